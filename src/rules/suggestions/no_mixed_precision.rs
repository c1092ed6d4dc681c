//! TL301 `no-mixed-precision`; documentation and examples in
//! `rules/suggestions/no-mixed-precision.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::analysis::file_mentions;
use crate::semantic::grad::GradMode;
use crate::semantic::per_batch::{loop_header, short};
use crate::semantic::precision::reduced_precision;

pub struct NoMixedPrecision;

impl Check for NoMixedPrecision {
    fn kinds(&self) -> &'static [&'static str] {
        &["for_statement", "while_statement"]
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        loop_node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        // A CUDA training loop: the file names CUDA, and the loop's own body trains.
        if checker.settings.host_only
            || !file_mentions(checker.text(), "cuda")
            || !checker
                .model
                .loop_facts(loop_node)
                .is_some_and(|facts| facts.trains())
        {
            return;
        }
        if reduced_precision(checker.text()).is_some() {
            return;
        }
        let analysis = &checker.analysis;
        // Its first forward with grad of a model on the GPU: what keeps activations for backward.
        let forward = checker.model.loop_calls(loop_node).iter().find(|call| {
            analysis.forward_on_device(**call) && checker.grad_mode(**call) != GradMode::Disabled
        });
        let Some(&forward) = forward else {
            return;
        };
        let message = rule.message.replace("{forward}", &short(checker, forward));
        out.push(
            Diagnostic::new(rule, message, loop_header(checker, loop_node)).with_label(
                forward.byte_range(),
                "runs in float32, keeping float32 activations",
            ),
        );
    }
}
