//! The memory budget: how the device memory of a moment splits into parameters, gradients,
//! optimizer state, activations and other tensors, and the allocator's cache; and whether an
//! out-of-memory error was fragmentation.

use serde::{Deserialize, Serialize};

use super::events::{Budget, OutOfMemory};
use super::verdict::fmt_bytes;

/// The part of the budget a module's forward allocated, where the stacks tell it apart.
pub const ACTIVATIONS: &str = "activations (made in a forward)";

/// One part of the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub what: String,
    pub bytes: u64,
}

/// A budget as reported: what the runner read, and the parts it splits into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    #[serde(flatten)]
    pub read: Budget,
    pub parts: Vec<Part>,
}

impl Split {
    pub fn of(read: Budget) -> Split {
        let mut parts = vec![
            Part {
                what: "parameters".to_owned(),
                bytes: read.parameters,
            },
            Part {
                what: "gradients".to_owned(),
                bytes: read.gradients,
            },
        ];
        for optimizer in &read.optimizers {
            parts.push(Part {
                what: format!("optimizer state ({})", optimizer.class),
                bytes: optimizer.bytes,
            });
        }
        let counted: u64 = parts.iter().map(|part| part.bytes).sum();
        if let Some(allocated) = read.allocated {
            // Everything else the allocator hands out: the forward's activations and what
            // autograd saved for the backward, batches, outputs, anything the script keeps;
            // told apart where the allocation stacks were read (`--attribute`).
            let rest = allocated.saturating_sub(counted);
            match read.activations {
                Some(activations) => {
                    let activations = activations.min(rest);
                    parts.push(Part {
                        what: ACTIVATIONS.to_owned(),
                        bytes: activations,
                    });
                    parts.push(Part {
                        what: "other tensors".to_owned(),
                        bytes: rest - activations,
                    });
                }
                None => parts.push(Part {
                    what: "activations and other tensors".to_owned(),
                    bytes: rest,
                }),
            }
            if let Some(reserved) = read.reserved {
                parts.push(Part {
                    what: "cached but free".to_owned(),
                    bytes: reserved.saturating_sub(allocated),
                });
            }
        }
        Split { read, parts }
    }

    /// The table: a heading, then one line per part with its share of what the allocator
    /// reserved (device runs) or of the counted tensors (CPU mode).
    pub fn lines(&self) -> Vec<String> {
        let when = match self.read.at.as_str() {
            "out_of_memory" => "at the out-of-memory error",
            "peak" => "at its peak",
            "complete" => "once the watched lines had their hits",
            _ => "at the end of the run",
        };
        let heading = match (self.read.allocated, self.read.reserved) {
            (Some(allocated), Some(reserved)) => format!(
                "device memory {when}: {} allocated, {} reserved",
                fmt_bytes(allocated as f64),
                fmt_bytes(reserved as f64)
            ),
            _ if self.read.device => format!("device memory {when}"),
            _ => format!("host memory of the model and optimizer {when} (CPU mode)"),
        };
        let whole = self
            .read
            .reserved
            .unwrap_or_else(|| self.parts.iter().map(|part| part.bytes).sum());
        let width = self
            .parts
            .iter()
            .map(|part| part.what.len())
            .max()
            .unwrap_or(0);
        let mut lines = vec![heading];
        for part in &self.parts {
            let share = if whole > 0 {
                format!("{:>4.0}%", 100.0 * part.bytes as f64 / whole as f64)
            } else {
                String::new()
            };
            lines.push(format!(
                "{:<width$}  {:>10}  {share}",
                part.what,
                fmt_bytes(part.bytes as f64)
            ));
        }
        lines
    }
}

/// The budget to show for the run: the one read at the most allocated memory (device runs), or
/// the one with the most counted bytes (CPU mode); not the out-of-memory one (the post-mortem's).
pub fn for_run(budgets: &[Budget]) -> Option<Split> {
    budgets
        .iter()
        .filter(|budget| budget.at != "out_of_memory")
        .max_by_key(|budget| {
            (
                budget.allocated.unwrap_or(0),
                budget.parameters
                    + budget.gradients
                    + budget.optimizers.iter().map(|o| o.bytes).sum::<u64>(),
            )
        })
        .cloned()
        .map(Split::of)
}

/// The budget read at the out-of-memory error.
pub fn at_out_of_memory(budgets: &[Budget]) -> Option<Split> {
    budgets
        .iter()
        .rev()
        .find(|budget| budget.at == "out_of_memory")
        .cloned()
        .map(Split::of)
}

/// Whether an out-of-memory error was fragmentation: the allocator's cache held more free
/// memory than the request, yet no block of that size, or the memory is held by tensors.
pub fn out_of_memory_verdict(error: &OutOfMemory) -> Option<String> {
    let (requested, allocated, reserved) = (error.requested?, error.allocated?, error.reserved?);
    let free = reserved.saturating_sub(allocated);
    let largest = error
        .largest_free_block
        .map(|block| format!(" (the largest free block: {})", fmt_bytes(block as f64)))
        .unwrap_or_default();
    Some(if free >= requested {
        format!(
            "fragmentation: {} of the {} reserved was cached but free, yet no block of {} in it{largest}; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (empty_cache() would not help: the allocator already frees its cache and retries before it raises)",
            fmt_bytes(free as f64),
            fmt_bytes(reserved as f64),
            fmt_bytes(requested as f64)
        )
    } else {
        format!(
            "not fragmentation: only {} of the {} reserved was cached but free, and the request needed {}; tensors hold the memory, and empty_cache() would not have helped (the allocator frees its cache and retries before it raises)",
            fmt_bytes(free as f64),
            fmt_bytes(reserved as f64),
            fmt_bytes(requested as f64)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::events::OptimizerState;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_device_budget_splits_what_the_allocator_holds() {
        let split = Split::of(Budget {
            at: "peak".into(),
            device: true,
            parameters: 256 * MIB,
            gradients: 256 * MIB,
            optimizers: vec![OptimizerState {
                class: "AdamW".into(),
                bytes: 512 * MIB,
            }],
            allocated: Some(1300 * MIB),
            reserved: Some(1400 * MIB),
            ..Budget::default()
        });
        let parts: Vec<(&str, u64)> = split
            .parts
            .iter()
            .map(|part| (part.what.as_str(), part.bytes))
            .collect();
        assert_eq!(
            parts,
            [
                ("parameters", 256 * MIB),
                ("gradients", 256 * MIB),
                ("optimizer state (AdamW)", 512 * MIB),
                ("activations and other tensors", 276 * MIB),
                ("cached but free", 100 * MIB),
            ]
        );
        assert_eq!(
            split.lines()[0],
            "device memory at its peak: 1.3 GiB allocated, 1.4 GiB reserved"
        );
        assert_eq!(
            split.lines()[3],
            "optimizer state (AdamW)           512 MiB    37%"
        );
    }

    #[test]
    fn activations_are_told_from_other_tensors_where_the_stacks_were_read() {
        let read = Budget {
            at: "peak".into(),
            device: true,
            parameters: 256 * MIB,
            gradients: 256 * MIB,
            allocated: Some(812 * MIB),
            reserved: Some(900 * MIB),
            activations: Some(200 * MIB),
            ..Budget::default()
        };
        let parts = |split: Split| -> Vec<(String, u64)> {
            split
                .parts
                .into_iter()
                .map(|part| (part.what, part.bytes))
                .collect()
        };
        assert_eq!(
            parts(Split::of(read.clone()))[2..],
            [
                (ACTIVATIONS.to_owned(), 200 * MIB),
                ("other tensors".to_owned(), 100 * MIB),
                ("cached but free".to_owned(), 88 * MIB),
            ]
        );
        // Read a moment apart, the stacks may count more than the rest: never more than it.
        let later = Budget {
            activations: Some(400 * MIB),
            ..read
        };
        assert_eq!(
            parts(Split::of(later))[2..4],
            [
                (ACTIVATIONS.to_owned(), 300 * MIB),
                ("other tensors".to_owned(), 0),
            ]
        );
    }

    #[test]
    fn the_runs_budget_is_the_one_at_the_most_allocated_memory() {
        let at = |at: &str, allocated: u64| Budget {
            at: at.into(),
            device: true,
            allocated: Some(allocated),
            reserved: Some(allocated),
            ..Budget::default()
        };
        let budgets = [
            at("peak", 100),
            at("peak", 300),
            at("out_of_memory", 900),
            at("exit", 50),
        ];
        assert_eq!(for_run(&budgets).map(|s| s.read.allocated), Some(Some(300)));
        assert_eq!(
            at_out_of_memory(&budgets).map(|s| s.read.allocated),
            Some(Some(900))
        );
    }

    #[test]
    fn an_out_of_memory_error_is_fragmentation_only_when_the_cache_had_room() {
        let error = |requested: u64, allocated: u64, reserved: u64| OutOfMemory {
            requested: Some(requested),
            allocated: Some(allocated),
            reserved: Some(reserved),
            ..OutOfMemory::default()
        };
        let held = out_of_memory_verdict(&error(64 * MIB, 1300 * MIB, 1318 * MIB)).unwrap();
        assert!(held.starts_with("not fragmentation: only 18.0 MiB of the 1.3 GiB reserved was cached but free, and the request needed 64.0 MiB"), "{held}");
        let fragmented = out_of_memory_verdict(&OutOfMemory {
            largest_free_block: Some(14 * MIB),
            ..error(64 * MIB, 1000 * MIB, 1300 * MIB)
        })
        .unwrap();
        assert!(fragmented.starts_with("fragmentation: 300 MiB of the 1.3 GiB reserved was cached but free, yet no block of 64.0 MiB in it (the largest free block: 14.0 MiB)"), "{fragmented}");
        assert_eq!(out_of_memory_verdict(&OutOfMemory::default()), None);
    }
}
