//! Rules: the registry of rule files (built-in packs and user packs), the Rust checks, and the
//! per-node-kind dispatch table the checker walks with.

pub mod declarative;
pub mod memory;
pub mod meta;
pub mod pack;
pub mod performance;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, OnceLock};

use tree_sitter::{Node, QueryCursor};

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
pub use crate::error::FileError;
use crate::parse::python;
pub use meta::RuleMeta;
use meta::{Implementation, Origin};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_rules.rs"));
}

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
}

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
        "TL201" => Some(&performance::empty_cache_in_loop::EmptyCacheInLoop),
        _ => None,
    }
}

/// All rules known to one configuration: the built-in packs plus any user packs.
#[derive(Debug)]
pub struct RuleRegistry {
    rules: Vec<Arc<RuleMeta>>,
    by_code: HashMap<String, usize>,
    /// A hash of the user rule files' paths and texts, as read (0 for the built-ins alone,
    /// which the torchlint version identifies).
    user_files: u128,
}

static BUILTIN: LazyLock<Arc<RuleRegistry>> = LazyLock::new(|| {
    Arc::new(RuleRegistry::load_builtin().unwrap_or_else(|errors| {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        panic!("built-in rule files are invalid:\n{}", errors.join("\n"))
    }))
});

impl RuleRegistry {
    pub fn builtin() -> Arc<RuleRegistry> {
        Arc::clone(&BUILTIN)
    }

    /// Parses the rule files compiled into the binary.
    pub fn load_builtin() -> Result<RuleRegistry, Vec<FileError>> {
        let mut errors = Vec::new();
        let mut rules = Vec::new();
        for (path, text) in builtin::BUILTIN_RULE_FILES {
            match pack::parse_rule_file(Origin::Builtin { path }, text) {
                Ok(rule) => {
                    let implemented = match rule.implementation {
                        Implementation::Rust => rust_check(&rule.code).is_some(),
                        _ => true,
                    };
                    if implemented {
                        rules.push(rule);
                    } else {
                        errors.push(FileError::new(
                            *path,
                            format!("{} says `implementation = \"rust\"` but `rules::rust_check` has no module for it", rule.code),
                        ));
                    }
                }
                Err(error) => errors.push(error),
            }
        }
        let registry = RuleRegistry::from_rules(Vec::new(), rules, &mut errors);
        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(errors)
        }
    }

    /// This registry plus the declarative rules of each pack folder.
    pub fn extended(&self, packs: &[PathBuf]) -> Result<RuleRegistry, Vec<FileError>> {
        let mut errors = Vec::new();
        let mut added = Vec::new();
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&self.user_files.to_le_bytes());
        for folder in packs {
            let entries = match fs::read_dir(folder) {
                Ok(entries) => entries,
                Err(error) => {
                    errors.push(FileError::new(
                        folder,
                        format!("cannot read the rule pack folder: {error}"),
                    ));
                    continue;
                }
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
                .collect();
            files.sort();
            if files.is_empty() {
                errors.push(FileError::new(
                    folder,
                    "the rule pack folder holds no rule files (`<rule-name>.md`)",
                ));
            }
            for file in files {
                match read_user_rule(&file, &mut hasher) {
                    Ok(rule) if rule.code.starts_with("TL") => errors.push(FileError::new(
                        &file,
                        format!(
                            "`{}`: codes starting with `TL` are reserved for built-in rules; pick a prefix of your own, like `ACME101`",
                            rule.code
                        ),
                    )),
                    Ok(rule) => added.push(rule),
                    Err(error) => errors.push(error),
                }
            }
        }
        let mut registry = RuleRegistry::from_rules(self.rules.clone(), added, &mut errors);
        registry.user_files = hasher.digest128();
        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(errors)
        }
    }

    fn from_rules(
        mut rules: Vec<Arc<RuleMeta>>,
        added: Vec<RuleMeta>,
        errors: &mut Vec<FileError>,
    ) -> RuleRegistry {
        for rule in added {
            let clash = rules
                .iter()
                .find(|known| known.code == rule.code || known.name == rule.name);
            match clash {
                Some(known) => errors.push(FileError::new(
                    rule.origin.display(),
                    format!(
                        "{} {} clashes with {} {} from {}: codes and names must be unique",
                        rule.code,
                        rule.name,
                        known.code,
                        known.name,
                        known.origin.display()
                    ),
                )),
                None => rules.push(Arc::new(rule)),
            }
        }
        rules.sort_by(|a, b| a.code.cmp(&b.code));
        let by_code = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (rule.code.clone(), i))
            .collect();
        RuleRegistry {
            rules,
            by_code,
            user_files: 0,
        }
    }

    /// What the user rule files said when they were read (see `user_files`): part of the
    /// settings' fingerprint, so editing a rule file invalidates cached results.
    pub fn user_files_hash(&self) -> u128 {
        self.user_files
    }

    pub fn get(&self, code: &str) -> Option<&Arc<RuleMeta>> {
        self.by_code.get(code).map(|&i| &self.rules[i])
    }

    /// Looks a rule up by code or by name.
    pub fn find(&self, code_or_name: &str) -> Option<&Arc<RuleMeta>> {
        self.get(&code_or_name.to_ascii_uppercase())
            .or_else(|| self.rules.iter().find(|rule| rule.name == code_or_name))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RuleMeta>> {
        self.rules.iter()
    }
}

/// Reads and parses one user rule file, adding its path and text to `hasher`.
fn read_user_rule(
    path: &Path,
    hasher: &mut xxhash_rust::xxh3::Xxh3,
) -> Result<RuleMeta, FileError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_CONFIG_BYTES)
        .map_err(|error| FileError::new(path, format!("cannot read the rule file: {error}")))?;
    for part in [path.as_os_str().as_encoded_bytes(), text.as_bytes()] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    pack::parse_rule_file(
        Origin::User {
            path: path.to_owned(),
        },
        &text,
    )
}

/// One rule's work at one kind of node.
pub enum Entry {
    Rust {
        rule: Arc<RuleMeta>,
        check: &'static dyn Check,
    },
    Clause {
        rule: Arc<RuleMeta>,
        spec: Arc<declarative::DeclarativeRule>,
        clause: usize,
    },
}

impl Entry {
    pub fn rule(&self) -> &Arc<RuleMeta> {
        match self {
            Entry::Rust { rule, .. } | Entry::Clause { rule, .. } => rule,
        }
    }

    pub fn run<'a>(
        &self,
        node: Node<'a>,
        checker: &Checker<'a>,
        cursor: &mut QueryCursor,
        out: &mut Vec<Diagnostic>,
    ) {
        inject_fault(self.rule());
        match self {
            Entry::Rust { rule, check } => check.check(rule, node, checker, out),
            Entry::Clause { rule, spec, clause } => {
                declarative::run_clause(rule, &spec.clauses[*clause], node, checker, cursor, out)
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
                    let check = rust_check(&rule.code).expect("checked when the registry loads");
                    for kind in check.kinds() {
                        let id = language.id_for_node_kind(kind, true);
                        assert_ne!(id, 0, "{} registers unknown node kind `{kind}`", rule.code);
                        add(
                            id,
                            Entry::Rust {
                                rule: Arc::clone(rule),
                                check,
                            },
                        );
                    }
                }
                Implementation::Declarative(spec) => {
                    for (clause, spec_clause) in spec.clauses.iter().enumerate() {
                        add(
                            spec_clause.root_kind,
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
