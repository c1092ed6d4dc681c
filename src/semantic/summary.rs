//! A file's summary for the rest of the project: what each of its module-level names stands
//! for, in the few facts other files ask about — whether a class is an `nn.Module`, what a
//! function returns (a model, a graph-carrying or device tensor, a float64 array), whether it
//! runs a forward pass or disables grad. Built from the semantic model while the file is
//! linted, kept in the result cache with its findings, and read by the fact base
//! ([`super::facts`]) when another file imports the name.
//!
//! Only the names some file of the run imports are summarised ([`Demand`]): the project's
//! import statements are known before any file is parsed.

use crate::syntax::Node;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::analysis::Analysis;
use super::datasets::WorkSummary;
use super::scope::{BindingKind, Site};
use super::stores::StoredParameter;
use super::values::{Kind, Tri, ValueFacts};
use crate::parse::{FIELDS, KINDS};

/// What a file's module-level names stand for, by name (sorted, for binary search).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    pub names: Vec<(String, Symbol)>,
    /// The file names CUDA, a device or an accelerator: the run puts work on one, so a model
    /// in a file of the run that names none may run there too.
    #[serde(default)]
    pub accelerator: bool,
    /// The modules it imports with `from m import *` (absolute): a package's `__init__.py`
    /// re-exports their names.
    #[serde(default)]
    pub stars: Vec<String>,
}

impl FileSummary {
    pub fn get(&self, name: &str) -> Option<&Symbol> {
        self.names
            .binary_search_by(|(entry, _)| entry.as_str().cmp(name))
            .ok()
            .map(|at| &self.names[at].1)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Symbol {
    /// `from pkg.models import Net`, `import pkg.models as m`: another module's name, by its
    /// absolute qualified name.
    Import(String),
    Class(ClassSummary),
    Function(FunctionSummary),
    /// `model = Net()` at module level: the value it holds.
    Value(ValueSummary),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    /// The file alone shows that the class is an `nn.Module`.
    pub module: bool,
    /// The absolute qualified names of its imported bases: the class is a module if one of
    /// them is, and a framework runs its hooks if one of them is the framework's class.
    pub bases: Vec<String>,
    /// A criterion (`class FocalLoss(nn.Module)`), not a model.
    pub loss: bool,
    /// The class's file names CUDA, a device or an accelerator: its subclasses' work goes
    /// there too.
    pub accelerator: bool,
    /// Methods other files may call on an instance, with their summaries.
    pub methods: Vec<(String, FunctionSummary)>,
    /// The models an instance keeps on `self`, by attribute, when the class is no model
    /// itself (a sampler, predictor or trainer holding `self.denoiser = load(p).eval()`): its
    /// subclasses and users in other files run them.
    #[serde(default)]
    pub attributes: Vec<(String, ValueFacts)>,
    /// A dataset class (a loader's worker calls a method of it or of a base in its file,
    /// `__getitem__`): its first work on the accelerator in a worker, if any (TL112 on
    /// another file's `DataLoader`).
    #[serde(default)]
    pub worker_methods: bool,
    #[serde(default)]
    pub worker_work: Option<WorkSummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionSummary {
    pub returns: ValueSummary,
    /// Runs a model's forward pass (directly or through the file's own functions) with grad
    /// as its caller has it.
    pub runs_forward: bool,
    /// Decorated with `@torch.no_grad()` / `@torch.inference_mode()`.
    pub grad_disabled: bool,
    /// Calls a backward or an optimizer step: it trains.
    pub trains: bool,
    /// The parameters it keeps on `self` (a method's `self.sum += val`).
    #[serde(default)]
    pub stores: Vec<StoredParameter>,
}

/// What a name or a call evaluates to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValueSummary {
    pub facts: ValueFacts,
    /// When the file could not tell: the value is what calling this absolute qualified name
    /// returns (`return Net(cfg)`, `return build(cfg).to(device)`).
    pub call: Option<String>,
}

/// Which of a file's names other files of the run import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Demand {
    #[default]
    Nothing,
    /// Shared: a package's names pass on to every module it re-exports with `from .m import
    /// *`, and in a large package that is thousands of modules asked the same names.
    Names(Vec<Arc<str>>),
    /// Imported whole (`import pkg.utils as u`, `from pkg import utils`, `import *`).
    Everything,
}

impl Demand {
    pub fn wants(&self, name: &str) -> bool {
        match self {
            Demand::Nothing => false,
            Demand::Names(names) => names.iter().any(|wanted| **wanted == *name),
            Demand::Everything => true,
        }
    }

    pub fn add(&mut self, name: Option<&str>) {
        match (name, &mut *self) {
            (_, Demand::Everything) => {}
            (None, _) => *self = Demand::Everything,
            (Some(name), Demand::Nothing) => *self = Demand::Names(vec![name.into()]),
            (Some(name), Demand::Names(names)) => {
                if !names.iter().any(|n| **n == *name) {
                    names.push(name.into());
                }
            }
        }
    }

    pub fn is_nothing(&self) -> bool {
        *self == Demand::Nothing
    }

    /// Whether a summary made for this demand holds every name `other` asks for.
    pub fn covers(&self, other: &Demand) -> bool {
        match (self, other) {
            (Demand::Everything, _) | (_, Demand::Nothing) => true,
            (Demand::Nothing, _) | (Demand::Names(_), Demand::Everything) => false,
            (Demand::Names(mine), Demand::Names(theirs)) => {
                theirs.iter().all(|name| mine.contains(name))
            }
        }
    }
}

/// Methods that return their receiver (or a copy of it) as far as module-ness and the value's
/// origin go: `build(cfg).to(device)` is what `build` returns.
pub(super) const SAME_VALUE_METHODS: &[&str] = &[
    "to",
    "cuda",
    "cpu",
    "eval",
    "train",
    "float",
    "half",
    "double",
    "bfloat16",
    "type",
    "requires_grad_",
    "share_memory",
];

/// Summarises the names of the file that `demand` asks for. `module` is the file's dotted
/// path, to make its own names and relative imports absolute.
pub fn summarize(analysis: &Analysis<'_>, module: &str, demand: &Demand) -> FileSummary {
    let mut names: Vec<(String, Symbol)> = Vec::new();
    let accelerator = analysis.targets_gpu();
    if demand.is_nothing() {
        return FileSummary {
            names,
            accelerator,
            stars: Vec::new(),
        };
    }
    let stars = analysis
        .model
        .scopes
        .star_imports
        .iter()
        .map(|star| absolute_module(star, module))
        .collect();
    let model = analysis.model;
    let module_scope = model.scopes.get(0);
    for (&name, bindings) in module_scope.bindings() {
        if !demand.wants(name) {
            continue;
        }
        // The last binding wins for an importer (`try: import x` / `except: x = None`
        // keeps the import, as resolution does).
        let bindings = bindings.as_slice();
        let chosen = bindings
            .iter()
            .rev()
            .find(|b| matches!(b.kind, BindingKind::Import(_) | BindingKind::Definition))
            .or(bindings.last());
        let Some(binding) = chosen else { continue };
        let symbol = match &binding.kind {
            BindingKind::Import(qualified) => {
                Some(Symbol::Import(absolute_module(qualified, module)))
            }
            BindingKind::Definition => definition_symbol(analysis, module, name, binding.offset),
            BindingKind::Alias(_) | BindingKind::Other => match binding.site {
                Site::Value {
                    value, index: None, ..
                } => Some(Symbol::Value(value_summary(
                    analysis,
                    module,
                    value,
                    analysis.facts(value),
                ))),
                _ => None,
            },
        };
        if let Some(symbol) = symbol {
            names.push((name.to_owned(), symbol));
        }
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    FileSummary {
        names,
        accelerator,
        stars,
    }
}

/// A module-level `def` or `class` bound at `offset`.
fn definition_symbol(
    analysis: &Analysis<'_>,
    module: &str,
    name: &str,
    offset: usize,
) -> Option<Symbol> {
    let model = analysis.model;
    if let Some(index) = model
        .classes
        .iter()
        .position(|class| class.name == name && class.node.end_byte() <= offset + 1)
        .or_else(|| model.classes.iter().position(|class| class.name == name))
    {
        return Some(Symbol::Class(class_summary(analysis, module, index)));
    }
    let function = model.function_nodes_named(name).find(|f| {
        model
            .function_facts(*f)
            .is_some_and(|facts| facts.class.is_none())
    })?;
    Some(Symbol::Function(function_summary(
        analysis, module, function, 0,
    )))
}

fn class_summary(analysis: &Analysis<'_>, module: &str, index: usize) -> ClassSummary {
    let class = &analysis.model.classes[index];
    let local = analysis.modules().is_module_class(index);
    // A class of this file among the bases: its own module-ness is already in `local`.
    let bases = class
        .bases
        .iter()
        .filter_map(|base| analysis.qualified_name(*base))
        .map(|name| absolute_module(&name, module))
        .collect();
    let methods = class
        .methods
        .iter()
        .filter(|(name, _)| !name.starts_with("__") || matches!(*name, "__call__" | "__setitem__"))
        .map(|(name, node)| {
            (
                (*name).to_owned(),
                function_summary(analysis, module, *node, 1),
            )
        })
        .collect();
    let attributes = if local {
        Vec::new()
    } else {
        analysis.kept_models(index)
    };
    let worker_methods = analysis.has_worker_methods(index);
    ClassSummary {
        module: local,
        bases,
        loss: class.name.ends_with("Loss"),
        accelerator: analysis.targets_gpu(),
        methods,
        attributes,
        worker_methods,
        worker_work: worker_methods
            .then(|| analysis.dataset_work_summary(index))
            .flatten(),
    }
}

fn function_summary<'a>(
    analysis: &Analysis<'a>,
    module: &str,
    function: Node<'a>,
    first_parameter: u32,
) -> FunctionSummary {
    let facts = analysis.model.function_facts(function);
    let returns = analysis.model.returns_of(function);
    let mut summary = ValueSummary::default();
    for (at, &value) in returns.iter().enumerate() {
        let facts = analysis.facts(value);
        let returned = value_summary(analysis, module, value, facts);
        summary = if at == 0 {
            returned
        } else {
            ValueSummary {
                facts: summary.facts.combine(returned.facts),
                call: summary.call.or(returned.call),
            }
        };
    }
    // A model's `forward` runs it, by definition (whether the class is a model is the class
    // summary's); other dunders do not.
    let name = facts.map_or("", |f| f.name.as_str());
    let runs_forward = match name {
        "forward" | "__call__" => !analysis.grad().disabled_by_decorator(function),
        _ if name.starts_with("__") => false,
        _ => facts
            .and_then(|f| f.class)
            .is_some_and(|class| analysis.may_run_forward_with_grad(function, class)),
    };
    FunctionSummary {
        returns: summary,
        runs_forward,
        grad_disabled: analysis.grad().disabled_by_decorator(function),
        trains: facts.is_some_and(|f| f.contains_training),
        stores: if first_parameter == 1 {
            analysis.stored_parameters(function)
        } else {
            Vec::new()
        },
    }
}

/// The summary of an expression's value: its facts, and when they are unknown, the call it
/// comes from (through names bound in the file and methods that keep the value).
fn value_summary<'a>(
    analysis: &Analysis<'a>,
    module: &str,
    value: Node<'a>,
    facts: ValueFacts,
) -> ValueSummary {
    let call = if facts.kind == Kind::Unknown {
        origin_call(analysis, value, 0).map(|name| absolute_module(&name, module))
    } else {
        None
    };
    // A module-level value's device and graph depend on when it is read; keep the kind.
    let facts = ValueFacts {
        graph: if facts.kind == Kind::Tensor {
            facts.graph
        } else {
            Tri::No.or(facts.graph)
        },
        ..facts
    };
    ValueSummary { facts, call }
}

/// The qualified name of the call an expression's value comes from: `Net(cfg)`,
/// `build(cfg).to(dev)`, `m` after `m = Net(cfg)`. The file's own names are qualified with
/// the module's path by the caller.
fn origin_call<'a>(analysis: &Analysis<'a>, node: Node<'a>, depth: usize) -> Option<String> {
    if depth > 6 {
        return None;
    }
    let kind = node.kind_id();
    if kind == KINDS.parenthesized_expression {
        return origin_call(analysis, node.named_child(0)?, depth + 1);
    }
    if kind == KINDS.identifier {
        let value = analysis.reaching_value(node)?;
        return origin_call(analysis, value, depth + 1);
    }
    if kind != KINDS.call {
        return None;
    }
    let callee = node.child_by_field_id(FIELDS.function)?;
    if callee.kind_id() == KINDS.attribute
        && let Some(method) = callee.child_by_field_id(FIELDS.attribute)
        && SAME_VALUE_METHODS.contains(&analysis.text(method))
        && let Some(receiver) = callee.child_by_field_id(FIELDS.object)
        && receiver.kind_id() != KINDS.identifier
    {
        // `build(cfg).to(device)`: what `build` returns.
        return origin_call(analysis, receiver, depth + 1);
    }
    match analysis.qualified_name(callee) {
        Some(name) => Some(name),
        // One of the file's own functions or classes: named by the caller's module.
        None if callee.kind_id() == KINDS.identifier => {
            let name = analysis.text(callee);
            let own = analysis.model.class_named(name).is_some()
                || analysis.model.function_nodes_named(name).next().is_some();
            own.then(|| format!("{OWN_MODULE}{name}"))
        }
        None => None,
    }
}

/// Marks a name of the summarised file itself in [`origin_call`], before
/// [`absolute_module`] puts the module's path in front.
const OWN_MODULE: &str = "\u{0}.";

/// `.utils.f` imported from `pkg.train` is `pkg.utils.f`; `..x` is one package further up;
/// a name of the file itself (see [`OWN_MODULE`]) is put in the file's module.
pub fn absolute_module(imported: &str, importer: &str) -> String {
    // A package's own names are the package's (`pkg/__init__.py` defines `pkg.x`).
    let importer_module = importer.strip_suffix(".__init__").unwrap_or(importer);
    if let Some(own) = imported.strip_prefix(OWN_MODULE) {
        let importer = importer_module;
        return if importer.is_empty() {
            own.to_owned()
        } else {
            format!("{importer}.{own}")
        };
    }
    let dots = imported.len() - imported.trim_start_matches('.').len();
    if dots == 0 {
        return imported.to_owned();
    }
    // Relative imports count from `importer`, which for a package ends in `.__init__`: each
    // dot drops its last part (sliced off, not split into parts and joined again: a large
    // repository resolves tens of thousands of imports).
    let mut base = importer.trim_matches('.');
    for _ in 0..dots {
        base = base.rfind('.').map_or("", |at| &base[..at]);
    }
    let rest = &imported[dots..];
    match (base.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (false, true) => base.to_owned(),
        (false, false) => format!("{base}.{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_imports_are_made_absolute() {
        assert_eq!(absolute_module(".utils", "src.pkg.train"), "src.pkg.utils");
        assert_eq!(absolute_module("..x", "src.pkg.train"), "src.x");
        assert_eq!(absolute_module(".", "src.pkg.train"), "src.pkg");
        assert_eq!(absolute_module("pkg.utils", "src.pkg.train"), "pkg.utils");
        assert_eq!(absolute_module("\u{0}.Net", "pkg.models"), "pkg.models.Net");
        // In a package's `__init__.py`.
        assert_eq!(absolute_module(".base", "src.pkg.__init__"), "src.pkg.base");
        assert_eq!(
            absolute_module("\u{0}.Net", "src.pkg.__init__"),
            "src.pkg.Net"
        );
    }

    #[test]
    fn demand_grows_to_everything() {
        let mut demand = Demand::default();
        assert!(!demand.wants("Net"));
        demand.add(Some("Net"));
        demand.add(Some("Net"));
        assert_eq!(demand, Demand::Names(vec!["Net".into()]));
        demand.add(None);
        assert!(demand.wants("anything"));
    }
}
