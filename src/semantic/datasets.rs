//! What a dataset does in the worker processes a `DataLoader` starts: the methods a worker runs
//! for it (`__getitem__`, `__getitems__`, `__iter__`, `__next__`, and the class's own methods
//! those call), what in them works on the accelerator (a tensor moved or made there, a model
//! there run), and what `__init__` keeps there for the workers to inherit. TL112 asks.

use crate::syntax::Node;
use serde::{Deserialize, Serialize};

use super::analysis::Analysis;
use super::facts::{Answer, Ask};
use super::scope::Site;
use super::values::{Kind, Tri, is_non_forward_method};
use crate::parse::{Descend, FIELDS, KINDS, Visit, find_argument, walk};

/// The methods a loader's worker process calls on its copy of the dataset.
pub const WORKER_METHODS: &[&str] = &["__getitem__", "__getitems__", "__iter__", "__next__"];

/// How many of the class's own methods deep a worker method's calls are followed.
const MAX_DEPTH: usize = 2;

/// What a dataset does on the accelerator, or with a model, in a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkerWork {
    /// A tensor moved to (`.cuda()`, `.to(device)`) or made on (`device=...`) the accelerator.
    MovesToDevice,
    /// A model on the accelerator called (`self.model(x)`, `self.encoder.encode(x)`).
    RunsModel,
    /// `__init__` keeps a tensor or a model on the accelerator (`self.x = x.cuda()`), which
    /// every worker inherits with the dataset.
    KeepsOnDevice,
}

/// Where a dataset class does work of a [`WorkerWork`] kind.
#[derive(Debug, Clone, Copy)]
pub struct DatasetWork<'a> {
    pub kind: WorkerWork,
    /// The call, or for [`WorkerWork::KeepsOnDevice`] the assignment.
    pub node: Node<'a>,
    /// The method it is in (`__getitem__`, a helper it calls, `__init__`).
    pub method: &'a str,
    /// Whether what is kept or run is a model (else a tensor).
    pub model: bool,
}

/// [`DatasetWork`] as a file's summary keeps it for the loaders of other files: the dataset
/// class is imported where the loader starts its workers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkSummary {
    pub kind: WorkerWork,
    pub method: String,
    /// The call or assignment, shortened to its first line.
    pub shown: String,
    /// Its line in the dataset's file, from 1.
    pub line: u32,
    pub model: bool,
    /// The dataset's file names CUDA: the device is the GPU.
    pub cuda: bool,
}

impl<'a> Analysis<'a> {
    /// Whether a worker calls a method of the class (its own, or a base's in the file): it is
    /// a dataset.
    pub fn has_worker_methods(&self, class: usize) -> bool {
        WORKER_METHODS
            .iter()
            .any(|method| self.local_method(class, method).is_some())
    }

    /// [`Analysis::dataset_worker_work`] for the summary of a dataset class another file may
    /// hand to a loader.
    pub fn dataset_work_summary(&self, class: usize) -> Option<WorkSummary> {
        Some(self.work_summary(&self.dataset_worker_work(class)?))
    }

    /// What a summary keeps of one work: where, in words and by line.
    pub fn work_summary(&self, work: &DatasetWork<'a>) -> WorkSummary {
        WorkSummary {
            kind: work.kind,
            method: work.method.to_owned(),
            shown: crate::source::snippet(self.text(work.node), 50),
            line: memchr::memchr_iter(b'\n', &self.source.as_bytes()[..work.node.start_byte()])
                .count() as u32
                + 1,
            model: work.model,
            cuda: super::analysis::file_mentions(self.source, "cuda"),
        }
    }

    /// What the fact base says the imported dataset class `qualified` (or the base it takes
    /// its worker methods from) does on the accelerator in a worker.
    pub fn imported_dataset_work(&self, qualified: &str) -> Option<WorkSummary> {
        match self.ask_answer(Ask::DatasetWork(qualified.to_owned())) {
            Answer::Work(work) => Some(work),
            _ => None,
        }
    }

    /// For a class of the file with no worker method of its own or of its bases in the file:
    /// what its first imported base that is a dataset does in a worker, and that base's name.
    pub fn inherited_dataset_work(&self, class: usize) -> Option<(String, WorkSummary)> {
        if self.has_worker_methods(class) {
            return None;
        }
        let mut bases = Vec::new();
        self.qualified_bases(class, &mut bases, 0);
        bases.into_iter().find_map(|base| {
            let work = self.imported_dataset_work(&base)?;
            Some((base, work))
        })
    }

    /// The first work on the accelerator, or with a model, that the file's class `class` (a
    /// dataset handed to a loader) does in a worker, or keeps for one from `__init__`.
    pub fn dataset_worker_work(&self, class: usize) -> Option<DatasetWork<'a>> {
        let mut seen = Vec::new();
        for method in WORKER_METHODS {
            if let Some(function) = self.local_method(class, method)
                && let Some(work) = self.work_in(class, function, method, 0, &mut seen)
            {
                return Some(work);
            }
        }
        let init = self.local_method(class, "__init__")?;
        self.model
            .attribute_assignments_in(init.byte_range())
            .iter()
            .filter(|assignment| assignment.object == "self")
            .find_map(|assignment| {
                let Site::Value {
                    value, index: None, ..
                } = assignment.site
                else {
                    return None;
                };
                let facts = self.facts(value);
                // Whatever `.cuda()` or `.to(device)` returns is a tensor or a model, known or not.
                let kept = matches!(
                    facts.kind,
                    Kind::Tensor | Kind::Module | Kind::Container | Kind::Unknown
                );
                (kept && facts.device == Tri::Yes).then_some(DatasetWork {
                    kind: WorkerWork::KeepsOnDevice,
                    node: assignment.node,
                    method: "__init__",
                    model: facts.kind == Kind::Module,
                })
            })
    }

    /// The first call in `function` (or in a method of the class it calls) that works on the
    /// accelerator or runs a model.
    fn work_in(
        &self,
        class: usize,
        function: Node<'a>,
        method: &'a str,
        depth: usize,
        seen: &mut Vec<usize>,
    ) -> Option<DatasetWork<'a>> {
        if seen.contains(&function.id()) {
            return None;
        }
        seen.push(function.id());
        let body = function.child_by_field_id(FIELDS.body)?;
        let mut calls = Vec::new();
        walk(body, |visit| {
            let Visit::Enter(node) = visit else {
                return Descend::Yes;
            };
            let kind = node.kind_id();
            // A nested function or class runs when something calls it, not here.
            if kind == KINDS.function_definition || kind == KINDS.class_definition {
                return Descend::No;
            }
            if kind == KINDS.call {
                calls.push(node);
            }
            Descend::Yes
        });
        for call in calls {
            if let Some(work) = self.call_work(call, method) {
                return Some(work);
            }
            // `self.load(path)`: a helper of the class, followed.
            if depth < MAX_DEPTH
                && let Some(callee) = self.model.callee(call)
                && callee.kind_id() == KINDS.attribute
                && callee
                    .child_by_field_id(FIELDS.object)
                    .is_some_and(|object| self.text(object) == "self")
                && let Some(name) = self.model.call_name(call)
                && let Some(helper) = self.local_method(class, name)
                && let Some(work) = self.work_in(class, helper, name, depth + 1, seen)
            {
                return Some(work);
            }
        }
        None
    }

    /// Whether a call moves or makes a tensor on the accelerator, or runs a model.
    fn call_work(&self, call: Node<'a>, method: &'a str) -> Option<DatasetWork<'a>> {
        let name = self.model.call_name(call);
        let moves = matches!(name, Some("cuda" | "to"))
            || find_argument(call, self.source, Some("device"), None)
                .found()
                .is_some();
        if moves && self.facts(call).device == Tri::Yes {
            return Some(DatasetWork {
                kind: WorkerWork::MovesToDevice,
                node: call,
                method,
                model: false,
            });
        }
        // `self.model(x)`, or a forward by another name (`self.encoder.encode(x)`), of a model
        // on the accelerator. (A model on the host runs in each worker as it would in the
        // main process: a forked worker shares its weights.)
        let callee = self.model.callee(call)?;
        let model = if callee.kind_id() == KINDS.attribute
            && let Some(object) = callee.child_by_field_id(FIELDS.object)
            && self.text(object) != "self"
        {
            (!name.is_some_and(is_non_forward_method)).then_some(object)?
        } else {
            callee
        };
        let facts = self.facts(model);
        let runs = self.text(model).starts_with("self.")
            && facts.kind == Kind::Module
            && facts.device == Tri::Yes;
        runs.then_some(DatasetWork {
            kind: WorkerWork::RunsModel,
            node: call,
            method,
            model: true,
        })
    }
}
