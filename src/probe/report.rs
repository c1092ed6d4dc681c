//! Everything one probe run found out, in the shape every output format renders.

use serde::{Deserialize, Serialize};

use super::attribution::{Attributed, Held};
use super::budget::Split;
use super::events::{Budget, DeviceSample, Exit, Hit, OutOfMemory, Sample};
use super::verdict::{RunSummary, Verdict};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The script as the user named it.
    pub script: String,
    /// The command run: the script and its arguments.
    pub command: Vec<String>,
    pub python: Option<String>,
    /// torch's version as installed for that interpreter, when it is.
    pub torch: Option<String>,
    /// `sys.monitoring` or `settrace`.
    pub mechanism: Option<String>,
    /// The GPU the run was watched on; None in CPU mode.
    pub device: Option<DeviceInfo>,
    /// What the probe itself took of the machine.
    pub footprint: Footprint,
    /// Why there is no device reading (no driver, no GPU, `--gpu` out of range).
    pub cpu_mode_reason: Option<String>,
    /// `--max-memory`, in bytes, when the run capped the script's allocator.
    pub max_memory: Option<u64>,
    pub findings: Vec<WatchedFinding>,
    /// Findings in the script whose rules have no runtime signature (not watched).
    pub unwatched: Vec<FindingRef>,
    pub summary: RunSummary,
    /// How the memory split at the run's peak: parameters, gradients, optimizer state, the rest.
    pub budget: Option<Split>,
    /// `--attribute`: the lines holding the memory at the peak, and those whose memory grew.
    pub attribution: Option<Attributed>,
    pub stop: Stop,
    /// The script's own exit status and traceback, when it ended by itself (in a distributed
    /// job, the first rank that failed, else the lowest rank).
    pub exit: Option<Exit>,
    /// A distributed job's ranks, how each ended; empty for a script run alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<super::ranks::RankRun>,
    /// The rank that failed first, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_rank: Option<u32>,
    /// When the script died of an out-of-memory error: the post-mortem.
    pub out_of_memory: Option<PostMortem>,
    /// Seconds since the Unix epoch when the script started, and how long it ran.
    pub started: f64,
    pub duration: f64,
    /// Problems of the runner itself (lines it could not watch, internal errors), not the script's.
    pub runner_errors: Vec<String>,
    /// Raw series, for the HTML timeline (left out of JSON unless asked for).
    #[serde(skip)]
    pub samples: Vec<Sample>,
    #[serde(skip)]
    pub device_samples: Vec<DeviceSample>,
    #[serde(skip)]
    pub hits: Vec<Hit>,
    /// Every budget read, for the HTML timeline's stacked bars.
    #[serde(skip)]
    pub budgets: Vec<Budget>,
    /// The seconds since the Unix epoch at which each step started (`--attribute`), for the
    /// HTML timeline's step markers.
    #[serde(skip)]
    pub steps: Vec<(u64, f64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub index: usize,
    pub name: String,
    pub total: u64,
    /// Used memory on the whole device before the script started (other processes); None
    /// when only the script's process could read the device.
    pub used_before: Option<u64>,
    /// Where the device's figures come from.
    pub source: MemorySource,
}

/// What the probe itself takes of the machine it measures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Footprint {
    /// Device memory held by torchlint's own process at its most (NVML's per-process figure;
    /// 0: it holds no CUDA context). None without a GPU or without NVML.
    pub device: Option<u64>,
    /// torchlint's own peak resident memory on the host.
    pub host_peak_rss: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FindingRef {
    pub code: String,
    pub name: String,
    pub message: String,
    pub line: usize,
    pub column: usize,
    /// The flagged line as written (its first line, without the indentation).
    pub source: String,
    /// What to do: the finding's fix, else its rule's help.
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WatchedFinding {
    #[serde(flatten)]
    pub finding: FindingRef,
    pub verdict: Verdict,
    /// A distributed job's verdict on each rank (`verdict` merges them); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<super::ranks::RankVerdict>,
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// Every watched line reached `--hits`.
    Complete,
    /// The script finished by itself (or crashed).
    ScriptExited,
    Timeout,
    Interrupted,
    /// The runner could not start the script (no interpreter, runner error).
    RunnerFailed,
}

impl Stop {
    /// How the run ended, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Stop::Complete => "stopped once every watched line had its hits",
            Stop::ScriptExited => "the script ended by itself",
            Stop::Timeout => "stopped at the timeout",
            Stop::Interrupted => "interrupted (Ctrl-C)",
            Stop::RunnerFailed => "the runner could not start the script",
        }
    }
}

/// Where the device's used memory comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum MemorySource {
    /// NVML, from outside the script: the whole device before the script starts, and each
    /// process on it.
    Nvml,
    /// `torch.cuda.mem_get_info` in the script's process, once it has a context: the whole
    /// device, but nothing from before the script's first CUDA call. `why`: NVML's absence.
    InProcess { why: String },
}

impl MemorySource {
    /// The source in a sentence, for the report's header.
    pub fn describe(&self) -> String {
        match self {
            MemorySource::Nvml => {
                "NVML (whole device, and per process), read from outside the script".to_owned()
            }
            MemorySource::InProcess { why } => format!(
                "torch.cuda.mem_get_info inside the script's process, from its first CUDA call on ({why})"
            ),
        }
    }
}

/// An out-of-memory death, read where it happened, with the findings on its stack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PostMortem {
    #[serde(flatten)]
    pub error: OutOfMemory,
    /// The watched and unwatched findings on the script's lines of the stack (`TL102:41`).
    pub findings_on_stack: Vec<String>,
    /// Whether it was fragmentation (the cache had the room, not in one block) or tensors.
    pub fragmentation: Option<String>,
    /// How the device memory split at that moment.
    pub budget: Option<Split>,
    /// The lines holding the memory at that moment (`--attribute` or `--max-memory`).
    pub held_by: Vec<Held>,
}
