//! What the Python runner reports, one JSON object per line on the events pipe.
//!
//! The runner (`runner.py`, embedded in the binary) writes these; torchlint reads them while the
//! script runs. Every event has `ev` (its kind) and `t` (seconds since the Unix epoch, as
//! `time.time()` gives it, so that the runner's events and torchlint's own device samples share
//! one clock). Unknown fields are ignored, so the runner can grow without breaking older readers.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// The runner is about to execute the script.
    Start(Start),
    /// One execution of a watched line, observed right after it ran.
    Hit(Hit),
    /// Process-wide counters, every ~100 ms while torch is loaded (the timeline).
    Sample(Sample),
    /// Every armed target has reached the requested number of hits.
    Complete { t: f64 },
    /// The script ran out of memory: what the runner read before the error's frames unwound.
    OutOfMemory(OutOfMemory),
    /// What the script's parameters, gradients and optimizer state held at one moment.
    Budget(Budget),
    /// `--attribute`: the live device memory by the line of the user's code that allocated it.
    Attribution(Attribution),
    /// The script finished: its exit status and, for an uncaught exception, the traceback.
    Exit(Exit),
    /// Something in the runner itself went wrong (not the script).
    Error { t: f64, message: String },
}

/// What the script's parameters, their gradients and its optimizers' state held at one moment
/// (the runner finds them by hooking their construction), beside the allocator's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub t: f64,
    /// When it was read: `peak` (allocated memory 5% above the last budget's), `complete` (every
    /// watched line had its hits), `exit`, or `out_of_memory`.
    pub at: String,
    /// Whether the bytes are the device's (else the host's: a CPU-mode run).
    pub device: bool,
    /// Each storage counted once (tied weights, views), in bytes.
    pub parameters: u64,
    pub gradients: u64,
    /// State per optimizer class (`AdamW`: two moments per parameter), in bytes.
    #[serde(default)]
    pub optimizers: Vec<OptimizerState>,
    /// The allocator's totals at that moment (device runs only).
    #[serde(default)]
    pub allocated: Option<u64>,
    #[serde(default)]
    pub reserved: Option<u64>,
    /// With `--attribute`: the live blocks allocated inside a module's forward (its outputs,
    /// what autograd saved for the backward), from the allocation stacks read with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<u64>,
}

/// The live device memory of one moment by the line that allocated it (`--attribute`), read
/// with the same timing as a [`Budget`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    pub t: f64,
    /// As [`Budget::at`].
    pub at: String,
    /// Every live block's bytes.
    pub total: u64,
    /// The live blocks allocated inside a module's forward.
    #[serde(default)]
    pub in_forward: u64,
    /// The step that was starting (`at` = `step`), counted from 1.
    #[serde(default)]
    pub step: Option<u64>,
    /// The lines holding the most, the most first (`file` empty: outside the user's code).
    pub lines: Vec<AllocatedAt>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocatedAt {
    /// The real path of the file; empty for memory allocated outside the user's code.
    pub file: String,
    pub line: usize,
    pub bytes: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OptimizerState {
    pub class: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub t: f64,
    pub pid: u32,
    /// `sys.version` of the interpreter, first word (`3.12.1`).
    pub python: String,
    /// torch's version as installed for that interpreter (`2.11.0`), read without importing it.
    #[serde(default)]
    pub torch: Option<String>,
    /// `sys.monitoring` (3.12+) or `settrace` (older interpreters).
    pub mechanism: String,
    /// Targets whose line maps to code the runner can watch.
    pub armed: Vec<usize>,
    /// Targets it cannot watch, with the reason (no code on that line, ...).
    #[serde(default)]
    pub unarmed: Vec<Unarmed>,
    /// In a distributed job, the process's rank (`RANK`) and the job's size (`WORLD_SIZE`),
    /// as the launcher set them.
    #[serde(default)]
    pub rank: Option<u32>,
    #[serde(default)]
    pub world_size: Option<u32>,
    /// The ranks on this host (`LOCAL_WORLD_SIZE`).
    #[serde(default)]
    pub local_world_size: Option<u32>,
}

/// An out-of-memory error the script did not catch, read where it was raised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutOfMemory {
    pub t: f64,
    /// The error's first line.
    pub message: String,
    /// The lines of the user's code on the stack (not the standard library's or an installed
    /// package's), innermost first: the first is the line that asked.
    #[serde(default)]
    pub stack: Vec<StackLine>,
    /// Bytes the failed allocation asked for, from the message (`Tried to allocate 2.00 GiB`).
    #[serde(default)]
    pub requested: Option<u64>,
    /// The caching allocator then: bytes in live tensors, and held from the device.
    #[serde(default)]
    pub allocated: Option<u64>,
    #[serde(default)]
    pub reserved: Option<u64>,
    /// The device then, through the script's own context.
    #[serde(default)]
    pub device_free: Option<u64>,
    #[serde(default)]
    pub device_total: Option<u64>,
    /// The most the process may hold, when the script capped itself
    /// (`set_per_process_memory_fraction`; from the message's "… allowed").
    #[serde(default)]
    pub allowed: Option<u64>,
    /// The largest block the allocator held free at that moment.
    #[serde(default)]
    pub largest_free_block: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackLine {
    pub file: String,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unarmed {
    pub target: usize,
    pub why: String,
}

/// What the watched value looked like right after the line ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Value {
    /// The expression that was read (`total_loss`, `self.hidden`, `preds`).
    pub expr: String,
    /// `tensor`, `container` (list/tuple/dict/deque), `module`, `loader`, `other`, `missing`.
    pub kind: String,
    /// The tensor (or, for a container, its last item) has a `grad_fn`.
    #[serde(default)]
    pub grad_fn: bool,
    #[serde(default)]
    pub dtype: Option<String>,
    /// `cpu`, `cuda:0`, ...
    #[serde(default)]
    pub device: Option<String>,
    /// Bytes of the tensor, or of all tensor items of a container.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Container length.
    #[serde(default)]
    pub len: Option<u64>,
    /// Container items that carry a `grad_fn`.
    #[serde(default)]
    pub items_with_grad: Option<u64>,
    /// Container items on a CUDA device.
    #[serde(default)]
    pub items_on_gpu: Option<u64>,
    /// Hooks registered on a module (forward, forward-pre, backward, full-backward) or tensor.
    #[serde(default)]
    pub hooks: Option<u64>,
    /// Autograd nodes reachable from the value's `grad_fn` (bounded walk; sampled).
    #[serde(default)]
    pub nodes: Option<u64>,
    /// For `torch.load` results: devices the loaded tensors live on.
    #[serde(default)]
    pub devices: Option<Vec<String>>,
    /// For DataLoaders: `num_workers`, `prefetch_factor`, `pin_memory`.
    #[serde(default)]
    pub workers: Option<u64>,
    #[serde(default)]
    pub prefetch_factor: Option<u64>,
    #[serde(default)]
    pub pin_memory: Option<bool>,
    /// TL113: whether the value is another object than at the previous hit; TL203: whether
    /// `torch.compile` was given another function (or module) than at the previous hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub t: f64,
    /// Index of the target in the plan.
    pub target: usize,
    /// 1 for the first execution of the line, 2 for the second, ...
    pub n: u64,
    /// The CUDA device current in the process when the line ran (`torch.cuda.current_device()`,
    /// once CUDA is up): in a distributed job, which GPU the rank computes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// `torch.is_grad_enabled()` when the line started (None before torch is imported).
    #[serde(default)]
    pub grad_enabled: Option<bool>,
    #[serde(default)]
    pub inference_mode: Option<bool>,
    #[serde(default)]
    pub anomaly_enabled: Option<bool>,
    /// The watched values (usually one).
    #[serde(default)]
    pub values: Vec<Value>,
    /// Counters after the line ran (None when not sampled on this hit or not available).
    #[serde(default)]
    pub allocated: Option<u64>,
    #[serde(default)]
    pub reserved: Option<u64>,
    /// Host RSS of the script's main process.
    #[serde(default)]
    pub rss: Option<u64>,
    /// Pinned host memory (`torch.cuda.host_memory_stats()["allocated_bytes.all.current"]`).
    #[serde(default)]
    pub pinned: Option<u64>,
    /// Allocator `num_device_alloc` / `num_device_free` (cudaMalloc / cudaFree calls so far).
    #[serde(default)]
    pub device_allocs: Option<u64>,
    #[serde(default)]
    pub device_frees: Option<u64>,
    /// Seconds the line took (from its start to the next line event in the same frame).
    #[serde(default)]
    pub seconds: Option<f64>,
    /// TL110: how many parameters had a gradient when the line started, and how many of those
    /// gradients still carried an autograd graph (`.grad.grad_fn`) from an earlier backward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grads_with_graph: Option<u64>,
    /// TL107: whether a later backward ran through the graph the previous hit retained,
    /// before this hit (None: not watched, or no graph was retained then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// TL203: the graphs dynamo had compiled in the process when the line had run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs: Option<u64>,
    /// TL301: the loop's forward as it ran in this iteration (None: no forward was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<Forward>,
}

/// TL301: one forward of the model a loop trains, read by a forward pre-hook and a forward
/// hook on that module, set when the iteration starts and taken off after the first call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Forward {
    /// The module's class (`Sequential`, `ResNet`).
    pub module: String,
    /// `torch.is_autocast_enabled("cuda")` as the forward started (the older
    /// `torch.is_autocast_enabled()` where the device-type form is missing).
    #[serde(default)]
    pub autocast: Option<bool>,
    /// The dtype autocast casts to, when it is on (`bfloat16`).
    #[serde(default)]
    pub autocast_dtype: Option<String>,
    /// `torch.is_grad_enabled()` as the forward started.
    #[serde(default)]
    pub grad_enabled: Option<bool>,
    /// The floating dtype holding most of the module's parameters, their device and bytes.
    #[serde(default)]
    pub param_dtype: Option<String>,
    #[serde(default)]
    pub param_device: Option<String>,
    #[serde(default)]
    pub param_bytes: Option<u64>,
    /// The dtype of the forward's largest floating output tensor (None: its output was not
    /// read, or held no floating tensor).
    #[serde(default)]
    pub output_dtype: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    #[serde(default)]
    pub allocated: Option<u64>,
    #[serde(default)]
    pub reserved: Option<u64>,
    #[serde(default)]
    pub peak_allocated: Option<u64>,
    #[serde(default)]
    pub peak_reserved: Option<u64>,
    #[serde(default)]
    pub rss: Option<u64>,
    #[serde(default)]
    pub pinned: Option<u64>,
    /// `num_alloc_retries` (cudaMalloc retries after freeing the cache: fragmentation pressure).
    #[serde(default)]
    pub alloc_retries: Option<u64>,
    /// `torch.is_anomaly_enabled()`: whether anomaly detection is on at this moment.
    #[serde(default)]
    pub anomaly_enabled: Option<bool>,
    /// Used memory on the whole watched device, from `torch.cuda.mem_get_info` in the script's
    /// process (read only once the script has a context there, and only without NVML).
    #[serde(default)]
    pub device_used: Option<u64>,
    /// The allocator's cap on the watched device, when one is set
    /// (`set_per_process_memory_fraction`: the script's own, or `--max-memory`).
    #[serde(default)]
    pub allowed: Option<u64>,
}

impl Sample {
    /// A hit's counters as a reading of the run: a hit reads the same allocator counters as the
    /// sampler, right after its line ran, so a burst of hits between two samples (a fast loop,
    /// or a run the probe stops once its lines have their hits) still counts in the run's peaks.
    /// Not its anomaly flag: the share of time anomaly mode was on is read from periodic samples.
    pub fn of_hit(hit: &Hit) -> Sample {
        Sample {
            t: hit.t,
            allocated: hit.allocated,
            reserved: hit.reserved,
            rss: hit.rss,
            pinned: hit.pinned,
            ..Sample::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exit {
    pub t: f64,
    pub status: i32,
    #[serde(default)]
    pub traceback: Option<String>,
}

/// One reading of the device's used memory (everything on it: CUDA contexts, cuDNN/cuBLAS
/// workspaces, other processes), from NVML or from the script's process (`device::MemorySource`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceSample {
    pub t: f64,
    pub used: u64,
    /// What the script's processes hold of it (NVML's per-process figures).
    #[serde(default)]
    pub script: Option<u64>,
    /// What torchlint's own process holds of it: nothing, as it keeps no context.
    #[serde(default)]
    pub probe: Option<u64>,
    /// What the script's processes below its interpreter (DataLoader workers, pools) hold of
    /// it, and how many of them hold some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_processes: Option<u64>,
}
