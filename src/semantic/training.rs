//! How torchlint recognises training code: the calls that make a loop a training loop, the
//! iterables that make it a per-batch loop, and the framework hooks that run once per batch.

use std::sync::LazyLock;

use crate::syntax::Node;
use regex::Regex;

use super::frameworks::Frameworks;
use crate::parse::{FIELDS, KINDS, text};
use crate::source::TextRange;

/// If a call of `method` through the callee `function` is a training-step call — a backward
/// of the framework table (`x.backward()`, `accelerator.backward(loss)`,
/// `self.manual_backward(loss)`), `optimizer.step()`, `scaler.step(opt)` — the range of its
/// callee, for labels.
pub fn training_step_method(
    function: Node<'_>,
    method: &str,
    source: &str,
    frameworks: &Frameworks,
) -> Option<TextRange> {
    if function.kind_id() != KINDS.attribute {
        return None;
    }
    let is_step = match method {
        _ if frameworks.is_backward_method(method) => true,
        "step" => function
            .child_by_field_id(FIELDS.object)
            .is_some_and(|receiver| is_optimizer_like(last_name(receiver, source))),
        _ => false,
    };
    is_step.then(|| function.byte_range())
}

/// `opt`, `optimizer`, `d_optim`, `opt_g`, `scaler`: names people give optimizers and AMP
/// gradient scalers (whose `.step` is the optimizer step). Not `scheduler`, `env`.
pub fn is_optimizer_like(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if name.contains("optim") || name.contains("scaler") {
        return true;
    }
    name.split('_').any(|part| {
        part == "opt"
            || part == "opts"
            || part
                .strip_prefix("opt")
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The last name in `a.b.c`, `a.b[0]`, `a.b()`: what the value is called.
fn last_name<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    let mut node = node;
    loop {
        let next = if node.kind_id() == KINDS.attribute {
            return node
                .child_by_field_id(FIELDS.attribute)
                .map_or("", |attribute| text(attribute, source));
        } else if node.kind_id() == KINDS.subscript {
            node.child_by_field_id(FIELDS.value)
        } else if node.kind_id() == KINDS.call {
            node.child_by_field_id(FIELDS.function)
        } else {
            return text(node, source);
        };
        match next {
            Some(next) => node = next,
            None => return "",
        }
    }
}

// ASCII word boundaries and case (`-u`): the words are ASCII, and Unicode boundaries cost
// the regex its fast engines (two million instructions to compile, a slower search at every
// loop).
static LOADER_LIKE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i-u)(loader|\bdl\b|_dl\b|\bbatches\b|batch_iter|data_iter|\bdataset\b|minibatches|\bchunks\b)")
        .expect("valid regex")
});

/// Whether a `for` loop's iterable text looks like batches: `loader`, `enumerate(train_loader)`,
/// `tqdm(val_dl)`, `zip(loader_a, loader_b)`, `batches`.
pub fn iterates_batches(iterable: &str) -> bool {
    LOADER_LIKE.is_match(iterable)
}

/// `range(0, len(sentences), batch_size)`, `tqdm(range(0, n, self.bs))`: the start of each
/// batch of data a library's `encode` or `predict` slices itself. The step says so, by name.
pub fn steps_by_batch(iterable: Node<'_>, source: &str) -> bool {
    let mut node = iterable;
    // Under the wrappers that pass the range's items on.
    for _ in 0..3 {
        if node.kind_id() != KINDS.call {
            return false;
        }
        let Some(arguments) = node.child_by_field_id(FIELDS.arguments) else {
            return false;
        };
        let mut cursor = arguments.walk();
        let positional: Vec<Node<'_>> = arguments
            .named_children(&mut cursor)
            .filter(|argument| argument.kind_id() != KINDS.keyword_argument)
            .collect();
        match callee_name(node, source) {
            "range" | "trange" if positional.len() == 3 => {
                let step = last_name(positional[2], source).to_ascii_lowercase();
                return step.contains("batch") || step == "bs" || step.ends_with("_bs");
            }
            "tqdm" | "enumerate" | "iter" => match positional.first() {
                Some(first) => node = *first,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

static TRAINING_CALL_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(fit|train|train_(one_)?epoch|train_model|train_loop|training_loop|run_training|train_steps?|_train|do_train|run_train)$")
        .expect("valid regex")
});

/// Whether calling a function of this name trains a model (`trainer.fit()`, `train(...)`).
pub fn is_training_entry_point(name: &str) -> bool {
    TRAINING_CALL_NAME.is_match(name)
}

/// The name a call's callee ends in (`trainer.fit` → `fit`).
pub fn callee_name<'s>(call: Node<'_>, source: &'s str) -> &'s str {
    call.child_by_field_id(FIELDS.function)
        .map_or("", |function| last_name(function, source))
}

/// `val_loader`, `valid_dl`, `eval_dataloader`, `test_ds`, `testloader`, `loader_val`.
pub fn names_evaluation_data(word: &str) -> bool {
    const SPLITS: &[&str] = &["validation", "valid", "val", "evaluation", "eval", "test"];
    const DATA: &[&str] = &[
        "loader",
        "dataloader",
        "dl",
        "data",
        "dataset",
        "ds",
        "set",
        "batches",
        "iter",
        "loaders",
        "dataloaders",
    ];
    let word = word.to_ascii_lowercase();
    let data = |rest: &str| DATA.contains(&rest.trim_start_matches('_'));
    SPLITS.iter().any(|split| {
        word.strip_prefix(split).is_some_and(data)
            || word
                .strip_suffix(split)
                .and_then(|rest| rest.strip_suffix('_'))
                .is_some_and(|rest| DATA.contains(&rest))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimizer_names() {
        for name in [
            "opt",
            "optimizer",
            "d_optim",
            "opt_g",
            "opt1",
            "scaler",
            "g_opt",
        ] {
            assert!(is_optimizer_like(name), "{name}");
        }
        for name in [
            "scheduler",
            "env",
            "lr_sched",
            "option",
            "optional_thing",
            "adopt",
        ] {
            assert!(!is_optimizer_like(name), "{name}");
        }
    }

    #[test]
    fn batch_iterables() {
        for iterable in [
            "loader",
            "enumerate(train_loader)",
            "tqdm(val_dl)",
            "batches",
            "self.train_dataloader()",
            // Any case; a word ends at any other character.
            "tqdm(VAL_DL)",
            "Batches[0]",
            "données.dataset",
        ] {
            assert!(iterates_batches(iterable), "{iterable}");
        }
        for iterable in [
            "range(epochs)",
            "model.modules()",
            "params",
            "self.layers",
            "dlx",
            "my_datasets",
        ] {
            assert!(!iterates_batches(iterable), "{iterable}");
        }
    }
}
