//! TL201 `empty-cache-in-loop`; documentation and examples in
//! `rules/performance/empty-cache-in-loop.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::{Checker, last_part_is};
use crate::diagnostic::{Diagnostic, Fix};

use crate::rule_meta::Applicability;
use crate::rule_meta::RuleMeta;
use crate::rules::{Check, edits};
use crate::semantic::gates::Interval;

pub struct EmptyCacheInLoop;

/// The allocator-cache flushes of each accelerator backend.
const EMPTY_CACHE: &[&str] = &[
    "torch.cuda.empty_cache",
    "torch.cuda.memory.empty_cache",
    "torch.mps.empty_cache",
    "torch.xpu.empty_cache",
    "torch.npu.empty_cache",
];

impl Check for EmptyCacheInLoop {
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
        let extra = checker
            .option(rule, "extra-functions")
            .and_then(|value| value.as_array().cloned())
            .unwrap_or_default();
        let Some(callee) = checker.callee(call) else {
            return;
        };
        // Every listed flush is named `empty_cache`; the configured ones may be named anything.
        let may_match = checker.may_resolve_to(call, |last| {
            last == "empty_cache"
                || extra
                    .iter()
                    .filter_map(|f| f.as_str())
                    .any(|name| last_part_is(name, last))
        });
        if !may_match {
            return;
        }
        let Some(name) = checker.qualified_name(callee) else {
            return;
        };
        let listed =
            EMPTY_CACHE.contains(&name.as_str()) || extra.iter().any(|f| f.as_str() == Some(&name));
        // In an `except` block it is OOM recovery, which is what the call is for.
        if !listed || checker.in_except_handler() {
            return;
        }
        let Some(evidence) = checker.per_batch() else {
            return;
        };
        // A flush every N batches costs a step 1/N of one every batch: past the configured
        // interval it is left alone. An interval the code computes may be 1: said as written.
        let max_interval = checker
            .option(rule, "max-gated-interval")
            .and_then(|value| value.as_integer())
            .unwrap_or(10);
        let how_often = match checker.interval_gate(call) {
            None => "once per batch".to_owned(),
            Some(Interval::Every(n)) if i64::try_from(n).is_ok_and(|n| n <= max_interval) => {
                format!("every {n} batches")
            }
            Some(Interval::Every(_)) => return,
            Some(Interval::Computed(n)) => {
                format!("every `{}` batches", crate::rules::snippet(n, 40))
            }
        };
        let message = rule
            .message
            .replace(
                "{callee}",
                &crate::rules::snippet(checker.node_text(callee), 50),
            )
            .replace("{how_often}", &how_often);
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range())
            .with_label(evidence.range, evidence.reason);
        diagnostic.fix = remove_statement(checker, call);
        out.push(diagnostic);
    }
}

/// The fix: the call's statement goes, its whole line with it; `pass` takes its place where it
/// is the block's only statement. Only for a call that is a statement alone on its line.
/// Unsafe: code that relied on the flush (a measurement of free memory right after it, another
/// process sharing the GPU) behaves otherwise.
fn remove_statement(checker: &Checker<'_>, call: Node<'_>) -> Option<Fix> {
    Some(Fix {
        message: "Remove the call".to_owned(),
        applicability: Applicability::Unsafe,
        edits: vec![edits::remove_statement(checker, call)?],
    })
}
