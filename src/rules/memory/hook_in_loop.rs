//! TL109 `hook-in-loop`; documentation and examples in `rules/memory/hook-in-loop.md`.

use std::sync::Arc;

use crate::syntax::Node;

use super::tensor_accumulated::in_module_forward;
use super::{loop_header, per_batch_function};
use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::parse::{FIELDS, KINDS, mentions_word};
use crate::rule_meta::RuleMeta;
use crate::rules::{Check, edits};
use crate::semantic::hooks::MODULE_HOOKS;
use crate::semantic::values::Kind;
use crate::source::TextRange;

pub struct HookInLoop;

/// Besides the module hooks: a hook on a tensor (on parameters, it lives as long as they do).
const TENSOR_HOOK: &str = "register_hook";

fn registers(name: &str) -> bool {
    MODULE_HOOKS.contains(&name) || name == TENSOR_HOOK
}

impl Check for HookInLoop {
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
        if !checker.call_name(call).is_some_and(registers) {
            return;
        }
        let Some(callee) = checker.callee(call) else {
            return;
        };
        if callee.kind_id() != KINDS.attribute {
            return;
        }
        let Some(method) = checker.field(callee, FIELDS.attribute) else {
            return;
        };
        let method = checker.node_text(method);
        if !registers(method) {
            return;
        }
        // Where it runs repeatedly: a training, epoch or batch loop, every forward, a
        // per-batch hook (`training_step`), or a helper called from such a loop.
        let repeating = checker
            .enclosing_loops()
            .into_iter()
            .find(|loop_node| repeats(checker, *loop_node));
        let label = match repeating {
            Some(loop_node) => {
                if hook_on_fresh_tensor(checker, callee, loop_node) {
                    return;
                }
                Some((
                    loop_header(checker, loop_node),
                    "this loop registers a new hook on every iteration".to_owned(),
                ))
            }
            None if in_module_forward(checker) => None,
            None if checker.enclosing_loops().is_empty() => {
                match per_batch_function(checker)
                    .or_else(|| called_in_loop(checker))
                    .or_else(|| registered_as_hook(checker))
                {
                    Some((range, why)) => Some((range, why)),
                    None => return check_per_instance(rule, call, checker, out),
                }
            }
            // A loop over the module's children, in a function that is itself a hook.
            None => match registered_as_hook(checker) {
                Some(label) => Some(label),
                None => return check_per_instance(rule, call, checker, out),
            },
        };
        if handle_is_managed(checker, call) {
            return;
        }
        let message = if handles_replaced(checker, call) {
            format!(
                "`{method}` runs on every call and its handles go into a list the next call replaces: only the last call's hooks are ever removed, the others pile up on the module, all of them run on each call, and what they store stays alive"
            )
        } else {
            rule.message.replace("{method}", method)
        };
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if let Some((range, why)) = label {
            diagnostic = diagnostic.with_label(range, why);
        }
        diagnostic.fix = keep_the_handle(call);
        out.push(diagnostic);
    }
}

/// The suggestion: keep the handle the registration returns (`handle = model.register_...`),
/// to remove the hook once the step is done; where that is, the rule cannot tell. Only where
/// the registration is a statement of its own, its handle dropped.
fn keep_the_handle(call: Node<'_>) -> Option<Fix> {
    call.parent()
        .filter(|statement| statement.kind_id() == KINDS.expression_statement)?;
    Some(edits::suggestion(
        "Keep the handle, and call `handle.remove()` once the step is done",
        vec![Edit {
            range: call.start_byte()..call.start_byte(),
            content: "handle = ".to_owned(),
        }],
    ))
}

/// `model.register_forward_hook(self._keep)` in a method of a helper class (no module) that
/// nothing in the class removes: each instance adds hooks to a model it does not own, for good,
/// and a user who builds one helper per image or batch piles them up. A class with a removal
/// path (any `.remove()`, `__exit__`, `__del__`) is left to its users.
fn check_per_instance<'a>(
    rule: &Arc<RuleMeta>,
    call: Node<'a>,
    checker: &Checker<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let Some((_, facts)) = checker.current_function() else {
        return;
    };
    let Some(class) = facts.class else {
        return;
    };
    let analysis = &checker.analysis;
    if analysis.modules().is_module_class(class) {
        // A module hooking its own layers: the hooks live and die with it.
        return;
    }
    let info = &checker.model.classes[class];
    let removes = info
        .methods
        .iter()
        .any(|(name, _)| matches!(*name, "__exit__" | "__del__" | "remove"))
        || memchr::memmem::find(checker.node_text(info.node).as_bytes(), b".remove(").is_some();
    if removes || !on_a_model_passed_in(checker, call) {
        return;
    }
    let method = checker.call_name(call).unwrap_or("register_forward_hook");
    let message = format!(
        "`{method}` adds a hook to a model that `{}` does not own, and nothing in the class removes it: every instance adds one for good, all of them run on each call, and what they store stays alive",
        info.name
    );
    out.push(
        Diagnostic::new(rule, message, call.byte_range()).with_label(
            facts.header.clone(),
            format!("each `{}(...)` runs this", info.name),
        ),
    );
}

/// Whether a hook is registered on a model the instance was given (a parameter of the method,
/// or an attribute holding a model), or on one of its layers, also through a loop over them.
fn on_a_model_passed_in<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(receiver) = checker
        .callee(call)
        .and_then(|callee| checker.field(callee, FIELDS.object))
    else {
        return false;
    };
    let root = checker.analysis.chain_root(receiver);
    if root.kind_id() == KINDS.identifier {
        // `for m in model.modules(): m.register_...`: the model the loop walks.
        let name = checker.node_text(root);
        let walked = checker.enclosing_loops().into_iter().find_map(|loop_node| {
            let target = checker.field(loop_node, FIELDS.left)?;
            let names_it = mentions_word(checker.node_text(target), name);
            names_it
                .then(|| checker.field(loop_node, FIELDS.right))
                .flatten()
        });
        return match walked {
            Some(iterable) => checker
                .analysis
                .given_model(checker.analysis.chain_root(iterable)),
            None => checker.analysis.given_model(root),
        };
    }
    checker.analysis.given_model(root)
}

/// A training, epoch or batch loop.
fn repeats<'a>(checker: &Checker<'a>, loop_node: Node<'a>) -> bool {
    let Some(facts) = checker.model.loop_facts(loop_node) else {
        return false;
    };
    facts.trains()
        || facts.nested_training
        || checker
            .field(loop_node, FIELDS.right)
            .is_some_and(|iterable| checker.analysis.iterates_batches(iterable))
}

/// `act.register_hook(...)` on a tensor computed in this iteration: the hook goes away with
/// the tensor.
fn hook_on_fresh_tensor<'a>(checker: &Checker<'a>, callee: Node<'a>, loop_node: Node<'a>) -> bool {
    let Some(receiver) = checker.field(callee, FIELDS.object) else {
        return false;
    };
    let Some(value) = checker.analysis.reaching_value(receiver) else {
        return false;
    };
    loop_node.byte_range().contains(&value.start_byte())
        && checker.analysis.facts(receiver).kind == Kind::Tensor
}

/// A function the file registers as a hook itself (`m.register_forward_pre_hook(self._pre)`):
/// it runs on every forward or backward, and registers another hook each time.
fn registered_as_hook(checker: &Checker<'_>) -> Option<(TextRange, String)> {
    let (function, facts) = checker.current_function()?;
    let name = facts.name.as_str();
    let registered = MODULE_HOOKS.iter().chain([&TENSOR_HOOK]).any(|method| {
        checker
            .model
            .calls_by_name
            .get(method)
            .into_iter()
            .flatten()
            .any(|call| {
                // Not the registration inside the function itself.
                !function.byte_range().contains(&call.start_byte())
                    && checker.arguments(*call).is_some_and(|arguments| {
                        let mut cursor = arguments.walk();
                        arguments.named_children(&mut cursor).any(|argument| {
                            let text = checker.node_text(argument);
                            text == name || text.strip_prefix("self.") == Some(name)
                        })
                    })
            })
    });
    registered.then(|| {
        (
            facts.header.clone(),
            format!("`{name}` is itself a hook: it runs on every call of the module"),
        )
    })
}

/// For a function without loops: a call of it inside a repeating loop of this file.
fn called_in_loop<'a>(checker: &Checker<'a>) -> Option<(TextRange, String)> {
    let (function, facts) = checker.current_function()?;
    let is_method = facts.class.is_some();
    let calls = checker.model.calls_by_name.get(facts.name.as_str())?;
    calls.iter().find_map(|call| {
        let attribute_call = checker
            .callee(*call)
            .is_some_and(|c| c.kind_id() == KINDS.attribute);
        if attribute_call != is_method || function.byte_range().contains(&call.start_byte()) {
            return None;
        }
        let mut node = call.parent();
        while let Some(current) = node {
            let kind = current.kind_id();
            if kind == KINDS.function_definition || kind == KINDS.class_definition {
                return None;
            }
            if (kind == KINDS.for_statement || kind == KINDS.while_statement)
                && repeats(checker, current)
            {
                return Some((
                    call.byte_range(),
                    format!(
                        "`{}` is called here on every iteration of a training loop",
                        facts.name
                    ),
                ));
            }
            node = current.parent();
        }
        None
    })
}

/// `self.handles = [c.register_forward_hook(f) for c in ...]`: the handle goes into a list on
/// the instance that the assignment replaces, and the function does not remove the old ones
/// first (`for h in self.handles: h.remove()`).
fn handles_replaced<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(list) = call
        .parent()
        .filter(|p| p.kind_id() == KINDS.list_comprehension || p.kind_id() == KINDS.list)
    else {
        return false;
    };
    let Some(left) = list
        .parent()
        .filter(|p| p.kind_id() == KINDS.assignment)
        .and_then(|assignment| checker.field(assignment, FIELDS.left))
    else {
        return false;
    };
    let function = checker
        .analysis
        .enclosing_function(call)
        .map_or(checker.text(), |f| checker.node_text(f));
    checker.node_text(left).starts_with("self.") && !function.contains(".remove()")
}

/// Whether the handle is kept and removed: `h = m.register_...(...)` with `h.remove()` in the
/// same function, collected into a list, or used as a context manager.
fn handle_is_managed<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(parent) = call.parent() else {
        return false;
    };
    let kind = parent.kind_id();
    if kind == KINDS.expression_statement {
        return false;
    }
    if kind == KINDS.assignment {
        let Some(left) = checker.field(parent, FIELDS.left) else {
            return true;
        };
        let name = checker.node_text(left);
        let region = checker
            .analysis
            .enclosing_function(call)
            .map_or(checker.text(), |f| checker.node_text(f));
        return region.contains(&format!("{name}.remove()"));
    }
    // `handles.append(m.register_...(...))`: managed when something removes the handles.
    if kind == KINDS.argument_list
        && let Some(append) = parent.parent()
        && let Some(callee) = checker.callee(append)
        && checker.node_text(callee).ends_with(".append")
        && let Some(list) = checker.field(callee, FIELDS.object)
    {
        let list = checker.node_text(list);
        let text = checker.text();
        return text.contains(".remove()")
            && (text.contains(&format!("in {list}")) || text.contains(&format!("{list}.pop")));
    }
    // `self.handles = [c.register_forward_hook(f) for c in module.children()]` where this runs
    // on every call: each run replaces the list and loses the handles of the run before, so
    // only the last run's are ever removed — unless the function removes the old ones first.
    if kind == KINDS.list_comprehension || kind == KINDS.list {
        return !handles_replaced(checker, call);
    }
    // A `with` item, a return value, another call's argument: managed elsewhere.
    true
}
