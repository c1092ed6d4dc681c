//! Rust implementations of the `memory` pack (`rules/memory/`). What they share (which calls
//! are forward passes, which statements accumulate into a container, which loops a container
//! outlives) is a fact of the code: `semantic::{accumulation, per_batch, resets, graph_arguments}`,
//! re-exported here.

pub mod create_graph_cycle;
pub mod cuda_in_dataloader_workers;
pub mod eval_without_no_grad;
pub mod float64_data;
pub mod gpu_collection;
pub mod hook_in_loop;
pub mod hook_stores_activations;
pub mod missing_detach;
pub mod module_copied_per_step;
pub mod pinned_workers;
pub mod retain_graph_in_loop;
pub mod tensor_accumulated;

pub use crate::semantic::accumulation::*;
pub use crate::semantic::graph_arguments::*;
pub use crate::semantic::per_batch::*;
pub use crate::semantic::resets::*;

/// Where a file's tensors are, as the file shows it: code that names CUDA puts them on the
/// GPU; otherwise they are on whatever device the model runs on (`self.device`, a `device`
/// parameter, the framework's accelerator; the CPU in a script that never moves them).
pub(super) fn device_name(checker: &crate::checker::Checker<'_>) -> &'static str {
    if checker.settings.host_only {
        "the CPU"
    } else if crate::semantic::analysis::file_mentions(checker.text(), "cuda") {
        "the GPU"
    } else {
        "the model's device"
    }
}

/// Whether a call is a backward pass: `Some(false)` for `x.backward(...)`, `Some(true)` for
/// `torch.autograd.backward(...)` under any alias (resolved only when the callee could be it).
pub(super) fn backward_call<'a>(
    checker: &crate::checker::Checker<'a>,
    call: crate::syntax::Node<'a>,
) -> Option<bool> {
    use crate::parse::{FIELDS, KINDS};
    let callee = checker.callee(call)?;
    if checker.call_name(call) != Some("backward")
        && !(checker.may_resolve_to(call, |last| last == "backward")
            && checker.qualified_name(callee).as_deref() == Some("torch.autograd.backward"))
    {
        return None;
    }
    if !checker.node_text(callee).ends_with("backward") {
        return None;
    }
    let is_backward = callee.kind_id() == KINDS.attribute
        && checker
            .field(callee, FIELDS.attribute)
            .is_some_and(|a| checker.node_text(a) == "backward");
    let is_autograd_backward =
        checker.qualified_name(callee).as_deref() == Some("torch.autograd.backward");
    (is_backward || is_autograd_backward).then_some(is_autograd_backward)
}

/// [`record_graph_arguments`] as the rules that wait for graph-carrying arguments record it
/// (`Check::facts`).
pub fn record_graph_arguments_at<'a>(
    node: crate::syntax::Node<'a>,
    checker: &crate::checker::Checker<'a>,
) {
    record_graph_arguments(checker, node);
}
