//! TL101 `eval-without-no-grad`; documentation and examples in
//! `rules/memory/eval-without-no-grad.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::{forward_call, short};
use crate::checker::{Checker, GradMode};
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::parse::{FIELDS, KINDS};
use crate::rule_meta::{Applicability, RuleMeta};
use crate::rules::{Check, edits};
use crate::semantic::{ModeCall, modules};

pub struct EvalWithoutNoGrad;

impl Check for EvalWithoutNoGrad {
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
        let start = out.len();
        self.check_grad_dependent(rule, call, checker, out);
        // Graphs are only recorded if the function runs with grad: its callers may tell.
        for diagnostic in &mut out[start..] {
            diagnostic.assumption = checker.caller_assumption(call);
        }
    }
}

impl EvalWithoutNoGrad {
    fn check_grad_dependent<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        // Evaluation code needs an `x.eval()` somewhere in the file, an evaluation-named
        // function, or a loaded model in a file that trains nothing; the first two are cheap
        // to ask before what the call runs.
        // Whether a loop around the call iterates evaluation data: asked once, when needed.
        let eval_loop = std::cell::OnceCell::new();
        let eval_loop = || *eval_loop.get_or_init(|| evaluation_loop(checker));
        if !checker.model.mode_calls.iter().any(|mode| mode.eval)
            && !eval_named(checker, call)
            && !inference_file(checker, call)
            && !eval_loop()
        {
            return;
        }
        // Grad mode is a lookup in a table built once per file; what the call runs is a value
        // analysis of its callee.
        let mode = checker.grad_mode(call);
        if !matches!(mode, GradMode::Enabled | GradMode::FromCaller) {
            return;
        }
        // A model's own `forward` runs its layers with whatever grad mode its caller has.
        if super::tensor_accumulated::in_module_forward(checker) {
            return;
        }
        let Some(forward) = forward_call(checker, call) else {
            check_helper_call(rule, call, checker, out);
            return;
        };
        // `@torch.inference_mode()` on the model's own `forward`.
        if forward.grad_disabled {
            return;
        }
        let function = checker.analysis.enclosing_function(call);
        let eval_call = last_mode_call(checker, function, forward.receiver, call)
            .or_else(|| object_mode_call(checker, forward.receiver, call))
            .or_else(|| sibling_mode_call(checker, function, forward.receiver, call));
        let in_eval = eval_loop()
            || match eval_call {
                Some(mode_call) => mode_call.eval,
                None => {
                    forward.module.eval_mode
                        || eval_named(checker, call)
                        || (forward.module.pretrained && inference_file(checker, call))
                }
            };
        if !in_eval
            || needs_gradients(checker, function, forward.receiver)
            || checker.analysis.frozen(forward.receiver)
        {
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
                    "`{}` has no grad context of its own, and not every caller in the linted files disables grad",
                    facts.name
                ),
            );
        }
        diagnostic.fix = no_grad_decorator(checker);
        out.push(diagnostic);
    }
}

/// `out = self._forward(batch)` in evaluation code, where the helper runs the model and is
/// shared with training (it is not evaluation code of its own): the finding is at this call,
/// on the evaluation path.
fn check_helper_call<'a>(
    rule: &Arc<RuleMeta>,
    call: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let function = checker.analysis.enclosing_function(call);
    // The last mode switch before the call in the function, of whichever model.
    let eval_call = checker
        .model
        .mode_calls
        .iter()
        .rev()
        .filter(|mode| mode.node.start_byte() < call.start_byte())
        .find(|mode| {
            checker
                .analysis
                .enclosing_function(mode.node)
                .map(|f| f.id())
                == function.map(|f| f.id())
        })
        .copied();
    let in_eval = match eval_call {
        Some(mode_call) => mode_call.eval,
        None => eval_named(checker, call),
    };
    if !in_eval || needs_gradients(checker, function, "self") {
        return;
    }
    let Some((helper, label)) = forward_helper(checker, call) else {
        return;
    };
    let message = rule.message.replace("{call}", &short(checker, call));
    let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
    if let Some(range) = label {
        diagnostic = diagnostic.with_label(
            range,
            format!("`{helper}` runs the model, and training calls it too"),
        );
    }
    if let Some(mode_call) = eval_call {
        diagnostic = diagnostic.with_label(
            mode_call.node.byte_range(),
            "eval mode switches Dropout and BatchNorm, not autograd",
        );
    }
    diagnostic.fix = no_grad_decorator(checker);
    out.push(diagnostic);
}

/// The fix: `@torch.no_grad()` on the function the finding is in, written with the module's own
/// name for torch (`@th.no_grad()`, or `@no_grad()` where only that is imported), with `import
/// torch` added where the module imports neither. Not `inference_mode()`: its tensors refuse
/// autograd later, which code after the function may want. None for a call outside a function
/// (wrapping module code in `with torch.no_grad():` re-indents it), nor in a function that also
/// trains (its backward would fail). Unsafe: whatever in the
/// function did need gradients (a gradient-based saliency map, a test-time adaptation step)
/// stops getting them.
fn no_grad_decorator(checker: &Checker<'_>) -> Option<Fix> {
    let (function, facts) = checker.current_function()?;
    if function.kind_id() != KINDS.function_definition || trains(checker, function, facts) {
        return None;
    }
    let text = checker.source.text();
    let line_start = edits::line_start(text, function.start_byte());
    let indent = &text[line_start..function.start_byte()];
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        return None;
    }
    let scopes = &checker.model.scopes;
    let (decorator, import) = match scopes.module_name_for("torch") {
        Some(torch) => (format!("{torch}.no_grad()"), None),
        None => match scopes.module_name_for("torch.no_grad") {
            Some(no_grad) => (format!("{no_grad}()"), None),
            None => ("torch.no_grad()".to_owned(), Some(import_torch(checker)?)),
        },
    };
    let mut edits: Vec<Edit> = import.into_iter().collect();
    edits.push(Edit {
        range: function.start_byte()..function.start_byte(),
        content: format!("@{decorator}\n{indent}"),
    });
    Some(Fix {
        message: format!(
            "Run `{}` under `@{decorator}`",
            checker
                .field(function, FIELDS.name)
                .map_or("the function", |name| checker.node_text(name))
        ),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// Whether the function trains as well (a `fit` that validates after each epoch): under
/// `no_grad` its backward would fail, so the fix would break it.
fn trains<'a>(
    checker: &Checker<'a>,
    function: Node<'a>,
    facts: &crate::semantic::FunctionFacts,
) -> bool {
    if facts.contains_training {
        return true;
    }
    let mut cursor = function.walk();
    let mut stack = vec![function];
    while let Some(node) = stack.pop() {
        if node.kind_id() == KINDS.call && checker.analysis.call_trains(node) {
            return true;
        }
        stack.extend(node.named_children(&mut cursor));
    }
    false
}

/// `import torch` on a line of its own before the module's first statement that is not its
/// docstring, a comment or a `from __future__` import (which must come first).
fn import_torch(checker: &Checker<'_>) -> Option<Edit> {
    let root = checker.tree.root_node();
    let mut cursor = root.walk();
    let first = root
        .named_children(&mut cursor)
        .enumerate()
        .find(|(index, child)| {
            let kind = child.kind_id();
            let docstring = *index == 0
                && kind == KINDS.expression_statement
                && child
                    .named_child(0)
                    .is_some_and(|c| c.kind_id() == KINDS.string);
            let future = child.kind() == "future_import_statement";
            !(docstring || future || kind == KINDS.comment)
        })?;
    let text = checker.source.text();
    let at = edits::line_start(text, first.1.start_byte());
    // Among imports, one more; before code, a blank line after it.
    let imports =
        [KINDS.import_statement, KINDS.import_from_statement].contains(&first.1.kind_id());
    Some(Edit {
        range: at..at,
        content: if imports {
            "import torch\n"
        } else {
            "import torch\n\n"
        }
        .to_owned(),
    })
}

/// A call of a function or method of the project that runs a forward pass with its caller's
/// grad mode and is no evaluation code of its own (`self._forward(batch)`, `run_model(m, x)`):
/// its name, and its header when it is in this file.
fn forward_helper<'a>(
    checker: &Checker<'a>,
    call: Node<'a>,
) -> Option<(String, Option<crate::source::TextRange>)> {
    use crate::semantic::facts::Ask;
    use crate::semantic::instances::ClassRef;
    let analysis = &checker.analysis;
    let callee = checker.callee(call)?;
    let name = checker.call_name(call)?;
    // One of the file's functions or methods, or a method of `self` a base class may define.
    let own = checker
        .model
        .classes
        .iter()
        .any(|class| class.methods.iter().any(|(method, _)| *method == name))
        || checker.model.function_nodes_named(name).next().is_some();
    if !own {
        return None;
    }
    if crate::semantic::values::is_non_forward_method(name.trim_start_matches('_'))
        || checker
            .analysis
            .frameworks
            .is_per_batch_hook_of_any_class(name)
    {
        return None;
    }
    let local = |function: Node<'a>| -> Option<(String, Option<crate::source::TextRange>)> {
        let facts = checker.model.function_facts(function)?;
        // Evaluation code of its own, by its name or its own `x.eval()`: its forwards are
        // reported where they run.
        let own_eval =
            ["evaluat", "validat", "pred", "infer", "test"]
                .iter()
                .any(|word| facts.name.to_ascii_lowercase().contains(word))
                || checker.model.mode_calls.iter().any(|mode| {
                    mode.eval && function.byte_range().contains(&mode.node.start_byte())
                });
        (!own_eval && !facts.contains_training && analysis.runs_forward_with_grad(function))
            .then(|| (facts.name.clone(), Some(facts.header.clone())))
    };
    if callee.kind_id() == crate::parse::KINDS.attribute {
        let receiver = checker.field(callee, crate::parse::FIELDS.object)?;
        return analysis
            .instance_classes(receiver)
            .into_iter()
            .find_map(|class| match class {
                ClassRef::Local(class) => local(analysis.local_method(class, name)?),
                ClassRef::Imported(class) => {
                    let qualified = format!("{class}.{name}");
                    (analysis.ask(Ask::RunsForward(qualified)).is_some()
                        && !["evaluat", "validat", "pred", "infer", "test"]
                            .iter()
                            .any(|word| name.to_ascii_lowercase().contains(word)))
                    .then(|| (name.to_owned(), None))
                }
            });
    }
    if callee.kind_id() == crate::parse::KINDS.identifier {
        let function = checker.model.function_nodes_named(name).find(|f| {
            checker
                .model
                .function_facts(*f)
                .is_some_and(|f| f.class.is_none())
        })?;
        return local(function);
    }
    None
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
            let scope = checker
                .analysis
                .enclosing_function(mode.node)
                .map(|f| f.id());
            // A script's module-level `teacher.eval()` holds in the functions it calls later.
            scope == function.map(|f| f.id()) || scope.is_none()
        })
        .copied()
}

/// Code outside any model's own methods, in a file that trains nothing but loads trained
/// weights (a serving handler, a demo): a loaded model it runs is run for inference.
fn inference_file<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    !checker.analysis.trains_anything()
        && checker.analysis.loads_weights()
        && !super::in_module_method(checker, call)
}

/// `self.network.eval()` before `self.mnetwork(x)` (a wrapper of the same network) in the same
/// method: the last mode switch of the object's models there.
fn sibling_mode_call<'a>(
    checker: &Checker<'a>,
    function: Option<Node<'a>>,
    receiver: &str,
    call: Node<'_>,
) -> Option<ModeCall<'a>> {
    let function = function?;
    if !receiver.starts_with("self.") {
        return None;
    }
    checker
        .model
        .mode_calls
        .iter()
        .rev()
        .filter(|mode| {
            mode.node.start_byte() < call.start_byte()
                && function.byte_range().contains(&mode.node.start_byte())
                && mode.receiver.starts_with("self.")
        })
        .copied()
        .next()
}

/// `self.model.eval()` in `__init__` (or another method) of a class that never switches the
/// model back with `.train()`: the model, and its submodules, stay in eval mode for the
/// object's life.
fn object_mode_call<'a>(
    checker: &Checker<'a>,
    receiver: &str,
    call: Node<'_>,
) -> Option<ModeCall<'a>> {
    if !receiver.starts_with("self.") {
        return None;
    }
    let class = checker.analysis.class_of(call)?;
    let range = checker.model.classes[class].node.byte_range();
    // `self.model.eval()` holds for `self.model.encoder(x)` too.
    let mut calls = checker.model.mode_calls.iter().filter(|mode| {
        range.contains(&mode.node.start_byte())
            && (mode.receiver == receiver
                || (mode.receiver != "self"
                    && receiver
                        .strip_prefix(mode.receiver)
                        .is_some_and(|rest| rest.starts_with('.'))))
    });
    let first = *calls.next()?;
    (first.eval && calls.all(|mode| mode.eval)).then_some(first)
}

/// Whether the code runs in a loop over evaluation data that does not train (whatever mode
/// the model was last put in).
fn evaluation_loop(checker: &Checker<'_>) -> bool {
    checker
        .enclosing_loops()
        .into_iter()
        .any(|loop_node| checker.analysis.evaluation_loop(loop_node))
}

/// Functions whose name says they evaluate: `evaluate`, `validate`, `predict`, `infer`,
/// `score`. In a model's own methods only the framework's evaluation hooks count (a model's
/// `predict_*` helpers are part of its forward), and only when the class's bases are all known
/// (a framework base class runs those hooks without grad).
fn eval_named<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some((_, facts)) = checker.current_function() else {
        return false;
    };
    let name = facts.name.as_str();
    let lower;
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = name.to_ascii_lowercase();
        lower.as_str()
    } else {
        name
    };
    let hook = checker.function_memo("no-grad-hook", || {
        checker.analysis.frameworks.names_no_grad_hook(name)
    });
    let eval_word = checker.function_memo("eval-named", || {
        ["evaluat", "validat", "predict", "infer", "eval_", "_eval"]
            .iter()
            .any(|word| name.contains(word))
            || name == "eval"
            || name == "score"
            || name.starts_with("score_")
    });
    let generates = crate::semantic::per_batch::names_generation(name);
    if !hook && !eval_word && !generates {
        return false;
    }
    if super::in_module_method(checker, call) {
        return (hook
            && checker
                .analysis
                .class_of(call)
                .is_some_and(|class| modules::bases_are_plain_modules(&checker.analysis, class)))
            || (generates && crate::semantic::per_batch::in_generation_loop(checker, call));
    }
    eval_word
}

/// Evaluation code that needs gradients (saliency maps, adversarial inputs, test-time
/// training): the loop (or function) running the forward sets `requires_grad` on something,
/// calls `torch.autograd.grad`, or runs a backward: without an optimizer step, or with one that trains this very model. A
/// frozen teacher run next to an optimizer over another model's parameters needs none.
fn needs_gradients<'a>(checker: &Checker<'a>, function: Option<Node<'a>>, receiver: &str) -> bool {
    // The loop running the forward decides: a `fit` function has a training loop (with
    // backward) and an evaluation loop (without).
    let whole = match function {
        Some(function) => checker.node_text(function),
        None => checker.text(),
    };
    let asks_for_gradients = || {
        whole.contains("requires_grad_(") && !whole.contains("requires_grad_(False)")
            || whole.contains("requires_grad=True")
            || whole.contains("requires_grad = True")
            || whole.contains("autograd.grad(")
    };
    // Once per function: a training function's every model call asks, and each question
    // reads the whole function.
    if checker.memo_of(function, "asks for gradients", asks_for_gradients) {
        return true;
    }
    let region_node = checker
        .enclosing_loop()
        .or(function)
        .unwrap_or_else(|| checker.tree.root_node());
    // A backward of the framework table (`.backward()`, `accelerator.backward(loss)`).
    if !checker.analysis.calls_backward_in(region_node) {
        return false;
    }
    let region = checker.node_text(region_node);
    let file = checker.text();
    let optimizes_other = file.contains(".parameters()")
        && !file.contains(&format!("{receiver}.parameters()"))
        && !file.contains(&format!("{receiver}.named_parameters()"));
    !(region.contains(".step(") && optimizes_other)
}
