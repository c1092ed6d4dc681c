//! Where the value a call returns goes: straight into another call, or into a name whose every
//! later read goes there. TL108's fix is safe where a checkpoint only ever feeds
//! `load_state_dict` (which copies each tensor into the already placed model, wherever the
//! load put it); the same question suits any fix that changes what a call returns.

use crate::syntax::Node;

use super::analysis::Analysis;
use crate::parse::{FIELDS, KINDS};

impl<'a> Analysis<'a> {
    /// Whether everything `call` returns ends up in an argument of a call of one of `methods`
    /// (`model.load_state_dict(torch.load(p))`; `ckpt = torch.load(p)` then only
    /// `model.load_state_dict(ckpt["model"])` and `opt.load_state_dict(ckpt["opt"])`). A name
    /// read anywhere else after the assignment (`ckpt["epoch"]` too: what it holds may be a
    /// tensor), returned, or rebound in a loop says no.
    pub fn result_only_passed_to(&self, call: Node<'a>, methods: &[String]) -> bool {
        let Some(parent) = call.parent() else {
            return false;
        };
        if self.in_argument_of(call, methods) {
            return true;
        }
        if parent.kind_id() != KINDS.assignment {
            return false;
        }
        let Some(target) = parent
            .child_by_field_id(FIELDS.left)
            .filter(|left| left.kind_id() == KINDS.identifier)
        else {
            return false;
        };
        let name = self.text(target);
        let scope = self
            .enclosing_function(call)
            .and_then(|function| function.child_by_field_id(FIELDS.body))
            .unwrap_or(self.root);
        let mut reads = 0;
        let mut cursor = scope.walk();
        let mut stack = vec![scope];
        while let Some(node) = stack.pop() {
            if node.kind_id() == KINDS.function_definition
                || node.kind_id() == KINDS.class_definition
            {
                // Another scope: its own `name` is another variable (or a closure's read,
                // which this does not follow).
                if self.text(node).contains(name) {
                    return false;
                }
                continue;
            }
            if node.kind_id() == KINDS.identifier
                && node.start_byte() > target.end_byte()
                && self.text(node) == name
            {
                if !self.in_argument_of(node, methods) {
                    return false;
                }
                reads += 1;
                continue;
            }
            stack.extend(node.named_children(&mut cursor));
        }
        reads > 0
    }

    /// Whether `node` is (part of) an argument of a call of one of `methods`, up to the
    /// statement holding it.
    fn in_argument_of(&self, node: Node<'a>, methods: &[String]) -> bool {
        let mut current = node;
        for _ in 0..8 {
            let Some(parent) = current.parent() else {
                return false;
            };
            if parent.kind_id() == KINDS.argument_list {
                return parent
                    .parent()
                    .and_then(|call| call.child_by_field_id(FIELDS.function))
                    .and_then(|callee| callee.child_by_field_id(FIELDS.attribute))
                    .is_some_and(|method| methods.iter().any(|m| m == self.text(method)));
            }
            // Only through what selects from the value (`ckpt["model"]`) or a keyword
            // argument's value (`load_state_dict(state_dict=ckpt)`).
            let selects = parent.kind_id() == KINDS.subscript
                && parent.child_by_field_id(FIELDS.value).map(|v| v.id()) == Some(current.id())
                || parent.kind_id() == KINDS.keyword_argument;
            if !selects {
                return false;
            }
            current = parent;
        }
        false
    }
}
