//! What torchlint asks the runner to watch: written as JSON into the private temp dir and
//! passed to `runner.py --plan PATH`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Absolute path of the script; it runs as `__main__`.
    pub script: String,
    /// `sys.argv` for the script: its path as given, then the user's arguments.
    pub argv: Vec<String>,
    /// Hits per target after which a target is complete (`--hits`).
    pub hits: u64,
    /// Hits at the start that the verdicts leave out of growth fits (allocator caches, cuDNN
    /// autotuning, lazy initialisation). The runner still reads the cheap counters on them (a
    /// one-shot line has only warm-up hits); the autograd-graph walk waits until after them.
    pub warmup: u64,
    /// The file descriptor the runner writes events to.
    pub events_fd: i32,
    /// A distributed job's ranks connect to this Unix socket instead, one connection each:
    /// the launcher passes no descriptors on to the processes it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_socket: Option<String>,
    /// Whether the runner's samples read the whole device's used memory from inside the
    /// script's process (torchlint could not read it from outside, through NVML).
    #[serde(default)]
    pub read_device: bool,
    /// `--max-memory`: the most the script's allocator may hold on the watched device, in bytes.
    #[serde(default)]
    pub max_memory: Option<u64>,
    /// Record the stack of every live device allocation (`--attribute`, or `--max-memory`).
    #[serde(default)]
    pub attribute: bool,
    pub targets: Vec<Target>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Index in `targets`; events name targets by it.
    pub id: usize,
    /// The rule (`TL102`); decides what the runner reads at each hit.
    pub code: String,
    /// 1-based line and column of the finding's primary span, and its last line.
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    /// The flagged source text (the span), for the runner to find the stored value.
    pub text: String,
    /// Hits to observe at this line (0: the plan's `hits`). A growth rule's line is watched
    /// until its growth can be measured, whatever `--hits` asked.
    #[serde(default)]
    pub hits: u64,
    /// TL301: the source text of the forward call the finding labels (`model(x.cuda())`), whose
    /// callee the runner watches as the loop runs; None for other rules (and `--watch`: the
    /// runner then takes the first module with parameters the loop's body calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<String>,
}
