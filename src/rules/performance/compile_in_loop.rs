//! TL203 `compile-in-loop`; documentation and examples in
//! `rules/performance/compile-in-loop.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{KINDS, find_argument};
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::callables::Made;

pub struct CompileInLoop;

impl Check for CompileInLoop {
    fn kinds(&self) -> &'static [&'static str] {
        &["call", "decorator"]
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        // `@torch.compile(mode=...)` is a call too: the decorator's own check sees it.
        let (callee, compiled) = if node.kind_id() == KINDS.decorator {
            let Some(expression) = node.named_child(0) else {
                return;
            };
            if expression.kind_id() == KINDS.call {
                if !checker.may_resolve_to(expression, |last| last == "compile") {
                    return;
                }
                (checker.callee(expression), None)
            } else {
                (Some(expression), None)
            }
        } else {
            if !checker.may_resolve_to(node, |last| last == "compile") {
                return;
            }
            let Some(first) = checker
                .arguments(node)
                .and_then(|arguments| compiled_argument(checker, arguments))
            else {
                return;
            };
            (checker.callee(node), Some(first))
        };
        let Some(callee) = callee else {
            return;
        };
        if checker.qualified_name(callee).as_deref() != Some("torch.compile") {
            return;
        }
        // Asked last: `parent()` walks down from the root.
        if compiled.is_some()
            && node
                .parent()
                .is_some_and(|parent| parent.kind_id() == KINDS.decorator)
        {
            return;
        }
        let Some(repeated) = repeated(checker) else {
            return;
        };
        if conditional_within(node, repeated.region) {
            return;
        }
        // A decorated `def` here is defined again on every run; an argument is new only if it
        // is made here.
        let made = match compiled {
            None => Made::Def,
            Some(value) => match checker.analysis.callable_made_in(value, repeated.region) {
                Some(made) => made,
                None => return,
            },
        };
        let message = rule
            .message
            .replace("{callee}", checker.node_text(callee))
            .replace("{what}", made.describe())
            .replace("{how_often}", repeated.how_often);
        out.push(
            Diagnostic::new(rule, message, node.byte_range())
                .with_label(repeated.evidence, repeated.reason),
        );
    }
}

/// What `torch.compile` is given to compile: its first argument, or `model=`.
fn compiled_argument<'a>(checker: &Checker<'a>, arguments: Node<'a>) -> Option<Node<'a>> {
    find_argument(arguments, checker.text(), Some("model"), Some(0)).found()
}

/// Code that runs again and again, with where it is said.
struct Repeated<'a> {
    /// The innermost loop around the call, or the step function it is in.
    region: Node<'a>,
    evidence: crate::source::TextRange,
    reason: String,
    how_often: &'static str,
}

/// The call's innermost loop (or step function), if the call runs once per batch there, or in
/// an epoch loop (one whose nested loop trains).
fn repeated<'a>(checker: &Checker<'a>) -> Option<Repeated<'a>> {
    let innermost = checker
        .enclosing_loop()
        .or_else(|| checker.current_function().map(|(function, _)| function))?;
    if checker.in_except_handler() {
        return None;
    }
    if let Some(evidence) = checker.per_batch() {
        return Some(Repeated {
            region: innermost,
            evidence: evidence.range,
            reason: evidence.reason,
            how_often: "on every batch",
        });
    }
    let epoch = checker
        .enclosing_loops()
        .into_iter()
        .find_map(|loop_node| {
            checker
                .model
                .loop_facts(loop_node)
                .filter(|facts| facts.nested_training)
                .map(|facts| facts.header.clone())
        })?;
    Some(Repeated {
        region: innermost,
        evidence: epoch,
        reason: "this loop runs once per epoch: a loop inside it trains".to_owned(),
        how_often: "on every epoch",
    })
}

/// Whether `node` is under an `if` (or a conditional expression) inside `region`: compiled on
/// the first step only (`if compiled is None:`), or when a flag says so, it is not compiled on
/// every run.
fn conditional_within(node: Node<'_>, region: Node<'_>) -> bool {
    let mut current = node.parent();
    while let Some(parent) = current {
        if parent.id() == region.id() {
            return false;
        }
        let kind = parent.kind_id();
        if kind == KINDS.if_statement || kind == KINDS.conditional_expression {
            return true;
        }
        current = parent.parent();
    }
    false
}
