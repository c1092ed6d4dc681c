//! TL105 `float64-data`; documentation and examples in `rules/memory/float64-data.md`.

use std::sync::Arc;

use tree_sitter::Node;

use super::short;
use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::parse::{FIELDS, KINDS};
use crate::rules::declarative::find_argument;
use crate::rules::{Check, RuleMeta};
use crate::semantic::values::{Kind, Tri};

pub struct Float64Data;

const FROM_ARRAYS: &[&str] = &["torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray"];
const DEFAULT_DTYPE: &[&str] = &["torch.set_default_dtype", "torch.set_default_tensor_type"];

impl Check for Float64Data {
    fn kinds(&self) -> &'static [&'static str] {
        &["call"]
    }

    fn check(
        &self,
        rule: &Arc<RuleMeta>,
        call: Node<'_>,
        checker: &Checker<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        let Some(callee) = call.child_by_field_id(FIELDS.function) else {
            return;
        };
        let name = checker.qualified_name(callee).unwrap_or_default();
        let source = checker.text();
        let dtype = find_argument(call, source, Some("dtype"), None).found();
        let what = if DEFAULT_DTYPE.contains(&name.as_str()) {
            let argument = find_argument(call, source, Some("d"), Some(0))
                .found()
                .map(|a| checker.node_text(a))
                .unwrap_or("");
            if !(is_float64(argument) || argument.contains("DoubleTensor")) {
                return;
            }
            "every tensor and layer created from here on is float64".to_owned()
        } else if let Some(dtype) = dtype {
            if !name.starts_with("torch.") || !is_float64(checker.node_text(dtype)) {
                return;
            }
            format!("`{}` creates a float64 tensor", short(checker, call))
        } else if FROM_ARRAYS.contains(&name.as_str()) {
            let Some(array) = find_argument(call, source, Some("data"), Some(0)).found() else {
                return;
            };
            let facts = checker.analysis.facts(array);
            if !facts.float64 || !matches!(facts.kind, Kind::Numpy | Kind::Tensor) {
                return;
            }
            if converted_right_away(checker, call) {
                return;
            }
            format!(
                "`{}` keeps NumPy's default float64",
                short(checker, call)
            )
        } else if callee.kind_id() == KINDS.attribute
            && callee
                .child_by_field_id(FIELDS.attribute)
                .is_some_and(|a| checker.node_text(a) == "double")
        {
            let Some(receiver) = callee.child_by_field_id(FIELDS.object) else {
                return;
            };
            let facts = checker.analysis.facts(receiver);
            // `.double()` on a CPU metric or a Python value costs nothing on the GPU.
            if facts.kind == Kind::Scalar || facts.kind == Kind::Numpy || facts.device == Tri::No {
                return;
            }
            if facts.kind == Kind::Module {
                "`.double()` casts every parameter and buffer of the model to float64".to_owned()
            } else {
                format!("`{}` makes a float64 tensor", short(checker, call))
            }
        } else {
            return;
        };
        let message = rule.message.replace("{what}", &what);
        out.push(Diagnostic::new(rule, message, call.byte_range()));
    }
}

fn is_float64(text: &str) -> bool {
    matches!(
        text.trim(),
        "torch.float64" | "torch.double" | "float64" | "double"
    )
}

/// `torch.from_numpy(a).float()`: converted in the same expression.
fn converted_right_away(checker: &Checker<'_>, call: Node<'_>) -> bool {
    let Some(parent) = call.parent() else {
        return false;
    };
    if parent.kind_id() != KINDS.attribute {
        return false;
    }
    let method = parent
        .child_by_field_id(FIELDS.attribute)
        .map(|a| checker.node_text(a))
        .unwrap_or("");
    if matches!(method, "float" | "half" | "bfloat16" | "long" | "int" | "bool" | "double") {
        // `.double()` is reported at the `.double()` call.
        return true;
    }
    if method == "to"
        && let Some(call) = parent.parent()
    {
        let arguments = checker.node_text(call);
        return arguments.contains("float32")
            || arguments.contains("torch.float)")
            || arguments.contains("float16")
            || arguments.contains("dtype");
    }
    false
}
