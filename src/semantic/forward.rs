//! Which calls run a model's forward pass: `model(x)`, `self(x)`, `self.encoder(x)`,
//! `model.decode(z)` — and which functions do, directly or through the file's own helpers
//! (a function summary's `runs_forward`).

use tree_sitter::Node;

use super::analysis::Analysis;
use super::values::{Kind, ValueFacts, is_non_forward_method};
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};

/// A call that runs a model.
pub struct Forward<'a> {
    /// The callee text a mode call (`x.eval()`) must match: `model`, `self.model`, `self`.
    pub receiver: &'a str,
    pub module: ValueFacts,
}

impl<'a> Analysis<'a> {
    /// Whether `call` runs a model's forward pass, and on what.
    pub fn forward_call(&self, call: Node<'a>) -> Option<Forward<'a>> {
        let callee = self.model.callee(call)?;
        let kind = callee.kind_id();
        if kind == KINDS.identifier {
            let facts = self.facts(callee);
            return (facts.kind == Kind::Module).then(|| Forward {
                receiver: self.text(callee),
                module: facts,
            });
        }
        if kind != KINDS.attribute {
            return None;
        }
        let object = callee.child_by_field_id(FIELDS.object)?;
        let attribute = self.model.call_name(call)?;
        let callee_facts = self.facts(callee);
        if callee_facts.kind == Kind::Module {
            return Some(Forward {
                receiver: self.text(callee),
                module: callee_facts,
            });
        }
        let object_facts = self.facts(object);
        if object_facts.kind == Kind::Module
            && is_forward_method(attribute)
            && !is_non_forward_method(attribute)
            && self.is_model_member(attribute)
        {
            return Some(Forward {
                receiver: self.text(object),
                module: object_facts,
            });
        }
        None
    }

    /// Whether a function's body (not its nested functions) runs a forward pass, directly or
    /// through a call of one of the file's plain functions that does.
    pub fn runs_forward(&self, function: Node<'a>) -> bool {
        self.runs_forward_at_depth(function, 0)
    }

    fn runs_forward_at_depth(&self, function: Node<'a>, depth: usize) -> bool {
        let Some(body) = function.child_by_field_id(FIELDS.body) else {
            return false;
        };
        let mut found = false;
        walk(body, |visit| {
            let Visit::Enter(node) = visit else {
                return Descend::Yes;
            };
            if found
                || !node.is_named()
                || node.kind_id() == KINDS.function_definition
                || node.kind_id() == KINDS.class_definition
            {
                return Descend::No;
            }
            if node.kind_id() == KINDS.call
                && (self.forward_call(node).is_some()
                    || (depth < 2 && self.calls_forward_helper(node, depth)))
            {
                found = true;
                return Descend::No;
            }
            Descend::Yes
        });
        found
    }

    /// `forecast_error(model, x)`: a call of one of the file's plain functions that runs a
    /// model.
    pub fn calls_forward_helper(&self, call: Node<'a>, depth: usize) -> bool {
        let Some(callee) = self.model.callee(call) else {
            return false;
        };
        if callee.kind_id() != KINDS.identifier {
            return false;
        }
        let name = self.text(callee);
        let Some(function) = self.model.function_nodes_named(name).next() else {
            return false;
        };
        self.runs_forward_at_depth(function, depth + 1)
    }
}

/// Module methods that run (part of) the model, as opposed to `parameters()`, `to()`, ....
pub fn is_forward_method(name: &str) -> bool {
    !matches!(
        name,
        "parameters"
            | "named_parameters"
            | "modules"
            | "named_modules"
            | "children"
            | "named_children"
            | "buffers"
            | "named_buffers"
            | "state_dict"
            | "load_state_dict"
            | "eval"
            | "train"
            | "to"
            | "cuda"
            | "cpu"
            | "float"
            | "double"
            | "half"
            | "bfloat16"
            | "zero_grad"
            | "requires_grad_"
            | "apply"
            | "register_buffer"
            | "register_parameter"
            | "register_module"
            | "add_module"
            | "save_pretrained"
            | "configure_optimizers"
            | "get_submodule"
            | "training_step"
            | "validation_step"
            | "test_step"
            | "predict_step"
            | "fit"
            | "log"
            | "log_dict"
    ) && !name.starts_with("register_")
        && !name.starts_with("on_")
        && !name.starts_with('_')
}
