//! Which values a loop backpropagates through, and so certainly carry an autograd graph,
//! whatever produced them: the loss of `loss.backward()`, `scaler.scale(loss).backward()`,
//! `accelerator.backward(loss)`, `self.manual_backward(loss)`; what that loss was computed
//! from by arithmetic and reductions (`loss = sum(losses)`, `output["loss"].backward()`); and
//! the sibling outputs of the call that produced it (`loss, mse, ce = criterion(...)`).

use crate::syntax::Node;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::analysis::Analysis;
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};

/// Per loop node: the names its body backpropagates through.
pub(super) type Backpropagated<'a> = HashMap<usize, HashSet<&'a str>>;

/// Calls that reduce or combine their arguments differentiably: a loss built from them
/// carries the graph of each.
const COMBINING_FUNCTIONS: &[&str] = &[
    "sum",
    "mean",
    "stack",
    "cat",
    "add",
    "torch.sum",
    "torch.mean",
    "torch.stack",
    "torch.cat",
];

/// Methods whose result carries the receiver's graph.
const GRAPH_KEEPING_METHODS: &[&str] = &[
    "sum",
    "mean",
    "float",
    "half",
    "double",
    "to",
    "cuda",
    "cpu",
    "clone",
    "values",
    "view",
    "reshape",
    "squeeze",
    "unsqueeze",
    "flatten",
    "contiguous",
    "abs",
    "pow",
    "sqrt",
    "exp",
    "log",
    "scale",
    "backward",
    "__getitem__",
];

impl<'a> Analysis<'a> {
    /// The names an expression's value combines differentiably (see `combined_operands`).
    pub fn combined_names(&self, node: Node<'a>) -> HashSet<&'a str> {
        let mut names = HashSet::default();
        self.combined_operands(node, &mut names, 0);
        names
    }

    /// Whether the loop backpropagates through the value an identifier names.
    pub fn backpropagated_in(&self, loop_node: Node<'a>, name: &str) -> bool {
        if let Some(names) = self.backpropagated.borrow().get(&loop_node.id()) {
            return names.contains(name);
        }
        let names = self.find_backpropagated(loop_node);
        let found = names.contains(name);
        self.backpropagated
            .borrow_mut()
            .insert(loop_node.id(), names);
        found
    }

    /// Whether a backward is called anywhere in `node` (by the calls the model's walk recorded).
    pub fn calls_backward_in(&self, node: Node<'a>) -> bool {
        let range = node.byte_range();
        self.frameworks.backward_methods().iter().any(|name| {
            self.model
                .calls_by_name
                .get(name.as_str())
                .is_some_and(|calls| {
                    let first = calls.partition_point(|call| call.start_byte() < range.start);
                    calls
                        .get(first)
                        .is_some_and(|call| call.start_byte() < range.end)
                })
        })
    }

    fn find_backpropagated(&self, loop_node: Node<'a>) -> HashSet<&'a str> {
        let mut names: HashSet<&'a str> = HashSet::default();
        // Most loops call no backward: the model's walk recorded every call by name.
        if !self.calls_backward_in(loop_node) {
            return names;
        }
        let mut assignments: Vec<Node<'a>> = Vec::new();
        walk(loop_node, |visit| {
            let Visit::Enter(node) = visit else {
                return Descend::Yes;
            };
            if !node.is_named() {
                return Descend::No;
            }
            let kind = node.kind_id();
            if (kind == KINDS.function_definition || kind == KINDS.lambda)
                && node.id() != loop_node.id()
            {
                return Descend::No;
            }
            if kind == KINDS.assignment {
                assignments.push(node);
            } else if kind == KINDS.call
                && self
                    .model
                    .call_name(node)
                    .is_some_and(|name| self.frameworks.is_backward_method(name))
            {
                self.backward_operands(node, &mut names);
            }
            Descend::Yes
        });
        if names.is_empty() {
            return names;
        }
        // What the backpropagated values were computed from, to a fixed point.
        loop {
            let before = names.len();
            for &assignment in &assignments {
                let (Some(left), Some(right)) = (
                    assignment.child_by_field_id(FIELDS.left),
                    assignment.child_by_field_id(FIELDS.right),
                ) else {
                    continue;
                };
                let targets = target_names(self, left);
                if !targets.iter().any(|t| names.contains(t)) {
                    continue;
                }
                if targets.len() > 1 && right.kind_id() == KINDS.call {
                    // `loss, mse, ce = criterion(out, y)`: one call's outputs share its graph.
                    names.extend(targets.iter().copied());
                }
                if targets.len() == 1 {
                    self.combined_operands(right, &mut names, 0);
                }
            }
            if names.len() == before {
                return names;
            }
        }
    }

    /// The names a backward call runs through: the receiver of `x.backward()` (through
    /// `scaler.scale(x)`), or the argument of `accelerator.backward(x)`.
    fn backward_operands(&self, call: Node<'a>, names: &mut HashSet<&'a str>) {
        let argument = call
            .child_by_field_id(FIELDS.arguments)
            .and_then(|arguments| arguments.named_child(0))
            .filter(|argument| argument.kind_id() != KINDS.keyword_argument);
        match argument {
            // `accelerator.backward(loss)`, `self.manual_backward(loss)`,
            // `torch.autograd.backward(loss)`.
            Some(argument) => self.combined_operands(argument, names, 0),
            None => {
                if let Some(receiver) = self
                    .model
                    .callee(call)
                    .and_then(|callee| callee.child_by_field_id(FIELDS.object))
                {
                    self.combined_operands(receiver, names, 0);
                }
            }
        }
    }

    /// The names an expression combines differentiably: `loss`, `a + w * b`, `sum(losses)`,
    /// `loss.mean()`, `out["loss"]`, `scaler.scale(loss)`, `a if c else b`. Not the arguments
    /// of other calls (a criterion's target carries no graph).
    fn combined_operands(&self, node: Node<'a>, names: &mut HashSet<&'a str>, depth: usize) {
        if depth > 12 {
            return;
        }
        let kind = node.kind_id();
        let next = |child: Node<'a>, names: &mut HashSet<&'a str>| {
            self.combined_operands(child, names, depth + 1)
        };
        if kind == KINDS.identifier {
            let name = self.text(node);
            if !names.insert(name) {
                return;
            }
            // `for name, v in parts.items()`: `v` is one of `parts`.
            let iterables: Vec<Node<'a>> = self
                .model
                .scopes
                .lookup(self.scope_at(node), name, node.start_byte())
                .map(|(_, bindings)| {
                    bindings
                        .iter()
                        .filter_map(|binding| match binding.site {
                            super::scope::Site::Loop { iterable, .. } => Some(iterable),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            for iterable in iterables {
                next(iterable, names);
            }
        } else if kind == KINDS.binary_operator {
            for field in [FIELDS.left, FIELDS.right] {
                if let Some(operand) = node.child_by_field_id(field) {
                    next(operand, names);
                }
            }
        } else if kind == KINDS.parenthesized_expression || kind == KINDS.unary_operator {
            if let Some(inner) = node.named_child(0) {
                next(inner, names);
            }
        } else if kind == KINDS.conditional_expression {
            for index in [0, 2] {
                if let Some(branch) = node.named_child(index) {
                    next(branch, names);
                }
            }
        } else if kind == KINDS.subscript {
            if let Some(value) = node.child_by_field_id(FIELDS.value) {
                next(value, names);
            }
        } else if kind == KINDS.attribute {
            // `outputs.loss`: the output object; not `loss.data` or `p.grad` (no graph).
            let detached = node.child_by_field_id(FIELDS.attribute).is_some_and(|a| {
                matches!(self.text(a), "data" | "grad" | "shape" | "dtype" | "device")
            });
            if !detached && let Some(object) = node.child_by_field_id(FIELDS.object) {
                next(object, names);
            }
        } else if kind == KINDS.list || kind == KINDS.tuple || kind == KINDS.expression_list {
            let mut cursor = node.walk();
            let items: Vec<Node<'a>> = node.named_children(&mut cursor).collect();
            for item in items {
                next(item, names);
            }
        } else if kind == KINDS.call {
            let Some(callee) = node.child_by_field_id(FIELDS.function) else {
                return;
            };
            let arguments = || {
                node.child_by_field_id(FIELDS.arguments).map(|arguments| {
                    let mut cursor = arguments.walk();
                    arguments
                        .named_children(&mut cursor)
                        .filter(|a| a.kind_id() != KINDS.keyword_argument)
                        .collect::<Vec<_>>()
                })
            };
            if callee.kind_id() == KINDS.attribute {
                let method = self.model.call_name(node).unwrap_or("");
                if method == "scale" {
                    // `scaler.scale(loss)`: the loss, not the scaler.
                    for argument in arguments().unwrap_or_default() {
                        next(argument, names);
                    }
                } else if (GRAPH_KEEPING_METHODS.contains(&method)
                    || matches!(method, "values" | "items"))
                    && let Some(receiver) = callee.child_by_field_id(FIELDS.object)
                {
                    // `sum(loss_parts.values())` backpropagates every term of the dict;
                    // `parts.items()` yields them.
                    next(receiver, names);
                }
            } else if COMBINING_FUNCTIONS.contains(&self.text(callee)) {
                for argument in arguments().unwrap_or_default() {
                    next(argument, names);
                }
            }
        }
    }
}

/// The plain names an assignment target binds (`loss`, `loss, mse, ce`).
fn target_names<'a>(analysis: &Analysis<'a>, target: Node<'a>) -> Vec<&'a str> {
    if target.kind_id() == KINDS.identifier {
        return vec![analysis.text(target)];
    }
    if target.kind_id() == KINDS.pattern_list || target.kind_id() == KINDS.tuple_pattern {
        let mut cursor = target.walk();
        return target
            .named_children(&mut cursor)
            .filter(|t| t.kind_id() == KINDS.identifier)
            .map(|t| analysis.text(t))
            .collect();
    }
    Vec::new()
}
