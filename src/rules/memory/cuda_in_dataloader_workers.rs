//! TL112 `cuda-in-dataloader-workers`; documentation and examples in
//! `rules/memory/cuda-in-dataloader-workers.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::constants::Constant;
use crate::semantic::datasets::WorkerWork;
use crate::semantic::instances::ClassRef;

pub struct CudaInDataloaderWorkers;

impl Check for CudaInDataloaderWorkers {
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
        if checker.settings.host_only {
            return;
        }
        // Workers have to be asked for (`num_workers`, 6th positional, or `**kwargs` that may
        // hold it): most calls are not loaders, and a loader without them has none.
        let Some(arguments) = checker.arguments(call) else {
            return;
        };
        let text = checker.node_text(arguments);
        if !text.contains("num_workers")
            && !text.contains("**")
            && arguments.named_child_count() < 6
        {
            return;
        }
        let Some(callee) = checker.callee(call) else {
            return;
        };
        let analysis = &checker.analysis;
        if !analysis.is_data_loader(callee) {
            return;
        }
        // DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
        let Some(workers_node) = analysis.loader_argument(call, "num_workers", Some(5)) else {
            return;
        };
        let workers = match analysis.constant(workers_node) {
            Constant::Int(n) if n > 0 => format!("{n} worker process{}", plural(n)),
            Constant::CpuCount => "worker processes, one per CPU,".to_owned(),
            _ => return,
        };
        let Some(dataset) = analysis.loader_argument(call, "dataset", Some(0)) else {
            return;
        };
        // Where the work is: in this file (labelled), or in the file the class comes from.
        let (class_name, work, at) = match analysis.instance_class(dataset) {
            Some(ClassRef::Local(class)) => match analysis.dataset_worker_work(class) {
                Some(work) => {
                    let name = analysis.model.classes[class].name.to_owned();
                    (name, analysis.work_summary(&work), Some(work.node))
                }
                // A subclass of another file's dataset, which its workers run the methods of.
                None => match analysis.inherited_dataset_work(class) {
                    Some((base, work)) => (base, work, None),
                    None => return,
                },
            },
            Some(ClassRef::Imported(qualified)) => {
                let Some(work) = analysis.imported_dataset_work(&qualified) else {
                    return;
                };
                (qualified, work, None)
            }
            None => return,
        };
        // An imported class is named by its last part, and its line by the module as this
        // file imports it (`.data`).
        let (class_name, shown) = match (at, class_name.rsplit_once('.')) {
            (None, Some((module, class))) => (
                class.to_owned(),
                format!("`{}`, line {} of `{module}`", work.shown, work.line),
            ),
            _ => (class_name, format!("`{}`", work.shown)),
        };
        let device = if work.cuda && !checker.settings.host_only {
            "the GPU"
        } else {
            super::device_name(checker)
        };
        let workers_phrase = format!("each of the {workers} this loader starts");
        let does = match work.kind {
            WorkerWork::MovesToDevice => {
                format!("moves data to {device} ({shown}) in {workers_phrase}")
            }
            WorkerWork::RunsModel => {
                format!("runs a model on {device} ({shown}) in {workers_phrase}")
            }
            WorkerWork::KeepsOnDevice => format!(
                "keeps {} on {device} ({shown}), and {workers_phrase} gets the dataset with it",
                if work.model { "a model" } else { "a tensor" }
            ),
        };
        let label = match work.kind {
            WorkerWork::KeepsOnDevice => "every worker gets this with the dataset",
            _ => "runs in every worker, on each sample",
        };
        let message = format!(
            "`{class_name}.{method}` {does}: a worker forked after this process has used CUDA \
             cannot use it, and one that can opens a CUDA context of its own, so device memory \
             grows with `num_workers`",
            method = work.method,
        );
        let message = rule.message.replace("{what}", &message);
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if let Some(node) = at {
            diagnostic = diagnostic.with_label(node.byte_range(), label);
        }
        if workers_node.byte_range() != call.byte_range() {
            diagnostic = diagnostic.with_label(
                workers_node.byte_range(),
                format!("`{}` worker processes", super::short(checker, workers_node)),
            );
        }
        out.push(diagnostic);
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "es" }
}
