//! TL107 `retain-graph-in-loop`; documentation and examples in
//! `rules/memory/retain-graph-in-loop.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::{first_per_batch, forward_call, loop_header, per_batch_function};
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};
use crate::rule_meta::RuleMeta;
use crate::rules::declarative::find_argument;
use crate::rules::{Check, edits};
use crate::semantic::constants::Constant;

pub struct RetainGraphInLoop;

impl Check for RetainGraphInLoop {
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
        let Some(is_autograd_backward) = super::backward_call(checker, call) else {
            return;
        };
        let Some(callee) = checker.callee(call) else {
            return;
        };
        let position = if is_autograd_backward {
            Some(2)
        } else {
            Some(1)
        };
        let Some(retain) =
            find_argument(call, checker.text(), Some("retain_graph"), position).found()
        else {
            return;
        };
        if checker.analysis.constant(retain) != Constant::Bool(true) {
            return;
        }
        let loops = checker.enclosing_loops();
        let (region, label, why) = match first_per_batch(checker, &loops) {
            Some((loop_node, why)) => (loops[0], loop_header(checker, loop_node), why),
            None if loops.is_empty() => {
                match (per_batch_function(checker), checker.current_function()) {
                    (Some((header, why)), Some((function, _))) => (function, header, why),
                    _ => return,
                }
            }
            None => return,
        };
        // The loop or step function must hold the call in its body: code that error recovery
        // attached to its header is no part of it.
        if !checker.in_body(call, region) {
            return;
        }
        let Some(target) = backward_target(checker, call, is_autograd_backward) else {
            return;
        };
        let retained = graph_sources(checker, target);
        // Backward per class or per output from one forward made before the loop: the next
        // iteration needs the graph again.
        if !loops.is_empty()
            && !retained.is_empty()
            && retained
                .iter()
                .all(|source| source.end_byte() <= loops[0].start_byte())
        {
            return;
        }
        if later_backward_through(checker, region, call, &retained) {
            // A second backward through the same graph in this iteration (GAN generator
            // step, several task losses): what `retain_graph=True` is for.
            return;
        }
        let message = rule
            .message
            .replace("{call}", &super::short(checker, callee));
        let mut diagnostic =
            Diagnostic::new(rule, message, call.byte_range()).with_label(label, why);
        // The argument itself: `retain_graph=True`, or the positional `True`.
        let argument = retain
            .parent()
            .filter(|parent| parent.kind_id() == KINDS.keyword_argument)
            .unwrap_or(retain);
        diagnostic.fix = edits::remove_argument(argument).map(|edit| {
            edits::suggestion(
                "Drop `retain_graph=True` (if no later backward needs this graph)",
                vec![edit],
            )
        });
        out.push(diagnostic);
    }
}

/// What a backward call differentiates: `loss` in `loss.backward()`, the first argument of
/// `torch.autograd.backward(loss)`.
fn backward_target<'a>(checker: &Checker<'a>, call: Node<'a>, autograd: bool) -> Option<Node<'a>> {
    if autograd {
        return find_argument(call, checker.text(), Some("tensors"), Some(0)).found();
    }
    let mut target = checker.callee(call)?.child_by_field_id(FIELDS.object)?;
    // `scaler.scale(loss).backward()`
    if target.kind_id() == KINDS.call
        && checker
            .callee(target)
            .is_some_and(|f| checker.node_text(f).ends_with(".scale"))
        && let Some(inner) = find_argument(target, checker.text(), None, Some(0)).found()
    {
        target = inner;
    }
    Some(target)
}

/// The forward passes (and leaf tensors that require grad) whose graph a value depends on,
/// through the assignments that reach it; `.detach()`ed parts do not count.
fn graph_sources<'a>(checker: &Checker<'a>, value: Node<'a>) -> Vec<Node<'a>> {
    let mut sources = Vec::new();
    let mut seen = Vec::new();
    collect_sources(checker, value, &mut sources, &mut seen, 0);
    sources
}

fn collect_sources<'a>(
    checker: &Checker<'a>,
    node: Node<'a>,
    sources: &mut Vec<Node<'a>>,
    seen: &mut Vec<usize>,
    depth: usize,
) {
    if depth > 16 || seen.contains(&node.id()) {
        return;
    }
    seen.push(node.id());
    let mut names = Vec::new();
    // The `attr` of each `obj.attr` met: a name, not a value. Noted when the attribute is
    // entered, as asking an identifier for its parent walks down from the root, which on a
    // deeply nested expression (`f([a][a][a]...)`) costs its depth for every name.
    let mut attribute_names = Vec::new();
    walk(node, |visit| {
        let Visit::Enter(inner) = visit else {
            return Descend::Yes;
        };
        let kind = inner.kind_id();
        if kind == KINDS.attribute {
            attribute_names.extend(checker.field(inner, FIELDS.attribute).map(|a| a.id()));
        }
        if kind == KINDS.call {
            let callee = checker.callee(inner);
            let method = callee
                .filter(|c| c.kind_id() == KINDS.attribute)
                .and_then(|c| checker.field(c, FIELDS.attribute))
                .map(|a| checker.node_text(a));
            if matches!(method, Some("detach" | "detach_" | "item" | "tolist")) {
                return Descend::No;
            }
            if forward_call(checker, inner).is_some() {
                sources.push(inner);
            }
            if checker.node_text(inner).contains("requires_grad") {
                sources.push(inner);
            }
        } else if kind == KINDS.identifier {
            if attribute_names.last() == Some(&inner.id()) {
                attribute_names.pop();
            } else {
                names.push(inner);
            }
        } else if kind == KINDS.keyword_argument {
            if let Some(value) = checker.field(inner, FIELDS.value) {
                names.push(value);
            }
            return Descend::No;
        }
        Descend::Yes
    });
    for name in names {
        if name.kind_id() != KINDS.identifier {
            collect_sources(checker, name, sources, seen, depth + 1);
            continue;
        }
        if let Some(value) = checker.analysis.reaching_value(name) {
            collect_sources(checker, value, sources, seen, depth + 1);
        }
    }
}

/// Another `.backward(...)` or `torch.autograd.grad(...)` after `call` in the region whose
/// target shares a forward pass with the retained graph (or whose target is unknown).
fn later_backward_through<'a>(
    checker: &Checker<'a>,
    region: Node<'a>,
    call: Node<'a>,
    retained: &[Node<'a>],
) -> bool {
    let Some(body) = checker.field(region, FIELDS.body) else {
        return false;
    };
    let mut later = Vec::new();
    walk(body, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if !node.is_named() {
            return Descend::No;
        }
        if node.kind_id() == KINDS.function_definition || node.kind_id() == KINDS.lambda {
            return Descend::No;
        }
        if node.kind_id() == KINDS.call && node.start_byte() > call.end_byte() {
            let text = checker
                .callee(node)
                .map(|f| checker.node_text(f))
                .unwrap_or("");
            if text.ends_with(".backward") || text.ends_with("autograd.grad") || text == "grad" {
                later.push(node);
            }
        }
        Descend::Yes
    });
    later.into_iter().any(|node| {
        let text = checker
            .callee(node)
            .map(|f| checker.node_text(f))
            .unwrap_or("");
        let target = if text.ends_with(".backward") {
            backward_target(checker, node, text == "torch.autograd.backward")
        } else {
            find_argument(node, checker.text(), Some("outputs"), Some(0)).found()
        };
        let Some(target) = target else {
            return true;
        };
        let sources = graph_sources(checker, target);
        // Nothing known about either graph: assume they are shared, as the author did.
        retained.is_empty()
            || sources.is_empty()
            || sources
                .iter()
                .any(|s| retained.iter().any(|r| r.id() == s.id()))
    })
}
