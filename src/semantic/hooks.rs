//! Module hooks: which function a registration (`layer.register_forward_hook(fn)`) puts on a
//! module, which of its parameters hold the module's inputs, outputs or gradients, and what of
//! those it keeps in a container that outlives the call. TL111 reads these facts.

use crate::syntax::Node;

use super::analysis::Analysis;
use crate::parse::{Descend, FIELDS, KINDS, Visit, find_argument, walk};

/// The registrations of a hook that runs on every forward or backward of a module.
pub const MODULE_HOOKS: &[&str] = &[
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_full_backward_pre_hook",
    "register_backward_hook",
];

/// A function registered as a module hook.
#[derive(Debug, Clone)]
pub struct Hook<'a> {
    /// The `def` or `lambda` that runs.
    pub function: Node<'a>,
    /// Its parameters that hold what the module was given or returned (or their gradients):
    /// every one after the module itself, and after `self` and arguments bound by `partial`.
    pub tensors: Vec<&'a str>,
    /// Whether it runs on the backward pass (`register_full_backward_hook`).
    pub backward: bool,
}

/// A store in a hook body that keeps something of what the hook was given.
#[derive(Debug, Clone, Copy)]
pub struct Kept<'a> {
    /// The statement's expression: the `append` call, or the assignment.
    pub store: Node<'a>,
    /// What grows: `features` of `features.append(output)`.
    pub container: Node<'a>,
    /// What is stored.
    pub value: Node<'a>,
}

impl<'a> Analysis<'a> {
    /// The function a module-hook registration puts on the module: a `def` named by the
    /// first argument (or `self.method`), a lambda, what a factory returns (`self.save(name)`
    /// returning its nested `def`), or what `functools.partial` wraps.
    pub fn registered_hook(&self, registration: Node<'a>) -> Option<Hook<'a>> {
        let name = self.model.call_name(registration)?;
        if !MODULE_HOOKS.contains(&name) {
            return None;
        }
        let argument = find_argument(registration, self.source, Some("hook"), Some(0)).found()?;
        let (function, bound) = self.hook_function(argument, 0)?;
        let parameters = self.parameter_list(function);
        // The module comes first; `self` before it in a method named as `self.method`.
        let skip = bound
            + 1
            + usize::from(
                parameters
                    .first()
                    .is_some_and(|first| matches!(*first, "self" | "cls")),
            );
        Some(Hook {
            function,
            tensors: parameters.into_iter().skip(skip).collect(),
            backward: name.contains("backward"),
        })
    }

    /// A `def`'s or lambda's parameter names, in order.
    fn parameter_list(&self, function: Node<'a>) -> Vec<&'a str> {
        self.parameter_names(function)
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    /// The `def` or `lambda` an expression names, and how many leading parameters a `partial`
    /// binds.
    fn hook_function(&self, node: Node<'a>, depth: usize) -> Option<(Node<'a>, usize)> {
        if depth > 4 {
            return None;
        }
        let kind = node.kind_id();
        if kind == KINDS.lambda {
            return Some((node, 0));
        }
        if kind == KINDS.identifier {
            return self.function_named(self.text(node), node, false);
        }
        if kind == KINDS.attribute {
            let object = node.child_by_field_id(FIELDS.object)?;
            let attribute = node.child_by_field_id(FIELDS.attribute)?;
            if self.text(object) != "self" {
                return None;
            }
            return self.function_named(self.text(attribute), node, true);
        }
        if kind != KINDS.call {
            return None;
        }
        let callee = self.model.callee(node)?;
        let arguments = node.child_by_field_id(FIELDS.arguments)?;
        if matches!(self.text(callee), "partial" | "functools.partial") {
            let mut cursor = arguments.walk();
            let positional: Vec<Node<'a>> = arguments
                .named_children(&mut cursor)
                .filter(|argument| argument.kind_id() != KINDS.keyword_argument)
                .collect();
            let (wrapped, bound) = self.hook_function(*positional.first()?, depth + 1)?;
            return Some((wrapped, bound + positional.len() - 1));
        }
        // A factory: the nested `def` or the lambda it returns.
        let (factory, _) = self.hook_function(callee, depth + 1)?;
        if factory.kind_id() != KINDS.function_definition {
            return None;
        }
        self.model.returns_of(factory).iter().find_map(|returned| {
            if returned.kind_id() == KINDS.lambda {
                return Some((*returned, 0));
            }
            if returned.kind_id() != KINDS.identifier {
                return None;
            }
            let name = self.text(*returned);
            self.model
                .function_nodes_named(name)
                .find(|nested| factory.byte_range().contains(&nested.start_byte()))
                .map(|nested| (nested, 0))
        })
    }

    /// A `def` of this name: a method of the class around `at` (`self.name`), or else the
    /// function of that name defined closest before `at` that is no method.
    fn function_named(&self, name: &str, at: Node<'a>, method: bool) -> Option<(Node<'a>, usize)> {
        let class = self
            .enclosing_function(at)
            .and_then(|function| self.model.function_facts(function))
            .and_then(|facts| facts.class);
        self.model
            .function_nodes_named(name)
            .filter(|function| {
                let owner = self.model.function_facts(*function).and_then(|f| f.class);
                if method {
                    owner.is_some() && owner == class
                } else {
                    owner.is_none()
                }
            })
            .min_by_key(|function| {
                // Defined before the registration first, the nearest of those.
                let start = function.start_byte();
                (start > at.start_byte(), at.start_byte().abs_diff(start))
            })
            .map(|function| (function, 0))
    }

    /// What a hook keeps of its tensors: `xs.append(v)`, `xs.extend(v)`, `xs.insert(i, v)`,
    /// `xs += [v]`, or `xs[key] = v` under a key that changes from call to call, into a
    /// container that outlives the call (on `self`, a global, or a variable of an enclosing
    /// function), where `v` is, or is computed from, a tensor the hook was given and is not
    /// moved off the device or reduced to a number.
    pub fn kept_by_hook(&self, hook: &Hook<'a>) -> Vec<Kept<'a>> {
        let Some(body) = hook.function.child_by_field_id(FIELDS.body) else {
            return Vec::new();
        };
        let mut derived: Vec<&'a str> = hook.tensors.clone();
        let mut local: Vec<&'a str> = self.parameter_list(hook.function);
        let mut kept = Vec::new();
        walk(body, |visit| {
            let Visit::Enter(node) = visit else {
                return Descend::Yes;
            };
            let kind = node.kind_id();
            if kind == KINDS.function_definition
                || kind == KINDS.lambda
                || kind == KINDS.class_definition
            {
                return Descend::No;
            }
            if kind == KINDS.assignment || kind == KINDS.for_statement {
                let (Some(left), Some(right)) = (
                    node.child_by_field_id(FIELDS.left),
                    node.child_by_field_id(FIELDS.right),
                ) else {
                    return Descend::Yes;
                };
                if left.kind_id() == KINDS.subscript {
                    if kind == KINDS.assignment
                        && let Some(store) = self.keyed_store(node, left, right, &derived)
                    {
                        kept.push(store);
                    }
                    return Descend::Yes;
                }
                if left.kind_id() == KINDS.attribute {
                    // `self.x = out` overwrites one slot: bounded.
                    return Descend::Yes;
                }
                let from_tensor = self.carries(right, &derived);
                for name in identifiers(left, self.source) {
                    local.push(name);
                    if from_tensor {
                        derived.push(name);
                    }
                }
                return Descend::Yes;
            }
            if kind == KINDS.augmented_assignment {
                if let (Some(left), Some(right)) = (
                    node.child_by_field_id(FIELDS.left),
                    node.child_by_field_id(FIELDS.right),
                ) && matches!(right.kind_id(), k if k == KINDS.list || k == KINDS.tuple)
                    && self.text(node).contains("+=")
                    && self.carries(right, &derived)
                    && self.outlives(left, &local)
                {
                    kept.push(Kept {
                        store: node,
                        container: left,
                        value: right,
                    });
                }
                return Descend::Yes;
            }
            if kind == KINDS.call
                && let Some(store) = self.appended(node, &derived, &local)
            {
                kept.push(store);
            }
            Descend::Yes
        });
        kept
    }

    /// `xs.append(v)`, `xs.extend(v)`, `xs.insert(i, v)`, `xs.appendleft(v)` keeping a tensor.
    fn appended(&self, call: Node<'a>, derived: &[&'a str], local: &[&'a str]) -> Option<Kept<'a>> {
        // From the tree: the model records the names of the calls rules start at, and a
        // hook's body may hold none.
        let callee = call.child_by_field_id(FIELDS.function)?;
        let name = self.text(callee.child_by_field_id(FIELDS.attribute)?);
        let position = match name {
            "append" | "extend" | "appendleft" => 0,
            "insert" => 1,
            _ => return None,
        };
        let container = callee.child_by_field_id(FIELDS.object)?;
        let value = find_argument(call, self.source, None, Some(position)).found()?;
        (self.carries(value, derived) && self.outlives(container, local)).then_some(Kept {
            store: call,
            container,
            value,
        })
    }

    /// `cache[self.step] = output`, `feats[len(feats)] = out`: an item under a key that
    /// changes between calls, where the file counts it up (`self.step += 1`). A key fixed
    /// per hook (`activations[name] = output`, `name` bound when the hook was made) overwrites
    /// one slot.
    fn keyed_store(
        &self,
        assignment: Node<'a>,
        left: Node<'a>,
        right: Node<'a>,
        derived: &[&'a str],
    ) -> Option<Kept<'a>> {
        let container = left.child_by_field_id(FIELDS.value)?;
        let key = left.child_by_field_id(FIELDS.index)?;
        let key_text = self.text(key);
        let counted = key_text.contains("len(")
            || key_chains(key, self.source)
                .into_iter()
                .any(|chain| self.source.contains(&format!("{chain} += ")));
        (counted && self.carries(right, derived) && self.outlives(container, &[])).then_some(Kept {
            store: assignment,
            container,
            value: right,
        })
    }

    /// Whether a value holds one of `derived` on the device: it names one and is neither moved
    /// to the host nor reduced to a Python number, a shape or a size.
    fn carries(&self, value: Node<'a>, derived: &[&'a str]) -> bool {
        let text = self.text(value);
        const OFF_DEVICE: &[&str] = &[
            ".cpu()",
            ".item()",
            ".tolist()",
            ".numpy()",
            ".shape",
            ".size(",
            ".dim()",
            ".ndim",
            "\"cpu\"",
            "'cpu'",
            ".dtype",
            ".device",
            ".numel()",
        ];
        if OFF_DEVICE.iter().any(|marker| text.contains(marker)) {
            return false;
        }
        if value.kind_id() == KINDS.call
            && let Some(callee) = self.model.callee(value)
            && matches!(
                self.text(callee),
                "float" | "int" | "bool" | "len" | "str" | "type" | "id" | "repr" | "print"
            )
        {
            return false;
        }
        identifiers_read(value, self.source)
            .into_iter()
            .any(|name| derived.contains(&name))
    }

    /// Whether a container outlives the hook's call: an attribute of `self`, or a name the
    /// hook does not bind itself (a global, or a variable of the function that made it).
    fn outlives(&self, container: Node<'a>, local: &[&'a str]) -> bool {
        // `self.feats` of `self.feats[name]`, `feats` of `feats[name]`.
        let root = self.chain_root(container);
        let name = self.text(root);
        if name.starts_with("self.") || name == "self" {
            return true;
        }
        root.kind_id() == KINDS.identifier && !local.contains(&name)
    }

    /// Whether the handle of a registration is removed somewhere: it is a `with` item, or kept
    /// (in a variable, a list, a return value) in a file that calls `.remove()`.
    pub fn handle_removed(&self, registration: Node<'a>) -> bool {
        let Some(parent) = registration.parent() else {
            return false;
        };
        let kind = parent.kind_id();
        if kind == KINDS.with_item {
            return true;
        }
        kind != KINDS.expression_statement && self.source.contains(".remove()")
    }

    /// Whether the file empties a container anywhere (`xs.clear()`, `del xs[:]`, `xs[:] = []`,
    /// `xs.pop(...)`), or binds it more than once (`self.feats = []` in `__init__` and again in
    /// `reset`): what it holds is then bounded by how often that runs.
    pub fn emptied_anywhere(&self, container: Node<'a>) -> bool {
        let mut texts = vec![self.text(container)];
        // `self.feats[name].append(out)`: emptying `self.feats` empties it too.
        let mut node = container;
        while node.kind_id() == KINDS.subscript {
            let Some(value) = node.child_by_field_id(FIELDS.value) else {
                break;
            };
            texts.push(self.text(value));
            node = value;
        }
        texts.iter().any(|text| {
            let bindings = self
                .source
                .lines()
                .map(str::trim_start)
                .filter(|line| {
                    line.strip_prefix(text).is_some_and(|rest| {
                        rest.starts_with(" = ") || (rest.starts_with(':') && rest.contains(" = "))
                    })
                })
                .count();
            bindings > 1
                || [
                    format!("{text}.clear()"),
                    format!("del {text}[:]"),
                    format!("del {text}\n"),
                    format!("{text}[:] = "),
                    format!("{text}.pop("),
                    format!("{text}.popleft("),
                ]
                .iter()
                .any(|pattern| self.source.contains(pattern.as_str()))
        })
    }
}

/// The names an assignment or `for` target binds.
fn identifiers<'a>(target: Node<'a>, source: &'a str) -> Vec<&'a str> {
    let mut names = Vec::new();
    walk(target, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if node.kind_id() == KINDS.identifier {
            names.push(&source[node.byte_range()]);
        }
        // `a.b`, `a[i]` as targets bind no name.
        if node.kind_id() == KINDS.attribute || node.kind_id() == KINDS.subscript {
            return Descend::No;
        }
        Descend::Yes
    });
    names
}

/// The names an expression reads (not attribute names after a dot, not keyword names).
fn identifiers_read<'a>(value: Node<'a>, source: &'a str) -> Vec<&'a str> {
    let mut names = Vec::new();
    walk(value, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        let kind = node.kind_id();
        if kind == KINDS.lambda {
            return Descend::No;
        }
        if kind == KINDS.identifier {
            let attribute_name = node.parent().is_some_and(|parent| {
                (parent.kind_id() == KINDS.attribute
                    && parent.child_by_field_id(FIELDS.attribute) == Some(node))
                    || (parent.kind_id() == KINDS.keyword_argument
                        && parent.child_by_field_id(FIELDS.name) == Some(node))
            });
            if !attribute_name {
                names.push(&source[node.byte_range()]);
            }
        }
        Descend::Yes
    });
    names
}

/// The names and attribute chains in a key (`self.step`, `step`), to look for where the file
/// counts them up.
fn key_chains<'a>(key: Node<'a>, source: &'a str) -> Vec<&'a str> {
    let mut chains = Vec::new();
    walk(key, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        let kind = node.kind_id();
        if kind == KINDS.attribute || kind == KINDS.identifier {
            chains.push(&source[node.byte_range()]);
            return Descend::No;
        }
        Descend::Yes
    });
    chains
}
