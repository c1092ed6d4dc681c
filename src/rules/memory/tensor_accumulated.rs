//! TL102 `tensor-accumulated`; documentation and examples in
//! `rules/memory/tensor-accumulated.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::{
    How, accumulation, backpropagated_in_loop, carrying_loops, first_per_batch, loop_header,
    per_batch_function, short,
};
use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix, Severity};
use crate::parse::{FIELDS, KINDS, mentions_word};
use crate::rule_meta::RuleMeta;
use crate::rules::{Check, edits};
use crate::semantic::values::{Kind, Tri};

pub struct TensorAccumulated;

impl Check for TensorAccumulated {
    fn kinds(&self) -> &'static [&'static str] {
        &["augmented_assignment", "assignment", "call"]
    }

    /// The calls here that pass a graph-carrying tensor to a method of the project that keeps
    /// it: what this rule's findings on the keeping line (in whichever file) wait for.
    fn facts(&self) -> Option<crate::rules::RecordFacts> {
        Some(super::record_graph_arguments_at)
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        let start = out.len();
        self.check_grad_dependent(rule, node, checker, out);
        // Graphs are only recorded if the function runs with grad: its callers may tell.
        for diagnostic in &mut out[start..] {
            diagnostic.assumption = checker.caller_assumption(node);
        }
        // What the line keeps already carries a graph here: reported as it is.
        if out.len() == start {
            check_stored_argument(rule, node, checker, out);
        }
    }
}

/// `self.sum += val * n` in a method: a finding if some caller in the run passes a
/// graph-carrying tensor as `val` on every step (kept or dropped once every file is in).
fn check_stored_argument<'a>(
    rule: &Arc<RuleMeta>,
    node: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(store) = checker.analysis.store_in_method(node) else {
        return;
    };
    if !store.accumulates || !store.keeps.graph || in_module_forward(checker) {
        return;
    }
    let Some(assumption) = super::stored_argument_assumption(checker, &store, false) else {
        return;
    };
    let crate::semantic::cross_file::Assumption::GraphArgument { name, .. } = &assumption else {
        return;
    };
    let message = rule
        .message
        .replace("{value}", name)
        .replace("{container}", &short(checker, store.target))
        .replace(
            "{growth}",
            "a caller passes it a tensor with its graph on every step ({caller}), and each one is kept",
        );
    out.push(Diagnostic::new(rule, message, node.byte_range()).assuming(Some(assumption)));
}

impl TensorAccumulated {
    fn check_grad_dependent<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        // State kept on a module during forward is TL103's; asked first, as a model file's
        // forwards hold most of its statements.
        if in_module_forward(checker) {
            return;
        }
        let found = accumulation(checker, node);
        if found.is_none() && node.kind_id() != KINDS.call {
            return;
        }
        if let Some(found) = found {
            check_accumulation(
                rule,
                node,
                found.container,
                found.value,
                found.how,
                checker,
                out,
            );
            return;
        }
        if node.kind_id() == KINDS.call {
            check_helper_call(rule, node, checker, out);
        }
    }
}

fn check_accumulation<'a>(
    rule: &Arc<RuleMeta>,
    statement: Node<'a>,
    container: Node<'a>,
    value: Node<'a>,
    how: How,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    // Outside loops only `self.x` containers of per-batch functions can accumulate; ask that
    // before any value facts.
    if checker.enclosing_loops().is_empty() && !super::outlives_function(checker, container) {
        return;
    }
    // Under `no_grad` the accumulating operation records nothing (`total += loss` makes a
    // tensor without a graph); only a stored object keeps the graph it was made with.
    if checker.grad_mode(statement) == crate::checker::GradMode::Disabled {
        let stores_object = matches!(how, How::Append | How::Store)
            && matches!(value.kind_id(), k if k == KINDS.identifier || k == KINDS.attribute || k == KINDS.subscript);
        if !stores_object {
            return;
        }
    }
    let analysis = &checker.analysis;
    let facts = analysis.facts(value);
    // `losses.append(loss_fn(x))` then `losses[-1].backward()`: what goes in is backpropagated.
    let backpropagated_element = how == How::Append
        && checker.enclosing_loops().first().is_some_and(|l| {
            checker
                .analysis
                .backpropagated_in(*l, checker.node_text(container))
        });
    if facts.graph != Tri::Yes && !backpropagated_element && !backpropagated_in_loop(checker, value)
    {
        return;
    }
    let container_facts = analysis.facts(container);
    if how == How::Store && container_facts.kind == Kind::Tensor {
        // Writing features into a preallocated tensor bank is TL103's.
        return;
    }
    // `total = total + loss / k; ...; total.backward()`: gradient accumulation by design.
    if backpropagated(checker, container) {
        return;
    }
    let loops = carrying_loops(checker, container, statement);
    // A rolling window (`recent.pop(0)`) holds a fixed number of graphs: TL103's.
    if how == How::Append
        && loops
            .iter()
            .any(|l| super::bounded(checker, checker.node_text(container), *l))
    {
        return;
    }
    // Reset every few steps (`running_loss = 0` after each optimizer step): bounded.
    if loops
        .first()
        .is_some_and(|l| super::reset_in_loop(checker, *l, checker.node_text(container)))
    {
        return;
    }
    let evidence = match first_per_batch(checker, &loops) {
        Some((loop_node, why)) => Some((loop_header(checker, loop_node), why)),
        None if loops.is_empty() && super::outlives_function(checker, container) => {
            per_batch_function(checker)
        }
        None => None,
    };
    let Some((label_range, why)) = evidence else {
        return;
    };
    // The loop trains, or repeats updates in a nested loop on what it drew (a step loop).
    let backward_each_step = loops.iter().any(|l| {
        checker.analysis.loop_trains(*l)
            || checker
                .model
                .loop_facts(*l)
                .is_some_and(|facts| facts.nested_training)
    }) || (loops.is_empty()
        && checker
            .current_function()
            .is_some_and(|(_, f)| f.contains_training || f.name.contains("training_step")));
    let growth = if backward_each_step {
        "its graph's nodes (host memory) grow every step".to_owned()
    } else {
        // On the GPU only where the file says so: CPU-only code holds host memory.
        format!(
            "no backward frees its activations, so the memory of {} grows every step",
            super::device_name(checker)
        )
    };
    let message = rule
        .message
        .replace("{value}", &short(checker, value))
        .replace("{container}", &short(checker, container))
        .replace("{growth}", &growth);
    let mut diagnostic =
        Diagnostic::new(rule, message, statement.byte_range()).with_label(label_range, why);
    if !backward_each_step {
        diagnostic.severity = Severity::Error;
    }
    diagnostic.fix = keep_no_graph(checker, container, value, how);
    out.push(diagnostic);
}

/// The fix: keep a number, `loss.item()`, or where the container is later stacked into a
/// tensor, a copy without the graph, `loss.detach().clone()` (not a bare `.detach()`: a
/// reduction's 0-dim result can sit on a batch-sized storage that a detached view keeps). A
/// list or tuple stored whole (`history.extend([rec, kl])`) gets it on each item that holds a
/// tensor; an iterable that is not a literal (`extend(losses)`) gets none: its items are out of
/// reach. Unsafe: the kept value's type changes, and a later backward through it would break.
fn keep_no_graph<'a>(
    checker: &Checker<'a>,
    container: Node<'a>,
    value: Node<'a>,
    how: How,
) -> Option<Fix> {
    if !matches!(how, How::AugmentedAdd | How::Rebind | How::Append) {
        return None;
    }
    let items = match edits::literal_items(value) {
        Some(items) => items
            .into_iter()
            .filter(|item| {
                let facts = checker.analysis.facts(*item);
                facts.kind == Kind::Tensor || facts.graph == Tri::Yes
            })
            .collect(),
        None if how == How::Append && edits::extended_by(checker, value) => return None,
        None => vec![value],
    };
    if items.is_empty() {
        return None;
    }
    let stacked = how == How::Append && stacked_later(checker, container);
    let method = if stacked {
        ".detach().clone()"
    } else {
        ".item()"
    };
    let edits: Vec<Edit> = items
        .into_iter()
        .map(|item| {
            let detached = edits::method_called(checker, item) == Some("detach");
            let method = if stacked && detached {
                ".clone()"
            } else {
                method
            };
            edits::call_method(checker, item, method)
        })
        .collect();
    Some(edits::keep_instead(edits, || {
        format!("Keep `{method}` of each item instead")
    }))
}

/// Whether the function (or module) the container is filled in hands it to a tensor op that
/// joins its items (`torch.stack(losses)`, `torch.cat(outputs)`): its items must stay tensors.
fn stacked_later(checker: &Checker<'_>, container: Node<'_>) -> bool {
    const JOINS: [&str; 5] = ["stack", "cat", "concat", "vstack", "hstack"];
    let name = checker.node_text(container);
    let scope = checker
        .current_function()
        .map_or_else(|| checker.tree.root_node(), |(function, _)| function);
    let mut cursor = scope.walk();
    let mut stack = vec![scope];
    while let Some(node) = stack.pop() {
        if node.kind_id() == KINDS.call
            && let Some(function) = node.child_by_field_id(FIELDS.function)
            && JOINS.contains(&checker.node_text(function).rsplit('.').next().unwrap_or(""))
            && let Some(first) = node
                .child_by_field_id(FIELDS.arguments)
                .and_then(|arguments| arguments.named_child(0))
            && checker.node_text(first) == name
        {
            return true;
        }
        stack.extend(node.named_children(&mut cursor));
    }
    false
}

/// `meter.update(loss)` where the file's own `update` stores its argument on `self`: the
/// finding goes on the storing line of the helper.
fn check_helper_call<'a>(
    rule: &Arc<RuleMeta>,
    call: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(callee) = checker.callee(call) else {
        return;
    };
    if callee.kind_id() != KINDS.attribute {
        return;
    }
    // The attribute's name, as the model recorded it for `obj.m(...)`.
    let Some(method) = checker.call_name(call) else {
        return;
    };
    // Only methods of this file's classes can be followed; ask that before any value facts.
    let storing = checker.storing_methods.get_or_init(|| {
        checker
            .model
            .classes
            .iter()
            .flat_map(|class| class.methods.iter())
            .filter(|(_, helper)| {
                let body = checker.node_text(*helper);
                let body = body.as_bytes();
                super::SELF_DOT.find(body).is_some()
                    && (super::PLUS_EQUALS.find(body).is_some()
                        || super::DOT_APPEND.find(body).is_some())
            })
            .map(|(name, _)| (*name).to_owned())
            .collect()
    });
    if !storing.contains(method) {
        return;
    }
    let Some(arguments) = checker.arguments(call) else {
        return;
    };
    let mut cursor = arguments.walk();
    let arguments: Vec<Node<'a>> = arguments.named_children(&mut cursor).collect();
    let graph_argument = arguments.iter().position(|argument| {
        argument.kind_id() != KINDS.keyword_argument
            && checker.analysis.facts(*argument).graph == Tri::Yes
    });
    let Some(argument_index) = graph_argument else {
        return;
    };
    // Only in code that runs per batch.
    let loops = checker.enclosing_loops();
    let per_batch = first_per_batch(checker, &loops);
    if per_batch.is_none() && per_batch_function(checker).is_none() {
        return;
    }
    for class in &checker.model.classes {
        let Some((_, helper)) = class.methods.iter().find(|(name, _)| *name == method) else {
            continue;
        };
        // Parameter 0 is `self`.
        let Some(parameter) = parameter_name(checker, *helper, argument_index + 1) else {
            continue;
        };
        if let Some(storing) = storing_statement(checker, *helper, parameter) {
            let message = rule
                .message
                .replace("{value}", parameter)
                .replace("{container}", &short(checker, storing.1))
                .replace(
                    "{growth}",
                    "the caller passes a tensor with its graph every step",
                );
            let mut diagnostic = Diagnostic::new(rule, message, storing.0.byte_range()).with_label(
                call.byte_range(),
                "called here with a graph-carrying tensor",
            );
            if let Some((loop_node, why)) = &per_batch {
                diagnostic = diagnostic.with_label(loop_header(checker, *loop_node), why.clone());
            }
            out.push(diagnostic);
            return;
        }
    }
}

fn parameter_name<'a>(checker: &Checker<'a>, function: Node<'a>, index: usize) -> Option<&'a str> {
    let parameters = checker.field(function, FIELDS.parameters)?;
    let parameter = parameters.named_child(index as u32)?;
    let name = if parameter.kind_id() == KINDS.identifier {
        parameter
    } else {
        checker.field(parameter, FIELDS.name)?
    };
    Some(checker.node_text(name))
}

/// In `helper`, a statement that adds `parameter` (or an expression of it) to a `self`
/// attribute: `self.sum += val * n`, `self.values.append(val)`. Returns it and the container.
fn storing_statement<'a>(
    checker: &Checker<'a>,
    helper: Node<'a>,
    parameter: &str,
) -> Option<(Node<'a>, Node<'a>)> {
    let body = checker.field(helper, FIELDS.body)?;
    let mut found = None;
    crate::parse::walk(body, |visit| {
        let crate::parse::Visit::Enter(node) = visit else {
            return crate::parse::Descend::Yes;
        };
        if found.is_some() {
            return crate::parse::Descend::No;
        }
        if let Some(accumulated) = accumulation(checker, node)
            && checker
                .node_text(accumulated.container)
                .starts_with("self.")
            && mentions_name(checker, accumulated.value, parameter)
            && !detaches(checker, accumulated.value)
        {
            found = Some((node, accumulated.container));
            return crate::parse::Descend::No;
        }
        crate::parse::Descend::Yes
    });
    found
}

fn mentions_name<'a>(checker: &Checker<'a>, node: Node<'a>, name: &str) -> bool {
    mentions_word(checker.node_text(node), name)
}

fn detaches<'a>(checker: &Checker<'a>, node: Node<'a>) -> bool {
    let text = checker.node_text(node);
    [".item()", ".detach()", "float(", ".tolist()", "int("]
        .iter()
        .any(|d| text.contains(d))
}

/// Whether `container.backward()` is called in the same function: the accumulated loss is
/// backpropagated on purpose (gradient accumulation).
fn backpropagated<'a>(checker: &Checker<'a>, container: Node<'a>) -> bool {
    let region = checker
        .analysis
        .enclosing_function(container)
        .map_or(checker.text(), |f| checker.node_text(f));
    let name = checker.node_text(container);
    // The container itself, not an element (`losses[-1].backward()` is one step's loss), by
    // any backward of the framework table: `total.backward()`, `scaler.scale(total).backward()`,
    // `accelerator.backward(total)`.
    checker
        .analysis
        .frameworks
        .backward_methods()
        .iter()
        .any(|method| {
            region.contains(&format!("{name}.{method}("))
                || region.contains(&format!("({name}).{method}("))
                || region.contains(&format!(".{method}({name})"))
                || region.contains(&format!(".{method}({name},"))
        })
}

pub(crate) fn in_module_forward<'a>(checker: &Checker<'a>) -> bool {
    let Some((function, facts)) = checker.current_function() else {
        return false;
    };
    facts.name == "forward"
        && checker.function_memo("module-forward", || {
            checker
                .analysis
                .class_of(checker.field(function, FIELDS.body).unwrap_or(function))
                .is_some_and(|class| checker.analysis.modules().is_module_class(class))
        })
}
