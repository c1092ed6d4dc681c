//! TL110 `create-graph-cycle`; documentation and examples in
//! `rules/memory/create-graph-cycle.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::{first_per_batch, loop_header, short};
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::rules::declarative::find_argument;
use crate::semantic::constants::Constant;

pub struct CreateGraphCycle;

impl Check for CreateGraphCycle {
    fn kinds(&self) -> &'static [&'static str] {
        &["call"]
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(autograd) = super::backward_call(checker, call) else {
            return;
        };
        // `x.backward(gradient, retain_graph, create_graph)`,
        // `torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph)`.
        let position = if autograd { 3 } else { 2 };
        let Some(create) =
            find_argument(call, checker.text(), Some("create_graph"), Some(position)).found()
        else {
            return;
        };
        if checker.analysis.constant(create) != Constant::Bool(true) {
            return;
        }
        // Once per step: a loop that trains or iterates a loader. (A step function whose
        // caller clears the gradients is not looked into.)
        let loops = checker.enclosing_loops();
        let Some((per_batch, why)) = first_per_batch(checker, &loops) else {
            return;
        };
        if !checker.in_body(call, loops[0]) || clears_gradients(checker, per_batch) {
            return;
        }
        let Some(callee) = checker.callee(call) else {
            return;
        };
        let message = rule.message.replace("{call}", &short(checker, callee));
        out.push(
            Diagnostic::new(rule, message, call.byte_range())
                .with_label(loop_header(checker, per_batch), why),
        );
    }
}

/// Whether the loop sets gradients to `None`, deletes them or detaches them, which breaks the
/// cycle each step: `optimizer.zero_grad()` or `model.zero_grad()` (with `set_to_none=False`
/// too: it detaches a gradient that has a graph before zeroing it), `p.grad = None`,
/// `del p.grad`.
fn clears_gradients<'a>(checker: &Checker<'a>, loop_node: Node<'a>) -> bool {
    let mut clears = false;
    walk(loop_node, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if clears {
            return Descend::No;
        }
        let kind = node.kind_id();
        if kind == KINDS.call && checker.call_name(node) == Some("zero_grad") {
            clears = true;
        } else if kind == KINDS.assignment {
            clears = checker
                .field(node, FIELDS.left)
                .is_some_and(|left| is_grad_attribute(checker, left))
                && checker
                    .field(node, FIELDS.right)
                    .is_some_and(|right| right.kind_id() == KINDS.none);
        } else if node.kind() == "delete_statement" {
            clears = checker.node_text(node).contains(".grad");
        }
        Descend::Yes
    });
    clears
}

/// `p.grad`, `param.grad`: the attribute `grad` of something.
fn is_grad_attribute<'a>(checker: &Checker<'a>, node: Node<'a>) -> bool {
    node.kind_id() == KINDS.attribute
        && checker
            .field(node, FIELDS.attribute)
            .is_some_and(|attribute| checker.node_text(attribute) == "grad")
}
