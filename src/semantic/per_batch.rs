//! Per-batch code: why a loop runs once per batch (it trains, runs a forward pass, iterates a
//! loader), the first such loop around a node, the step function a node is in, and how a
//! finding names them.

use crate::syntax::Node;

use super::accumulation::forward_call;
use super::position::Position;
use crate::parse::{Descend, FIELDS, KINDS, Visit, text, walk};
use crate::semantic::values::{Kind, is_non_forward_method};
use crate::source::TextRange;

/// How every label naming a loop that runs once per batch or step begins: the probe finds the
/// training loop's header by it (its step boundary for `--attribute`).
pub const PER_BATCH_LOOP_LABEL: &str = "this loop runs";

/// Why a loop runs once per batch, for labels; `None` for loops that do not (epochs,
/// setup loops, loops over time steps of one sequence).
pub fn per_batch_reason<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> Option<String> {
    reason(checker, loop_node, true)
}

/// `per_batch_reason`; `helpers`: whether to ask if the loop's function is itself run once
/// per batch by its callers (not asked of the callers' loops).
fn reason<'a>(checker: &impl Position<'a>, loop_node: Node<'a>, helpers: bool) -> Option<String> {
    let facts = checker.model().loop_facts(loop_node)?;
    if let Some(call) = facts
        .training_call
        .clone()
        .or_else(|| checker.analysis().loop_trains_through_calls(loop_node))
    {
        return Some(format!(
            "this loop runs once per training step (it calls `{}`)",
            crate::source::snippet(&checker.text()[call], 50)
        ));
    }
    if let Some(why) = steps_through_batches(checker, loop_node) {
        return Some(why);
    }
    if let Some(why) = iterates_what_batches_filled(checker, loop_node) {
        return Some(why);
    }
    if facts.nested_training
        && let Some(why) = updates_on_each_iteration(checker, loop_node)
    {
        return Some(why);
    }
    let over_modules = checker
        .field(loop_node, FIELDS.right)
        .is_some_and(|iterable| checker.analysis().facts(iterable).kind == Kind::Module);
    if facts.nested_training
        || over_modules
        || in_module_method(checker, loop_node)
        || (helpers
            && in_per_batch_helper(checker, loop_node)
            && !iterates_a_data_loader(checker, loop_node))
    {
        // Loops inside a model's own code run per layer or per chunk of one forward pass; so
        // do the loops of a helper that each batch of a caller's loop runs through.
        return None;
    }
    // `for i in range(x.shape[0])`: the rows of one batch, one forward each; `for key in
    // self.models.keys()`: the members of an ensemble (or the heads, tasks, splits of a dict).
    if iterates_rows_of_one_tensor(checker, loop_node) || iterates_a_dict(checker, loop_node) {
        return None;
    }
    runs_forward(checker, loop_node).map(|call| {
        format!(
            "this loop runs the model once per iteration (`{}`)",
            crate::source::snippet(call, 50)
        )
    })
}

/// `for batch in tqdm(dataloader)`, `enumerate(eval_data)`, or over a name bound to one: a
/// loader (or a split of the data) yields whole batches, so a loop over one is no loop over the
/// pieces of a caller's batch, whatever loop calls its function (an epoch loop calling
/// `evaluate(model, loader)` runs the model through it).
fn iterates_a_data_loader<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> bool {
    let Some(iterable) = checker.field(loop_node, FIELDS.right) else {
        return false;
    };
    let names_a_loader = |node: Node<'a>| {
        let text = checker.node_text(node);
        text.to_ascii_lowercase().contains("loader")
            || text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(crate::semantic::training::names_evaluation_data)
    };
    // The names first: facts cost more.
    names_a_loader(iterable)
        || checker
            .analysis()
            .reaching_value(iterable)
            .is_some_and(names_a_loader)
        || checker.analysis().facts(iterable).kind == Kind::Loader
}

/// Whether the function around a loop is called, at every call site in this file, once per
/// batch of a caller (`predict_in_chunks(batch)` in `for batch in loader`, or in a helper that
/// loop calls): its own loop then runs over pieces of one batch.
fn in_per_batch_helper<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> bool {
    // The loops asked about are around the walk's node, so in its function.
    checker.current_function().is_some_and(|(function, _)| {
        function.byte_range().contains(&loop_node.start_byte())
            && called_per_batch(checker, function, 0)
    })
}

fn called_per_batch<'a>(checker: &impl Position<'a>, function: Node<'a>, depth: usize) -> bool {
    let analysis = checker.analysis();
    let mut sites = super::grad::call_sites(analysis, function).peekable();
    if depth > 3 || sites.peek().is_none() {
        return false;
    }
    sites.all(|call| {
        // Up to the statement's loop or function, a few levels in real code: each step asks
        // tree-sitter for a parent, which walks down from the root, so a site nested
        // thousands deep (error recovery) is given up on, not climbed.
        let mut node = call;
        for _ in 0..64 {
            let Some(parent) = node.parent() else {
                return false;
            };
            if parent.kind_id() == KINDS.function_definition {
                return called_per_batch(checker, parent, depth + 1);
            }
            if (parent.kind_id() == KINDS.for_statement
                || parent.kind_id() == KINDS.while_statement)
                && reason(checker, parent, false).is_some()
            {
                return true;
            }
            node = parent;
        }
        false
    })
}

/// Whether a node is in a method of an `nn.Module` class.
pub fn in_module_method<'a>(checker: &impl Position<'a>, node: Node<'a>) -> bool {
    checker
        .analysis()
        .class_of(node)
        .is_some_and(|class| checker.analysis().modules().is_module_class(class))
}

/// `for i in range(x.shape[0])`, `range(x.size(0))`, or over a name assigned one of those
/// (`batch_size = inputs["input_ids"].shape[0]`): a loop over the rows of one tensor.
fn iterates_rows_of_one_tensor<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> bool {
    let Some(iterable) = checker.field(loop_node, FIELDS.right) else {
        return false;
    };
    if iterable.kind_id() != KINDS.call
        || crate::semantic::training::callee_name(iterable, checker.text()) != "range"
    {
        return false;
    }
    let Some(bound) = checker
        .field(iterable, FIELDS.arguments)
        .filter(|arguments| arguments.named_child_count() == 1)
        .and_then(|arguments| arguments.named_child(0))
    else {
        return false;
    };
    let bound = checker.analysis().bound_value(bound).unwrap_or(bound);
    let text: String = checker
        .node_text(bound)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    text.ends_with(".shape[0]") || text.ends_with(".size(0)")
}

/// `for key in d.keys()`, `for k, v in d.items()`, `for v in d.values()`.
fn iterates_a_dict<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> bool {
    checker
        .field(loop_node, FIELDS.right)
        .map(|iterable| checker.analysis().unwrapped_iterable(iterable, true))
        .is_some_and(|iterable| {
            iterable.kind_id() == KINDS.call
                && checker
                    .field(iterable, FIELDS.function)
                    .is_some_and(|callee| callee.kind_id() == KINDS.attribute)
                && matches!(
                    crate::semantic::training::callee_name(iterable, checker.text()),
                    "keys" | "values" | "items"
                )
        })
}

/// A forward call in the loop's own body (not in nested loops or functions).
fn runs_forward<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> Option<&'a str> {
    // A `while` loop that runs a model without drawing batches steps through one sequence
    // (autoregressive decoding feeds each output back in).
    if loop_node.kind_id() != KINDS.for_statement {
        return None;
    }
    runs_forward_in(checker, checker.field(loop_node, FIELDS.body)?)
}

/// A loop whose nested training loops take no batches of their own and step an optimizer
/// (`for j in range(self.updates_per_sample):` over the data this loop drew): each iteration
/// is a step, not an epoch. The reason names the nested loop; `None` when some nested loop
/// trains over a loader or draws its own batches (an epoch's pass over the data).
pub fn updates_on_each_iteration<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
) -> Option<String> {
    let range = loop_node.byte_range();
    let model = checker.model();
    let mut nested = model
        .skeleton
        .iter()
        .filter(|step| {
            step.enter
                && (step.kind == KINDS.for_statement || step.kind == KINDS.while_statement)
                && step.node.id() != loop_node.id()
                && range.contains(&step.node.start_byte())
        })
        .map(|step| step.node)
        .filter(|nested| {
            model
                .loop_facts(*nested)
                .is_some_and(|facts| facts.trains())
        })
        .peekable();
    let first = *nested.peek()?;
    // An optimizer step in the nested loop's own body: it updates the model (a profiler's
    // loop of backward passes over one input updates nothing).
    let steps_optimizer = |nested: Node<'a>| {
        model.loop_calls(nested).iter().any(|call| {
            model.call_name(*call) == Some("step")
                && model.callee(*call).is_some_and(|callee| {
                    super::training::training_step_method(
                        callee,
                        "step",
                        checker.text(),
                        checker.analysis().frameworks,
                    )
                    .is_some()
                        || checker
                            .field(callee, FIELDS.object)
                            .is_some_and(|receiver| {
                                checker.analysis().facts(receiver).kind == Kind::Optimizer
                            })
                })
        })
    };
    let repeats = |nested: Node<'a>| {
        steps_optimizer(nested)
            && nested.kind_id() == KINDS.for_statement
            && checker.field(nested, FIELDS.right).is_some_and(|iterable| {
                checker.node_text(iterable).starts_with("range(")
                    && !checker.analysis().iterates_batches(iterable)
            })
            && draws_batch(checker, nested).is_none()
    };
    if !nested.all(repeats) {
        return None;
    }
    let header = model
        .loop_facts(first)
        .map_or("", |facts| &checker.text()[facts.header.clone()]);
    Some(format!(
        "this loop runs a training step each iteration (its nested loop `{}` updates on the data it draws)",
        crate::source::snippet(header.trim_end_matches(':'), 50)
    ))
}

/// Why a loop steps through batches, for labels: `for batch in loader`, or a `while` loop
/// that draws the next batch in each iteration.
pub fn steps_through_batches<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
) -> Option<String> {
    if loop_node.kind_id() == KINDS.for_statement {
        let iterable = checker.field(loop_node, FIELDS.right)?;
        return checker.analysis().iterates_batches(iterable).then(|| {
            format!(
                "this loop runs once per batch of `{}`",
                short(checker, iterable)
            )
        });
    }
    if loop_node.kind_id() == KINDS.while_statement {
        return draws_batch(checker, loop_node).map(|draw| {
            format!(
                "this loop draws a batch each iteration (`{}`)",
                crate::source::snippet(draw, 50)
            )
        });
    }
    None
}

/// `for y in outputs` after `outputs.append(y)` in a loop over the loader earlier in the same
/// function: one iteration per batch, each with what that batch left in the list.
fn iterates_what_batches_filled<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
) -> Option<String> {
    if loop_node.kind_id() != KINDS.for_statement {
        return None;
    }
    let iterable = checker
        .analysis()
        .unwrapped_iterable(checker.field(loop_node, FIELDS.right)?, true);
    if iterable.kind_id() != KINDS.identifier {
        return None;
    }
    let name = checker.node_text(iterable);
    let analysis = checker.analysis();
    let function = analysis.enclosing_function(loop_node)?;
    analysis.earlier_appends(iterable).find_map(|append| {
        let filling = enclosing_loop(append, function)?;
        steps_through_batches(checker, filling).map(|_| {
            let loader = checker.field(filling, FIELDS.right).map_or_else(
                || "the loader".to_owned(),
                |l| format!("`{}`", short(checker, l)),
            );
            format!(
                "this loop runs once per batch: `{name}` holds one item from each batch of {loader}"
            )
        })
    })
}

/// The innermost loop around a node inside `function`.
fn enclosing_loop<'a>(node: Node<'a>, function: Node<'a>) -> Option<Node<'a>> {
    let mut node = node;
    for _ in 0..64 {
        node = node.parent()?;
        if node == function {
            return None;
        }
        if node.kind_id() == KINDS.for_statement || node.kind_id() == KINDS.while_statement {
            return Some(node);
        }
    }
    None
}

/// A call in a `while` loop's own body that draws the next batch: `next(train_iter)`,
/// `data_loader.next()`, `feed.get_next_batch(i, data)`. Such a loop steps through a loader as
/// `for batch in loader` does.
fn draws_batch<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> Option<&'a str> {
    let body = checker.field(loop_node, FIELDS.body)?;
    let mut found = None;
    walk(body, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if found.is_some() || !node.is_named() {
            return Descend::No;
        }
        let kind = node.kind_id();
        if kind == KINDS.for_statement
            || kind == KINDS.while_statement
            || kind == KINDS.function_definition
            || kind == KINDS.lambda
            || kind == KINDS.class_definition
        {
            return Descend::No;
        }
        if kind == KINDS.call && is_batch_draw(checker, node) {
            found = Some(checker.node_text(node));
            return Descend::No;
        }
        Descend::Yes
    });
    found.map(first_line)
}

fn is_batch_draw<'a>(checker: &impl Position<'a>, call: Node<'a>) -> bool {
    let Some(callee) = checker.field(call, FIELDS.function) else {
        return false;
    };
    let analysis = checker.analysis();
    if callee.kind_id() == KINDS.identifier {
        // `next(train_iter)`
        return checker.node_text(callee) == "next"
            && checker
                .field(call, FIELDS.arguments)
                .and_then(|arguments| arguments.named_child(0))
                .is_some_and(|source| analysis.iterates_batches(source));
    }
    let (Some(object), Some(method)) = (
        checker.field(callee, FIELDS.object),
        checker.field(callee, FIELDS.attribute),
    ) else {
        return false;
    };
    match checker.node_text(method) {
        // `data_loader.next()`, a prefetcher's.
        "next" | "__next__" => analysis.iterates_batches(object),
        method => names_batch_draw(method),
    }
}

/// `get_next_batch`, `next_batch`, `load_batch`, `fetch_batch`: a method named for handing
/// out the next batch.
fn names_batch_draw(method: &str) -> bool {
    let Some(verb) = method
        .strip_suffix("_batch")
        .or_else(|| method.strip_suffix("_batches"))
    else {
        return false;
    };
    matches!(
        verb.trim_start_matches('_'),
        "next" | "get_next" | "get" | "load" | "fetch" | "sample" | "read"
    )
}

fn runs_forward_in<'a>(checker: &impl Position<'a>, body: Node<'a>) -> Option<&'a str> {
    let mut found = None;
    walk(body, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if found.is_some() || !node.is_named() {
            return Descend::No;
        }
        let kind = node.kind_id();
        if kind == KINDS.for_statement {
            // A nested loop's iterable runs once per iteration of this one:
            // `for name, out in model(x).items()`.
            if let Some(iterable) = checker.field(node, FIELDS.right) {
                found = runs_forward_in(checker, iterable);
            }
            return Descend::No;
        }
        if kind == KINDS.while_statement
            || kind == KINDS.function_definition
            || kind == KINDS.lambda
            || kind == KINDS.class_definition
        {
            return Descend::No;
        }
        if kind == KINDS.call
            && (forward_call(checker, node).is_some()
                || calls_model_helper(checker, node)
                || calls_model_method(checker, node))
        {
            found = Some(checker.node_text(node));
            return Descend::No;
        }
        Descend::Yes
    });
    found.map(first_line)
}

/// `vae.sample_latent(x)`: a method of a model given inputs, which computes with the model
/// whether or not it records a graph.
fn calls_model_method<'a>(checker: &impl Position<'a>, call: Node<'a>) -> bool {
    let Some(callee) = checker.field(call, FIELDS.function) else {
        return false;
    };
    callee.kind_id() == KINDS.attribute
        && checker
            .field(callee, FIELDS.object)
            .is_some_and(|object| checker.analysis().facts(object).kind == Kind::Module)
        && checker
            .field(callee, FIELDS.attribute)
            .is_some_and(|method| !is_non_forward_method(checker.node_text(method)))
        && checker
            .field(call, FIELDS.arguments)
            .is_some_and(|arguments| arguments.named_child_count() > 0)
}

/// `forecast_error(model, x)`: a call of one of the file's functions that runs a model.
fn calls_model_helper<'a>(checker: &impl Position<'a>, call: Node<'a>) -> bool {
    checker.analysis().calls_forward_helper(call, 0)
        || checker.analysis().calls_own_forward_method(call)
}

pub fn first_line(text: &str) -> &str {
    match memchr::memchr(b'\n', text.as_bytes()) {
        Some(end) => {
            let line = &text[..end];
            line.strip_suffix('\r').unwrap_or(line)
        }
        None => text,
    }
}

/// The first of the loops that runs once per batch, with the reason.
pub fn first_per_batch<'a>(
    checker: &impl Position<'a>,
    loops: &[Node<'a>],
) -> Option<(Node<'a>, String)> {
    loops
        .iter()
        .find_map(|loop_node| per_batch_reason(checker, *loop_node).map(|why| (*loop_node, why)))
}

/// The header of a loop (`for x in loader`), for labels.
pub fn loop_header<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> TextRange {
    checker
        .model()
        .loop_facts(loop_node)
        .map_or(loop_node.byte_range(), |facts| facts.header.clone())
}

/// Whether the function holding the current node runs once per batch when it is not in a
/// loop: a framework per-batch hook (`training_step`) or a function that is itself a step.
pub fn per_batch_function<'a>(checker: &impl Position<'a>) -> Option<(TextRange, String)> {
    let (function, facts) = checker.current_function()?;
    if checker.analysis().is_per_batch_hook(function) {
        return Some((
            facts.header.clone(),
            format!("`{}` runs once per batch", facts.name),
        ));
    }
    // A model's own methods that call `.backward()` (reversible layers recomputing their
    // activations) are part of one backward pass, not a training step.
    if let Some(call) = &facts.training_call_outside_loops
        && !in_module_method(
            checker,
            checker.field(function, FIELDS.body).unwrap_or(function),
        )
    {
        return Some((
            facts.header.clone(),
            format!(
                "`{}` is a training step (it calls `{}`)",
                facts.name,
                crate::source::snippet(&checker.text()[call.clone()], 50)
            ),
        ));
    }
    None
}

/// A model method named for producing outputs step by step: `generate`, `generate_*`,
/// `sample`.
pub fn names_generation(name: &str) -> bool {
    name.starts_with("generate") || name == "sample"
}

/// `for _ in range(steps): x, h = self(x, h)` in a model's own `generate()` or `sample()`: a
/// decoding loop users run to produce outputs, not part of a training forward. Only a method
/// the model's `forward` does not call itself (a VAE's `sample(mu, logvar)` runs in training),
/// and by those names alone: `sample_latent()` and the like are steps a library's own
/// generation loop calls, under its `no_grad`.
pub fn in_generation_loop<'a>(checker: &impl Position<'a>, node: Node<'a>) -> bool {
    let Some((method, facts)) = checker.current_function() else {
        return false;
    };
    let name = facts.name.as_str();
    if !names_generation(name) || checker.enclosing_loops().is_empty() {
        return false;
    }
    let Some(class) = checker.analysis().class_of(node) else {
        return false;
    };
    let Some(forward) = checker.analysis().local_method(class, "forward") else {
        return true;
    };
    !checker
        .model()
        .calls_by_name
        .get(name)
        .into_iter()
        .flatten()
        .any(|site| {
            forward.byte_range().contains(&site.start_byte())
                && !method.byte_range().contains(&site.start_byte())
        })
}

/// The text of a node, shortened to its first line.
pub fn short<'a>(checker: &impl Position<'a>, node: Node<'_>) -> String {
    crate::source::snippet(text(node, checker.text()), 50)
}

/// The canonical name of a method of one of this file's classes (see `FactBase::canonical`).
pub fn own_method_name<'a>(checker: &impl Position<'a>, class: usize, method: &str) -> String {
    let module = checker.analysis().module_path().unwrap_or("");
    format!("{module}.{}.{method}", checker.model().classes[class].name)
}

impl<'a> super::analysis::Analysis<'a> {
    /// The parameters that receive the batch on the accelerator when `function` is a method a
    /// framework calls once per batch, and whether it is known by a base of its class (see
    /// `Frameworks::batch_parameters`): by its name, or by its name and a base of its class
    /// (`update` of a `torchmetrics.Metric`). The bases are the class's own, as imported, and
    /// those of the file's classes it derives from.
    pub fn batch_hook_parameters(&self, function: Node<'a>) -> Option<(&'a [String], bool)> {
        let facts = self.model.function_facts(function)?;
        let frameworks = self.frameworks;
        // The name first: resolving the bases costs more.
        if !frameworks.names_per_batch_hook(&facts.name) {
            return None;
        }
        let mut bases = Vec::new();
        if let Some(class) = facts.class {
            self.qualified_bases(class, &mut bases, 0);
        }
        frameworks.batch_parameters(&facts.name, &bases)
    }

    /// Whether `function` is a method a framework calls once per batch.
    pub fn is_per_batch_hook(&self, function: Node<'a>) -> bool {
        self.batch_hook_parameters(function).is_some()
    }

    pub(super) fn qualified_bases(&self, class: usize, bases: &mut Vec<String>, depth: usize) {
        if depth > 8 {
            return;
        }
        for base in &self.model.classes[class].bases {
            let name = self.text(*base);
            if let Some(local) = self.model.classes.iter().position(|c| c.name == name) {
                if local != class {
                    self.qualified_bases(local, bases, depth + 1);
                }
            } else if let Some(qualified) = self.qualified_name(*base) {
                bases.push(qualified);
            }
        }
    }
}
