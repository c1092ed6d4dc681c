//! TL106 `pinned-workers`; documentation and examples in `rules/memory/pinned-workers.md`.

use std::sync::Arc;

use tree_sitter::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::FIELDS;
use crate::rules::declarative::find_argument;
use crate::rules::{Check, RuleMeta};
use crate::semantic::constants::Constant;

pub struct PinnedWorkers;

const DATA_LOADERS: &[&str] = &[
    "torch.utils.data.DataLoader",
    "torch.utils.data.dataloader.DataLoader",
];

impl Check for PinnedWorkers {
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
        let Some(name) = checker.qualified_name(callee) else {
            return;
        };
        if !DATA_LOADERS.contains(&name.as_str()) {
            return;
        }
        let source = checker.text();
        let analysis = &checker.analysis;
        let argument = |keyword: &str, position: Option<usize>| {
            find_argument(call, source, Some(keyword), position).found()
        };
        // DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
        //            collate_fn, pin_memory, ...)
        let pinned = argument("pin_memory", Some(7))
            .is_some_and(|value| analysis.constant(value) == Constant::Bool(true));
        if !pinned {
            return;
        }
        let Some(workers_node) = argument("num_workers", Some(5)) else {
            return;
        };
        let max_workers = checker
            .option(rule, "max-workers")
            .and_then(|value| value.as_integer())
            .unwrap_or(8);
        let workers = analysis.constant(workers_node);
        let prefetch = argument("prefetch_factor", None)
            .map(|p| analysis.constant(p))
            .and_then(|p| match p {
                Constant::Int(i) => Some(i),
                _ => None,
            })
            .unwrap_or(2);
        let batch = argument("batch_size", Some(1)).and_then(|b| match analysis.constant(b) {
            Constant::Int(i) => Some(i),
            _ => None,
        });
        let (count, description) = match workers {
            Constant::Int(n) if n > max_workers => (
                format!("{}", n * prefetch + 1),
                format!("num_workers={n} and prefetch_factor={prefetch}"),
            ),
            Constant::CpuCount => (
                format!("CPU count × {prefetch} + 1"),
                "num_workers follows the machine's CPU count".to_owned(),
            ),
            _ => return,
        };
        let batches = match batch {
            Some(size) => format!("{count} batches of {size} samples"),
            None => format!("{count} batches"),
        };
        let message = rule
            .message
            .replace("{workers}", &description)
            .replace("{batches}", &batches)
            .replace("{max}", &max_workers.to_string());
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if workers_node.byte_range() != call.byte_range() {
            let shown = checker.node_text(workers_node);
            diagnostic = diagnostic.with_label(
                workers_node.byte_range(),
                match workers {
                    Constant::CpuCount => format!("`{shown}` grows with the machine"),
                    _ => format!("`{shown}` worker processes"),
                },
            );
        }
        out.push(diagnostic);
    }
}
