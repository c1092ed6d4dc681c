//! The facts one file hands to the cross-file pass, and the names that pass speaks in: which
//! function a finding's [`Assumption`] is about ([`FunctionKey`], by [`module_path`]), the
//! graph-carrying calls a file makes ([`GraphCall`]), the names it calls ([`CalledNames`]).
//! They are data, made by the per-file analysis and the rules, read by `project`, the cache and
//! the diagnostics; the pass that joins them lives in `project`.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// A function of the project: where it is defined and how calls name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FunctionKey {
    /// The dotted path of the defining file (`src.pkg.utils`), see [`module_path`].
    pub module: String,
    pub name: String,
    /// A method, called as `x.name(...)`.
    pub method: bool,
}

/// What a finding takes for granted about the rest of the project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Assumption {
    /// The finding holds if `function` runs with grad enabled. `framework_hook`: a method that
    /// a training framework calls without grad when the class derives from it
    /// (`validation_step` on a class whose bases this file does not show); with no call site
    /// in the project, it is taken to be the framework's.
    EnteredWithGrad {
        function: FunctionKey,
        framework_hook: bool,
    },
    /// The finding (on a line that keeps a parameter, `self.sum += val`) holds if some call in
    /// the run passes a graph-carrying tensor for that parameter of `function` (by its
    /// canonical name, see `FactBase::canonical`) — in code that runs per batch, when the
    /// line adds to what it keeps (`per_batch`).
    GraphArgument {
        function: String,
        parameter: u32,
        name: String,
        per_batch: bool,
        expects: crate::semantic::stores::Expects,
        /// The line keeps device memory, not a graph (TL104): it waits for a call passing a
        /// device tensor without a graph.
        #[serde(default)]
        device: bool,
    },
    /// The finding (device memory in a file that names no accelerator) holds if some file of
    /// the run names CUDA, a device or an accelerator: the run puts its models there.
    RunNamesAccelerator,
}

/// A call that passes a graph-carrying tensor to one of the project's functions: what a
/// [`Assumption::GraphArgument`] finding waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GraphCall {
    /// The callee's canonical name.
    pub function: String,
    /// The parameter the tensor is passed as: its index (`self` is 0) or keyword.
    pub parameter: Option<u32>,
    pub keyword: Option<String>,
    /// The call runs once per batch (a training or evaluation loop, a step function).
    pub per_batch: bool,
    /// It passes a list or tuple of tensors, not one.
    pub container: bool,
    /// Where, for the message: `path:line`.
    pub site: String,
    /// Set when the tensor passed is the caller's own parameter (or made from it): the call
    /// passes a graph only when the caller's caller does. The caller's canonical name, the
    /// parameter's index and name.
    pub from: Option<(String, u32, String)>,
    /// It passes a device tensor without a graph (what TL104 waits for), not a graph.
    #[serde(default)]
    pub device: bool,
}

/// The prefix of a [`GraphCall`]'s function when the receiver's class is unknown: the call
/// names any method of that name (`?.update`).
pub const ANY_RECEIVER: &str = "?.";

impl GraphCall {
    /// Whether this call satisfies a finding's [`Assumption::GraphArgument`].
    pub fn satisfies(
        &self,
        function: &str,
        parameter: u32,
        name: &str,
        per_batch: bool,
        expects: crate::semantic::stores::Expects,
        device: bool,
    ) -> bool {
        use crate::semantic::stores::Expects;
        let named = match self.function.strip_prefix(ANY_RECEIVER) {
            Some(method) => function
                .strip_suffix(method)
                .is_some_and(|class| class.ends_with('.')),
            None => self.function == function,
        };
        self.device == device
            && named
            && (self.parameter == Some(parameter) || self.keyword.as_deref() == Some(name))
            && (self.per_batch || !per_batch)
            && match expects {
                Expects::Any => true,
                Expects::Container => self.container,
                Expects::Tensor => !self.container,
            }
    }
}

/// The calls that pass a graph-carrying tensor, with the ones that pass their caller's
/// parameter along (`update_affine(data)` calling `update_with_decay(name, reduce(data))`)
/// followed from the calls that pass the caller a graph, to a fixed point.
pub fn effective_graph_calls(calls: &[GraphCall]) -> Vec<GraphCall> {
    use crate::semantic::stores::Expects;
    let mut effective: Vec<GraphCall> =
        calls.iter().filter(|c| c.from.is_none()).cloned().collect();
    let mut pending: Vec<&GraphCall> = calls.iter().filter(|c| c.from.is_some()).collect();
    loop {
        let mut added = Vec::new();
        pending.retain(|call| {
            let Some((function, parameter, name)) = &call.from else {
                return false;
            };
            let Some(trigger) = effective
                .iter()
                .find(|e| e.satisfies(function, *parameter, name, false, Expects::Any, false))
            else {
                return true;
            };
            added.push(GraphCall {
                per_batch: call.per_batch || trigger.per_batch,
                site: trigger.site.clone(),
                from: None,
                ..(*call).clone()
            });
            false
        });
        if added.is_empty() {
            return effective;
        }
        effective.extend(added);
    }
}

/// The names a file calls (`f(...)`, `x.f(...)`), as a 1,024-bit Bloom filter: the second pass
/// reads only the files that may call a function in question, without keeping every file's
/// names or text from the first pass. A false positive costs one read; there are no false
/// negatives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalledNames([u64; 16]);

impl CalledNames {
    pub fn new<'n>(names: impl IntoIterator<Item = &'n str>) -> Self {
        let mut filter = CalledNames::default();
        for name in names {
            for bit in Self::bits(name) {
                filter.0[bit / 64] |= 1 << (bit % 64);
            }
        }
        filter
    }

    pub fn may_contain(&self, name: &str) -> bool {
        Self::bits(name).all(|bit| self.0[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// Three bit positions from one 64-bit hash (Kirsch and Mitzenmacher's double hashing).
    fn bits(name: &str) -> impl Iterator<Item = usize> {
        let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
        let (low, high) = (hash as u32 as usize, (hash >> 32) as usize);
        (0..3).map(move |i| low.wrapping_add(i * high) % 1024)
    }
}

/// `src/pkg/utils.py` → `src.pkg.utils`; `pkg/__init__.py` → `pkg`.
pub fn module_path(path: &Path) -> String {
    let mut parts: Vec<String> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut()
        && let Some(stem) = last
            .strip_suffix(".py")
            .or_else(|| last.strip_suffix(".pyi"))
            .or_else(|| last.strip_suffix(".ipynb"))
    {
        *last = stem.to_owned();
    }
    if parts.last().is_some_and(|last| last == "__init__") {
        parts.pop();
    }
    // A folder named with a dot (`~/src/acme.ml/`, a `.tmpXYZ` temporary folder) is no
    // package, but its dot would split the module path in two where relative imports count
    // the parts.
    for part in &mut parts {
        if part.contains('.') {
            *part = part.replace('.', "_");
        }
    }
    parts.join(".")
}
