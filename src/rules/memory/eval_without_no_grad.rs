//! TL101 `eval-without-no-grad`; documentation and examples in
//! `rules/memory/eval-without-no-grad.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::{forward_call, short};
use crate::checker::{Checker, GradMode};
use crate::diagnostic::Diagnostic;
use crate::rules::{Check, RuleMeta};
use crate::semantic::ModeCall;

pub struct EvalWithoutNoGrad;

impl Check for EvalWithoutNoGrad {
    fn kinds(&self) -> &'static [&'static str] {
        &["call"]
    }

    fn check(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'_>,
        checker: &Checker<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(forward) = forward_call(checker, call) else {
            return;
        };
        let mode = checker.grad_mode(call);
        if !matches!(mode, GradMode::Enabled | GradMode::FromCaller) {
            return;
        }
        let function = checker.analysis.enclosing_function(call);
        let eval_call = last_mode_call(checker, function, forward.receiver, call);
        let in_eval = match eval_call {
            Some(mode_call) => mode_call.eval,
            None => forward.module.eval_mode || eval_named(checker),
        };
        if !in_eval || needs_gradients(checker, function) || frozen(checker, forward.receiver) {
            return;
        }
        let message = rule.message.replace("{call}", &short(checker, call));
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if let Some(mode_call) = eval_call {
            diagnostic = diagnostic.with_label(
                mode_call.node.byte_range(),
                "eval mode switches Dropout and BatchNorm, not autograd",
            );
        }
        if mode == GradMode::FromCaller
            && let Some((_, facts)) = checker.current_function()
        {
            diagnostic = diagnostic.with_label(
                facts.header.clone(),
                format!(
                    "`{}` is called with grad enabled (not every caller wraps it in `torch.no_grad()`)",
                    facts.name
                ),
            );
        }
        out.push(diagnostic);
    }
}

/// The last `x.eval()` / `x.train()` before `call` in the same function (or at module level)
/// on the model the call runs, or on the object it belongs to (`model.eval()` covers
/// `model.encoder(x)`).
fn last_mode_call<'a>(
    checker: &Checker<'a>,
    function: Option<Node<'a>>,
    receiver: &str,
    call: Node<'_>,
) -> Option<ModeCall<'a>> {
    checker
        .model
        .mode_calls
        .iter()
        .rev()
        .filter(|mode| mode.node.start_byte() < call.start_byte())
        .filter(|mode| {
            mode.receiver == receiver
                || receiver
                    .strip_prefix(mode.receiver)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
        .find(|mode| {
            checker.analysis.enclosing_function(mode.node).map(|f| f.id())
                == function.map(|f| f.id())
        })
        .copied()
}

/// Functions whose name says they evaluate: `evaluate`, `validate`, `predict`, `infer`.
fn eval_named(checker: &Checker<'_>) -> bool {
    let Some((_, facts)) = checker.current_function() else {
        return false;
    };
    let name = facts.name.to_ascii_lowercase();
    ["evaluat", "validat", "predict", "infer", "eval_", "_eval"]
        .iter()
        .any(|word| name.contains(word))
        || name == "eval"
}

/// Evaluation code that needs gradients (saliency maps, adversarial inputs, test-time
/// training): it sets `requires_grad` on something, calls `torch.autograd.grad`, or calls
/// `.backward()` without ever putting a model in training mode.
fn needs_gradients(checker: &Checker<'_>, function: Option<Node<'_>>) -> bool {
    let region = match function {
        Some(function) => checker.node_text(function),
        None => checker.text(),
    };
    if region.contains("requires_grad_(") && !region.contains("requires_grad_(False)")
        || region.contains("requires_grad=True")
        || region.contains("requires_grad = True")
        || region.contains("autograd.grad(")
    {
        return true;
    }
    region.contains(".backward(") && !region.contains(".train(")
}

/// A model whose parameters were frozen records no graph from its own weights.
fn frozen(checker: &Checker<'_>, receiver: &str) -> bool {
    checker
        .text()
        .contains(&format!("{receiver}.requires_grad_(False)"))
}
