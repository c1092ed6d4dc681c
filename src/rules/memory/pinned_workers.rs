//! TL106 `pinned-workers`; documentation and examples in `rules/memory/pinned-workers.md`.

use std::sync::Arc;

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit};
use crate::parse::KINDS;
use crate::rule_meta::RuleMeta;
use crate::rules::declarative::find_argument;
use crate::rules::{Check, edits};
use crate::semantic::constants::Constant;

pub struct PinnedWorkers;

impl Check for PinnedWorkers {
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
        let Some(callee) = checker.callee(call) else {
            return;
        };
        // Pinning has to be asked for: `pin_memory=...`, or a `**kwargs` that may hold it.
        let passes_pinning = checker.arguments(call).is_some_and(|arguments| {
            let text = checker.node_text(arguments);
            text.contains("pin_memory") || text.contains("**")
        });
        if !passes_pinning {
            return;
        }
        // `DataLoader(...)` (under any alias, a subclass of it, or a class chosen by a
        // conditional), or `functools.partial(DataLoader, ...)`, whose arguments go by keyword.
        let partial = checker
            .qualified_name(callee)
            .is_some_and(|name| name == "functools.partial");
        let loader = if partial {
            checker
                .arguments(call)
                .and_then(|arguments| arguments.named_child(0))
        } else {
            Some(callee)
        };
        if !loader.is_some_and(|loader| checker.analysis.is_data_loader(loader)) {
            return;
        }
        let position = |index: usize| (!partial).then_some(index);
        let analysis = &checker.analysis;
        let argument = |keyword: &str, position: Option<usize>| {
            analysis.loader_argument(call, keyword, position)
        };
        // DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
        //            collate_fn, pin_memory, ...)
        let pinned = argument("pin_memory", position(7))
            .is_some_and(|value| analysis.constant(value) == Constant::Bool(true));
        if !pinned {
            return;
        }
        let Some(workers_node) = argument("num_workers", position(5)) else {
            return;
        };
        let max_workers = checker
            .option(rule, "max-workers")
            .and_then(|value| value.as_integer())
            .unwrap_or(8);
        let workers = analysis.constant(workers_node);
        let prefetch = argument("prefetch_factor", None)
            .map(|p| analysis.constant(p))
            .and_then(|p| match p {
                Constant::Int(i) => Some(i),
                _ => None,
            })
            .unwrap_or(2);
        let batch = argument("batch_size", position(1)).and_then(|b| match analysis.constant(b) {
            Constant::Int(i) => Some(i),
            _ => None,
        });
        let (count, description) = match workers {
            Constant::Int(n) if n > max_workers => (
                format!("{}", n * prefetch + 1),
                format!("`num_workers={n}` and `prefetch_factor={prefetch}`"),
            ),
            Constant::CpuCount => (
                format!("(CPU count × {prefetch} + 1)"),
                "`num_workers` tied to the CPU count".to_owned(),
            ),
            _ => return,
        };
        let sample = argument("dataset", position(0)).and_then(|d| sample_bytes(checker, d));
        let batches = match (batch, sample) {
            (Some(size), Some(sample)) => {
                let batch_bytes = size as u64 * sample;
                let pinned = match workers {
                    Constant::Int(n) => format!(
                        ", about {} pinned",
                        human_bytes((n * prefetch + 1) as u64 * batch_bytes.next_power_of_two())
                    ),
                    _ => String::new(),
                };
                format!(
                    "{count} batches of {size} samples ({} each{pinned})",
                    human_bytes(batch_bytes)
                )
            }
            (Some(size), None) => format!("{count} batches of {size} samples"),
            _ => format!("{count} batches"),
        };
        let message = rule
            .message
            .replace("{workers}", &description)
            .replace("{batches}", &batches)
            .replace("{max}", &max_workers.to_string());
        let mut diagnostic = Diagnostic::new(rule, message, call.byte_range());
        if workers_node.byte_range() != call.byte_range() {
            let shown = super::short(checker, workers_node);
            diagnostic = diagnostic.with_label(
                workers_node.byte_range(),
                match workers {
                    Constant::CpuCount => format!("`{shown}` grows with the machine"),
                    _ => format!("`{shown}` worker processes"),
                },
            );
        }
        let cap = match workers {
            Constant::CpuCount => {
                format!("min({}, {max_workers})", checker.node_text(workers_node))
            }
            _ => max_workers.to_string(),
        };
        diagnostic.fix = Some(edits::suggestion(
            format!("Cap the workers at {max_workers} (`max-workers`), or drop `pin_memory=True`"),
            vec![Edit {
                range: workers_node.byte_range(),
                content: cap,
            }],
        ));
        out.push(diagnostic);
    }
}

/// The bytes of one sample of a `TensorDataset` built from tensors of literal shape
/// (`TensorDataset(torch.randn(1000, 3, 32, 32), torch.randint(0, 10, (1000,)))`).
fn sample_bytes<'a>(checker: &Checker<'a>, dataset: Node<'a>) -> Option<u64> {
    let analysis = &checker.analysis;
    let dataset = analysis.bound_value(dataset).unwrap_or(dataset);
    if dataset.kind_id() != KINDS.call {
        return None;
    }
    let callee = checker.callee(dataset)?;
    if !analysis.qualified_name(callee).is_some_and(|name| {
        name.ends_with("data.TensorDataset") || name.ends_with("dataset.TensorDataset")
    }) {
        return None;
    }
    let arguments = checker.arguments(dataset)?;
    let mut cursor = arguments.walk();
    let tensors: Vec<Node<'_>> = arguments.named_children(&mut cursor).collect();
    let mut total = 0;
    for tensor in tensors {
        let tensor = analysis.bound_value(tensor).unwrap_or(tensor);
        total += tensor_sample_bytes(checker, tensor)?;
    }
    (total > 0).then_some(total)
}

/// Bytes per row of `torch.randn(n, d1, d2)`, `torch.zeros((n, d), dtype=...)`,
/// `torch.randint(lo, hi, (n, d))`.
fn tensor_sample_bytes<'a>(checker: &Checker<'a>, call: Node<'a>) -> Option<u64> {
    let analysis = &checker.analysis;
    if call.kind_id() != KINDS.call {
        return None;
    }
    let name = analysis.qualified_name(checker.callee(call)?)?;
    let function = name.strip_prefix("torch.")?;
    let source = checker.text();
    let dtype = find_argument(call, source, Some("dtype"), None)
        .found()
        .map(|d| checker.node_text(d));
    let (shape_at, default_size) = match function {
        "randn" | "rand" | "zeros" | "ones" | "empty" => (0, 4),
        "randint" => (2, 8),
        _ => return None,
    };
    let element = match dtype {
        None => default_size,
        Some(dtype) => element_size(dtype)?,
    };
    let arguments = checker.arguments(call)?;
    let mut cursor = arguments.walk();
    let positional: Vec<Node<'_>> = arguments
        .named_children(&mut cursor)
        .filter(|a| a.kind_id() != KINDS.keyword_argument)
        .collect();
    let dims: Vec<Node<'_>> = match positional.get(shape_at) {
        Some(shape) if shape.kind_id() == KINDS.tuple || shape.kind_id() == KINDS.list => {
            let mut cursor = shape.walk();
            shape.named_children(&mut cursor).collect()
        }
        Some(_) if shape_at == 0 => positional.clone(),
        _ => return None,
    };
    let mut row = element;
    for dim in dims.iter().skip(1) {
        match analysis.constant(*dim) {
            Constant::Int(n) if n > 0 => row *= n as u64,
            _ => return None,
        }
    }
    Some(row)
}

fn element_size(dtype: &str) -> Option<u64> {
    let name = dtype.rsplit('.').next()?;
    Some(match name {
        "float64" | "double" | "int64" | "long" | "complex64" => 8,
        "float32" | "float" | "int32" | "int" => 4,
        "float16" | "half" | "bfloat16" | "int16" | "short" => 2,
        "uint8" | "int8" | "bool" => 1,
        _ => return None,
    })
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: &[&str] = &["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else if value >= 100.0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
