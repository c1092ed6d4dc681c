//! Which parameters a method keeps beyond the call: `AverageMeter.update(val)` doing
//! `self.sum += val * n`, a collector's `__setitem__` appending `value`, a buffer's
//! `update_ratio(indices, ratio)` writing `self.ratio[indices] = ratio`,
//! `self.register_buffer(name, value)`. What such a method keeps depends on what its callers
//! pass: a graph-carrying tensor is kept with its graph (the finding goes on the storing line,
//! once a caller in the run is seen passing one).

use crate::syntax::Node;
use serde::{Deserialize, Serialize};

use super::analysis::Analysis;
use super::scope::Site;
use super::values::{Kind, Tri, ValueFacts};
use crate::parse::{FIELDS, KINDS, mentions_word};

/// A `self.m(...)` call of a class's own method: where it starts, and the position of the
/// method's name among the class's methods.
#[derive(Clone, Copy)]
pub(super) struct SelfCall<'a> {
    start: usize,
    method: usize,
    call: Node<'a>,
}

/// A parameter a method keeps on `self`, and how.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoredParameter {
    /// Its index in the parameter list (`self` is 0).
    pub index: u32,
    pub name: String,
    pub expects: Expects,
    /// Added to what is already there (`+=`, `.append`): it grows with each call; otherwise
    /// the last value is kept.
    pub accumulates: bool,
    /// What the kept value holds when the caller passes a tensor: its graph (nothing detaches
    /// it on the way), its device (nothing moves it to the host).
    #[serde(default)]
    pub keeps: Keeps,
}

/// What a stored parameter keeps of a tensor passed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Keeps {
    pub graph: bool,
    pub device: bool,
}

/// A statement that keeps a parameter on `self`.
#[derive(Debug, Clone, Copy)]
pub struct Store<'a> {
    pub statement: Node<'a>,
    /// The `self.x` (or `self.x[k]`) it writes.
    pub target: Node<'a>,
    pub parameter: u32,
    pub accumulates: bool,
    pub keeps: Keeps,
    /// What the caller must pass for the line to see a tensor: a list of them (the line stores
    /// the elements, `for v in values: self.sum += v`), one tensor (it adds the whole value,
    /// `self.sum += value`), or either (`self.values.append(value)`).
    pub expects: Expects,
}

/// What a storing line needs from its caller's argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Expects {
    Any,
    /// A list or tuple, whose elements the line keeps.
    Container,
    /// A tensor, not a list (adding a list to a number fails).
    Tensor,
}

/// Calls whose arguments go into the receiver: `self.values.append(v)`.
const ADDING_METHODS: &[&str] = &["append", "extend", "insert", "add_"];

impl<'a> Analysis<'a> {
    /// The statements of a method that keep one of its parameters on `self`.
    pub fn stores_of(&self, function: Node<'a>) -> Vec<Store<'a>> {
        if self
            .model
            .function_facts(function)
            .is_none_or(|facts| facts.name == "__init__")
        {
            return Vec::new();
        }
        let parameters = self.parameter_names(function);
        if parameters.len() < 2 {
            return Vec::new();
        }
        let Some(body) = function.child_by_field_id(FIELDS.body) else {
            return Vec::new();
        };
        // From what the model's walk recorded, not another walk: `self.x = ...`,
        // `self.x[i] = ...`, `self.xs.append(...)`, `self.register_buffer(...)`.
        let range = body.byte_range();
        let inside = |node: Node<'a>| {
            range.contains(&node.start_byte())
                && self
                    .enclosing_function(node)
                    .is_some_and(|f| f.id() == function.id())
        };
        let mut candidates: Vec<Node<'a>> = Vec::new();
        for assignment in self.self_attribute_statements(range.clone()) {
            candidates.push(assignment);
        }
        candidates.extend_from_slice(self.model.subscript_stores_in(range.clone()));
        for method in ["register_buffer", "append", "extend", "insert", "add_"] {
            candidates.extend(self.calls_in(method, range.clone()));
        }
        candidates.sort_by_key(|node| node.start_byte());
        candidates.dedup_by_key(|node| node.id());
        candidates
            .into_iter()
            .filter(|node| inside(*node))
            .filter_map(|node| self.store_at(node, &parameters))
            .collect()
    }

    /// A class's `self.m(...)` calls of its own methods, by start. Worked out once per class:
    /// asked for every method, method by method it was a lookup of every method's name.
    fn self_calls(&self, class: usize) -> std::rc::Rc<[SelfCall<'a>]> {
        if let Some(known) = self.self_calls.borrow().get(&class) {
            return known.clone();
        }
        let methods = &self.model.classes[class].methods;
        let mut calls: Vec<SelfCall<'a>> = Vec::new();
        for (method, (name, _)) in methods.iter().enumerate() {
            // A name defined twice (a property's setter) adds no call the first did not.
            if methods[..method].iter().any(|(earlier, _)| earlier == name) {
                continue;
            }
            let Some(named) = self.model.calls_by_name.get(name) else {
                continue;
            };
            for &call in named {
                if self.model.callee(call).is_some_and(|callee| {
                    callee.kind_id() == KINDS.attribute
                        && callee
                            .child_by_field_id(FIELDS.object)
                            .is_some_and(|object| self.text(object) == "self")
                }) {
                    calls.push(SelfCall {
                        start: call.start_byte(),
                        method,
                        call,
                    });
                }
            }
        }
        // Stable: each method's calls stay in document order.
        calls.sort_by_key(|call| call.start);
        let calls: std::rc::Rc<[SelfCall<'a>]> = calls.into();
        self.self_calls.borrow_mut().insert(class, calls.clone());
        calls
    }

    /// The calls of a name (`f(...)`, `x.f(...)`) that start in `range`.
    fn calls_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'a>] {
        let Some(calls) = self.model.calls_by_name.get(name) else {
            return &[];
        };
        // In document order, as the walk recorded them.
        super::in_range(calls, range, |call| call.start_byte())
    }

    /// The statements assigning `self.<attribute>` (or `+=`) whose start lies in `range`.
    fn self_attribute_statements(&self, range: std::ops::Range<usize>) -> Vec<Node<'a>> {
        self.model
            .attribute_assignments_in(range)
            .iter()
            .filter(|a| a.object == "self")
            .map(|a| a.node)
            .collect()
    }

    /// The summary form of [`Analysis::stores_of`], with the parameters the method passes on
    /// to another method of its class that keeps them (`update_affine(data)` calling
    /// `self.update_with_decay("mean", reduce(data), d)`).
    pub fn stored_parameters(&self, function: Node<'a>) -> Vec<StoredParameter> {
        self.stored_parameters_at_depth(function, 0)
    }

    fn stored_parameters_at_depth(&self, function: Node<'a>, depth: usize) -> Vec<StoredParameter> {
        if let Some(known) = self.stored_memo.borrow().get(&function.id()) {
            return known.clone();
        }
        // Recursion through the class's methods ends here.
        self.stored_memo
            .borrow_mut()
            .insert(function.id(), Vec::new());
        let stored = self.compute_stored_parameters(function, depth);
        self.stored_memo
            .borrow_mut()
            .insert(function.id(), stored.clone());
        stored
    }

    fn compute_stored_parameters(&self, function: Node<'a>, depth: usize) -> Vec<StoredParameter> {
        // `__init__` keeps its parameters as configuration.
        if self
            .model
            .function_facts(function)
            .is_some_and(|facts| facts.name == "__init__")
        {
            return Vec::new();
        }
        let mut stored = self.directly_stored(function);
        if depth < 3 {
            for forwarded in self.forwarded_parameters(function, depth) {
                if !stored.iter().any(|s| s.index == forwarded.index) {
                    stored.push(forwarded);
                }
            }
        }
        stored
    }

    /// Parameters passed, as they are or made into another tensor, to a method of the same
    /// class that keeps them.
    fn forwarded_parameters(&self, function: Node<'a>, depth: usize) -> Vec<StoredParameter> {
        let Some(class) = self.model.function_facts(function).and_then(|f| f.class) else {
            return Vec::new();
        };
        let Some(body) = function.child_by_field_id(FIELDS.body) else {
            return Vec::new();
        };
        // Only the class's own methods are followed: `self.m(...)` calls, which a helper that
        // keeps state through another method has.
        let parameters = self.parameter_names(function);
        let graph_carrying = ValueFacts {
            kind: Kind::Tensor,
            graph: Tri::Yes,
            ..ValueFacts::default()
        };
        // `self.m(...)` calls in the body, by method in the class's order, each method's in
        // document order: the first call to pass a parameter on decides its entry.
        let range = body.byte_range();
        let self_calls = self.self_calls(class);
        let mut calls = super::in_range(&self_calls, range, |call| call.start).to_vec();
        if calls.is_empty() {
            return Vec::new();
        }
        calls.sort_by_key(|call| call.method);
        let mut forwarded = Vec::new();
        for SelfCall { call, .. } in calls {
            let Some(name) = self.model.call_name(call) else {
                continue;
            };
            let Some(callee) = self.local_method(class, name) else {
                continue;
            };
            if callee.id() == function.id() {
                continue;
            }
            let inner = self.stored_parameters_at_depth(callee, depth + 1);
            let Some(arguments) = call.child_by_field_id(FIELDS.arguments) else {
                continue;
            };
            for stored in inner {
                // Positional arguments bind from 1 (after `self`).
                let Some(argument) = arguments.named_child(stored.index - 1) else {
                    continue;
                };
                if argument.kind_id() == KINDS.keyword_argument {
                    continue;
                }
                for &(index, parameter) in parameters.iter().skip(1) {
                    if self.derives_from(argument, parameter).is_some()
                        || self
                            .reaching_value(argument)
                            .is_some_and(|value| self.derives_from(value, parameter).is_some())
                    {
                        let given =
                            self.facts_given_parameter(argument, function, index, graph_carrying);
                        if stored.keeps.graph
                            && given.graph == Tri::Yes
                            && !forwarded.iter().any(|f: &StoredParameter| f.index == index)
                        {
                            forwarded.push(StoredParameter {
                                index,
                                name: parameter.to_owned(),
                                expects: Expects::Any,
                                accumulates: stored.accumulates,
                                keeps: Keeps {
                                    graph: true,
                                    device: false,
                                },
                            });
                        }
                    }
                }
            }
        }
        forwarded
    }

    fn directly_stored(&self, function: Node<'a>) -> Vec<StoredParameter> {
        let parameters = self.parameter_names(function);
        let mut stored: Vec<StoredParameter> = Vec::new();
        for store in self.stores_of(function) {
            let Some((_, name)) = parameters.iter().find(|(i, _)| *i == store.parameter) else {
                continue;
            };
            let entry = StoredParameter {
                index: store.parameter,
                name: (*name).to_owned(),
                expects: store.expects,
                accumulates: store.accumulates,
                keeps: store.keeps,
            };
            if !stored.contains(&entry) {
                stored.push(entry);
            }
        }
        stored
    }

    /// The store at `node`, when `node` keeps a parameter of the method holding it on `self`.
    pub fn store_in_method(&self, node: Node<'a>) -> Option<Store<'a>> {
        if !self.store_shaped(node) {
            return None;
        }
        // TL102 and TL103 both ask at the same node, one after the other.
        if let Some((id, store)) = self.last_store.get()
            && id == node.id()
        {
            return store;
        }
        let store = self.find_store_in_method(node);
        self.last_store.set(Some((node.id(), store)));
        store
    }

    fn find_store_in_method(&self, node: Node<'a>) -> Option<Store<'a>> {
        let function = self.enclosing_function(node)?;
        let facts = self.model.function_facts(function)?;
        facts.class?;
        // `__init__` keeps its parameters as configuration.
        if facts.name == "__init__" {
            return None;
        }
        let parameters = self.parameter_names(function);
        if parameters.len() < 2 {
            return None;
        }
        self.store_at(node, &parameters)
    }

    fn store_at(&self, node: Node<'a>, parameters: &[(u32, &'a str)]) -> Option<Store<'a>> {
        let kind = node.kind_id();
        let (target, value, accumulates) = if kind == KINDS.assignment {
            let left = node.child_by_field_id(FIELDS.left)?;
            let right = node.child_by_field_id(FIELDS.right)?;
            (left, right, false)
        } else if kind == KINDS.augmented_assignment {
            let left = node.child_by_field_id(FIELDS.left)?;
            let right = node.child_by_field_id(FIELDS.right)?;
            (left, right, true)
        } else if kind == KINDS.call {
            let callee = self.model.callee(node)?;
            let method = self.model.call_name(node)?;
            let arguments = node.child_by_field_id(FIELDS.arguments)?;
            if method == "register_buffer" {
                // `self.register_buffer(name, value)`: the call names what is kept.
                let value = arguments.named_child(1)?;
                if !on_self(self, callee.child_by_field_id(FIELDS.object)?) {
                    return None;
                }
                (node, value, false)
            } else if ADDING_METHODS.contains(&method) {
                let value = arguments.named_child(if method == "insert" { 1 } else { 0 })?;
                (callee.child_by_field_id(FIELDS.object)?, value, true)
            } else {
                return None;
            }
        } else {
            return None;
        };
        if !(target.id() == node.id() || on_self(self, target)) {
            return None;
        }
        let detached = detaches(self.text(value));
        let function = self.enclosing_function(node)?;
        // The parameter whose graph the stored value would carry: not one it only reads a
        // size, dtype or device from (`self.seq_len = x.size(1)`).
        let graph_carrying = ValueFacts {
            kind: Kind::Tensor,
            graph: Tri::Yes,
            ..ValueFacts::default()
        };
        // Or whose device memory it would hold: a device tensor stored detached or not, but
        // not moved to the host (`.cpu()`) or made a number (`.item()`).
        let on_device = ValueFacts {
            kind: Kind::Tensor,
            graph: Tri::No,
            device: Tri::Yes,
            ..ValueFacts::default()
        };
        // A parameter passed into the value comes before one it only calls a method of
        // (`obj.loss(prediction, target)` keeps a tensor made from `prediction`, not `obj`).
        // A plain copy in `__init__` is configuration.
        if self
            .model
            .function_facts(function)
            .is_some_and(|facts| facts.name == "__init__")
        {
            return None;
        }
        let candidates: Vec<(u32, bool)> = parameters
            .iter()
            .skip(1)
            .filter(|(_, name)| self.derives_from(value, name).is_some())
            .map(|(index, name)| (*index, self.only_a_receiver(value, name)))
            .collect();
        let keeps_graph = |index: u32| {
            !detached
                && self
                    .facts_given_parameter(value, function, index, graph_carrying)
                    .graph
                    == Tri::Yes
        };
        // `self.losses[name].append(self.metric(prediction, target))`: made from the parameter
        // by a call the file cannot see into (a metric, a loss), kept in a list the class later
        // joins with `torch.cat`: a tensor, so one on the parameter's device.
        let joined = std::cell::OnceCell::new();
        let keeps_device = |index: u32| {
            let given = self.facts_given_parameter(value, function, index, on_device);
            given.device == Tri::Yes && matches!(given.kind, Kind::Tensor | Kind::Container)
                || matches!(given.kind, Kind::Unknown | Kind::Tensor)
                    && given.device != Tri::No
                    && !detached
                    && accumulates
                    && *joined.get_or_init(|| self.joined_by_the_class(target, function))
        };
        // The graph a parameter would carry decides before its device; a parameter passed into
        // the value before one it only calls a method of (`obj.loss(prediction, target)` keeps
        // a tensor made from `prediction`, not `obj`).
        // Each parameter's answers once: the facts given a parameter are not memoised.
        let graphs: Vec<std::cell::OnceCell<bool>> = candidates
            .iter()
            .map(|_| std::cell::OnceCell::new())
            .collect();
        let devices: Vec<std::cell::OnceCell<bool>> = candidates
            .iter()
            .map(|_| std::cell::OnceCell::new())
            .collect();
        let graph_at = |at: usize| *graphs[at].get_or_init(|| keeps_graph(candidates[at].0));
        let device_at = |at: usize| *devices[at].get_or_init(|| keeps_device(candidates[at].0));
        let (at, keeps) = [false, true].into_iter().find_map(|receiver| {
            let candidates = &candidates;
            let tier = || (0..candidates.len()).filter(move |at| candidates[*at].1 == receiver);
            let chosen = tier()
                .find(|at| graph_at(*at))
                .or_else(|| tier().find(|at| device_at(*at)))?;
            Some((
                chosen,
                Keeps {
                    graph: graph_at(chosen),
                    device: device_at(chosen),
                },
            ))
        })?;
        let parameter = candidates[at].0;
        let name = parameters.iter().find(|(i, _)| *i == parameter)?.1;
        let expects = match self.derives_from(value, name) {
            Some(true) => Expects::Container,
            _ if kind == KINDS.augmented_assignment => Expects::Tensor,
            _ => Expects::Any,
        };
        Some(Store {
            statement: node,
            target,
            parameter,
            accumulates,
            keeps,
            expects,
        })
    }

    /// Whether the class around `function` passes the list at `target` (`self.losses[name]`,
    /// `self.maps`) to `torch.cat` or `torch.stack`: it holds tensors.
    fn joined_by_the_class(&self, target: Node<'a>, function: Node<'a>) -> bool {
        let Some(base) = subscripted(target) else {
            return false;
        };
        let list = self.text(base);
        let Some(class) = self.model.method_class(function) else {
            return false;
        };
        self.joined_with_torch(list, class.node.byte_range())
    }

    /// Whether some call in `range` passes the list `list` (or a slot of it: `list[name]`) to
    /// `torch.cat` or `torch.stack`: it holds tensors.
    pub fn joined_with_torch(&self, list: &str, range: std::ops::Range<usize>) -> bool {
        ["cat", "stack", "concat"].iter().any(|name| {
            self.calls_in(name, range.clone()).iter().any(|&call| {
                let joins_the_list = call
                    .child_by_field_id(FIELDS.arguments)
                    .and_then(|arguments| arguments.named_child(0))
                    .is_some_and(|first| {
                        let text = self.text(first);
                        text.strip_prefix(list)
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with('['))
                    });
                joins_the_list
                    && self
                        .model
                        .callee(call)
                        .and_then(|callee| self.qualified_name(callee))
                        .is_some_and(|name| name.starts_with("torch."))
            })
        })
    }

    /// Whether an expression mentions `name` directly (`Some(false)`) or through a loop
    /// variable over it (`Some(true)`: `for i, v in enumerate(values): self.sum[i] += v`).
    fn derives_from(&self, value: Node<'a>, name: &str) -> Option<bool> {
        let text = self.text(value);
        if mentions_word(text, name) {
            return Some(false);
        }
        if value.kind_id() != KINDS.identifier {
            return None;
        }
        let (_, bindings) =
            self.model
                .scopes
                .lookup(self.scope_at(value), text, value.start_byte())?;
        if bindings.iter().any(|binding| match binding.site {
            Site::Loop { iterable, .. } => mentions_word(self.text(iterable), name),
            _ => false,
        }) {
            return Some(true);
        }
        // `value = old * decay + new_value * (1 - decay)`, then `value` is kept; any of the
        // name's values (`loss = obj.loss(pred, y)`, then `if ...: loss = rearrange(loss)`).
        self.bound_values(value)
            .into_iter()
            .any(|bound| bound.id() != value.id() && mentions_word(self.text(bound), name))
            .then_some(false)
    }

    /// What a name is assigned in its scope before `value`, or the value itself.
    fn bound_values(&self, value: Node<'a>) -> Vec<Node<'a>> {
        if value.kind_id() != KINDS.identifier {
            return vec![value];
        }
        let Some((_, bindings)) =
            self.model
                .scopes
                .lookup(self.scope_at(value), self.text(value), value.start_byte())
        else {
            return vec![value];
        };
        let mut bound: Vec<Node<'a>> = bindings
            .iter()
            .filter_map(|binding| match binding.site {
                Site::Value { value, .. } => Some(value),
                _ => None,
            })
            .collect();
        bound.push(value);
        bound
    }

    /// Whether every mention of `name` in the value (or what the name it is was assigned) is
    /// the receiver of an attribute (`obj.loss(...)`, `obj.grid_shape`).
    fn only_a_receiver(&self, value: Node<'a>, name: &str) -> bool {
        self.bound_values(value).into_iter().all(|bound| {
            let text = self.text(bound);
            let mut rest = text;
            let mut offset = 0;
            while let Some(at) = memchr::memmem::find(rest.as_bytes(), name.as_bytes()) {
                let start = offset + at;
                let end = start + name.len();
                let before = text[..start].chars().next_back();
                let after = text[end..].chars().next();
                let word = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_');
                if word && after != Some('.') {
                    return false;
                }
                offset = end;
                rest = &text[end..];
            }
            true
        })
    }

    /// A function's parameters by index, with `self` (or `cls`) as 0 when it has one.
    pub fn parameter_names(&self, function: Node<'a>) -> Vec<(u32, &'a str)> {
        if let Some(known) = self.parameter_memo.borrow().get(&function.id()) {
            return known.clone();
        }
        let names = self.find_parameter_names(function);
        self.parameter_memo
            .borrow_mut()
            .insert(function.id(), names.clone());
        names
    }

    fn find_parameter_names(&self, function: Node<'a>) -> Vec<(u32, &'a str)> {
        if function.child_by_field_id(FIELDS.parameters).is_none() {
            return Vec::new();
        }
        let scope = self.model.scope_of(function);
        let mut names = Vec::new();
        let Some(scope) = scope else {
            return names;
        };
        for (name, bindings) in self.model.scopes.get(scope).bindings() {
            for binding in bindings.as_slice() {
                if let Site::Parameter { function: f, index } = binding.site
                    && f.id() == function.id()
                {
                    names.push((index, *name));
                }
            }
        }
        names.sort_unstable();
        names.dedup();
        names
    }
}

impl<'a> Analysis<'a> {
    /// Whether a statement has the shape of a store on `self`, by its first line: asked before
    /// anything about the method around it.
    fn store_shaped(&self, node: Node<'a>) -> bool {
        let kind = node.kind_id();
        // Statements start at their target: `self.x = ...`, `self.xs.append(...)`.
        let text = self.text(node).as_bytes();
        if kind == KINDS.call {
            return text.starts_with(b"self")
                && matches!(
                    self.model.call_name(node),
                    Some("register_buffer" | "append" | "extend" | "insert" | "add_")
                );
        }
        (kind == KINDS.assignment || kind == KINDS.augmented_assignment)
            && text.starts_with(b"self.")
    }
}

/// Whether a target is `self.x` or an element of it.
fn on_self(analysis: &Analysis<'_>, target: Node<'_>) -> bool {
    let Some(base) = subscripted(target) else {
        return false;
    };
    let text = analysis.text(base);
    (base.kind_id() == KINDS.attribute && text.starts_with("self.")) || text == "self"
}

/// What a target's subscripts index into (`self.losses` of `self.losses[name][i]`), or the
/// target itself.
fn subscripted(target: Node<'_>) -> Option<Node<'_>> {
    let mut base = target;
    while base.kind_id() == KINDS.subscript {
        base = base.child_by_field_id(FIELDS.value)?;
    }
    Some(base)
}

fn detaches(text: &str) -> bool {
    [
        ".item()",
        ".detach()",
        "float(",
        ".tolist()",
        "int(",
        ".numpy()",
        "len(",
    ]
    .iter()
    .any(|d| text.contains(d))
}
