//! Graph-carrying arguments: the calls that pass a tensor with a graph to the project's
//! functions (recorded as `GraphCall`s for the cross-file pass), the `Assumption` a finding on
//! a kept parameter rests on, and whether a value is backpropagated in its loop.

use crate::syntax::Node;

use super::per_batch::own_method_name;
use super::position::Position;
use crate::parse::{FIELDS, KINDS, mentions_word};

/// An argument of a call: its position (`self` is 0) or keyword, and its value.
type PassedArgument<'a> = (Option<u32>, Option<&'a str>, Node<'a>);

/// What a call passes to a method: a call's argument list, or the value a subscript
/// assignment hands to `__setitem__(self, key, value)`.
enum Passed<'a> {
    Arguments(Node<'a>),
    Value(Node<'a>),
}

impl<'a> Passed<'a> {
    fn arguments(&self, checker: &impl Position<'a>) -> Vec<PassedArgument<'a>> {
        let list = match self {
            Passed::Value(value) => return vec![(Some(2), None, *value)],
            Passed::Arguments(list) => *list,
        };
        let mut cursor = list.walk();
        let mut arguments = Vec::new();
        let mut position = 1;
        for argument in list.named_children(&mut cursor) {
            if argument.kind_id() == KINDS.keyword_argument {
                let (Some(name), Some(value)) = (
                    argument.child_by_field_id(FIELDS.name),
                    argument.child_by_field_id(FIELDS.value),
                ) else {
                    continue;
                };
                arguments.push((None, Some(checker.node_text(name)), value));
            } else if argument.kind_id() != KINDS.list_splat
                && argument.kind_id() != KINDS.dictionary_splat
            {
                arguments.push((Some(position), None, argument));
                position += 1;
            }
        }
        arguments
    }
}

/// Records a call at `node` that passes a graph-carrying tensor to a method of the project
/// that keeps it (`meter.update(loss)`, `stats["loss"] = loss` on a collector's
/// `__setitem__`): the storing line's finding waits for one (`Assumption::GraphArgument`).
pub fn record_graph_arguments<'a>(checker: &impl Position<'a>, node: Node<'a>) {
    let analysis = &checker.analysis();
    // TL102 and TL103 both ask at the same node.
    if analysis.recorded_node.replace(node.id()) == node.id() {
        return;
    }
    // The receiver and the method; then, once the receiver is known to be an instance of a
    // class whose method keeps a parameter, the arguments by parameter index (`self` is 0).
    let (receiver, method, passed): (Node<'a>, &str, Passed<'a>) = if node.kind_id() == KINDS.call {
        let Some(callee) = checker.callee(node) else {
            return;
        };
        if callee.kind_id() != KINDS.attribute {
            return;
        }
        let Some(method) = checker.call_name(node) else {
            return;
        };
        if matches!(
            method,
            "append" | "extend" | "insert" | "add_" | "item" | "backward" | "step"
        ) {
            return;
        }
        // A call that passes nothing records nothing: asked before whether the method keeps
        // a parameter, which analyses every method of that name in the file.
        let Some(list) = checker
            .arguments(node)
            .filter(|list| list.named_child_count() > 0)
        else {
            return;
        };
        let Some(receiver) = checker.field(callee, FIELDS.object) else {
            return;
        };
        if !analysis.may_store(method) {
            // The file that defines the method may not be summarised yet: a call on a
            // receiver of no known class is recorded by name all the same.
            record_device_arguments_by_name(
                checker,
                node,
                receiver,
                method,
                &Passed::Arguments(list),
            );
            return;
        }
        (receiver, method, Passed::Arguments(list))
    } else if node.kind_id() == KINDS.assignment {
        // `collector["loss"] = loss`: `__setitem__(self, key, value)`. The target is the
        // assignment's first child; asked first, as most assignments bind names.
        let Some(left) = node
            .child(0)
            .filter(|left| left.kind_id() == KINDS.subscript)
        else {
            return;
        };
        if !analysis.may_store("__setitem__") {
            return;
        }
        let Some(right) = checker.field(node, FIELDS.right) else {
            return;
        };
        let Some(receiver) = checker.field(left, FIELDS.value) else {
            return;
        };
        (receiver, "__setitem__", Passed::Value(right))
    } else {
        return;
    };
    let (function, stores) = match analysis.instance_class(receiver) {
        Some(crate::semantic::instances::ClassRef::Local(class)) => {
            let Some(method_node) = analysis.local_method(class, method) else {
                return;
            };
            (
                own_method_name(checker, class, method),
                analysis.stored_parameters(method_node),
            )
        }
        Some(crate::semantic::instances::ClassRef::Imported(class)) => {
            let qualified = format!("{class}.{method}");
            let crate::semantic::facts::Answer::Stores(stores) =
                analysis.ask_answer(crate::semantic::facts::Ask::Stores(qualified.clone()))
            else {
                return;
            };
            let Some(function) = analysis.canonical(&qualified) else {
                return;
            };
            (function, stores)
        }
        None => {
            record_device_arguments_by_name(checker, node, receiver, method, &passed);
            return;
        }
    };
    let arguments = passed.arguments(checker);
    if stores.is_empty() {
        return;
    }
    let per_batch = checker.per_batch().is_some();
    let site = call_site(checker, node);
    for stored in &stores {
        let passed = arguments.iter().find(|(position, keyword, _)| {
            *position == Some(stored.index) || *keyword == Some(stored.name.as_str())
        });
        let Some((position, keyword, value)) = passed else {
            continue;
        };
        let mut facts = analysis.facts(*value);
        // A device tensor without a graph, passed on every batch to a method that keeps it
        // (`evaluator.update(preds)`): what TL104's finding on the keeping line waits for.
        // (Only where the file itself names the accelerator: another file's finding cannot
        // carry this one's assumption about the run.)
        if stored.keeps.device
            && per_batch
            && !analysis.device_assumed()
            && facts.graph != crate::semantic::values::Tri::Yes
            && facts.device == crate::semantic::values::Tri::Yes
            && matches!(
                facts.kind,
                crate::semantic::values::Kind::Tensor | crate::semantic::values::Kind::Container
            )
        {
            analysis.record_graph_call(crate::semantic::cross_file::GraphCall {
                function: function.clone(),
                parameter: *position,
                keyword: keyword.map(str::to_owned),
                per_batch,
                container: facts.kind == crate::semantic::values::Kind::Container,
                site: site.clone(),
                from: None,
                device: true,
            });
            continue;
        }
        if !stored.keeps.graph {
            continue;
        }
        // `loss = criterion(...)` of an unknown criterion, then `loss.backward()`: whatever
        // made it, it carries a graph.
        if facts.graph != crate::semantic::values::Tri::Yes
            && backpropagated_in_loop(checker, *value)
        {
            facts.graph = crate::semantic::values::Tri::Yes;
            facts.kind = crate::semantic::values::Kind::Tensor;
        }
        let (facts, from) = if facts.graph == crate::semantic::values::Tri::Yes {
            (facts, None)
        } else {
            // The caller's own parameter (or a value made from it): a graph only when the
            // caller is passed one.
            let Some((facts, from)) = passed_parameter(checker, *value) else {
                continue;
            };
            (facts, Some(from))
        };
        analysis.record_graph_call(crate::semantic::cross_file::GraphCall {
            function: function.clone(),
            parameter: *position,
            keyword: keyword.map(str::to_owned),
            per_batch,
            container: facts.kind == crate::semantic::values::Kind::Container,
            site: site.clone(),
            from,
            device: false,
        });
    }
}

/// `metrics["map"].update(preds=preds)` on a receiver of no known class, once per batch: each
/// device tensor passed is recorded for any method of that name in the run that keeps it (a
/// metric's `update`, an evaluator's `process`), since which object it is cannot be told.
/// Graphs are not followed this way: a tensor's device is plain; a graph's keeper is TL102's
/// and TL103's, which ask for the class.
fn record_device_arguments_by_name<'a>(
    checker: &impl Position<'a>,
    node: Node<'a>,
    receiver: Node<'a>,
    method: &str,
    passed: &Passed<'a>,
) {
    let analysis = &checker.analysis();
    // In a file that names no accelerator, no value is known to be on one: asked before the
    // arguments' facts, which the answer makes moot.
    if method.starts_with("__") || analysis.device_assumed() || checker.per_batch().is_none() {
        return;
    }
    let arguments = passed.arguments(checker);
    // A tensor, or an object holding some (`NamedTensor.new_like(pred, y)`).
    let on_device = |value: Node<'a>| {
        let facts = analysis.facts(value);
        matches!(
            facts.kind,
            crate::semantic::values::Kind::Tensor | crate::semantic::values::Kind::Container
        ) && facts.device == crate::semantic::values::Tri::Yes
            && facts.graph != crate::semantic::values::Tri::Yes
    };
    // Asked last: what the receiver is costs more than the arguments' facts. A metric may be
    // a module (torchmetrics'), so only tensors and optimizers are ruled out.
    if !arguments.iter().any(|(_, _, value)| on_device(*value))
        || analysis.instance_class(receiver).is_some()
        || matches!(
            analysis.facts(receiver).kind,
            crate::semantic::values::Kind::Tensor | crate::semantic::values::Kind::Optimizer
        )
    {
        return;
    }
    let site = call_site(checker, node);
    for (position, keyword, value) in arguments {
        if !on_device(value) {
            continue;
        }
        analysis.record_graph_call(crate::semantic::cross_file::GraphCall {
            function: format!("{}{method}", crate::semantic::cross_file::ANY_RECEIVER),
            parameter: position,
            keyword: keyword.map(str::to_owned),
            per_batch: true,
            container: analysis.facts(value).kind == crate::semantic::values::Kind::Container,
            site: site.clone(),
            from: None,
            device: true,
        });
    }
}

/// Where a recorded call is, for the finding's message: `path:line`.
fn call_site<'a>(checker: &impl Position<'a>, node: Node<'a>) -> String {
    let row = checker.source().location(node.start_byte()).row;
    format!("{}:{row}", crate::escape::path(checker.source().name()))
}

/// When `value` carries a graph only if a parameter of the function around it does: its facts
/// then, and the function's canonical name with the parameter's index and name.
fn passed_parameter<'a>(
    checker: &impl Position<'a>,
    value: Node<'a>,
) -> Option<(crate::semantic::values::ValueFacts, (String, u32, String))> {
    let analysis = &checker.analysis();
    let (function, facts) = checker.current_function()?;
    let canonical = match facts.class {
        Some(class) => own_method_name(checker, class, &facts.name),
        None => format!("{}.{}", analysis.module_path().unwrap_or(""), facts.name),
    };
    let text = checker.node_text(value);
    let graph_carrying = crate::semantic::values::ValueFacts {
        kind: crate::semantic::values::Kind::Tensor,
        graph: crate::semantic::values::Tri::Yes,
        ..Default::default()
    };
    analysis
        .parameter_names(function)
        .into_iter()
        .filter(|(index, name)| {
            (facts.class.is_none() || *index > 0) && mentions_word(text, name)
                || analysis
                    .reaching_value(value)
                    .is_some_and(|bound| mentions_word(checker.node_text(bound), name))
        })
        .find_map(|(index, name)| {
            let given = analysis.facts_given_parameter(value, function, index, graph_carrying);
            (given.graph == crate::semantic::values::Tri::Yes)
                .then(|| (given, (canonical.clone(), index, name.to_owned())))
        })
}

/// The finding for a line of a method that keeps its parameter on `self`, to be kept once a
/// caller in the run passes a graph-carrying tensor (`Assumption::GraphArgument`).
pub fn stored_argument_assumption<'a>(
    checker: &impl Position<'a>,
    store: &crate::semantic::stores::Store<'a>,
    device: bool,
) -> Option<crate::semantic::cross_file::Assumption> {
    let (function, facts) = checker.current_function()?;
    let class = facts.class?;
    let name = checker
        .analysis()
        .parameter_names(function)
        .into_iter()
        .find(|(index, _)| *index == store.parameter)?
        .1;
    Some(crate::semantic::cross_file::Assumption::GraphArgument {
        function: own_method_name(checker, class, &facts.name),
        parameter: store.parameter,
        name: name.to_owned(),
        per_batch: store.accumulates,
        expects: store.expects,
        device,
    })
}

/// Whether the value is (an expression of) a variable the loop calls `.backward()` on: then it
/// certainly carries a graph, whatever produced it (`loss = self._loss_fn(...)`).
pub fn backpropagated_in_loop<'a>(checker: &impl Position<'a>, value: Node<'a>) -> bool {
    // The loops around it (the backward may be in an outer one: `for name, v in
    // parts.items()` inside the step loop), or outside loops the step function itself.
    let mut regions = checker.enclosing_loops();
    if regions.is_empty() {
        regions.extend(checker.current_function().map(|(function, _)| function));
    }
    // The innermost loop that calls a backward decides.
    regions
        .into_iter()
        .find(|region| checker.analysis().calls_backward_in(*region))
        .is_some_and(|region| backpropagated_in_region(checker, region, value))
}

fn backpropagated_in_region<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
    value: Node<'a>,
) -> bool {
    let region = checker.node_text(loop_node);
    let text = checker.node_text(value);
    if [".item()", ".detach()", "float(", ".tolist()", "int("]
        .iter()
        .any(|detaching| text.contains(detaching))
    {
        return false;
    }
    let words = || {
        text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '.')
            .filter(|word| !word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()))
    };
    words().any(|word| region.contains(&format!("{word}.backward(")))
        // What the loop backpropagates through, by any spelling of the backward call
        // (`scaler.scale(loss).backward()`, `accelerator.backward(loss)`) and what the
        // backpropagated loss was computed from (`loss = sum(losses)`).
        || checker
            .analysis()
            .combined_names(value)
            .into_iter()
            .any(|name| checker.analysis().backpropagated_in(loop_node, name))
}
