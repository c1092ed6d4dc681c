//! TL105 `float64-data`; documentation and examples in `rules/memory/float64-data.md`.

use std::sync::{Arc, LazyLock};

use crate::syntax::Node;

use super::short;
use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::parse::{FIELDS, KINDS};
use crate::rule_meta::{Applicability, RuleMeta};
use crate::rules::declarative::find_argument;
use crate::rules::{Check, edits};
use crate::semantic::values::{Kind, Tri};

pub struct Float64Data;

const FROM_ARRAYS: &[&str] = &[
    "torch.from_numpy",
    "torch.tensor",
    "torch.as_tensor",
    "torch.asarray",
];
const DEFAULT_DTYPE: &[&str] = &["torch.set_default_dtype", "torch.set_default_tensor_type"];

/// Searches call texts for `dtype`, built once (this rule looks at every call).
static DTYPE: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new("dtype"));

impl Check for Float64Data {
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
        // A cast, a conversion from an array or a default-dtype switch by its recorded name,
        // or any `torch.*` call (which may take `dtype=`).
        let named = matches!(
            checker.call_name(call),
            Some(
                "double"
                    | "to"
                    | "type"
                    | "from_numpy"
                    | "tensor"
                    | "as_tensor"
                    | "asarray"
                    | "set_default_dtype"
                    | "set_default_tensor_type"
            )
        );
        let Some(callee) = checker.callee(call) else {
            return;
        };
        // Without one of those names, only an alias of one (`from torch import tensor as T`)
        // or a `torch.*` call taking `dtype=` is ours; the text tests come before resolving.
        if !named {
            let mentions_dtype = DTYPE.find(checker.node_text(call).as_bytes()).is_some();
            if !mentions_dtype && !checker.may_resolve_to(call, |_| false) {
                return;
            }
            let ours = checker.qualified_name(callee).is_some_and(|name| {
                FROM_ARRAYS.contains(&name.as_str())
                    || DEFAULT_DTYPE.contains(&name.as_str())
                    || (name.starts_with("torch.") && mentions_dtype)
            });
            if !ours {
                return;
            }
        }
        // Syntax first: a cast, a conversion from an array, a default-dtype switch, or a
        // `dtype=` keyword.
        // The last name of what is called, through aliases and parentheses
        // (`from torch import from_numpy as to_tensor`, `(torch.from_numpy)(x)`).
        let resolved = checker.qualified_name(callee);
        let callee_text = checker.node_text(callee);
        let last = resolved
            .as_deref()
            .unwrap_or(callee_text)
            .rsplit('.')
            .next()
            .unwrap_or(callee_text);
        let shaped = matches!(
            last,
            "double"
                | "to"
                | "type"
                | "from_numpy"
                | "tensor"
                | "as_tensor"
                | "asarray"
                | "set_default_dtype"
                | "set_default_tensor_type"
        ) || checker
            .arguments(call)
            .is_some_and(|arguments| checker.node_text(arguments).contains("dtype"));
        if !shaped {
            return;
        }
        let name = resolved.unwrap_or_default();
        let source = checker.text();
        let dtype = find_argument(call, source, Some("dtype"), None).found();
        let mut fix = None;
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
            if !creates_data(checker, call, &name) || checks_gradients(checker, call) {
                return;
            }
            fix = float32_dtype(checker, dtype);
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
            fix = Some(Fix {
                message: "Convert it with `.float()`".to_owned(),
                applicability: Applicability::Unsafe,
                edits: vec![edits::call_method(checker, call, ".float()")],
            });
            format!("`{}` keeps NumPy's default float64", short(checker, call))
        } else if callee.kind_id() == KINDS.attribute && casts_to_float64(checker, call, callee) {
            let Some(receiver) = checker.field(callee, FIELDS.object) else {
                return;
            };
            let facts = checker.analysis.facts(receiver);
            // `.double()` on a CPU metric or a Python value costs nothing on the GPU; a model
            // cast to float64 doubles its parameters wherever it lives (and what it will be
            // moved to the GPU with).
            if facts.kind == Kind::Scalar
                || facts.kind == Kind::Numpy
                || (facts.device == Tri::No && facts.kind != Kind::Module)
            {
                return;
            }
            if facts.kind != Kind::Module && !is_input_data(checker, call, receiver, facts.device) {
                return;
            }
            if facts.kind == Kind::Module {
                format!(
                    "`{}` casts every parameter and buffer of the model to float64",
                    short(checker, call)
                )
            } else {
                format!("`{}` makes a float64 tensor", short(checker, call))
            }
        } else {
            return;
        };
        let message = rule.message.replace("{what}", &what);
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        diagnostic.fix = fix;
        out.push(diagnostic);
    }
}

/// The fix of `dtype=torch.float64` (or `torch.double`, through any alias of `torch`): the
/// same module's `float32`. Unsafe: the tensor loses precision, and code that compares dtypes
/// or mixes it with float64 tensors behaves otherwise.
fn float32_dtype<'a>(checker: &Checker<'a>, dtype: Node<'a>) -> Option<Fix> {
    if dtype.kind_id() != KINDS.attribute {
        return None;
    }
    let attribute = checker.field(dtype, FIELDS.attribute)?;
    if !matches!(checker.node_text(attribute), "float64" | "double") {
        return None;
    }
    Some(Fix {
        message: "Make it float32".to_owned(),
        applicability: Applicability::Unsafe,
        edits: vec![Edit {
            range: attribute.byte_range(),
            content: "float32".to_owned(),
        }],
    })
}

/// Whether an explicitly float64 creation makes data (a buffer, a batch, a dataset) rather
/// than a scalar or a numeric helper (a window, a grid): those are small and often need the
/// precision.
fn creates_data<'a>(checker: &Checker<'a>, call: Node<'a>, name: &str) -> bool {
    let function = name.rsplit('.').next().unwrap_or(name);
    match function {
        "zeros" | "ones" | "empty" | "full" | "rand" | "randn" | "randint" | "normal"
        | "zeros_like" | "ones_like" | "empty_like" | "full_like" | "rand_like" | "randn_like"
        | "stack" | "cat" => true,
        "tensor" | "as_tensor" | "asarray" | "from_numpy" => {
            find_argument(call, checker.text(), Some("data"), Some(0))
                .found()
                .is_some_and(|data| {
                    let facts = checker.analysis.facts(data);
                    matches!(facts.kind, Kind::Numpy | Kind::Tensor | Kind::Container)
                        || data.kind_id() == KINDS.list
                        || data.kind_id() == KINDS.list_comprehension
                })
        }
        _ => false,
    }
}

/// `.double()`, `.to(torch.float64)`, `.type(torch.float64)`, `.type(torch.DoubleTensor)`.
fn casts_to_float64<'a>(checker: &Checker<'a>, call: Node<'a>, callee: Node<'a>) -> bool {
    let method = checker
        .field(callee, FIELDS.attribute)
        .map_or("", |a| checker.node_text(a));
    match method {
        "double" => true,
        "to" | "type" => {
            let source = checker.text();
            let dtype = find_argument(call, source, Some("dtype"), None)
                .found()
                .or_else(|| {
                    // `.to(torch.float64)`, `.to(device, torch.float64)`
                    (0..2).find_map(|i| {
                        find_argument(call, source, None, Some(i))
                            .found()
                            .filter(|a| is_float64(checker.node_text(*a)))
                    })
                });
            dtype.is_some_and(|dtype| {
                let text = checker.node_text(dtype);
                is_float64(text) || text.ends_with("DoubleTensor")
            })
        }
        _ => false,
    }
}

/// Whether a cast tensor is data on its way into a model: a tensor already on the GPU, a
/// batch (`x`, `inputs`, `batch`, `images`, ...), or anything cast in a data-pipeline function
/// (`__getitem__`, `collate_fn`, `prepare_batch`, `preprocess`). A model's own methods and
/// metric code choose their precision on purpose (quantisation scales, confusion matrices).
fn is_input_data<'a>(
    checker: &Checker<'a>,
    call: Node<'a>,
    receiver: Node<'a>,
    device: Tri,
) -> bool {
    if super::in_module_method(checker, call) {
        return false;
    }
    // `torch.autograd.Function.forward/backward`: a custom op's internal precision.
    if checker.current_function().is_some_and(|(_, facts)| {
        facts.class.is_some() && matches!(facts.name.as_str(), "forward" | "backward")
    }) {
        return false;
    }
    if device == Tri::Yes {
        return true;
    }
    let function = checker
        .current_function()
        .map(|(_, facts)| facts.name.to_ascii_lowercase())
        .unwrap_or_default();
    if [
        "getitem",
        "collate",
        "prepare",
        "preprocess",
        "batch",
        "transform",
        "to_tensor",
    ]
    .iter()
    .any(|word| function.contains(word))
    {
        return true;
    }
    let mut root = receiver;
    while let Some(object) = checker.field(root, FIELDS.object) {
        root = object;
    }
    let name = checker.node_text(root).to_ascii_lowercase();
    let name = name.trim_start_matches('_');
    matches!(
        name,
        "x" | "xs"
            | "inputs"
            | "input"
            | "input_ids"
            | "batch"
            | "data"
            | "images"
            | "imgs"
            | "image"
            | "img"
            | "features"
            | "feats"
            | "samples"
            | "sample"
            | "signals"
            | "frames"
    ) || name.starts_with("batch_")
        || name.starts_with("input_")
}

/// Numerical gradient checks (`torch.autograd.gradcheck`) need float64 inputs.
fn checks_gradients<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let region = checker
        .analysis
        .enclosing_function(call)
        .map_or(checker.text(), |function| checker.node_text(function));
    region.contains("gradcheck(")
}

fn is_float64(text: &str) -> bool {
    matches!(
        text.trim(),
        "torch.float64" | "torch.double" | "float64" | "double"
    )
}

/// `torch.from_numpy(a).float()`: converted in the same expression.
fn converted_right_away<'a>(checker: &Checker<'a>, call: Node<'a>) -> bool {
    let Some(parent) = call.parent() else {
        return false;
    };
    if parent.kind_id() != KINDS.attribute {
        return false;
    }
    let method = checker
        .field(parent, FIELDS.attribute)
        .map(|a| checker.node_text(a))
        .unwrap_or("");
    if matches!(
        method,
        "float" | "half" | "bfloat16" | "long" | "int" | "bool" | "double"
    ) {
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
