//! TL107 `retain-graph-in-loop`; documentation and examples in
//! `rules/memory/retain-graph-in-loop.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::{first_per_batch, loop_header};
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};
use crate::rules::declarative::find_argument;
use crate::rules::{Check, RuleMeta};
use crate::semantic::constants::Constant;

pub struct RetainGraphInLoop;

impl Check for RetainGraphInLoop {
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
        let is_backward = callee.kind_id() == KINDS.attribute
            && callee
                .child_by_field_id(FIELDS.attribute)
                .is_some_and(|a| checker.node_text(a) == "backward");
        let is_autograd_backward =
            checker.qualified_name(callee).as_deref() == Some("torch.autograd.backward");
        if !is_backward && !is_autograd_backward {
            return;
        }
        let position = if is_autograd_backward { Some(2) } else { Some(1) };
        let Some(retain) = find_argument(call, checker.text(), Some("retain_graph"), position).found()
        else {
            return;
        };
        if checker.analysis.constant(retain) != Constant::Bool(true) {
            return;
        }
        let loops = checker.enclosing_loops();
        let Some((loop_node, why)) = first_per_batch(checker, &loops) else {
            return;
        };
        if later_backward(checker, loops[0], call) {
            // A second backward through the same graph in this iteration (GAN generator
            // step, several task losses): what `retain_graph=True` is for.
            return;
        }
        let message = rule.message.replace("{call}", checker.node_text(callee));
        out.push(
            Diagnostic::new(rule, message, call.byte_range())
                .with_label(loop_header(checker, loop_node), why),
        );
    }
}

/// Another `.backward(...)` or `torch.autograd.grad(...)` after `call` in the loop body.
fn later_backward(checker: &Checker<'_>, loop_node: Node<'_>, call: Node<'_>) -> bool {
    let Some(body) = loop_node.child_by_field_id(FIELDS.body) else {
        return false;
    };
    let mut found = false;
    walk(body, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if found || !node.is_named() {
            return Descend::No;
        }
        if node.kind_id() == KINDS.function_definition || node.kind_id() == KINDS.lambda {
            return Descend::No;
        }
        if node.kind_id() == KINDS.call && node.start_byte() > call.end_byte() {
            let text = node
                .child_by_field_id(FIELDS.function)
                .map(|f| checker.node_text(f))
                .unwrap_or("");
            if text.ends_with(".backward") || text.ends_with("autograd.grad") || text == "grad" {
                found = true;
            }
        }
        Descend::Yes
    });
    found
}
