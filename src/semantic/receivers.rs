//! Where a chain of attributes, subscripts and calls starts (`model` of
//! `dict(model.named_modules())[name]`), and whether that start is a model the code was given
//! rather than one it made: what TL109 asks of a hook's receiver.

use crate::syntax::Node;

use super::analysis::Analysis;
use super::values::Kind;
use crate::parse::{FIELDS, KINDS};

impl<'a> Analysis<'a> {
    /// `model` of `model.layer4[-1]`, `dict(model.named_modules())[name]`, `self.model.blocks`:
    /// the name or `self.` attribute a chain of attributes, subscripts and calls starts from.
    pub fn chain_root(&self, node: Node<'a>) -> Node<'a> {
        let mut root = node;
        for _ in 0..32 {
            let next = match root.kind_id() {
                k if k == KINDS.attribute => root.child_by_field_id(FIELDS.object),
                k if k == KINDS.subscript => root.child_by_field_id(FIELDS.value),
                k if k == KINDS.call => {
                    root.child_by_field_id(FIELDS.function)
                        .and_then(|function| {
                            if function.kind_id() == KINDS.attribute {
                                function.child_by_field_id(FIELDS.object)
                            } else {
                                // `dict(model.named_modules())`: what the builtin is given.
                                root.child_by_field_id(FIELDS.arguments)
                                    .and_then(|arguments| arguments.named_child(0))
                            }
                        })
                }
                _ => None,
            };
            match next {
                // `self.model`: the attribute is the root.
                Some(inner) if self.text(inner) == "self" => break,
                Some(inner) => root = inner,
                None => break,
            }
        }
        root
    }

    /// Whether a chain's root is a model the code was given: a parameter, a `self.` attribute
    /// holding a model (or a method of the instance returning one), or a local name taken
    /// from one (`layer = dict(model.named_modules())[name]`).
    pub fn given_model(&self, root: Node<'a>) -> bool {
        self.given_model_at_depth(root, 0)
    }

    fn given_model_at_depth(&self, root: Node<'a>, depth: usize) -> bool {
        // `self.register_hook(hook)`: the class's own method of that name (a runner's hooks).
        if root.kind_id() == KINDS.identifier && self.text(root) == "self" {
            return false;
        }
        if root.kind_id() == KINDS.identifier {
            return self.is_parameter(root)
                || (depth < 4
                    && self.bound_value(root).is_some_and(|value| {
                        self.given_model_at_depth(self.chain_root(value), depth + 1)
                    }));
        }
        // `self.model`: a model the instance holds; `self.find_layer(name)`: a layer its own
        // method looks up (what a forward hook is registered on is a module, whatever the
        // file can tell).
        match root.kind_id() {
            k if k == KINDS.attribute => {
                self.text(root).starts_with("self.") && self.facts(root).kind == Kind::Module
            }
            k if k == KINDS.call => self
                .model
                .callee(root)
                .is_some_and(|callee| self.text(callee).starts_with("self.")),
            _ => false,
        }
    }
}
