//! Rules: the Rust checks, the runner of declarative rules, and the per-node-kind dispatch table
//! the checker walks with. What a rule is (its metadata, its file, the registry) is data in
//! `rule_meta`, below the settings that select rules by it.

pub mod declarative;
pub mod edits;
pub mod memory;
pub mod performance;
pub mod suggestions;

use std::sync::{Arc, OnceLock};

use tree_sitter::QueryCursor;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::python;
use crate::rule_meta::declarative::DeclarativeRule;
use crate::rule_meta::{Implementation, RuleMeta};
use crate::settings::Settings;

/// A rule implemented in Rust: called for every node of the kinds it names.
pub trait Check: Send + Sync {
    fn kinds(&self) -> &'static [&'static str];
    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    );

    /// What the rule records at a node of its kinds for its findings in other files: run
    /// before [`Check::check`] there, and alone in a file the run only needs the facts of (a
    /// context file, whose findings nobody reads). None: nothing (most rules), and then the
    /// rule costs a context file nothing.
    fn facts(&self) -> Option<RecordFacts> {
        None
    }
}

/// Records a rule's facts at one node (see [`Check::facts`]).
pub type RecordFacts = for<'a> fn(Node<'a>, &Checker<'a>);

pub use crate::source::snippet;

/// The Rust implementation of a rule whose file says `implementation = "rust"`.
pub fn rust_check(code: &str) -> Option<&'static dyn Check> {
    match code {
        "TL101" => Some(&memory::eval_without_no_grad::EvalWithoutNoGrad),
        "TL102" => Some(&memory::tensor_accumulated::TensorAccumulated),
        "TL103" => Some(&memory::missing_detach::MissingDetach),
        "TL104" => Some(&memory::gpu_collection::GpuCollection),
        "TL105" => Some(&memory::float64_data::Float64Data),
        "TL106" => Some(&memory::pinned_workers::PinnedWorkers),
        "TL107" => Some(&memory::retain_graph_in_loop::RetainGraphInLoop),
        "TL109" => Some(&memory::hook_in_loop::HookInLoop),
        "TL110" => Some(&memory::create_graph_cycle::CreateGraphCycle),
        "TL111" => Some(&memory::hook_stores_activations::HookStoresActivations),
        "TL112" => Some(&memory::cuda_in_dataloader_workers::CudaInDataloaderWorkers),
        "TL113" => Some(&memory::module_copied_per_step::ModuleCopiedPerStep),
        "TL201" => Some(&performance::empty_cache_in_loop::EmptyCacheInLoop),
        "TL203" => Some(&performance::compile_in_loop::CompileInLoop),
        "TL301" => Some(&suggestions::no_mixed_precision::NoMixedPrecision),
        _ => None,
    }
}

/// One rule's work at one kind of node.
pub enum Entry {
    Rust {
        rule: Arc<RuleMeta>,
        check: &'static dyn Check,
        facts: Option<RecordFacts>,
    },
    Clause {
        rule: Arc<RuleMeta>,
        spec: Arc<DeclarativeRule>,
        clause: usize,
    },
}

impl Entry {
    pub fn rule(&self) -> &Arc<RuleMeta> {
        match self {
            Entry::Rust { rule, .. } | Entry::Clause { rule, .. } => rule,
        }
    }

    /// Whether the rule records facts for the project ([`Check::facts`]).
    pub fn records_facts(&self) -> bool {
        matches!(self, Entry::Rust { facts: Some(_), .. })
    }

    /// The rule's work at `node`: the facts it records for the project (see
    /// [`Check::facts`]), then, if the run reads this file's findings, its check.
    pub fn run<'a>(
        &self,
        node: Node<'a>,
        checker: &Checker<'a>,
        cursor: &mut QueryCursor,
        out: Option<&mut Vec<Diagnostic>>,
    ) {
        inject_fault(self.rule());
        if let Entry::Rust {
            facts: Some(record),
            ..
        } = self
        {
            record(node, checker);
        }
        let Some(out) = out else {
            return;
        };
        match self {
            Entry::Rust { rule, check, .. } => check.check(rule, node, checker, out),
            Entry::Clause { rule, spec, clause } => {
                declarative::run_clause(rule, spec, *clause, node, checker, cursor, out)
            }
        }
    }
}

/// The enabled rules of one configuration, grouped by the node kind they start at.
pub struct Dispatch {
    by_kind: Vec<Vec<(usize, Entry)>>,
    /// `kinds[kind_id]`: whether any rule starts at that kind.
    kinds: Vec<bool>,
}

impl Dispatch {
    /// The dispatch table of the settings' enabled rules, built on first use and kept with
    /// the settings.
    pub fn of(settings: &Settings) -> &Dispatch {
        settings
            .dispatch
            .get_or_init(|| Dispatch::new(settings.enabled_rules()))
    }

    pub fn new(rules: &[Arc<RuleMeta>]) -> Self {
        let language = python();
        let mut by_kind: Vec<Vec<(usize, Entry)>> = (0..language.node_kind_count())
            .map(|_| Vec::new())
            .collect();
        let mut index = 0;
        let mut add = |kind: u16, entry: Entry| {
            by_kind[kind as usize].push((index, entry));
            index += 1;
        };
        for rule in rules {
            match &rule.implementation {
                Implementation::Rust => {
                    let check = rust_check(&rule.code)
                        .expect("a `rust` rule has its module (`every_rust_rule_has_a_check`)");
                    for kind in check.kinds() {
                        let id = crate::parse::kind_id(kind);
                        assert_ne!(id, 0, "{} registers unknown node kind `{kind}`", rule.code);
                        add(
                            id,
                            Entry::Rust {
                                rule: Arc::clone(rule),
                                check,
                                facts: check.facts(),
                            },
                        );
                    }
                }
                Implementation::Declarative(spec) => {
                    for (clause, root_kind) in spec.root_kinds().iter().enumerate() {
                        add(
                            *root_kind,
                            Entry::Clause {
                                rule: Arc::clone(rule),
                                spec: Arc::clone(spec),
                                clause,
                            },
                        );
                    }
                }
                Implementation::Engine => {}
            }
        }
        let kinds = by_kind.iter().map(|entries| !entries.is_empty()).collect();
        Dispatch { by_kind, kinds }
    }

    /// Which node kinds rules start at, by kind id.
    pub fn kinds(&self) -> &[bool] {
        &self.kinds
    }

    pub fn for_kind(&self, kind: u16) -> impl Iterator<Item = (usize, &Entry)> {
        self.by_kind
            .get(kind as usize)
            .into_iter()
            .flatten()
            .map(|(index, entry)| (*index, entry))
    }
}

/// Fault injection for the tests of panic containment: `TORCHLINT_INJECT_PANIC=TL201` makes
/// that rule panic whenever it runs.
fn inject_fault(rule: &RuleMeta) {
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var("TORCHLINT_INJECT_PANIC").ok());
    if target.as_deref() == Some(rule.code.as_str()) {
        panic!("injected failure (TORCHLINT_INJECT_PANIC={})", rule.code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule_meta::RuleRegistry;

    /// A built-in rule whose file says `implementation = "rust"` has a module here: the
    /// registry reads the files without knowing the checks.
    #[test]
    fn every_rust_rule_has_a_check() {
        let registry = RuleRegistry::load_builtin().expect("built-in rule files are valid");
        for rule in registry.iter() {
            if matches!(rule.implementation, Implementation::Rust) {
                assert!(
                    rust_check(&rule.code).is_some(),
                    "{} says `implementation = \"rust\"` but `rules::rust_check` has no module for it",
                    rule.code
                );
            }
        }
    }
}
