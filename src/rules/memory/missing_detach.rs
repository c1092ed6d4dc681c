//! TL103 `missing-detach`; documentation and examples in `rules/memory/missing-detach.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::tensor_accumulated::in_module_forward;
use super::{How, accumulation, carrying_loops, forward_call, loop_header, short};
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{FIELDS, KINDS};
use crate::rules::{Check, RuleMeta};
use crate::semantic::values::{Kind, Tri};

pub struct MissingDetach;

impl Check for MissingDetach {
    fn kinds(&self) -> &'static [&'static str] {
        &["assignment", "augmented_assignment", "call"]
    }

    fn check(
        &self,
        rule: &Arc<RuleMeta>,
        node: Node<'_>,
        checker: &Checker<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        if !checker.grad_mode(node).may_record() {
            return;
        }
        if in_module_forward(checker) {
            check_forward_state(rule, node, checker, out);
            return;
        }
        if node.kind_id() == KINDS.assignment {
            check_fed_back_state(rule, node, checker, out);
            check_feature_bank(rule, node, checker, out);
        }
    }
}

/// `self.cache = x`, `self.xs.append(x)`, `self.ema = d * self.ema + (1 - d) * x` in a
/// module's `forward`.
fn check_forward_state<'a>(
    rule: &Arc<RuleMeta>,
    node: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    // Caches kept only in eval mode are for inference.
    if checker
        .enclosing_conditions()
        .iter()
        .any(|condition| condition.replace(' ', "").contains("notself.training"))
    {
        return;
    }
    let stored = if node.kind_id() == KINDS.assignment {
        let Some(left) = node.child_by_field_id(FIELDS.left) else {
            return;
        };
        let Some(right) = node.child_by_field_id(FIELDS.right) else {
            return;
        };
        if left.kind_id() == KINDS.attribute && checker.node_text(left).starts_with("self.") {
            Some((left, right))
        } else {
            None
        }
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
    let message = rule
        .message
        .replace("{value}", &short(checker, value))
        .replace("{target}", &short(checker, target))
        .replace(
            "{held}",
            "keeps this forward's autograd graph alive on the module until the next call",
        );
    out.push(Diagnostic::new(rule, message, node.byte_range()));
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
        assignment.child_by_field_id(FIELDS.left),
        assignment.child_by_field_id(FIELDS.right),
    ) else {
        return;
    };
    if right.kind_id() != KINDS.call || forward_call(checker, right).is_none() {
        return;
    }
    let Some(arguments) = right.child_by_field_id(FIELDS.arguments) else {
        return;
    };
    let argument_texts: Vec<&str> = {
        let mut cursor = arguments.walk();
        arguments
            .named_children(&mut cursor)
            .map(|a| {
                if a.kind_id() == KINDS.keyword_argument {
                    a.child_by_field_id(FIELDS.value)
                        .map_or("", |v| checker.node_text(v))
                } else {
                    checker.node_text(a)
                }
            })
            .collect()
    };
    let targets: Vec<Node<'a>> = if left.kind_id() == KINDS.identifier || left.kind_id() == KINDS.attribute {
        vec![left]
    } else {
        let mut cursor = left.walk();
        left.named_children(&mut cursor).collect()
    };
    for target in targets {
        let name = checker.node_text(target);
        if !argument_texts.iter().any(|argument| argument_feeds(argument, name)) {
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
        let loops = carrying_loops(checker, target, assignment);
        if loops.is_empty() {
            continue;
        }
        let training = loops.iter().find(|l| {
            checker
                .model
                .loop_facts(**l)
                .is_some_and(|facts| facts.trains())
        });
        let outer_training = checker
            .enclosing_loops()
            .iter()
            .any(|l| checker.model.loop_facts(*l).is_some_and(|f| f.trains()));
        let (label, why) = match training {
            Some(loop_node) => (
                loop_header(checker, *loop_node),
                "the state crosses training steps here".to_owned(),
            ),
            // A rollout with grad on and no training step around it at all.
            None if !outer_training && !function_trains(checker) => (
                loop_header(checker, loops[0]),
                "a rollout with grad enabled: every step's graph stays linked".to_owned(),
            ),
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
        out.push(Diagnostic::new(rule, message, assignment.byte_range()).with_label(label, why));
        return;
    }
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
    let Some(training) = loops
        .iter()
        .find(|l| checker.model.loop_facts(**l).is_some_and(|f| f.trains()))
    else {
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

/// Whether an argument text passes the state back (`h`, `(h, c)`, `state`).
fn argument_feeds(argument: &str, name: &str) -> bool {
    argument == name
        || argument
            .trim_matches(['(', ')'])
            .split(',')
            .any(|part| part.trim() == name)
}

/// `h = h.detach()`, `h.detach_()`, `h = repackage_hidden(h)` anywhere in the enclosing loops.
fn detached_in_loop(checker: &Checker<'_>, name: &str) -> bool {
    let region = checker
        .enclosing_loops()
        .last()
        .map(|l| checker.node_text(*l))
        .unwrap_or("");
    region.contains(&format!("{name}.detach(")) || region.contains(&format!("{name}.detach_("))
        || region.contains(&format!("repackage_hidden({name}"))
        || region.contains(&format!("detach_hidden({name}"))
}

fn detached_elsewhere(checker: &Checker<'_>, assignment: Node<'_>, name: &str) -> bool {
    let region = checker
        .analysis
        .enclosing_function(assignment)
        .map_or(checker.text(), |f| checker.node_text(f));
    region.contains(&format!("{name}.detach(")) || region.contains(&format!("{name}.detach_("))
        || region.contains("detach() for")
}

fn function_trains(checker: &Checker<'_>) -> bool {
    checker
        .current_function()
        .is_some_and(|(_, facts)| facts.contains_training)
}
