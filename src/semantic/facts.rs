//! The project-wide fact base: the summaries of every file of the run ([`FileSummary`]),
//! looked up by qualified name. It answers what one file cannot know about the names it
//! imports: whether `SeqNet` from `models/seqnet.py` is an `nn.Module`, what
//! `build_model(cfg)` from `utils/factory.py` returns, whether a helper runs a forward pass.
//!
//! Files are linted after the files they import (`project::schedule`), so the summaries a
//! file asks about are usually there; an answer given without one (a cycle of imports, an
//! import the scan missed) is recorded with the file ([`Question`]) and checked again once
//! every summary is in: a file whose answers changed is linted again.

use std::cell::RefCell;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::datasets::WorkSummary;
use super::frameworks;
use super::stores::StoredParameter;
use super::summary::{ClassSummary, FileSummary, FunctionSummary, Symbol};
use super::values::{Kind, Tri, ValueFacts};

/// How many imports and re-exports a lookup follows.
const MAX_DEPTH: usize = 8;

pub struct FactBase {
    /// Each file's dotted path, from its absolute path (`/src/pkg/models.py` →
    /// `src.pkg.models`): an import names a file when the file's path ends with it.
    modules: Vec<String>,
    /// Where each file's relative imports start from: its dotted path, and for a package's
    /// `__init__.py` that path and `.__init__` (`from .base import x` in `pkg/__init__.py` is
    /// `pkg.base`, one level below the package, not beside it).
    import_bases: Vec<String>,
    /// Files by the last component of their dotted path.
    by_last: HashMap<String, Vec<u32>>,
    summaries: Vec<OnceLock<Arc<FileSummary>>>,
    /// The names of the methods some summary says keep a parameter (`update`,
    /// `__setitem__`): a call of another name needs no lookup.
    storing_methods: std::sync::RwLock<rustc_hash::FxHashSet<String>>,
    /// The config's framework table, when it adds to the built-in one.
    frameworks: Option<Arc<frameworks::Frameworks>>,
    /// Names looked up through a file's star imports, by file and name: the dotted path of
    /// the star-imported module that has it, or `None`. A registry package re-exports
    /// hundreds of modules, and every miss would search them all again.
    star_memo: std::sync::RwLock<HashMap<(usize, String), Option<String>>>,
}

/// What a qualified name refers to.
#[derive(Debug, Clone, Copy)]
pub enum Lookup<'f> {
    /// Not a module of the run: a library (or a name the run does not hold).
    External,
    /// A file of the run whose summary is not in yet.
    Pending,
    /// A module of the run itself (`pkg.models`).
    Module,
    Symbol(&'f Symbol),
    /// A method of a class of the run, through the class (`Net.build`).
    Method(&'f ClassSummary, &'f FunctionSummary),
}

/// A question a file asked the fact base, and the answer it got: the file's findings hold as
/// long as the answers do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Question {
    pub ask: Ask,
    pub answer: Answer,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Answer {
    /// Nothing is known.
    #[default]
    Unknown,
    Facts(ValueFacts),
    Yes,
    /// The parameters a function keeps beyond the call.
    Stores(Vec<StoredParameter>),
    /// What a dataset does on the accelerator in a worker.
    Work(WorkSummary),
}

impl Answer {
    /// The answer as value facts (`Yes` as [`YES`]).
    pub fn facts(&self) -> Option<ValueFacts> {
        match self {
            Answer::Facts(facts) => Some(*facts),
            Answer::Yes => Some(YES),
            Answer::Unknown | Answer::Stores(_) | Answer::Work(_) => None,
        }
    }

    fn from_facts(facts: Option<ValueFacts>) -> Answer {
        facts.map_or(Answer::Unknown, Answer::Facts)
    }

    fn yes_if(yes: bool) -> Answer {
        if yes { Answer::Yes } else { Answer::Unknown }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ask {
    /// What calling this name returns.
    Call(String),
    /// What the name holds, as a value.
    Value(String),
    /// Whether a class of this name is a module (answered as `Kind::Module` or nothing).
    ModuleClass(String),
    /// Whether calling this function runs a forward pass.
    RunsForward(String),
    /// Whether calling this function trains: it calls a backward or an optimizer step.
    Trains(String),
    /// Whether this function disables grad for its body (`@torch.no_grad()`).
    GradDisabled(String),
    /// Whether a module of the run defines this name (for `from m import *`).
    Defines(String),
    /// Which parameters this function keeps beyond the call.
    Stores(String),
    /// Whether a framework runs this method of a class of this name (or of a class deriving
    /// from it) without grad (`validation_step` of a `LightningModule`).
    NoGradHook { class: String, method: String },
    /// Whether a class of this name, or a base of it, is defined in a file that names CUDA, a
    /// device or an accelerator.
    AcceleratorClass(String),
    /// The model an instance of a class keeps in an attribute (`pkg.Sampler.denoiser`), by
    /// the class or one of its bases.
    Attribute(String),
    /// Whether calling this name makes an instance of a class of the project that is no model
    /// (`NamedTensor(t, names)`, or a function returning one: `NamedTensor.new_like(t, other)`).
    Instance(String),
    /// What a dataset class of this name does on the accelerator in a loader's workers.
    DatasetWork(String),
}

impl Ask {
    /// The qualified name asked about.
    pub fn name_mut(&mut self) -> &mut String {
        match self {
            Ask::Call(name)
            | Ask::Value(name)
            | Ask::ModuleClass(name)
            | Ask::RunsForward(name)
            | Ask::Trains(name)
            | Ask::GradDisabled(name)
            | Ask::Defines(name)
            | Ask::Stores(name)
            | Ask::NoGradHook { class: name, .. }
            | Ask::AcceleratorClass(name)
            | Ask::Attribute(name)
            | Ask::Instance(name)
            | Ask::DatasetWork(name) => name,
        }
    }
}

/// Which summaries the answers a file got rest on: what can change them.
#[derive(Debug, Clone, Default)]
pub struct Reads {
    /// Some lookup met a file whose summary was not in yet.
    pub pending: bool,
    /// The files whose summaries lookups read, sorted.
    pub files: Vec<u32>,
}

impl Reads {
    /// Reads not known (answers taken from the cache): any summary may change them.
    pub fn unknown() -> Reads {
        Reads {
            pending: true,
            files: Vec::new(),
        }
    }

    /// Whether answers that rest on these reads may differ now that these files were
    /// summarised again.
    pub fn may_change(&self, resummarised: impl Fn(usize) -> bool) -> bool {
        self.pending || self.files.iter().any(|&file| resummarised(file as usize))
    }
}

thread_local! {
    /// The reads of the lint running on this thread, while one is noted. A thread, not the
    /// fact base: files are linted in parallel, each on one thread, against one base.
    static READS: RefCell<Option<Reads>> = const { RefCell::new(None) };
}

/// Runs `f` (linting one file, on this thread), with the summaries its answers rest on.
pub fn noting_reads<T>(f: impl FnOnce() -> T) -> (T, Reads) {
    let outer = READS.replace(Some(Reads::default()));
    let value = f();
    let mut reads = READS.replace(outer).unwrap_or_default();
    reads.files.sort_unstable();
    reads.files.dedup();
    (value, reads)
}

impl FactBase {
    /// A fact base for these files (their paths as linted), with no summary yet.
    pub fn new<'p>(paths: impl IntoIterator<Item = &'p Path>) -> Self {
        use rayon::prelude::*;
        // The working folder once, not once a file (`std::path::absolute` asks the OS each
        // time); a run holds thousands of files.
        let here = std::env::current_dir().ok();
        let paths: Vec<&Path> = paths.into_iter().collect();
        let modules: Vec<String> = paths
            .par_iter()
            .map(|path| match &here {
                Some(here) if path.is_relative() => {
                    crate::semantic::cross_file::module_path(&here.join(path))
                }
                _ => {
                    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                    crate::semantic::cross_file::module_path(&absolute)
                }
            })
            .collect();
        let import_bases = paths
            .iter()
            .zip(&modules)
            .map(|(path, module)| {
                let package = path.file_stem().is_some_and(|stem| stem == "__init__");
                if package {
                    format!("{module}.__init__")
                } else {
                    module.clone()
                }
            })
            .collect();
        let mut by_last: HashMap<String, Vec<u32>> = HashMap::default();
        for (index, module) in modules.iter().enumerate() {
            let last = module.rsplit('.').next().unwrap_or(module);
            by_last
                .entry(last.to_owned())
                .or_default()
                .push(index as u32);
        }
        let summaries = modules.iter().map(|_| OnceLock::new()).collect();
        FactBase {
            modules,
            import_bases,
            by_last,
            summaries,
            storing_methods: std::sync::RwLock::default(),
            star_memo: std::sync::RwLock::default(),
            frameworks: None,
        }
    }

    /// Library names are looked up in this table instead of the built-in one.
    pub fn with_frameworks(mut self, frameworks: Option<Arc<frameworks::Frameworks>>) -> Self {
        self.frameworks = frameworks;
        self
    }

    pub fn frameworks(&self) -> &frameworks::Frameworks {
        self.frameworks.as_deref().unwrap_or(frameworks::builtin())
    }

    /// A fact base that knows no file: lookups only reach the framework table.
    pub fn empty() -> Self {
        FactBase::new(std::iter::empty())
    }

    pub fn len(&self) -> usize {
        self.modules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The dotted path the fact base knows a file by: relative imports start from it.
    pub fn module(&self, file: usize) -> &str {
        &self.modules[file]
    }

    /// Where the file's relative imports start from (see [`FactBase::import_bases`]).
    pub fn import_base(&self, file: usize) -> &str {
        &self.import_bases[file]
    }

    /// Records a file's summary (once: a file is summarised when it is linted).
    pub fn set_summary(&self, file: usize, summary: Arc<FileSummary>) {
        let storing: Vec<String> = summary
            .names
            .iter()
            .filter_map(|(_, symbol)| match symbol {
                Symbol::Class(class) => Some(class),
                _ => None,
            })
            .flat_map(|class| class.methods.iter())
            .filter(|(_, method)| !method.stores.is_empty())
            .map(|(name, _)| name.clone())
            .collect();
        if !storing.is_empty() {
            let mut names = self
                .storing_methods
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            names.extend(storing);
        }
        let _ = self.summaries[file].set(summary);
    }

    /// Records a file's summary again (it was linted again). A method name the old summary
    /// stored with stays known as storing: that only costs a closer look at its calls.
    pub fn replace_summary(&mut self, file: usize, summary: Arc<FileSummary>) {
        self.summaries[file] = OnceLock::new();
        self.star_memo
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        self.set_summary(file, summary);
    }

    /// Whether some summarised method of this name keeps a parameter.
    pub fn may_store(&self, method: &str) -> bool {
        self.storing_methods
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(method)
    }

    pub fn summary(&self, file: usize) -> Option<&FileSummary> {
        self.summaries[file].get().map(Arc::as_ref)
    }

    /// A file's summary for a lookup, which is noted on this thread (see [`noting_reads`]).
    fn summary_to_look_up(&self, file: usize) -> Option<&FileSummary> {
        let summary = self.summary(file);
        READS.with_borrow_mut(|reads| match (reads, summary) {
            (Some(reads), Some(_)) => reads.files.push(file as u32),
            (Some(reads), None) => reads.pending = true,
            (None, _) => {}
        });
        summary
    }

    /// Whether some file of the run is a module of this (last) name: `from pkg import name`
    /// may import a submodule only then.
    pub fn has_module_named(&self, name: &str) -> bool {
        self.by_last.contains_key(name)
    }

    /// The file a dotted module path names, seen from `importer` (the closest of several
    /// files whose paths end with it).
    pub fn module_file(&self, dotted: &str, importer: Option<usize>) -> Option<usize> {
        let last = dotted.rsplit('.').next()?;
        let candidates = self.by_last.get(last)?;
        let matches = candidates.iter().copied().filter(|&file| {
            let module = &self.modules[file as usize];
            module == dotted
                || module
                    .strip_suffix(dotted)
                    .is_some_and(|head| head.ends_with('.'))
        });
        let near = |file: u32| {
            importer.map_or(0, |importer| {
                common_prefix(&self.modules[importer], &self.modules[file as usize])
            })
        };
        // Most names match one file: how near the others are is asked only among several.
        let mut matches = matches.peekable();
        let first = matches.next()?;
        if matches.peek().is_none() {
            return Some(first as usize);
        }
        std::iter::once(first)
            .chain(matches)
            .max_by_key(|&file| (near(file), std::cmp::Reverse(file)))
            .map(|file| file as usize)
    }

    /// What an absolute qualified name refers to.
    pub fn lookup(&self, qualified: &str, importer: Option<usize>) -> Lookup<'_> {
        self.lookup_at_depth(qualified, importer, 0)
    }

    fn lookup_at_depth(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Lookup<'_> {
        if depth > MAX_DEPTH || self.modules.is_empty() {
            return Lookup::External;
        }
        let parts: Vec<&str> = qualified.split('.').collect();
        for (split, module) in module_prefixes(qualified, &parts) {
            let Some(file) = self.module_file(module, importer) else {
                continue;
            };
            let rest = &parts[split..];
            let Some(&first) = rest.first() else {
                return Lookup::Module;
            };
            let Some(summary) = self.summary_to_look_up(file) else {
                return Lookup::Pending;
            };
            let Some(symbol) = summary.get(first) else {
                // Re-exported from a module the file star-imports (`from .base import *` in a
                // package's `__init__.py`).
                if !summary.stars.is_empty() {
                    return self.star_lookup(summary, file, rest, depth);
                }
                // Not a summarised name: not imported by anyone, or not module-level.
                return Lookup::External;
            };
            return match (symbol, &rest[1..]) {
                (Symbol::Import(target), more) => {
                    let mut target = target.clone();
                    for part in more {
                        target.push('.');
                        target.push_str(part);
                    }
                    self.lookup_at_depth(&target, Some(file), depth + 1)
                }
                (symbol, []) => Lookup::Symbol(symbol),
                (Symbol::Class(class), [method]) => class
                    .methods
                    .iter()
                    .find(|(name, _)| name == method)
                    .map_or(Lookup::External, |(_, summary)| {
                        Lookup::Method(class, summary)
                    }),
                _ => Lookup::External,
            };
        }
        Lookup::External
    }

    /// `rest` (a name and its attributes) through the star imports of `file`, remembered by
    /// name once the answer is final (no module it searched was still pending).
    fn star_lookup(
        &self,
        summary: &FileSummary,
        file: usize,
        rest: &[&str],
        depth: usize,
    ) -> Lookup<'_> {
        let in_star = |star: &str| {
            let mut target = star.to_owned();
            for part in rest {
                target.push('.');
                target.push_str(part);
            }
            self.lookup_at_depth(&target, Some(file), depth + 1)
        };
        let key = (file, rest[0].to_owned());
        let known = self
            .star_memo
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
            .cloned();
        match known {
            Some(None) => return Lookup::External,
            Some(Some(star)) => return in_star(&star),
            None => {}
        }
        let mut pending = false;
        for star in &summary.stars {
            // A module outside the run re-exports nothing the run can see. Looked up by name
            // it would resolve to a package above it, which can be this very file (`from
            // .albert import *` in `models/__init__.py` when the run holds no `albert`), and
            // every name not found would search every star again, each a level deeper.
            if self.module_file(star, Some(file)).is_none() {
                continue;
            }
            match in_star(star) {
                Lookup::External => {}
                Lookup::Pending => pending = true,
                found => {
                    self.remember_star(key, Some(star.clone()));
                    return found;
                }
            }
        }
        if pending {
            return Lookup::Pending;
        }
        self.remember_star(key, None);
        Lookup::External
    }

    fn remember_star(&self, key: (usize, String), star: Option<String>) {
        self.star_memo
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key, star);
    }

    /// Whether the class a qualified name refers to is an `nn.Module`: `Some(true)` or
    /// `Some(false)` when the run or the framework table can tell.
    pub fn is_module_class(&self, qualified: &str, importer: Option<usize>) -> Option<bool> {
        self.is_module_class_at_depth(qualified, importer, 0)
    }

    fn is_module_class_at_depth(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.lookup(qualified, importer) {
            Lookup::Symbol(Symbol::Class(class)) => {
                if class.module {
                    return Some(true);
                }
                let mut all_known = true;
                for base in &class.bases {
                    if self.frameworks().is_module_base(base) {
                        return Some(true);
                    }
                    match self.is_module_class_at_depth(base, importer, depth + 1) {
                        Some(true) => return Some(true),
                        Some(false) => {}
                        None => all_known = false,
                    }
                }
                all_known.then_some(false)
            }
            Lookup::External | Lookup::Pending => {
                self.frameworks().is_module_base(qualified).then_some(true)
            }
            _ => None,
        }
    }

    /// Whether the framework table lists `method` as run without grad for the class of this
    /// name, one of its bases, or theirs, through the run's files.
    fn is_no_grad_hook(
        &self,
        qualified: &str,
        method: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.lookup(qualified, importer) {
            // The framework's own class, in a checkout of it the run lints, or one of its
            // bases.
            Lookup::Symbol(Symbol::Class(class)) => {
                self.frameworks().is_no_grad_hook(qualified, method)
                    || class.bases.iter().any(|base| {
                        self.frameworks().is_no_grad_hook(base, method)
                            || self.is_no_grad_hook(base, method, importer, depth + 1)
                    })
            }
            Lookup::External | Lookup::Pending => {
                self.frameworks().is_no_grad_hook(qualified, method)
            }
            _ => false,
        }
    }

    /// Whether the class of this name or one of its bases, through the run's files, is
    /// defined in a file that names CUDA, a device or an accelerator.
    fn is_accelerator_class(&self, qualified: &str, importer: Option<usize>, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.lookup(qualified, importer) {
            Lookup::Symbol(Symbol::Class(class)) => {
                class.accelerator
                    || class
                        .bases
                        .iter()
                        .any(|base| self.is_accelerator_class(base, importer, depth + 1))
            }
            _ => false,
        }
    }

    /// What calling the name returns, when the run or the framework table can tell.
    pub fn call_result(&self, qualified: &str, importer: Option<usize>) -> Option<ValueFacts> {
        self.call_result_at_depth(qualified, importer, 0)
    }

    fn call_result_at_depth(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Option<ValueFacts> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.lookup(qualified, importer) {
            // Pending: the framework table's answer for now. The answer is asked again once
            // every summary is in (the read was noted pending), and most often the run's
            // files lead to the same answer (a checkout of the framework itself).
            Lookup::External | Lookup::Pending => self.frameworks().call_result(qualified),
            Lookup::Module => None,
            Lookup::Symbol(Symbol::Class(class)) => {
                if self.is_module_class(qualified, importer) != Some(true) {
                    return None;
                }
                Some(module_facts(if class.loss {
                    Kind::LossModule
                } else {
                    Kind::Module
                }))
            }
            Lookup::Symbol(Symbol::Function(function)) | Lookup::Method(_, function) => {
                let returns = &function.returns;
                if returns.facts.kind != Kind::Unknown {
                    return Some(instantiate(returns.facts));
                }
                let call = returns.call.as_deref()?;
                self.call_result_at_depth(call, importer, depth + 1)
            }
            Lookup::Symbol(Symbol::Value(value)) => {
                // `Model = load_model(cfg)` at module level, then `Model(...)`.
                let held = if value.facts.kind != Kind::Unknown {
                    Some(value.facts)
                } else {
                    self.call_result_at_depth(value.call.as_deref()?, importer, depth + 1)
                }?;
                (held.kind == Kind::ModuleClass).then(|| module_facts(Kind::Module))
            }
            Lookup::Symbol(Symbol::Import(_)) => None,
        }
    }

    /// Whether calling the name makes an instance of a class of the run that is no model.
    fn makes_instance(&self, qualified: &str, importer: Option<usize>, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.lookup(qualified, importer) {
            Lookup::Symbol(Symbol::Class(_)) => {
                self.is_module_class(qualified, importer) == Some(false)
            }
            Lookup::Symbol(Symbol::Function(function)) | Lookup::Method(_, function) => {
                function.returns.facts.kind == Kind::Unknown
                    && function
                        .returns
                        .call
                        .as_deref()
                        .is_some_and(|call| self.makes_instance(call, importer, depth + 1))
            }
            _ => false,
        }
    }

    /// What the name holds as a value: a module class, or a module-level value.
    pub fn value_of(&self, qualified: &str, importer: Option<usize>) -> Option<ValueFacts> {
        match self.lookup(qualified, importer) {
            Lookup::Symbol(Symbol::Class(_)) => (self.is_module_class(qualified, importer)
                == Some(true))
            .then(|| module_facts(Kind::ModuleClass)),
            Lookup::Symbol(Symbol::Value(value)) => {
                if value.facts.kind != Kind::Unknown {
                    Some(value.facts)
                } else {
                    self.call_result(value.call.as_deref()?, importer)
                }
            }
            Lookup::External | Lookup::Pending => self.frameworks().value_of(qualified),
            _ => None,
        }
    }

    /// What instances of a class keep in an attribute (`pkg.Sampler.denoiser`), as the class or
    /// one of its bases assigns it.
    fn kept_attribute(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Option<ValueFacts> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (class_name, attribute) = qualified.rsplit_once('.')?;
        let Lookup::Symbol(Symbol::Class(class)) = self.lookup(class_name, importer) else {
            return None;
        };
        if let Some((_, facts)) = class.attributes.iter().find(|(name, _)| name == attribute) {
            return Some(*facts);
        }
        class.bases.iter().find_map(|base| {
            self.kept_attribute(&format!("{base}.{attribute}"), importer, depth + 1)
        })
    }

    /// What a dataset class does in a worker: its own worker methods decide, else those of
    /// the first base that has some.
    fn dataset_work(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Option<WorkSummary> {
        if depth > MAX_DEPTH {
            return None;
        }
        let Lookup::Symbol(Symbol::Class(class)) = self.lookup(qualified, importer) else {
            return None;
        };
        if class.worker_methods {
            return class.worker_work.clone();
        }
        class
            .bases
            .iter()
            .find_map(|base| self.dataset_work(base, importer, depth + 1))
    }

    /// The summary of the function a qualified name refers to.
    pub fn function(&self, qualified: &str, importer: Option<usize>) -> Option<&FunctionSummary> {
        match self.lookup(qualified, importer) {
            Lookup::Symbol(Symbol::Function(function)) | Lookup::Method(_, function) => {
                Some(function)
            }
            _ => None,
        }
    }

    /// Answers a recorded question again, with the summaries there are now.
    pub fn answer(&self, ask: &Ask, importer: Option<usize>) -> Answer {
        match ask {
            Ask::Call(name) => Answer::from_facts(self.call_result(name, importer)),
            Ask::Value(name) => Answer::from_facts(self.value_of(name, importer)),
            Ask::ModuleClass(name) => {
                Answer::yes_if(self.is_module_class(name, importer) == Some(true))
            }
            Ask::RunsForward(name) => Answer::yes_if(
                self.function(name, importer)
                    .is_some_and(|f| f.runs_forward && !f.grad_disabled),
            ),
            Ask::Trains(name) => {
                Answer::yes_if(self.function(name, importer).is_some_and(|f| f.trains))
            }
            Ask::GradDisabled(name) => Answer::yes_if(
                self.function(name, importer)
                    .is_some_and(|f| f.grad_disabled),
            ),
            Ask::Defines(name) => Answer::yes_if(matches!(
                self.lookup(name, importer),
                Lookup::Symbol(_) | Lookup::Method(..)
            )),
            Ask::NoGradHook { class, method } => {
                Answer::yes_if(self.is_no_grad_hook(class, method, importer, 0))
            }
            Ask::AcceleratorClass(name) => {
                Answer::yes_if(self.is_accelerator_class(name, importer, 0))
            }
            Ask::Attribute(name) => Answer::from_facts(self.kept_attribute(name, importer, 0)),
            Ask::Instance(name) => Answer::yes_if(self.makes_instance(name, importer, 0)),
            Ask::DatasetWork(name) => self
                .dataset_work(name, importer, 0)
                .map_or(Answer::Unknown, Answer::Work),
            Ask::Stores(name) => match self.function(name, importer) {
                Some(function) if !function.stores.is_empty() => {
                    Answer::Stores(function.stores.clone())
                }
                _ => Answer::Unknown,
            },
        }
    }

    /// The name a qualified name has in the file that defines it (`pkg.Net` re-exported from
    /// `pkg/models.py` is `<path>.pkg.models.Net`): the same for every importer.
    pub fn canonical(&self, qualified: &str, importer: Option<usize>) -> Option<String> {
        self.canonical_at_depth(qualified, importer, 0)
    }

    fn canonical_at_depth(
        &self,
        qualified: &str,
        importer: Option<usize>,
        depth: usize,
    ) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let parts: Vec<&str> = qualified.split('.').collect();
        for (split, module) in module_prefixes(qualified, &parts) {
            let Some(file) = self.module_file(module, importer) else {
                continue;
            };
            let rest = &parts[split..];
            let first = rest.first()?;
            if let Some(Symbol::Import(target)) =
                self.summary_to_look_up(file).and_then(|s| s.get(first))
            {
                let mut target = target.clone();
                for part in &rest[1..] {
                    target.push('.');
                    target.push_str(part);
                }
                return self.canonical_at_depth(&target, Some(file), depth + 1);
            }
            return Some(format!("{}.{}", self.modules[file], rest.join(".")));
        }
        None
    }
}

/// The answer `Some(YES)` to a yes-or-no question.
pub const YES: ValueFacts = ValueFacts {
    kind: Kind::Scalar,
    graph: Tri::No,
    device: Tri::No,
    float64: false,
    loss: false,
    eval_mode: false,
    pretrained: false,
    untyped: false,
};

/// The facts of a fresh instance of a module class (on the CPU until moved).
pub fn module_facts(kind: Kind) -> ValueFacts {
    ValueFacts {
        kind,
        graph: Tri::No,
        device: Tri::Unknown,
        ..ValueFacts::default()
    }
}

/// What a summary says a function returns, as seen at a call: whether a returned tensor carries
/// a graph depends on the caller's grad mode, which the summary cannot know.
fn instantiate(facts: ValueFacts) -> ValueFacts {
    facts
}

/// The leading runs of a dotted name's parts, longest first, with how many parts each holds
/// (`parts` is the name split at its dots): `a.b.c`, `a.b`, `a`. Slices of the name: lookups
/// run once a call, and building a string per try cost more than the lookup.
fn module_prefixes<'q>(
    qualified: &'q str,
    parts: &[&str],
) -> impl Iterator<Item = (usize, &'q str)> {
    std::iter::successors(Some((parts.len(), qualified)), |&(count, module)| {
        module.rfind('.').map(|dot| (count - 1, &module[..dot]))
    })
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.split('.')
        .zip(b.split('.'))
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_prefixes_go_from_the_whole_name_to_its_first_part() {
        fn prefixes(name: &str) -> Vec<(usize, &str)> {
            let parts: Vec<&str> = name.split('.').collect();
            module_prefixes(name, &parts).collect()
        }
        assert_eq!(
            prefixes("pkg.models.Net"),
            [(3, "pkg.models.Net"), (2, "pkg.models"), (1, "pkg")]
        );
        assert_eq!(prefixes("torch"), [(1, "torch")]);
        // What `parts[..n].join(".")` gives for a relative name's empty first part.
        assert_eq!(prefixes(".utils"), [(2, ".utils"), (1, "")]);
    }

    #[test]
    fn a_pending_file_of_the_run_leaves_the_framework_table_to_answer_for_now() {
        // The run holds a checkout of transformers whose `__init__.py` is not summarised yet
        // (a file of its import cycle asks first): the table's answer stands in, noted as
        // resting on a pending summary, so that it is asked again once every summary is in.
        let facts = FactBase::new([Path::new("/r/transformers/__init__.py")]);
        let name = "transformers.AutoModelForCausalLM.from_pretrained";
        let (result, reads) = noting_reads(|| facts.call_result(name, None));
        assert_eq!(result, frameworks::builtin().call_result(name));
        assert!(result.is_some());
        assert!(reads.pending);
    }
}
