//! Frozen models: the file turns off `requires_grad` for every parameter of a model
//! (`deactivate_requires_grad(model=self.model)`, `self.backbone.requires_grad_(False)`,
//! `for p in encoder.parameters(): p.requires_grad = False`, Lightning's `self.model.freeze()`)
//! and turns it back on only in an end hook (`on_fit_end`), after the loops that ran it. Its forward records no graph from its own weights: what it
//! returns carries a graph only if its inputs do.

use crate::syntax::Node;
use rustc_hash::FxHashSet;

use super::analysis::Analysis;
use crate::parse::{FIELDS, KINDS};

impl<'a> Analysis<'a> {
    /// Whether the model a receiver names (`self.model`, `encoder`) is frozen in this file.
    pub fn frozen(&self, receiver: &str) -> bool {
        self.frozen_models().contains(receiver)
    }

    fn frozen_models(&self) -> &FxHashSet<&'a str> {
        self.frozen.get_or_init(|| {
            let mut frozen = FxHashSet::default();
            let mut thawed = FxHashSet::default();
            for (name, calls) in &self.model.calls_by_name {
                // Asked of every call name of a file: lowercased into a copy only when it has
                // capitals.
                let lower: std::borrow::Cow<'_, str> =
                    if name.bytes().any(|b| b.is_ascii_uppercase()) {
                        name.to_ascii_lowercase().into()
                    } else {
                        (*name).into()
                    };
                let freezes = lower == "deactivate_requires_grad"
                    || (lower.contains("freeze") && !lower.contains("unfreeze"));
                let thaws = lower == "activate_requires_grad"
                    || lower.contains("unfreeze")
                    || lower == "thaw";
                let sets_flag = *name == "requires_grad_";
                if !freezes && !thaws && !sets_flag {
                    continue;
                }
                for call in calls {
                    // `on_fit_end`, `teardown`: turned back on after the loops that ran frozen.
                    if (thaws || sets_flag) && self.in_end_hook(*call) {
                        continue;
                    }
                    let targets = self.call_targets(*call);
                    let into = if sets_flag {
                        match self.first_argument_text(*call) {
                            Some("False") => &mut frozen,
                            _ => &mut thawed,
                        }
                    } else if freezes {
                        &mut frozen
                    } else {
                        &mut thawed
                    };
                    into.extend(targets);
                }
            }
            frozen.extend(self.parameters_loop_freezes());
            frozen.retain(|model| !thawed.contains(model));
            frozen
        })
    }

    /// What a freezing call acts on: its receiver (`self.model.freeze()`,
    /// `backbone.requires_grad_(False)`) and its arguments (`freeze(model=self.model)`).
    fn call_targets(&self, call: Node<'a>) -> Vec<&'a str> {
        let mut targets = Vec::new();
        if let Some(callee) = self.model.callee(call)
            && callee.kind_id() == KINDS.attribute
            && let Some(object) = callee.child_by_field_id(FIELDS.object)
            && self.text(object) != "self"
        {
            targets.push(self.text(object));
        }
        if let Some(arguments) = call.child_by_field_id(FIELDS.arguments) {
            let mut cursor = arguments.walk();
            for argument in arguments.named_children(&mut cursor) {
                let value = if argument.kind_id() == KINDS.keyword_argument {
                    argument.child_by_field_id(FIELDS.value)
                } else {
                    Some(argument)
                };
                if let Some(value) = value
                    .filter(|v| v.kind_id() == KINDS.identifier || v.kind_id() == KINDS.attribute)
                {
                    targets.push(self.text(value));
                }
            }
        }
        targets
    }

    /// Whether a call is in a hook that runs after the work is done (`on_fit_end`,
    /// `on_train_end`, `teardown`).
    fn in_end_hook(&self, call: Node<'a>) -> bool {
        self.enclosing_function(call)
            .and_then(|function| function.child_by_field_id(FIELDS.name))
            .is_some_and(|name| {
                let name = self.text(name);
                name.ends_with("_end") || name == "teardown"
            })
    }

    fn first_argument_text(&self, call: Node<'a>) -> Option<&'a str> {
        let argument = call.child_by_field_id(FIELDS.arguments)?.named_child(0)?;
        let value = if argument.kind_id() == KINDS.keyword_argument {
            argument.child_by_field_id(FIELDS.value)?
        } else {
            argument
        };
        Some(self.text(value))
    }

    /// `for p in encoder.parameters(): p.requires_grad = False`: the model whose parameters
    /// the loop turns off.
    fn parameters_loop_freezes(&self) -> Vec<&'a str> {
        let mut frozen = Vec::new();
        for call in self
            .model
            .calls_by_name
            .get("parameters")
            .into_iter()
            .flatten()
        {
            let Some(loop_node) = call.parent().filter(|p| p.kind_id() == KINDS.for_statement)
            else {
                continue;
            };
            let (Some(variable), Some(body), Some(callee)) = (
                loop_node.child_by_field_id(FIELDS.left),
                loop_node.child_by_field_id(FIELDS.body),
                self.model.callee(*call),
            ) else {
                continue;
            };
            let body = self.text(body).replace(' ', "");
            if body.contains(&format!("{}.requires_grad=False", self.text(variable)))
                && let Some(object) = callee.child_by_field_id(FIELDS.object)
            {
                frozen.push(self.text(object));
            }
        }
        frozen
    }
}
