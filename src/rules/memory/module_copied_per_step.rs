//! TL113 `module-copied-per-step`; documentation and examples in
//! `rules/memory/module-copied-per-step.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{FIELDS, KINDS};
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::values::Kind;

pub struct ModuleCopiedPerStep;

/// The optimizers of `torch.optim` (PyTorch 2.11).
const OPTIMIZERS: &[&str] = &[
    "ASGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
];

impl Check for ModuleCopiedPerStep {
    fn kinds(&self) -> &'static [&'static str] {
        &["call"]
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(name) = checker.call_name(call) else {
            return;
        };
        // Named like a copy or one of `torch.optim`'s optimizers before anything is resolved:
        // most calls of a model file construct layers.
        let copy = name == "deepcopy";
        if !copy && !OPTIMIZERS.contains(&name) {
            return;
        }
        let Some(callee) = checker.callee(call) else {
            return;
        };
        // What the call makes, by the name it resolves to; then whether it runs once per batch,
        // unconditionally (a snapshot taken when the loss improves, or every N steps, or an
        // optimizer made on the first step only, is no per-step copy); then what it copies.
        let Some(qualified) = checker.qualified_name(callee) else {
            return;
        };
        let optimizer = qualified.strip_prefix("torch.optim.").is_some_and(|class| {
            !class.contains('.') && class.starts_with(|c: char| c.is_ascii_uppercase())
        });
        if !(optimizer || (copy && qualified == "copy.deepcopy")) {
            return;
        }
        let Some(evidence) = checker.per_batch() else {
            return;
        };
        if conditional_in_step(call) {
            return;
        }
        let made = if copy {
            let Some(copied) = checker
                .arguments(call)
                .and_then(|arguments| arguments.named_child(0))
            else {
                return;
            };
            if !is_model(checker, copied) || trained_in_iteration(checker, call) {
                return;
            }
            Made::Copy(checker.node_text(copied))
        } else {
            if over_fresh_parameters(checker, call) {
                return;
            }
            Made::Optimizer(name)
        };
        let what = match made {
            Made::Copy(copied) => format!(
                "`copy.deepcopy({})` copies the whole model (every parameter and buffer) on every batch: a model's worth of memory is allocated again at each step, and until the new copy replaces the last one the step holds both",
                crate::rules::snippet(copied, 40)
            ),
            Made::Optimizer(class) => format!(
                "a new `{class}` is built on every batch: its state (momentum, running averages) starts from zero at each step and is allocated again"
            ),
        };
        let message = rule.message.replace("{what}", &what);
        out.push(
            Diagnostic::new(rule, message, call.byte_range())
                .with_label(evidence.range, evidence.reason),
        );
    }
}

enum Made<'a> {
    /// `copy.deepcopy(<this>)`.
    Copy(&'a str),
    /// The optimizer class's name.
    Optimizer(&'a str),
}

/// A model, or its state (`model.state_dict()`).
fn is_model<'a>(checker: &Checker<'a>, value: Node<'a>) -> bool {
    let analysis = &checker.analysis;
    if analysis.facts(value).kind == Kind::Module {
        return true;
    }
    value.kind_id() == KINDS.call
        && checker.call_name(value) == Some("state_dict")
        && checker
            .callee(value)
            .and_then(|callee| checker.field(callee, FIELDS.object))
            .is_some_and(|model| analysis.facts(model).kind == Kind::Module)
}

/// `fast = copy.deepcopy(model)` whose parameters the same iteration trains
/// (`SGD(fast.parameters())`): a model adapted per task (MAML), a copy by design.
fn trained_in_iteration<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(target) = call
        .parent()
        .filter(|parent| parent.kind_id() == KINDS.assignment)
        .and_then(|assignment| checker.field(assignment, FIELDS.left))
    else {
        return false;
    };
    let region = iteration(checker, call).map_or(checker.text(), |node| checker.node_text(node));
    region.contains(&format!("{}.parameters()", checker.node_text(target)))
}

/// An optimizer over the parameters of a model this iteration made (`SGD(fast.parameters())`
/// after `fast = copy.deepcopy(model)`): that model is new at each step too.
fn over_fresh_parameters<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(parameters) = checker
        .arguments(call)
        .and_then(|arguments| arguments.named_child(0))
    else {
        return false;
    };
    let analysis = &checker.analysis;
    let root = analysis.chain_root(parameters);
    if root.kind_id() != KINDS.identifier {
        return false;
    }
    let Some(value) = analysis.reaching_value(root) else {
        return false;
    };
    iteration(checker, call).is_some_and(|region| region.byte_range().contains(&value.start_byte()))
}

/// What runs once per step around the call: its innermost loop, or else its function.
fn iteration<'a>(checker: &Checker<'a>, call: Node<'a>) -> Option<Node<'a>> {
    checker
        .enclosing_loops()
        .first()
        .copied()
        .or_else(|| checker.analysis.enclosing_function(call))
}

/// Whether the call is under a condition inside its loop or function (`if val_loss < best:`,
/// `if opt is None:`), or in an `except` handler.
fn conditional_in_step(call: Node<'_>) -> bool {
    let mut node = call.parent();
    while let Some(current) = node {
        let kind = current.kind_id();
        if kind == KINDS.for_statement
            || kind == KINDS.while_statement
            || kind == KINDS.function_definition
        {
            return false;
        }
        if kind == KINDS.if_statement
            || kind == KINDS.conditional_expression
            || kind == KINDS.except_clause
        {
            return true;
        }
        node = current.parent();
    }
    false
}
