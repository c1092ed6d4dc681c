//! The project index: what one file cannot know about itself. An evaluation helper in
//! `utils.py` looks grad-enabled there, but if every caller in `train.py` wraps it in
//! `torch.no_grad()`, it never records a graph.
//!
//! A finding that holds only if its function is entered with grad enabled carries an
//! [`Assumption`]. Once every file is linted, [`no_grad_functions`] finds the call sites of
//! those functions across the files of the run (and of their callers, and so on), in
//! parallel, and the findings whose function only ever runs without grad are dropped. Only the
//! files that call a function by that name are read and parsed again (the first pass keeps a
//! [`CalledNames`] filter per file), so a run without such findings pays nothing.
//!
//! Call sites are matched the way the per-file analysis matches them: plain calls through the
//! imports that bind them (`from .utils import evaluate`), methods by name (`x.val_step(...)`).

pub mod imports;
pub mod notes;
pub mod run;
pub mod schedule;

use std::path::Path;

use crate::syntax::Node;
use rayon::prelude::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::parse::{self, FIELDS, KINDS};
use crate::semantic::SemanticModel;
use crate::semantic::analysis::Analysis;
use crate::semantic::grad::GradMode;
use crate::semantic::scope::BindingKind;
use crate::source::SourceKind;

pub use crate::semantic::cross_file::{
    Assumption, CalledNames, FunctionKey, GraphCall, effective_graph_calls, module_path,
};

/// A file of the run, as the second pass reads it.
pub struct ProjectFile<'a> {
    /// The path to read.
    pub path: &'a Path,
    /// The path findings show (what [`module_path`] is computed from in the first pass).
    pub display: &'a Path,
    /// The node kinds the skeleton keeps (`Dispatch::kinds`).
    pub kinds: &'a [bool],
    /// The framework table of the file's settings.
    pub frameworks: &'a crate::semantic::frameworks::Frameworks,
    /// The names the first pass saw called in the file; None when it did not lint the file
    /// (a cached result), which is then read to find out.
    pub called: Option<&'a CalledNames>,
    /// Bytes that stand in for the file (an editor's unsaved buffer).
    pub text: Option<&'a [u8]>,
}

/// How grad stands at one call site.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SiteMode {
    Disabled,
    Enabled,
    /// Decided by the callers of the function holding the site.
    Caller(FunctionKey),
}

/// What a call site calls, as far as its file tells.
#[derive(Debug, Clone)]
enum Target {
    /// `f(...)` or `module.f(...)`: a function of the module with this dotted path.
    Function { module: String, name: String },
    /// `x.name(...)`.
    Method { name: String },
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Function { name, .. } | Target::Method { name } => name,
        }
    }

    fn calls(&self, key: &FunctionKey) -> bool {
        match self {
            Target::Method { name } => key.method && *name == key.name,
            Target::Function { module, name } => {
                !key.method && *name == key.name && same_module(module, &key.module)
            }
        }
    }
}

/// Import paths and file paths agree on their last components: `pkg.utils` names
/// `src/pkg/utils.py`, and from inside `pkg/`, `utils.py` is `pkg.utils`.
fn same_module(imported: &str, file: &str) -> bool {
    let ends_with = |long: &str, short: &str| {
        long == short
            || long
                .strip_suffix(short)
                .is_some_and(|head| head.ends_with('.'))
    };
    ends_with(file, imported) || ends_with(imported, file)
}

/// The functions, among those the assumptions name, that every call site in the project runs
/// with grad disabled (directly or through their callers).
pub fn no_grad_functions(
    files: &[ProjectFile<'_>],
    assumptions: &[&Assumption],
) -> HashSet<FunctionKey> {
    let mut hooks: HashSet<FunctionKey> = HashSet::default();
    let mut pending: Vec<FunctionKey> = Vec::new();
    for assumption in assumptions {
        let Assumption::EnteredWithGrad {
            function,
            framework_hook,
        } = assumption
        else {
            continue;
        };
        if *framework_hook {
            hooks.insert(function.clone());
        }
        if !pending.contains(function) {
            pending.push(function.clone());
        }
    }
    let mut keys: Vec<FunctionKey> = pending.clone();
    let mut found_by_name: HashMap<String, Vec<(Target, SiteMode)>> = HashMap::default();
    // Each round reads the files that call the functions still undecided; a function with a
    // grad-enabled call site is decided, and only the callers of the others join the next
    // round. Chains deeper than this stay undecided (the finding is kept).
    for _round in 0..MAX_ROUNDS {
        let names: Vec<String> = pending
            .iter()
            .map(|key| key.name.clone())
            .filter(|name| !found_by_name.contains_key(name))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if names.is_empty() {
            break;
        }
        let found: Vec<(Target, SiteMode)> = files
            .par_iter()
            .flat_map_iter(|file| call_sites(file, &names))
            .collect();
        for name in &names {
            found_by_name.entry(name.clone()).or_default();
        }
        for (target, mode) in found {
            found_by_name
                .entry(target.name().to_owned())
                .or_default()
                .push((target, mode));
        }
        pending.clear();
        for key in keys.clone() {
            let modes = sites_of(&found_by_name, &key);
            if modes.contains(&SiteMode::Enabled) {
                continue;
            }
            for mode in modes {
                if let SiteMode::Caller(caller) = mode
                    && !keys.contains(&caller)
                    && !IGNORED_CALLERS.contains(&caller.name.as_str())
                {
                    keys.push(caller.clone());
                    pending.push(caller);
                }
            }
        }
    }
    let sites: HashMap<FunctionKey, Vec<SiteMode>> = keys
        .iter()
        .map(|key| (key.clone(), sites_of(&found_by_name, key)))
        .collect();

    // Optimistic start, as in one file: a function with call sites is no-grad until a site
    // says otherwise; a framework hook nobody in the project calls is the framework's.
    let mut disabled: HashMap<&FunctionKey, bool> = sites
        .iter()
        .map(|(key, modes)| (key, !modes.is_empty() || hooks.contains(key)))
        .collect();
    loop {
        let mut changed = false;
        for (key, modes) in &sites {
            if !disabled[key] {
                continue;
            }
            let enabled = modes.iter().any(|mode| match mode {
                SiteMode::Disabled => false,
                SiteMode::Enabled => true,
                SiteMode::Caller(caller) => !disabled.get(caller).copied().unwrap_or(false),
            });
            if enabled {
                disabled.insert(key, false);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    disabled
        .into_iter()
        .filter(|(_, no_grad)| *no_grad)
        .map(|(key, _)| key.clone())
        .collect()
}

/// How many rounds of callers are followed.
const MAX_ROUNDS: usize = 4;

/// Callers not worth following: everything calls them, through the interpreter.
const IGNORED_CALLERS: &[&str] = &["__init__", "__call__", "forward", "main"];

fn sites_of(found: &HashMap<String, Vec<(Target, SiteMode)>>, key: &FunctionKey) -> Vec<SiteMode> {
    found
        .get(&key.name)
        .into_iter()
        .flatten()
        .filter(|(target, _)| target.calls(key))
        // A call from the function itself (recursion, or a method of the same name on another
        // object, `self.head.training_step(...)` in `training_step`) does not tell how the
        // function is entered; counting it would decide the function by itself.
        .filter(|(_, mode)| !matches!(mode, SiteMode::Caller(caller) if caller == key))
        .map(|(_, mode)| mode.clone())
        .collect()
}

/// The call sites of functions or methods with these names in one file, with their grad mode.
fn call_sites(file: &ProjectFile<'_>, names: &[String]) -> Vec<(Target, SiteMode)> {
    if let Some(called) = file.called
        && !names.iter().any(|name| called.may_contain(name))
    {
        return Vec::new();
    }
    let bytes = match file.text {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => match std::fs::read(file.path) {
            Ok(bytes) => std::borrow::Cow::Owned(bytes),
            Err(_) => return Vec::new(),
        },
    };
    let text = if SourceKind::from_path(file.path) == Some(SourceKind::Notebook) {
        crate::notebook::python_text(&bytes)
    } else {
        crate::source::decode(&bytes).ok()
    };
    let Some(text) = text else {
        return Vec::new();
    };
    let wanted: Vec<&String> = names
        .iter()
        .filter(|name| text.contains(&format!("{name}(")))
        .collect();
    if wanted.is_empty() || parse::check_parsable(&text).is_err() {
        return Vec::new();
    }
    let Ok(tree) = parse::parse(&text, None) else {
        return Vec::new();
    };
    let tree = crate::syntax::SyntaxTree::new(tree);
    let model = SemanticModel::build(&tree, &text, file.kinds, file.frameworks);
    let mut analysis = Analysis::new(&model, tree.root_node(), &text);
    analysis.frameworks = file.frameworks;
    let module = module_path(file.display);
    let mut out = Vec::new();
    for name in wanted {
        for call in model.calls_by_name.get(name.as_str()).into_iter().flatten() {
            let Some(target) = target_of(&analysis, *call, name, &module) else {
                continue;
            };
            out.push((target, site_mode(&analysis, *call, &module)));
        }
    }
    out
}

fn target_of(analysis: &Analysis<'_>, call: Node<'_>, name: &str, module: &str) -> Option<Target> {
    let callee = call.child_by_field_id(FIELDS.function)?;
    if callee.kind_id() == KINDS.identifier {
        return match analysis.qualified_name(callee) {
            // Not an import: one of this file's functions, if it defines one by that name.
            None => analysis
                .model
                .functions_named(name)
                .any(|facts| facts.class.is_none())
                .then(|| Target::Function {
                    module: module.to_owned(),
                    name: name.to_owned(),
                }),
            Some(qualified) => {
                let (path, _) = qualified.rsplit_once('.')?;
                Some(Target::Function {
                    module: absolute_module(path, module),
                    name: name.to_owned(),
                })
            }
        };
    }
    if callee.kind_id() != KINDS.attribute {
        return None;
    }
    // `utils.evaluate(...)` through `import pkg.utils as utils`: a module function.
    let mut head = callee;
    while let Some(object) = head.child_by_field_id(FIELDS.object) {
        head = object;
    }
    if head.kind_id() == KINDS.identifier {
        let scope = analysis.scope_at(head);
        let imported = analysis
            .model
            .scopes
            .lookup(scope, analysis.text(head), head.start_byte())
            .and_then(|(_, bindings)| bindings.last())
            .is_some_and(|binding| matches!(binding.kind, BindingKind::Import(_)));
        if imported && let Some(qualified) = analysis.qualified_name(callee) {
            let (path, _) = qualified.rsplit_once('.')?;
            return Some(Target::Function {
                module: absolute_module(path, module),
                name: name.to_owned(),
            });
        }
    }
    Some(Target::Method {
        name: name.to_owned(),
    })
}

/// `.utils` imported from `pkg.train` is `pkg.utils`; `..x` is one package further up.
fn absolute_module(imported: &str, importer: &str) -> String {
    let dots = imported.len() - imported.trim_start_matches('.').len();
    if dots == 0 {
        return imported.to_owned();
    }
    let mut base: Vec<&str> = importer.split('.').collect();
    for _ in 0..dots {
        base.pop();
    }
    let rest = &imported[dots..];
    if !rest.is_empty() {
        base.push(rest);
    }
    base.join(".")
}

fn site_mode(analysis: &Analysis<'_>, call: Node<'_>, module: &str) -> SiteMode {
    let grad = analysis.grad();
    match grad.mode_at(call.start_byte()) {
        GradMode::Disabled => SiteMode::Disabled,
        GradMode::FromCaller => grad
            .deciding_function(call.start_byte())
            .and_then(|id| analysis.model.function_facts_by_id(id))
            .map_or(SiteMode::Enabled, |facts| {
                SiteMode::Caller(FunctionKey {
                    module: module.to_owned(),
                    name: facts.name.clone(),
                    method: facts.class.is_some(),
                })
            }),
        GradMode::Enabled | GradMode::Conditional => SiteMode::Enabled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn called_names_hold_what_was_added() {
        // About what a 75 KB file calls.
        let names: Vec<String> = (0..50).map(|i| format!("function_{i}")).collect();
        let called = CalledNames::new(names.iter().map(String::as_str));
        assert!(names.iter().all(|name| called.may_contain(name)));
        // 50 names set at most 150 of the 1,024 bits: about 0.3% of other names pass.
        let others = (0..1000)
            .filter(|i| called.may_contain(&format!("other_{i}")))
            .count();
        assert!(others < 20, "{others} of 1000 false positives");
        let empty = CalledNames::default();
        assert!(!empty.may_contain("evaluate"));
        let one = CalledNames::new(["evaluate"]);
        assert!(one.may_contain("evaluate") && !one.may_contain("validate"));
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_path(Path::new("src/pkg/utils.py")), "src.pkg.utils");
        assert_eq!(module_path(Path::new("./pkg/__init__.py")), "pkg");
        assert_eq!(module_path(Path::new("train.py")), "train");
        assert_eq!(module_path(Path::new("nb/explore.ipynb")), "nb.explore");
        assert_eq!(
            module_path(Path::new("/tmp/.tmpA1/acme.ml/pkg/train.py")),
            "tmp._tmpA1.acme_ml.pkg.train"
        );
    }

    #[test]
    fn relative_imports() {
        assert_eq!(absolute_module(".utils", "src.pkg.train"), "src.pkg.utils");
        assert_eq!(absolute_module("..x", "src.pkg.train"), "src.x");
        assert_eq!(absolute_module(".", "src.pkg.train"), "src.pkg");
        assert_eq!(absolute_module("pkg.utils", "src.pkg.train"), "pkg.utils");
    }

    #[test]
    fn modules_match_on_whole_components() {
        assert!(same_module("pkg.utils", "src.pkg.utils"));
        assert!(same_module("pkg.utils", "utils"));
        assert!(!same_module("pkg.utils", "src.pkg.myutils"));
    }
}
