//! TL109 `hook-in-loop`; documentation and examples in `rules/memory/hook-in-loop.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::loop_header;
use super::tensor_accumulated::in_module_forward;
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{FIELDS, KINDS};
use crate::rules::{Check, RuleMeta};
use crate::semantic::training;

pub struct HookInLoop;

const REGISTER: &[&str] = &[
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_full_backward_pre_hook",
    "register_backward_hook",
    "register_hook",
];

impl Check for HookInLoop {
    fn kinds(&self) -> &'static [&'static str] {
        &["call"]
    }

    fn check(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'_>,
        checker: &Checker<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(callee) = call.child_by_field_id(FIELDS.function) else {
            return;
        };
        if callee.kind_id() != KINDS.attribute {
            return;
        }
        let Some(method) = callee.child_by_field_id(FIELDS.attribute) else {
            return;
        };
        let method = checker.node_text(method);
        if !REGISTER.contains(&method) {
            return;
        }
        // Where it runs repeatedly: a training, epoch or batch loop, or every forward.
        let repeating = checker.enclosing_loops().into_iter().find(|loop_node| {
            let Some(facts) = checker.model.loop_facts(*loop_node) else {
                return false;
            };
            let iterable = loop_node
                .child_by_field_id(FIELDS.right)
                .map_or("", |r| checker.node_text(r));
            facts.trains() || facts.nested_training || training::iterates_batches(iterable)
        });
        let label = match repeating {
            Some(loop_node) => Some((loop_header(checker, loop_node), "this loop registers a new hook on every iteration")),
            None if in_module_forward(checker) => None,
            None => return,
        };
        if handle_is_managed(checker, call) {
            return;
        }
        let message = rule.message.replace("{method}", method);
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if let Some((range, why)) = label {
            diagnostic = diagnostic.with_label(range, why);
        }
        out.push(diagnostic);
    }
}

/// Whether the handle is kept and removed: `h = m.register_...(...)` with `h.remove()` in the
/// same function, collected into a list, or used as a context manager.
fn handle_is_managed(checker: &Checker<'_>, call: Node<'_>) -> bool {
    let Some(parent) = call.parent() else {
        return false;
    };
    let kind = parent.kind_id();
    if kind == KINDS.expression_statement {
        return false;
    }
    if kind == KINDS.assignment {
        let Some(left) = parent.child_by_field_id(FIELDS.left) else {
            return true;
        };
        let name = checker.node_text(left);
        let region = checker
            .analysis
            .enclosing_function(call)
            .map_or(checker.text(), |f| checker.node_text(f));
        return region.contains(&format!("{name}.remove()"));
    }
    // An argument (`handles.append(...)`), a `with` item, a return value: managed elsewhere.
    true
}
