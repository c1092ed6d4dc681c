//! TL104 `gpu-collection`; documentation and examples in `rules/memory/gpu-collection.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::tensor_accumulated::in_module_forward;
use super::{
    How, accumulation, carrying_loops, first_per_batch, loop_header, per_batch_function, short,
};
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::KINDS;
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::values::{Kind, Tri};

pub struct GpuCollection;

impl Check for GpuCollection {
    fn kinds(&self) -> &'static [&'static str] {
        &["call", "assignment", "augmented_assignment"]
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        // A module's own state during forward is TL103's; asked first, as a model file's
        // forwards hold most of its statements.
        if in_module_forward(checker) {
            return;
        }
        let Some(found) = accumulation(checker, call) else {
            return;
        };
        if !matches!(found.how, How::Append | How::Concat) {
            return;
        }
        if checker.enclosing_loops().is_empty() && found.container.kind_id() != KINDS.attribute {
            return;
        }
        // Device tensors without a graph (a graph-carrying value is TL102's), alone or in a
        // tuple or list stored whole: `stats.append((correct, pred[:, 4], labels))`.
        let kept_on_device = |value: Node<'a>| {
            let facts = checker.analysis.facts(value);
            facts.kind == Kind::Tensor && facts.device == Tri::Yes && facts.graph != Tri::Yes
        };
        let stored = found.value;
        let on_device = if stored.kind_id() == KINDS.tuple || stored.kind_id() == KINDS.list {
            let mut cursor = stored.walk();
            let items: Vec<Node<'a>> = stored.named_children(&mut cursor).collect();
            let graph = items
                .iter()
                .any(|item| checker.analysis.facts(*item).graph == Tri::Yes);
            !graph && items.into_iter().any(kept_on_device)
        } else {
            kept_on_device(stored)
        };
        if !on_device {
            return;
        }
        if found.container.kind_id() != KINDS.identifier
            && found.container.kind_id() != KINDS.attribute
        {
            return;
        }
        let loops = carrying_loops(checker, found.container, call);
        // Flushed every few batches: bounded.
        if loops
            .first()
            .is_some_and(|l| super::reset_in_loop(checker, *l, checker.node_text(found.container)))
        {
            return;
        }
        let evidence = match first_per_batch(checker, &loops) {
            Some((loop_node, why)) => Some((loop_header(checker, loop_node), why)),
            None if loops.is_empty() && found.container.kind_id() == KINDS.attribute => {
                per_batch_function(checker)
            }
            None => None,
        };
        let Some((label, why)) = evidence else {
            return;
        };
        let message = rule
            .message
            .replace("{value}", &short(checker, found.value))
            .replace("{container}", &short(checker, found.container));
        out.push(Diagnostic::new(rule, message, call.byte_range()).with_label(label, why));
    }
}
