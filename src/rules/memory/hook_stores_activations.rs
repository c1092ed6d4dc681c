//! TL111 `hook-stores-activations`; documentation and examples in
//! `rules/memory/hook-stores-activations.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::rule_meta::RuleMeta;
use crate::rules::Check;
use crate::semantic::hooks::MODULE_HOOKS;
use crate::semantic::training::iterates_batches;

pub struct HookStoresActivations;

impl Check for HookStoresActivations {
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
        let analysis = &checker.analysis;
        // `None` for any call but a module-hook registration.
        let Some(hook) = analysis.registered_hook(call) else {
            return;
        };
        // Removed after the forwards it was for (also `with module.register_...(fn):`).
        if analysis.handle_removed(call) || !runs_repeatedly(checker) {
            return;
        }
        // One report per hook, at its first registration (a loop over layers registers it
        // on each).
        let first = MODULE_HOOKS
            .iter()
            .flat_map(|name| checker.model.calls_by_name.get(name).into_iter().flatten())
            .filter(|other| other.start_byte() < call.start_byte())
            .any(|other| {
                analysis
                    .registered_hook(*other)
                    .is_some_and(|earlier| earlier.function.id() == hook.function.id())
            });
        if first {
            return;
        }
        let pass = if hook.backward { "backward" } else { "forward" };
        for kept in analysis.kept_by_hook(&hook) {
            if analysis.emptied_anywhere(kept.container) {
                continue;
            }
            let container = checker.node_text(kept.container);
            let value = checker.node_text(kept.value);
            let what = if value.contains(".detach()") {
                "activations stay on the device".to_owned()
            } else if hook.backward {
                "gradients stay on the device".to_owned()
            } else {
                "activations stay on the device, and under grad the graph behind each of them"
                    .to_owned()
            };
            let message = rule
                .message
                .replace("{container}", container)
                .replace("{value}", value)
                .replace("{pass}", pass)
                .replace("{what}", &what);
            out.push(
                Diagnostic::new(rule, message, kept.store.byte_range()).with_label(
                    call.byte_range(),
                    format!("registered here: runs on every {pass} of the module"),
                ),
            );
        }
    }
}

/// Whether the hooked module runs again and again: the registration is in a function (a
/// library's extractor, a callback: its callers run the model) or the file has a training loop
/// or a loop over batches.
fn runs_repeatedly(checker: &Checker<'_>) -> bool {
    checker.in_function()
        || checker.model.has_training_loop()
        || checker.text().lines().any(|line| {
            let line = line.trim_start();
            line.starts_with("for ")
                && line
                    .split_once(" in ")
                    .is_some_and(|(_, iterable)| iterates_batches(iterable.trim_end_matches(':')))
        })
}
