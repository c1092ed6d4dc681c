//! TL104 `gpu-collection`; documentation and examples in `rules/memory/gpu-collection.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::tensor_accumulated::in_module_forward;
use super::{
    How, accumulation, backpropagated_in_loop, carrying_loops, first_per_batch, loop_header,
    per_batch_function, short,
};
use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::parse::{FIELDS, KINDS, mentions_word};
use crate::rule_meta::RuleMeta;
use crate::rules::{Check, edits};
use crate::semantic::cross_file::Assumption;
use crate::semantic::grad::GradMode;
use crate::semantic::values::{Kind, Tri};

pub struct GpuCollection;

impl Check for GpuCollection {
    fn kinds(&self) -> &'static [&'static str] {
        &[
            "call",
            "assignment",
            "augmented_assignment",
            "list_comprehension",
        ]
    }

    /// The calls here that pass a device tensor on each batch to a method of the project that
    /// keeps it: what this rule's findings on the keeping line (in whichever file) wait for.
    fn facts(&self) -> Option<crate::rules::RecordFacts> {
        Some(super::record_graph_arguments_at)
    }

    fn check<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        let start = out.len();
        self.check_node(rule, call, checker, out);
        // In a file that names no accelerator, the device is the run's: the finding holds if
        // another file of it names one.
        if out.len() > start && checker.analysis.device_assumed() {
            for diagnostic in &mut out[start..] {
                if diagnostic.assumption.is_none() {
                    diagnostic.assumption = Some(Assumption::RunNamesAccelerator);
                }
            }
        }
    }
}

impl GpuCollection {
    fn check_node<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        if call.kind_id() == KINDS.list_comprehension {
            check_comprehension(rule, call, checker, out);
            return;
        }
        // A module's own state during forward is TL103's when it keeps a graph; asked first,
        // as a model file's forwards hold most of its statements.
        if in_module_forward(checker) {
            check_forward_collection(rule, call, checker, out);
            return;
        }
        let start = out.len();
        self.check_collection(rule, call, checker, out);
        if out.len() == start {
            check_stored_argument(rule, call, checker, out);
        }
    }
}

/// `self.max_indices.append(indices)` in a module's `forward`: a list on the module that grows
/// by a device tensor on every forward pass, so once per batch for as long as the model lives,
/// unless `forward` starts it afresh (`self.max_indices = []`).
fn check_forward_collection<'a>(
    rule: &Arc<RuleMeta>,
    call: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(found) = accumulation(checker, call) else {
        return;
    };
    if found.how != How::Append || found.container.kind_id() != KINDS.attribute {
        return;
    }
    let container = checker.node_text(found.container);
    if !container.starts_with("self.") {
        return;
    }
    let facts = checker.analysis.facts(found.value);
    // With a graph it is TL103's.
    if facts.kind != Kind::Tensor || facts.device != Tri::Yes || facts.graph == Tri::Yes {
        return;
    }
    let Some((function, function_facts)) = checker.current_function() else {
        return;
    };
    if super::reset_in_loop(checker, function, container) {
        return;
    }
    let message = rule
        .message
        .replace("{value}", &short(checker, found.value))
        .replace("{container}", container)
        .replace(
            "{span}",
            "from every forward pass until something clears it",
        )
        .replace("{device}", super::device_name(checker));
    let mut diagnostic = Diagnostic::new(rule, message, call.byte_range()).with_label(
        function_facts.header.clone(),
        "`forward` runs once per batch, and the module outlives every batch".to_owned(),
    );
    diagnostic.fix = move_off_device(checker, found.value, |_| true);
    out.push(diagnostic);
}

/// `[model(x.cuda()) for x in loader]`: a list of every batch's output, like `append` in a
/// loop over the loader.
fn check_comprehension<'a>(
    rule: &Arc<RuleMeta>,
    comprehension: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let mut cursor = comprehension.walk();
    let clauses: Vec<Node<'a>> = comprehension
        .named_children(&mut cursor)
        .filter(|child| child.kind_id() == KINDS.for_in_clause)
        .collect();
    // Over batches: the loader is the outermost clause's iterable.
    let Some(iterable) = clauses
        .first()
        .and_then(|clause| checker.field(*clause, FIELDS.right))
    else {
        return;
    };
    // Named like batches, but pieces of one tensor (`chunks = x.split(n)`) are not a loader.
    if !checker.analysis.iterates_batches(iterable)
        || matches!(
            checker.analysis.facts(iterable).kind,
            Kind::Tensor | Kind::Container | Kind::Numpy
        )
    {
        return;
    }
    let Some(element) = checker.field(comprehension, FIELDS.body) else {
        return;
    };
    // A batch's outputs as a tensor, or as a list or tuple of them (`run_batch(batch)`
    // returning `[mean, std]`).
    let facts = checker.analysis.facts(element);
    if !matches!(facts.kind, Kind::Tensor | Kind::Container)
        || facts.device != Tri::Yes
        || facts.graph == Tri::Yes
    {
        return;
    }
    // The list by the name it is assigned to (`post_means = [...]`): a comprehension written
    // over several lines shortens to its bracket.
    let container = comprehension
        .parent()
        .filter(|parent| parent.kind_id() == KINDS.assignment)
        .and_then(|assignment| checker.field(assignment, FIELDS.left))
        .unwrap_or(comprehension);
    let message = rule
        .message
        .replace("{value}", &short(checker, element))
        .replace("{container}", &short(checker, container))
        .replace("{span}", "from every batch until the list is dropped")
        .replace("{device}", super::device_name(checker));
    let label = format!(
        "this comprehension runs once per batch of `{}`",
        short(checker, iterable)
    );
    // At what it keeps: the element, which is where a fix goes (`.cpu()`).
    let mut diagnostic = Diagnostic::new(rule, message, element.byte_range())
        .with_label(clauses[0].byte_range(), label);
    diagnostic.fix = move_off_device(checker, element, |_| true);
    out.push(diagnostic);
}

/// `self.preds.append(preds)` in a method with no loop of its own (a metric's `update`): a
/// finding if some caller in the run passes a device tensor once per batch (kept or dropped
/// once every file is in).
fn check_stored_argument<'a>(
    rule: &Arc<RuleMeta>,
    node: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(store) = checker.analysis.store_in_method(node) else {
        return;
    };
    if !store.accumulates || !store.keeps.device {
        return;
    }
    // A loop of the method's own decides unless each of its iterations keeps to a slot of
    // its own (`for name in self.metrics: self.losses[name].append(...)`): then each slot
    // grows once per call.
    if !checker
        .enclosing_loops()
        .into_iter()
        .all(|loop_node| keyed_by_loop_variable(checker, store.target, loop_node))
    {
        return;
    }
    // A running total (`self.total += value`) keeps one tensor, not one per call.
    if node.kind_id() == KINDS.augmented_assignment {
        return;
    }
    let Some(assumption) = super::stored_argument_assumption(checker, &store, true) else {
        return;
    };
    let Assumption::GraphArgument { name, .. } = &assumption else {
        return;
    };
    let message = rule
        .message
        .replace("{value}", &kept_value(checker, node, name))
        .replace("{container}", &short(checker, store.target))
        .replace(
            "{span}",
            "from every call: a caller passes it a device tensor once per batch ({caller})",
        )
        .replace("{device}", "the model's device");
    out.push(Diagnostic::new(rule, message, node.byte_range()).assuming(Some(assumption)));
}

/// What a per-call store keeps, named for the message: the parameter, or what the line made of
/// it (`spatial_loss` made from `prediction`).
fn kept_value<'a>(checker: &Checker<'a>, statement: Node<'a>, parameter: &str) -> String {
    let value = if statement.kind_id() == KINDS.call {
        checker
            .arguments(statement)
            .and_then(|arguments| arguments.named_child(0))
    } else {
        checker.field(statement, FIELDS.right)
    };
    match value.map(|value| short(checker, value)) {
        Some(text) if text != parameter => format!("{text}` made from `{parameter}"),
        _ => parameter.to_owned(),
    }
}

/// Whether `target` is a slot indexed by the variable `loop_node` binds (`self.losses[name]`
/// in `for name in self.metrics`).
fn keyed_by_loop_variable<'a>(
    checker: &Checker<'a>,
    target: Node<'a>,
    loop_node: Node<'a>,
) -> bool {
    let (Some(index), Some(variable)) = (
        checker
            .field(target, FIELDS.index)
            .filter(|_| target.kind_id() == KINDS.subscript),
        checker.field(loop_node, FIELDS.left),
    ) else {
        return false;
    };
    index.kind_id() == KINDS.identifier
        && variable.kind_id() == KINDS.identifier
        && checker.node_text(index) == checker.node_text(variable)
}

/// `slot = f(slot)`, or `d[k] = f(v)` in `for k, v in d.items()`: an assignment that replaces
/// a slot of the container (with a copy of its value moved or cast), not one that adds.
fn replaces_itself<'a>(checker: &Checker<'a>, assignment: Node<'a>) -> bool {
    let (Some(left), Some(right)) = (
        checker.field(assignment, FIELDS.left),
        checker.field(assignment, FIELDS.right),
    ) else {
        return false;
    };
    let target = checker.node_text(left);
    let value = checker.node_text(right);
    if memchr::memmem::find(value.as_bytes(), target.as_bytes()).is_some() {
        return true;
    }
    // The key is a loop variable over the container itself.
    let (Some(container), Some(key)) = (
        checker.field(left, FIELDS.value),
        checker.field(left, FIELDS.index),
    ) else {
        return false;
    };
    let container = checker.node_text(container);
    checker.enclosing_loops().into_iter().any(|loop_node| {
        loop_node.kind_id() == KINDS.for_statement
            && checker.field(loop_node, FIELDS.left).is_some_and(|target| {
                mentions_word(checker.node_text(target), checker.node_text(key))
            })
            && checker
                .field(loop_node, FIELDS.right)
                .is_some_and(|iterable| {
                    let iterable = checker.node_text(iterable);
                    iterable == container
                        || iterable.starts_with(&format!("{container}."))
                        || iterable.contains(&format!("len({container})"))
                })
    })
}

impl GpuCollection {
    fn check_collection<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(found) = accumulation(checker, call) else {
            return;
        };
        // `features[name] = out` under a key that changes every iteration grows the dict too;
        // `batch[key] = batch[key].to(device)` replaces a slot with a copy of itself.
        if !matches!(found.how, How::Append | How::Concat | How::Store) {
            return;
        }
        if found.how == How::Store && replaces_itself(checker, call) {
            return;
        }
        if checker.enclosing_loops().is_empty() && found.container.kind_id() != KINDS.attribute {
            return;
        }
        // Device tensors without a graph (a graph-carrying value is TL102's), alone or in a
        // tuple or list stored whole: `stats.append((correct, pred[:, 4], labels))`.
        // A value the loop backpropagates carries its graph, whatever its facts could tell.
        // What `torch.cat` takes is a tensor, even where its facts do not say so (an item of
        // a list of the model's outputs).
        // Library code that takes or keeps a device runs there: a tensor of unknown placement
        // it keeps is the device's.
        let keeps_a_device = std::cell::OnceCell::new();
        let on_its_device = |device: Tri| {
            device == Tri::Yes
                || device == Tri::Unknown
                    && *keeps_a_device.get_or_init(|| {
                        checker
                            .current_function()
                            .is_some_and(|(function, _)| checker.analysis.keeps_a_device(function))
                    })
        };
        let joined_later = std::cell::OnceCell::new();
        let kept_on_device = |value: Node<'a>| {
            let facts = checker.analysis.facts(value);
            // What `torch.cat` takes is a tensor, whatever its facts say: the item of a
            // concatenation, or of a list the function joins after its loop.
            let tensor = facts.kind == Kind::Tensor
                || facts.kind == Kind::Unknown
                    && (found.how == How::Concat
                        || found.how == How::Append
                            && *joined_later.get_or_init(|| {
                                checker.current_function().is_some_and(|(function, _)| {
                                    checker.analysis.joined_with_torch(
                                        checker.node_text(found.container),
                                        function.byte_range(),
                                    )
                                })
                            }));
            // A tuple of device tensors a function returns (`(out, yb[0].detach())`).
            let tuple = facts.kind == Kind::Container && found.how == How::Append;
            (tensor && on_its_device(facts.device) || tuple && facts.device == Tri::Yes)
                && facts.graph != Tri::Yes
                && !backpropagated_in_loop(checker, value)
        };
        let stored = found.value;
        let on_device = if stored.kind_id() == KINDS.tuple || stored.kind_id() == KINDS.list {
            let mut cursor = stored.walk();
            let items: Vec<Node<'a>> = stored.named_children(&mut cursor).collect();
            let graph = items
                .iter()
                .any(|item| checker.analysis.facts(*item).graph == Tri::Yes);
            !graph && items.into_iter().any(kept_on_device)
        } else {
            kept_on_device(stored)
        };
        if !on_device {
            return;
        }
        if found.container.kind_id() != KINDS.identifier
            && found.container.kind_id() != KINDS.attribute
        {
            return;
        }
        let loops = carrying_loops(checker, found.container, call);
        // Flushed every few batches: bounded.
        if loops
            .first()
            .is_some_and(|l| super::reset_in_loop(checker, *l, checker.node_text(found.container)))
        {
            return;
        }
        let evidence = match first_per_batch(checker, &loops) {
            Some((loop_node, why)) => Some((loop_header(checker, loop_node), why)),
            None if loops.is_empty() && found.container.kind_id() == KINDS.attribute => {
                per_batch_function(checker)
            }
            None => None,
        };
        let Some((label, why)) = evidence else {
            return;
        };
        // A framework's hook runs once per batch with no loop of its own.
        let span = if loops.is_empty() {
            "from every batch until something clears it"
        } else {
            "from every iteration until the loop ends"
        };
        let message = rule
            .message
            .replace("{value}", &short(checker, found.value))
            .replace("{container}", &short(checker, found.container))
            .replace("{span}", span)
            .replace("{device}", super::device_name(checker));
        // A concatenation is reported at the `torch.cat(...)` that grows the tensor: in a
        // statement over several lines (`acc = (\n    f if acc is None else torch.cat(...)\n)`)
        // that is where a fix goes.
        let mut range = call.byte_range();
        if found.how == How::Concat {
            let mut node = found.value;
            while let Some(parent) = node.parent() {
                if parent.id() == call.id() {
                    break;
                }
                if parent.kind_id() == KINDS.call {
                    range = parent.byte_range();
                    break;
                }
                node = parent;
            }
        }
        let mut diagnostic = Diagnostic::new(rule, message, range).with_label(label, why);
        if found.how != How::Concat {
            diagnostic.fix = move_off_device(checker, found.value, kept_on_device);
        }
        out.push(diagnostic);
    }
}

/// The fix: keep a host copy, `pred.cpu()` where grad is off and `pred.detach().cpu()` where it
/// may be on (a graph would come along to the host otherwise); on each item of a list or tuple
/// stored whole that `on_device` picks (`(correct, pred[:, 4].cpu(), labels)`). Not for an
/// iterable added item by item (`extend(preds)`), nor for a concatenation (`torch.cat([acc,
/// x])`: `acc` stays on the device, and the two would no longer join). Unsafe: what reads the
/// container later gets host tensors, and a computation with device tensors would fail.
fn move_off_device<'a>(
    checker: &Checker<'a>,
    value: Node<'a>,
    on_device: impl Fn(Node<'a>) -> bool,
) -> Option<Fix> {
    let items: Vec<Node<'a>> = match edits::literal_items(value) {
        Some(items) => items.into_iter().filter(|item| on_device(*item)).collect(),
        None if edits::extended_by(checker, value) => return None,
        None => vec![value],
    };
    // A list or tuple that is not a literal (what a helper returns) has no `.cpu()`.
    if items.is_empty()
        || items
            .iter()
            .any(|item| checker.analysis.facts(*item).kind == Kind::Container)
    {
        return None;
    }
    let grad_off = checker.grad_mode(value) == GradMode::Disabled;
    let edits: Vec<Edit> = items
        .into_iter()
        .map(|item| {
            let detached = grad_off || edits::method_called(checker, item) == Some("detach");
            let method = if detached {
                ".cpu()"
            } else {
                ".detach().cpu()"
            };
            edits::call_method(checker, item, method)
        })
        .collect();
    Some(edits::keep_instead(edits, || {
        let method = if grad_off {
            ".cpu()"
        } else {
            ".detach().cpu()"
        };
        format!("Keep `{method}` of each device tensor instead")
    }))
}
