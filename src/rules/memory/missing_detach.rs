//! TL103 `missing-detach`; documentation and examples in `rules/memory/missing-detach.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::tensor_accumulated::in_module_forward;
use super::{How, accumulation, carrying_loops, forward_call, loop_header, short};
use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Fix};
use crate::parse::{FIELDS, KINDS, mentions_word};
use crate::rule_meta::RuleMeta;
use crate::rules::{Check, edits};
use crate::semantic::values::{Kind, Tri};

pub struct MissingDetach;

impl Check for MissingDetach {
    fn kinds(&self) -> &'static [&'static str] {
        &["assignment", "augmented_assignment", "call"]
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

/// `self.ratio[idx] = ratio`, `self.register_buffer(name, value)` in a method: a finding if
/// some caller in the run passes a graph-carrying tensor (kept once every file is in).
fn check_stored_argument<'a>(
    rule: &Arc<RuleMeta>,
    node: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(store) = checker.analysis.store_in_method(node) else {
        return;
    };
    if store.accumulates || !store.keeps.graph || in_module_forward(checker) {
        return;
    }
    // State of a model (a buffer, `register_buffer`), or a write into a tensor the object
    // keeps (`self.ratio[idx] = ratio`): the graph stays with the model or the tensor. A
    // plain attribute of another object only holds the last value.
    let writes_into_tensor = store.target.kind_id() == KINDS.subscript
        && checker
            .field(store.target, FIELDS.value)
            .is_some_and(|base| checker.analysis.facts(base).kind == Kind::Tensor);
    if !writes_into_tensor && !super::in_module_method(checker, node) {
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
        .replace("{target}", &short(checker, store.target))
        .replace(
            "{held}",
            "a caller passes it a graph-carrying tensor ({caller}), whose graph stays alive on the object until the next call replaces it",
        );
    out.push(Diagnostic::new(rule, message, node.byte_range()).assuming(Some(assumption)));
}

impl MissingDetach {
    fn check_grad_dependent<'a>(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'a>,
        checker: &Checker<'a>,
        out: &mut Vec<Diagnostic>,
    ) {
        if !candidate(checker, node) {
            return;
        }
        // Where the statement is decides what to look for; grad mode is asked last (it is
        // the costlier fact).
        let forward = in_module_forward(checker);
        // A model's own code passes activations from layer to layer within one forward.
        // (Its decoding loops, `generate()`, feed each step's state into the next.)
        if !forward
            && super::in_module_method(checker, node)
            && !super::in_generation_loop(checker, node)
        {
            return;
        }
        // In forward only state stored on `self` is looked for, and the text tells whether the
        // statement can store any: most of a model's statements are local
        // (`hidden = self.norm(hidden)`).
        if forward && !may_store_on_self(checker, node) {
            return;
        }
        if !checker.grad_mode(node).may_record() {
            return;
        }
        if forward {
            check_forward_state(rule, node, checker, out);
            return;
        }
        if node.kind_id() == KINDS.assignment {
            check_fed_back_state(rule, node, checker, out);
            check_feature_bank(rule, node, checker, out);
            check_rebuilt_bank(rule, node, checker, out);
        } else if node.kind_id() == KINDS.call {
            check_rolling_window(rule, node, checker, out);
        }
    }
}

/// Whether the statement has a shape any check below looks for, before asking about grad.
fn candidate<'a>(checker: &Checker<'a>, node: Node<'a>) -> bool {
    let kind = node.kind_id();
    if kind == KINDS.call {
        return checker.call_name(node).is_some_and(|name| {
            matches!(name, "append" | "extend" | "insert") || IN_PLACE_UPDATES.contains(&name)
        });
    }
    // From the text of the first line: tree-sitter field lookups at every assignment cost
    // more than the checks below, and this runs at every assignment of the file.
    let text = checker.node_text(node);
    let line = super::first_line(text);
    let Some(equals) = memchr::memchr(b'=', line.as_bytes()) else {
        return false;
    };
    let (left, right) = (&line[..equals], &line[equals + 1..]);
    if kind == KINDS.augmented_assignment {
        return left.trim_start().starts_with("self.");
    }
    let left = left.trim();
    // `self.x = ...`, `bank[i] = ...`, `queue = ...[:n]`, `out, h = ...`, or a name that goes
    // back into the call on the right (`h = rnn(x, h)`).
    super::SELF_DOT.find(left.as_bytes()).is_some()
        || memchr::memchr2(b'[', b',', left.as_bytes()).is_some()
        || memchr::memchr(b'[', right.as_bytes()).is_some()
        || mentions_word(right, left)
        // A call spread over lines: the arguments after the first line.
        || (text.len() > line.len()
            && line.trim_end().ends_with(['(', ','])
            && mentions_word(&text[line.len()..], left))
}

/// Whether a statement in `forward` may keep something on `self`: an assignment with `self.`
/// in its targets, `self.x += ...`, or `self.xs.append(...)`.
fn may_store_on_self<'a>(checker: &Checker<'a>, node: Node<'a>) -> bool {
    let kind = node.kind_id();
    let target = if kind == KINDS.call {
        checker.callee(node)
    } else {
        checker.field(node, FIELDS.left)
    };
    target.is_some_and(|target| {
        let text = checker.node_text(target);
        if kind == KINDS.assignment {
            super::SELF_DOT.find(text.as_bytes()).is_some()
        } else {
            text.starts_with("self.")
        }
    })
}

/// `self.cache = x`, `self.xs.append(x)`, `self.ema = d * self.ema + (1 - d) * x` in a
/// module's `forward`.
fn check_forward_state<'a>(
    rule: &Arc<RuleMeta>,
    node: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    // Caches kept only in eval mode, or only when asked for (`use_cache`), are for inference.
    if checker.enclosing_conditions().iter().any(|condition| {
        let condition = condition.replace(' ', "");
        condition.contains("notself.training") || condition.to_ascii_lowercase().contains("cache")
    }) {
        return;
    }
    let stored = if node.kind_id() == KINDS.assignment {
        let Some(left) = checker.field(node, FIELDS.left) else {
            return;
        };
        let Some(right) = checker.field(node, FIELDS.right) else {
            return;
        };
        let mut targets = Vec::new();
        flatten_targets(left, &mut targets);
        // `out, self.state = self.lstm(x, self.state)` stores part of the output, and
        // `self.running_covar[:, 0] = ...` writes into a buffer of the module.
        targets
            .into_iter()
            .find(|t| stored_on_self(checker, *t))
            .map(|target| (target, right))
    } else if let Some((target, value)) = in_place_update(checker, node) {
        stored_on_self(checker, target).then_some((target, value))
    } else {
        accumulation(checker, node)
            .filter(|a| {
                matches!(a.how, How::Append | How::AugmentedAdd)
                    && checker.node_text(a.container).starts_with("self.")
            })
            .map(|a| (a.container, a.value))
    };
    let Some((target, value)) = stored else {
        return;
    };
    if checker.analysis.facts(value).graph != Tri::Yes {
        return;
    }
    // `self.running_mean.mul_(m).add_(x)`: the state's new value is computed from its old one,
    // so each call's graph hangs off the previous call's.
    let updates_itself =
        node.kind_id() == KINDS.call && checker.call_name(node).is_some_and(|name| name != "copy_");
    let fed_back = updates_itself
        || value.kind_id() == KINDS.call
            && checker.arguments(value).is_some_and(|arguments| {
                (0..arguments.named_child_count()).any(|i| {
                    arguments.named_child(i as u32).is_some_and(|argument| {
                        argument_feeds(checker.node_text(argument), checker.node_text(target))
                    })
                })
            });
    let held = if fed_back {
        "goes back into the next call: every call's graph links to the previous one and memory grows with each call"
    } else {
        "keeps this forward's autograd graph alive on the module until the next call"
    };
    let message = rule
        .message
        .replace("{value}", &short(checker, value))
        .replace("{target}", &short(checker, target))
        .replace("{held}", held);
    let mut diagnostic = Diagnostic::new(rule, message, node.byte_range());
    // Not where the target is one name of several (`out, self.state = self.lstm(...)`): the
    // value is the whole output then.
    let whole = node.kind_id() != KINDS.assignment
        || checker
            .field(node, FIELDS.left)
            .is_some_and(|left| left.id() == target.id());
    if whole && !updates_itself {
        diagnostic.fix = detach(checker, value);
    }
    out.push(diagnostic);
}

/// The fix: `.detach()` on the value (on each item of a tuple literal), so that what is kept,
/// or goes back into the next call, carries no graph. None where the value is a container
/// that is not a literal (an LSTM's `hidden` tuple has no `.detach()`) or is detached already.
/// Unsafe: a backward that was meant to reach through the kept value (truncated
/// backpropagation over several calls) stops at it.
fn detach<'a>(checker: &Checker<'a>, value: Node<'a>) -> Option<Fix> {
    let items = edits::literal_items(value).unwrap_or_else(|| vec![value]);
    if items.is_empty()
        || items.iter().any(|item| {
            checker.analysis.facts(*item).kind == Kind::Container
                || edits::method_called(checker, *item) == Some("detach")
        })
    {
        return None;
    }
    let edits = items
        .iter()
        .map(|item| edits::call_method(checker, *item, ".detach()"))
        .collect();
    Some(edits::keep_instead(edits, || {
        "Detach each tensor kept".to_owned()
    }))
}

/// In-place updates of a tensor: what they write records into its graph.
const IN_PLACE_UPDATES: &[&str] = &[
    "copy_", "add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_",
];

/// `self.running_mean.mul_(m).add_(batch_mean * (1 - m))`, `self.last.copy_(x)`: the tensor
/// updated in place (under a chain of in-place calls) and the argument written into it that
/// carries a graph, or the first. Asked of the outermost call of a chain only.
fn in_place_update<'a>(checker: &Checker<'a>, call: Node<'a>) -> Option<(Node<'a>, Node<'a>)> {
    let is_update = |call: Node<'a>| {
        call.kind_id() == KINDS.call
            && checker
                .call_name(call)
                .is_some_and(|name| IN_PLACE_UPDATES.contains(&name))
    };
    if !is_update(call)
        || call
            .parent()
            .and_then(|attribute| attribute.parent())
            .is_some_and(is_update)
    {
        return None;
    }
    let mut arguments = Vec::new();
    let mut link = call;
    while is_update(link) {
        let list = checker.arguments(link)?;
        arguments.extend((0..list.named_child_count()).filter_map(|i| list.named_child(i as u32)));
        link = checker
            .callee(link)
            .and_then(|callee| checker.field(callee, FIELDS.object))?;
    }
    // Through `.data` autograd records nothing (`self.embed.data.copy_(new)`).
    if checker
        .field(link, FIELDS.attribute)
        .is_some_and(|attribute| checker.node_text(attribute) == "data")
    {
        return None;
    }
    let value = arguments
        .iter()
        .copied()
        .find(|argument| checker.analysis.facts(*argument).graph == Tri::Yes)
        .or(arguments.first().copied())?;
    Some((link, value))
}

/// `out, h = model(x, h)` where `h` goes back into the next call without `.detach()`: each
/// step's graph links to the previous one.
fn check_fed_back_state<'a>(
    rule: &Arc<RuleMeta>,
    assignment: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let (Some(left), Some(right)) = (
        checker.field(assignment, FIELDS.left),
        checker.field(assignment, FIELDS.right),
    ) else {
        return;
    };
    if right.kind_id() != KINDS.call {
        return;
    }
    let Some(arguments) = checker.arguments(right) else {
        return;
    };
    let argument_texts: Vec<&str> = {
        let mut cursor = arguments.walk();
        arguments
            .named_children(&mut cursor)
            .map(|a| {
                if a.kind_id() == KINDS.keyword_argument {
                    checker
                        .field(a, FIELDS.value)
                        .map_or("", |v| checker.node_text(v))
                } else {
                    checker.node_text(a)
                }
            })
            .collect()
    };
    let mut targets = Vec::new();
    flatten_targets(left, &mut targets);
    // Syntax first: some target must go back into the call.
    let fed_back = |target: &Node<'a>| {
        let name = checker.node_text(*target);
        argument_texts
            .iter()
            .any(|argument| argument_feeds(argument, name))
    };
    if !targets.iter().any(fed_back) || forward_call(checker, right).is_none() {
        return;
    }
    for &target in &targets {
        let name = checker.node_text(target);
        if !fed_back(&target) {
            continue;
        }
        if target.kind_id() == KINDS.attribute {
            // `pred, self.state = self.model(x, self.state)`: carried across calls.
            if !name.starts_with("self.") || detached_elsewhere(checker, assignment, name) {
                continue;
            }
            let message = rule
                .message
                .replace("{value}", &short(checker, right))
                .replace("{target}", name)
                .replace(
                    "{held}",
                    "links every call's graph to the previous one: memory grows with each call",
                );
            out.push(Diagnostic::new(rule, message, assignment.byte_range()));
            return;
        }
        if target.kind_id() != KINDS.identifier || detached_in_loop(checker, name) {
            continue;
        }
        // Reset per batch or not, state carried across backward calls chains their graphs.
        let loops = super::loops_outlived(checker, target, assignment);
        if loops.is_empty() {
            continue;
        }
        let training = loops.iter().find(|l| checker.analysis.loop_trains(**l));
        let outer_training = checker
            .enclosing_loops()
            .iter()
            .any(|l| checker.analysis.loop_trains(*l));
        let (label, why) = match training {
            Some(loop_node) => (
                loop_header(checker, *loop_node),
                "the state crosses training steps here".to_owned(),
            ),
            // A rollout with grad on and no training step around it at all. Not an RNN
            // unrolled over the time steps of one input (`for i in range(x.size(0)):
            // h = rnn(x[i], h)`): its graph is bounded by that input and dies with the call,
            // and what costs memory there is grad being on (TL101), not a missing detach.
            None if !outer_training
                && !function_trains(checker)
                && !unrolls_one_input(checker, loops[0], &argument_texts) =>
            {
                (
                    loop_header(checker, loops[0]),
                    "a rollout with grad enabled: every step's graph stays linked".to_owned(),
                )
            }
            None => continue,
        };
        let message = rule
            .message
            .replace("{value}", &short(checker, right))
            .replace("{target}", name)
            .replace(
                "{held}",
                "links every step's graph to the previous one: memory and backward time grow each step",
            );
        let crossed = training.copied().unwrap_or(loops[0]);
        let fed: Vec<Node<'a>> = targets
            .iter()
            .copied()
            .filter(|target| target.kind_id() == KINDS.identifier && fed_back(target))
            .collect();
        let mut diagnostic =
            Diagnostic::new(rule, message, assignment.byte_range()).with_label(label, why);
        diagnostic.fix = detach_at_loop_top(checker, left, right, &fed, crossed);
        out.push(diagnostic);
        return;
    }
}

/// The fix for state fed back into the next call: detached at the top of the loop it crosses
/// (`h = h.detach()`; `h, c = h.detach(), c.detach()`; an LSTM's `(h, c)` kept as one name,
/// `hidden = tuple(s.detach() for s in hidden)`), under `if h is not None:` where it starts as
/// `None`. None where it is not known whether the state is a tensor or a tuple (a model of the
/// user's own returning it whole), or where the state is not bound before the loop. Unsafe:
/// truncated backpropagation that was meant to reach across iterations stops at the detach.
fn detach_at_loop_top<'a>(
    checker: &Checker<'a>,
    left: Node<'a>,
    call: Node<'a>,
    fed: &[Node<'a>],
    crossed: Node<'a>,
) -> Option<Fix> {
    let arguments = checker.arguments(call)?;
    let body = checker.field(crossed, FIELDS.body)?;
    let (mut tensors, mut tuples, mut maybe_none) = (Vec::new(), Vec::new(), Vec::new());
    for &target in fed {
        let name = checker.node_text(target);
        let tuple = if target.id() == left.id() {
            // `h = cell(x, h)`: the state is the whole output.
            match rnn_module(checker, call)? {
                "LSTMCell" => true,
                "GRUCell" | "RNNCell" => false,
                _ => return None,
            }
        } else if target
            .parent()
            .is_some_and(|parent| parent.id() == left.id())
        {
            // `out, h = rnn(x, h)`, `h, c = cell(x, (h, c))`: an element of the output.
            match rnn_module(checker, call)? {
                "LSTM" => true,
                "GRU" | "RNN" | "LSTMCell" => false,
                _ => return None,
            }
        } else {
            // `out, (h, c) = lstm(x, (h, c))`: one tensor of a state unpacked.
            false
        };
        // Bound before the loop, so that the top of its first iteration has it too.
        let argument = identifier_in(checker, arguments, name)?;
        let before = checker.analysis.reaching_value(argument)?;
        if before.start_byte() >= crossed.start_byte() {
            return None;
        }
        if checker.analysis.may_be_none(argument) {
            maybe_none.push(name);
        }
        if tuple {
            tuples.push(name);
        } else {
            tensors.push(name);
        }
    }
    let mut statements = Vec::new();
    if !tensors.is_empty() {
        let detached: Vec<String> = tensors
            .iter()
            .map(|name| format!("{name}.detach()"))
            .collect();
        statements.push(format!("{} = {}", tensors.join(", "), detached.join(", ")));
    }
    for name in &tuples {
        statements.push(format!("{name} = tuple(s.detach() for s in {name})"));
    }
    if statements.is_empty() {
        return None;
    }
    let edit = edits::insert_at_block_start(checker, body, |indent, unit| {
        let mut lines = String::new();
        let inner = if maybe_none.is_empty() {
            indent.to_owned()
        } else {
            let guards: Vec<String> = maybe_none
                .iter()
                .map(|name| format!("{name} is not None"))
                .collect();
            lines.push_str(&format!("{indent}if {}:\n", guards.join(" and ")));
            format!("{indent}{unit}")
        };
        for statement in &statements {
            lines.push_str(&format!("{inner}{statement}\n"));
        }
        lines
    })?;
    let names: Vec<&str> = tensors.iter().chain(&tuples).copied().collect();
    Some(Fix {
        message: format!(
            "Detach `{}` at the top of each iteration",
            names.join("`, `")
        ),
        applicability: crate::rule_meta::Applicability::Unsafe,
        edits: vec![edit],
    })
}

/// The `torch.nn` recurrent module a call runs (`"LSTM"`, `"GRUCell"`), which says what its
/// state is: `LSTM` returns `(output, (h, c))`, `GRU` and `RNN` `(output, h)`, `LSTMCell`
/// `(h, c)`, the other cells `h`. None for any other callee.
fn rnn_module<'a>(checker: &Checker<'a>, call: Node<'a>) -> Option<&'static str> {
    let callee = checker.callee(call)?;
    let crate::semantic::instances::ClassRef::Imported(class) =
        checker.analysis.instance_class(callee)?
    else {
        return None;
    };
    let name = class.strip_prefix("torch.nn.")?.rsplit('.').next()?;
    ["LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"]
        .into_iter()
        .find(|module| *module == name)
}

/// The identifier `name` among a call's arguments, or inside a tuple among them (`(h, c)`).
fn identifier_in<'a>(checker: &Checker<'a>, node: Node<'a>, name: &str) -> Option<Node<'a>> {
    let mut cursor = node.walk();
    let children: Vec<Node<'a>> = node.named_children(&mut cursor).collect();
    children.into_iter().find_map(|child| {
        let kind = child.kind_id();
        if kind == KINDS.identifier {
            (checker.node_text(child) == name).then_some(child)
        } else if [KINDS.tuple, KINDS.parenthesized_expression, KINDS.list].contains(&kind) {
            identifier_in(checker, child, name)
        } else {
            None
        }
    })
}

/// `bank[idx] = feats`: features with their graph written into a tensor that outlives the
/// loop.
fn check_feature_bank<'a>(
    rule: &Arc<RuleMeta>,
    assignment: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(found) = accumulation(checker, assignment) else {
        return;
    };
    if found.how != How::Store {
        return;
    }
    let analysis = &checker.analysis;
    if analysis.facts(found.container).kind != Kind::Tensor
        || analysis.facts(found.value).graph != Tri::Yes
    {
        return;
    }
    let loops = carrying_loops(checker, found.container, assignment);
    let Some(training) = loops.iter().find(|l| checker.analysis.loop_trains(**l)) else {
        return;
    };
    let message = rule
        .message
        .replace("{value}", &short(checker, found.value))
        .replace("{target}", &short(checker, found.container))
        .replace(
            "{held}",
            "keeps the graph of every batch written into the bank alive: grows each step",
        );
    out.push(
        Diagnostic::new(rule, message, assignment.byte_range()).with_label(
            loop_header(checker, *training),
            "the bank outlives this training loop",
        ),
    );
}

/// `queue = torch.cat([feats, queue])[:size]` in a training loop: the new queue is built from
/// the old one by an autograd op, so each step's graph links to all the previous ones.
fn check_rebuilt_bank<'a>(
    rule: &Arc<RuleMeta>,
    assignment: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let (Some(left), Some(right)) = (
        checker.field(assignment, FIELDS.left),
        checker.field(assignment, FIELDS.right),
    ) else {
        return;
    };
    if left.kind_id() != KINDS.identifier && left.kind_id() != KINDS.attribute {
        return;
    }
    let name = checker.node_text(left);
    // Sliced back to a fixed size; an unsliced `torch.cat` that only grows is TL102's.
    if right.kind_id() != KINDS.subscript {
        return;
    }
    let mut call = right;
    while call.kind_id() == KINDS.subscript {
        let Some(value) = checker.field(call, FIELDS.value) else {
            return;
        };
        call = value;
    }
    let Some(items) = super::concatenated_items(checker, call) else {
        return;
    };
    if !items.iter().any(|item| checker.node_text(*item) == name) {
        return;
    }
    let Some(fresh) = items.iter().find(|item| {
        checker.node_text(**item) != name && checker.analysis.facts(**item).graph == Tri::Yes
    }) else {
        return;
    };
    let loops = carrying_loops(checker, left, assignment);
    let Some(training) = loops.iter().find(|l| checker.analysis.loop_trains(**l)) else {
        return;
    };
    let message = rule
        .message
        .replace("{value}", &short(checker, *fresh))
        .replace("{target}", name)
        .replace(
            "{held}",
            "each new bank is computed from the previous one, so every step's graph stays linked: grows each step",
        );
    out.push(
        Diagnostic::new(rule, message, assignment.byte_range()).with_label(
            loop_header(checker, *training),
            "the bank is rebuilt on every step of this training loop",
        ),
    );
}

/// `recent.append(emb)` with `recent.pop(0)`: a window of the last steps' outputs, each with
/// its graph.
fn check_rolling_window<'a>(
    rule: &Arc<RuleMeta>,
    call: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(found) = accumulation(checker, call) else {
        return;
    };
    if found.how != How::Append || checker.analysis.facts(found.value).graph != Tri::Yes {
        return;
    }
    let name = checker.node_text(found.container);
    let loops = carrying_loops(checker, found.container, call);
    let Some(window) = loops.iter().find(|l| super::bounded(checker, name, **l)) else {
        return;
    };
    let message = rule
        .message
        .replace("{value}", &short(checker, found.value))
        .replace("{target}", name)
        .replace(
            "{held}",
            "keeps the autograd graph of every step still in the window alive",
        );
    out.push(
        Diagnostic::new(rule, message, call.byte_range()).with_label(
            loop_header(checker, *window),
            "the window is refilled on every iteration",
        ),
    );
}

/// `self.x`, or an element of it (`self.running_covar[:, 0]`): state that outlives the call.
/// Not caches (`self.k_cache[pos] = k`): inference code keeps those on purpose.
fn stored_on_self<'a>(checker: &Checker<'a>, target: Node<'a>) -> bool {
    let mut base = target;
    while base.kind_id() == KINDS.subscript {
        match checker.field(base, FIELDS.value) {
            Some(value) => base = value,
            None => return false,
        }
    }
    let text = checker.node_text(base);
    base.kind_id() == KINDS.attribute
        && text.starts_with("self.")
        && !(base.id() != target.id() && text.to_ascii_lowercase().contains("cache"))
}

/// Whether an argument text passes the state back (`h`, `(h, c)`, `state`).
fn argument_feeds(argument: &str, name: &str) -> bool {
    argument == name
        || argument
            .trim_matches(['(', ')'])
            .split(',')
            .any(|part| part.trim() == name)
}

/// `h = h.detach()`, `h.detach_()`, `h = repackage_hidden(h)` anywhere in the enclosing loops.
fn detached_in_loop<'a>(checker: &Checker<'a>, name: &str) -> bool {
    let region = checker
        .enclosing_loops()
        .last()
        .map(|l| checker.node_text(*l))
        .unwrap_or("");
    uses_detached(region, name)
        || region.contains(&format!("{name}.detach_("))
        || region.contains(&format!("repackage_hidden({name}"))
        || region.contains(&format!("detach_hidden({name}"))
        || detached_element_wise(region, name)
}

/// `hidden = tuple(h.detach() for h in hidden)` (an LSTM's `(h, c)` cut element by element).
fn detached_element_wise(region: &str, name: &str) -> bool {
    let assignment = format!("{name} = ");
    let over = format!(" in {name}");
    region.lines().any(|line| {
        line.trim_start()
            .strip_prefix(&assignment)
            .is_some_and(|value| value.contains(".detach()") && value.contains(&over))
    })
}

fn detached_elsewhere<'a>(checker: &Checker<'a>, assignment: Node<'a>, name: &str) -> bool {
    let region = checker
        .analysis
        .enclosing_function(assignment)
        .map_or(checker.text(), |f| checker.node_text(f));
    uses_detached(region, name)
        || region.contains(&format!("{name}.detach_("))
        || region.contains("detach() for")
}

/// Whether `name.detach()` is used somewhere in `region`: assigned or passed on. A bare
/// `h.detach()` statement returns a new tensor and leaves `h` as it was.
fn uses_detached(region: &str, name: &str) -> bool {
    let pattern = format!("{name}.detach(");
    region.match_indices(&pattern).any(|(at, _)| {
        let line_start = region[..at].rfind('\n').map_or(0, |i| i + 1);
        !region[line_start..at].trim().is_empty()
    })
}

/// The names and attributes a target pattern binds: `out, (h, c)` gives `out`, `h`, `c`.
fn flatten_targets<'a>(target: Node<'a>, out: &mut Vec<Node<'a>>) {
    let kind = target.kind_id();
    if kind == KINDS.identifier || kind == KINDS.attribute || kind == KINDS.subscript {
        out.push(target);
        return;
    }
    let mut cursor = target.walk();
    for child in target.named_children(&mut cursor) {
        flatten_targets(child, out);
    }
}

/// Whether `loop_node` is `for i in range(x.size(..))` / `range(len(x))` / `range(x.shape[..])`
/// and the call is fed `x[i]`: one input's time steps, not a stream of batches or steps.
fn unrolls_one_input<'a>(checker: &Checker<'a>, loop_node: Node<'a>, arguments: &[&str]) -> bool {
    if loop_node.kind_id() != KINDS.for_statement {
        return false;
    }
    let (Some(variable), Some(range)) = (
        checker.field(loop_node, FIELDS.left),
        checker.field(loop_node, FIELDS.right),
    ) else {
        return false;
    };
    let variable = checker.node_text(variable);
    let Some(bound) = checker
        .node_text(range)
        .strip_prefix("range(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return false;
    };
    let input = bound
        .strip_prefix("len(")
        .and_then(|rest| rest.strip_suffix(')'))
        .or_else(|| bound.split_once(".size(").map(|(input, _)| input))
        .or_else(|| bound.split_once(".shape[").map(|(input, _)| input));
    let Some(input) = input.map(str::trim).filter(|input| !input.is_empty()) else {
        return false;
    };
    let indexed = format!("{input}[{variable}]");
    arguments.iter().any(|argument| argument.trim() == indexed)
}

fn function_trains<'a>(checker: &Checker<'a>) -> bool {
    checker
        .current_function()
        .is_some_and(|(_, facts)| facts.contains_training)
}
