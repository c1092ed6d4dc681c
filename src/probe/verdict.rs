//! From the hits of one watched line to a verdict: confirmed, likely, not reproduced or not reached.
//! (hazards.md §7: skip warm-up, fit growth per hit, classify, decide, project.)
//!
//! Pure and deterministic: no IO, and the same hits give the same verdict, word for word.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::events::{DeviceSample, Forward, Hit, Sample, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A measurement shows the hazard: growth attributable to the line, or its cost.
    Confirmed,
    /// The line's values have the hazard's shape (a kept value carries a grad_fn), but the
    /// growth that would show its cost was not measured: too few hits, or no counters read.
    Likely,
    NotReproduced,
    NotReached,
}

/// How the memory behaved across hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Allocated GPU memory grows with every hit.
    GrowsGpu,
    /// GPU flat, but the autograd graph (and host memory) grows with every hit.
    GrowsHostGraph,
    /// Host memory grows with every hit (pinned or RSS), not through the graph.
    GrowsHost,
    /// A cost that does not grow (the hazard's predicate holds, memory is flat).
    Constant,
    /// A one-time jump at the first hits, flat afterwards.
    Spike,
    /// Nothing held or grew.
    None,
}

impl Class {
    /// Memory that grows with every hit, wherever it is.
    pub fn grows(self) -> bool {
        matches!(
            self,
            Class::GrowsGpu | Class::GrowsHostGraph | Class::GrowsHost
        )
    }
}

/// A least-squares slope of a counter against the hit number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slope {
    /// Units per hit (bytes, or nodes for the graph).
    pub per_hit: f64,
    /// Standard error of the slope.
    pub stderr: f64,
    /// Hits the fit used (after warm-up).
    pub hits: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    pub class: Class,
    /// Times the line ran during the probe.
    pub hits: u64,
    /// One line for humans: "+8.4 MiB per hit on the GPU, graph +8 nodes per hit".
    pub summary: String,
    /// The observations behind the verdict, one per line.
    pub evidence: Vec<String>,
    /// The cost over the user's run ("+1.0 MiB per step -> 9.8 GiB after 10,000 steps; 139 GiB
    /// free"); None when nothing grows.
    pub projection: Option<String>,
    pub gpu_slope: Option<Slope>,
    pub host_slope: Option<Slope>,
    pub node_slope: Option<Slope>,
}

/// What the verdicts need to know about the run.
#[derive(Debug, Clone)]
pub struct Context {
    /// `--hits` and the warm-up hits to skip.
    pub hits_wanted: u64,
    pub warmup: u64,
    /// Whether a CUDA device was watched (CPU mode otherwise).
    pub gpu: bool,
    /// Free device memory when the script started (bytes), for projections.
    pub device_free: Option<u64>,
    /// The most the script's allocator may hold when a cap is set (its own
    /// `set_per_process_memory_fraction`, or `--max-memory`): projections count from it.
    pub allowed: Option<u64>,
    /// Steps to project growth over (`--steps`, default 10,000).
    pub project_steps: u64,
    /// The script ended (or was stopped) before this line ran at all: message for not reached.
    pub ended_early: bool,
    /// The flagged source text (a call, a statement): what the script itself asked for.
    pub flagged_text: String,
    /// Another watched line of the run that keeps what grows (`line 15 (TL102)`): the memory a
    /// loop gains is counted there, not at every line of the loop.
    pub growth_kept_by: Option<String>,
}

/// Peak, fragmentation and device-level numbers for the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub peak_allocated: Option<u64>,
    pub peak_reserved: Option<u64>,
    /// Reserved minus allocated at the peak of reserved memory.
    pub fragmentation: Option<u64>,
    /// Device used memory (driver's view) at its peak, minus what was used before the script.
    pub device_peak_used: Option<u64>,
    pub peak_rss: Option<u64>,
    pub peak_pinned: Option<u64>,
    /// The most device memory the script's processes below its interpreter held at once
    /// (NVML), with how many processes held it; `None` where NVML could not tell.
    pub peak_worker_device: Option<(u64, u64)>,
    /// The allocator's cap at the end of the run (see [`Context::allowed`]).
    pub allowed: Option<u64>,
    /// The share of timeline samples with anomaly detection on (None: never read).
    pub anomaly_share: Option<f64>,
    /// When anomaly detection was read on the timeline, and whether it was on.
    #[serde(skip)]
    pub anomaly_timeline: Vec<(f64, bool)>,
    /// Suggest `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (only when the numbers show
    /// fragmentation).
    pub suggest_expandable_segments: bool,
    /// Human lines ("peak allocated 12.3 GiB, peak reserved 14.0 GiB, 1.7 GiB cached but free").
    pub notes: Vec<String>,
    /// The traceback the script ended with, if it failed (the report's exit holds it too).
    #[serde(skip)]
    pub failure: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Thresholds (hazards.md §7, §8, §9; the recorded streams in the tests below).

/// Hits after the warm-up before a slope may call growth (hazards §7: "GROWS = slope
/// significantly > 0 over ≥20 hits"). With fewer, a verdict rests on the predicates alone.
pub const MIN_GROWTH_HITS: usize = 20;

/// The rules confirmed only by growth measured at their line.
pub const GROWTH_RULES: [&str; 6] = ["TL102", "TL103", "TL104", "TL109", "TL110", "TL111"];

/// Measured points a slope needs to have a standard error at all (n − 2 degrees of freedom).
const MIN_FIT_POINTS: usize = 3;

/// A slope counts only when it is this many standard errors above zero: with 20 points or more
/// that is past the 99.5% one-sided level, so jitter (a rolling buffer, a cache refill) does not
/// read as a leak.
const SIGNIFICANCE: f64 = 3.0;

/// GPU growth floor, bytes per hit. Kept scalars (losses, metrics) add bytes to a few KiB per step
/// (2,000 kept losses: +0.97 MiB, hazards §9), which is harmless; 64 KiB per step is 625 MiB over
/// 10,000 steps, the smallest leak worth a verdict.
const GPU_MIN_SLOPE: f64 = 64.0 * 1024.0;

/// Host (RSS) growth floor. RSS moves by pages and allocator arenas (a recorded eval loop drifted
/// 30 KiB per hit from that alone) and hazards §8 calls it weak evidence, so host growth needs
/// four times the GPU floor; the slow graph leak of a training loop (≈6 KB per step) is caught by
/// the node count instead (`GrowsHostGraph`).
const HOST_MIN_SLOPE: f64 = 256.0 * 1024.0;

/// Pinned memory is an exact allocator counter, not a noisy one: the GPU floor applies.
const PINNED_MIN_SLOPE: f64 = GPU_MIN_SLOPE;

/// Graph growth: at least one node per hit, and the count rising on more than half of the
/// consecutive measured hits. A chained graph gains nodes on every hit; the share leaves room for
/// a sampled, bounded walk that repeats a count now and then.
const NODE_MIN_SLOPE: f64 = 1.0;
const RISING_SHARE: f64 = 0.5;
/// A graph that rises on this share of hits grows between its resets, whatever the slope
/// across the resets says.
const SAWTOOTH_RISING_SHARE: f64 = 0.75;

/// Spike: one jump of at least 1 MiB, landing within the warm-up or the few hits after it, after
/// which allocated memory stays within a quarter of the jump (Adam's first step: +32.3 MiB at
/// hit 2, then flat to the byte).
const SPIKE_MIN_BYTES: f64 = 1024.0 * 1024.0;
const SPIKE_WINDOW: u64 = 5;
const SPIKE_FLAT_SHARE: f64 = 0.25;

/// TL106's default `max-workers`: fixed worker counts up to it are not reported by the rule.
const MAX_PINNED_WORKERS: u64 = 8;
/// Anomaly detection on for at least this share of the run counts as left on for training.
const ANOMALY_MIN_SHARE: f64 = 0.5;
/// `DataLoader`'s `prefetch_factor` when it has workers and none is given.
const DEFAULT_PREFETCH: u64 = 2;

// ---------------------------------------------------------------------------------------------
// Judging one line.

/// Judges one watched line from its hits (in order). `code` is the rule (TL101...).
pub fn judge(code: &str, hits: &[&Hit], context: &Context) -> Verdict {
    judge_with_run(code, hits, context, &RunSummary::default())
}

/// `judge`, with the whole run's counters at hand: TL106's pinned memory fills once the loader
/// is iterated, after its line ran, so the run's peak pinned memory counts as evidence too.
pub fn judge_with_run(code: &str, hits: &[&Hit], context: &Context, run: &RunSummary) -> Verdict {
    if hits.is_empty() {
        return not_reached(context);
    }
    let measures = Measures::of(code, hits, context);
    let decision = match code {
        "TL101" => eval_without_no_grad(hits, &measures, context),
        "TL102" => kept_graph(hits, &measures, context, "accumulated value"),
        "TL103" => kept_graph(hits, &measures, context, "stored value"),
        "TL104" => gpu_collection(hits, &measures, context),
        "TL105" => float64_data(hits, &measures),
        "TL106" => pinned_workers(hits, &measures, context, run),
        "TL107" => retained_graph(hits, &measures),
        "TL108" => loaded_on_gpu(hits, &measures, context),
        "TL109" => hooks_in_loop(hits, &measures, context),
        // The hook's store is a collection like any other: its hits are the module's calls.
        "TL110" => create_graph_cycle(hits, &measures),
        "TL111" => gpu_collection(hits, &measures, context),
        "TL112" => cuda_in_workers(hits, &measures, context, run),
        "TL113" => made_per_step(hits, &measures),
        "TL203" => compiled_per_step(hits, &measures),
        "TL201" => empty_cache(hits, &measures, context),
        "TL202" => anomaly_mode(hits, &measures, run),
        "TL301" => no_mixed_precision(hits, &measures, context),
        _ => unknown_rule(code, &measures),
    };
    let projection = match decision.status {
        Status::Confirmed => projection(decision.class, &measures, context),
        _ => None,
    };
    let mut evidence = decision.evidence;
    evidence.extend(measures.evidence(context.warmup));
    let mut summary = decision.summary;
    if decision.status == Status::Confirmed
        && matches!(code, "TL101" | "TL107")
        && !measures.counted()
    {
        // A constant cost confirmed from the line's values and modes alone (the rules that
        // measure a cost by other means say it in their summary): the status says so, not
        // only an evidence line.
        summary.push_str(" (its cost is not measured here: no memory counter was read at this line after the warm-up)");
    }
    Verdict {
        status: decision.status,
        class: decision.class,
        hits: hits.len() as u64,
        summary,
        evidence,
        projection,
        gpu_slope: measures.gpu.map(|series| series.slope),
        host_slope: measures.host.map(|series| series.slope),
        node_slope: measures.nodes.map(|series| series.slope),
    }
}

fn not_reached(context: &Context) -> Verdict {
    let summary = if context.ended_early {
        "the line never ran within the run (the script ended, or was stopped, first)"
    } else {
        "the line never ran within the run"
    };
    Verdict {
        status: Status::NotReached,
        class: Class::None,
        hits: 0,
        summary: summary.to_owned(),
        evidence: vec!["0 hits".to_owned()],
        projection: None,
        gpu_slope: None,
        host_slope: None,
        node_slope: None,
    }
}

/// A rule's call, before the measurements' evidence is added.
struct Decision {
    status: Status,
    class: Class,
    summary: String,
    evidence: Vec<String>,
}

impl Decision {
    fn confirmed(class: Class, summary: String) -> Self {
        Self {
            status: Status::Confirmed,
            class,
            summary,
            evidence: Vec::new(),
        }
    }

    fn likely(class: Class, summary: String) -> Self {
        Self {
            status: Status::Likely,
            class,
            summary,
            evidence: Vec::new(),
        }
    }

    fn not_reproduced(class: Class, summary: String) -> Self {
        Self {
            status: Status::NotReproduced,
            class,
            summary,
            evidence: Vec::new(),
        }
    }

    fn with(mut self, line: String) -> Self {
        self.evidence.push(line);
        self
    }
}

// ---------------------------------------------------------------------------------------------
// The rules.

/// TL101: grad on at the forward and an output that carries a graph.
fn eval_without_no_grad(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    let n = hits.len();
    let enabled = count(hits, grad_on);
    let read = count(hits, |hit| hit.grad_enabled.is_some());
    let holding = count(hits, |hit| grad_on(hit) && any_value(hit, carries_grad));
    let grad_line = format!("grad enabled on {enabled}/{n} hits");
    if read == 0 {
        return Decision::not_reproduced(
            m.class(),
            "grad mode could not be read at this line (torch was not loaded yet)".to_owned(),
        );
    }
    if enabled == 0 {
        let inference = count(hits, |hit| hit.inference_mode == Some(true));
        let mut summary = format!("grad was disabled at this line on all {n} hits");
        if inference > 0 {
            summary.push_str(&format!(" (inference mode on {inference})"));
        }
        return Decision::not_reproduced(m.class(), summary).with(grad_line);
    }
    let output_line = format!("output carries a grad_fn on {holding}/{n} hits");
    if holding == 0 {
        let summary = format!(
            "grad was enabled on {enabled}/{n} hits, but the output carried no grad_fn: no parameter requires grad"
        );
        return Decision::not_reproduced(m.class(), summary)
            .with(grad_line)
            .with(output_line);
    }
    let mut summary = format!(
        "grad enabled and a grad_fn on the output on {holding}/{n} hits: each forward keeps its activations for a backward that never comes"
    );
    // The forward's own graph is rebuilt every hit; when another line keeps the outputs, the
    // loop's growth is that line's, and this one costs one forward's activations.
    if let Some(keeper) = context.growth_kept_by.as_ref().filter(|_| !m.graph_grows) {
        let kept = match m.growth_phrase() {
            Some(growth) => format!(
                "the loop's growth ({growth}) is counted at {keeper}, which keeps what grows"
            ),
            None => format!("the loop's growth is counted at {keeper}, which keeps what grows"),
        };
        return Decision::confirmed(Class::Constant, summary)
            .with(grad_line)
            .with(output_line)
            .with(kept);
    }
    let class = m.class_or(Class::Constant);
    if let Some(growth) = m.growth_phrase() {
        summary = format!("{growth}; {summary}");
    }
    Decision::confirmed(class, summary)
        .with(grad_line)
        .with(output_line)
}

/// TL102 and TL103: a stored value that carries a grad_fn and a graph (or a container of them)
/// that grows.
fn kept_graph(hits: &[&Hit], m: &Measures, context: &Context, what: &str) -> Decision {
    let n = hits.len();
    let with_grad = count(hits, |hit| any_value(hit, carries_grad));
    let grad_line = format!("grad_fn on {with_grad}/{n} hits");
    if with_grad == 0 {
        let summary = format!("the {what} carries no grad_fn: nothing is kept");
        return Decision::not_reproduced(m.class(), summary).with(grad_line);
    }
    let container = container_growth(hits, context.warmup);
    let grad_items = first_last(hits, context.warmup, |hit| {
        max_value(hit, |v| v.items_with_grad)
    });
    let container_keeps =
        container.is_some_and(|(a, b)| b > a) && grad_items.is_some_and(|(a, b)| b > a);
    let mut evidence = vec![grad_line];
    if let Some((a, b)) = container {
        evidence.push(format!("container length {a} → {b}"));
    }
    if let Some((a, b)) = grad_items {
        evidence.push(format!("items with a grad_fn {a} → {b}"));
    }
    let decision = if m.gpu_grows || m.graph_grows {
        let growth = m.growth_phrase().unwrap_or_default();
        Decision::confirmed(
            m.class(),
            format!("{growth}: the {what} keeps every hit's graph alive"),
        )
    } else if container_keeps {
        let (a, b) = container.unwrap_or_default();
        let class = if m.enough {
            Class::GrowsHostGraph
        } else {
            Class::Constant
        };
        Decision::confirmed(
            class,
            format!(
                "the container grew from {a} to {b} items carrying a grad_fn: each keeps its graph alive"
            ),
        )
    } else if let Some(nodes) = m.nodes.filter(|nodes| {
        !m.enough && nodes.pairs >= 2 && nodes.last > nodes.first && nodes.rising == nodes.pairs
    }) {
        // Too few hits to fit a rate, but the graph rose at every one of them: measured.
        Decision::confirmed(
            Class::Constant,
            format!(
                "the autograd graph reachable from the {what} rose from {} to {} nodes, on each of {} hits: it keeps every hit's graph alive",
                nodes.first, nodes.last, nodes.pairs
            ),
        )
    } else if !m.enough || !m.measured_any() {
        // A grad_fn says a graph is attached, not that graphs pile up: only growth says that.
        let why = if m.enough {
            "no memory counter or graph size was read"
        } else {
            "too few hits to measure growth"
        };
        Decision::likely(
            Class::None,
            format!(
                "the {what} carries a grad_fn on {with_grad}/{n} hits, but its growth was not measured ({why}): it likely keeps a graph"
            ),
        )
    } else if let Some(attribute) = module_attribute(hits).filter(|_| with_grad * 2 > n) {
        // A tensor kept on a module (`self.x = out` in forward) holds the last call's graph
        // until the next call replaces it: a constant cost, not growth.
        Decision::confirmed(
            Class::Constant,
            format!(
                "`{attribute}` keeps the last call's graph alive on the module ({with_grad}/{n} hits): one step's activations stay held until the next call"
            ),
        )
    } else {
        let summary = format!(
            "the {what} carries a grad_fn, but neither GPU memory nor the autograd graph grew over {} hits: each hit replaces the graph instead of extending it",
            m.measured_hits
        );
        Decision::not_reproduced(m.class(), summary)
    };
    evidence.into_iter().fold(decision, Decision::with)
}

/// The watched value when it is an attribute of `self` that carries a grad_fn.
fn module_attribute(hits: &[&Hit]) -> Option<String> {
    hits.iter()
        .flat_map(|hit| &hit.values)
        .find(|value| value.expr.starts_with("self.") && carries_grad(value))
        .map(|value| value.expr.clone())
}

/// TL104: tensors kept on the GPU in a container that grows.
fn gpu_collection(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    let n = hits.len();
    if !context.gpu {
        return Decision::not_reproduced(
            m.class(),
            "ran without a GPU: the tensors stayed on the CPU".to_owned(),
        );
    }
    let on_gpu = count(hits, |hit| any_value(hit, on_cuda));
    let gpu_line = format!("items on a CUDA device on {on_gpu}/{n} hits");
    if on_gpu == 0 {
        let summary = "the container's items are on the CPU: nothing is kept on the GPU".to_owned();
        return Decision::not_reproduced(m.class(), summary).with(gpu_line);
    }
    let length = container_growth(hits, context.warmup);
    let bytes = first_last(hits, context.warmup, |hit| max_value(hit, |v| v.bytes));
    let mut evidence = vec![gpu_line];
    if let Some((a, b)) = length {
        evidence.push(format!("container length {a} → {b}"));
    }
    if let Some((a, b)) = bytes {
        evidence.push(format!(
            "container bytes {} → {}",
            fmt_bytes(a as f64),
            fmt_bytes(b as f64)
        ));
    }
    let (Some((len_a, len_b)), Some((bytes_a, bytes_b))) = (length, bytes) else {
        let summary = "the container's length or bytes were not read: growth unknown".to_owned();
        return evidence
            .into_iter()
            .fold(Decision::not_reproduced(m.class(), summary), Decision::with);
    };
    if len_b <= len_a || bytes_b <= bytes_a {
        let summary =
            format!("the container did not grow (length {len_a} → {len_b}): it is bounded");
        return evidence
            .into_iter()
            .fold(Decision::not_reproduced(m.class(), summary), Decision::with);
    }
    let item = (bytes_b - bytes_a) as f64 / (len_b - len_a) as f64;
    if let Some(gpu) = m.gpu.filter(|_| m.gpu_grows) {
        evidence.push(format!(
            "GPU slope {} per hit ≈ {:.1} items per hit",
            fmt_bytes(gpu.slope.per_hit),
            gpu.slope.per_hit / item
        ));
    }
    let class = if m.enough {
        Class::GrowsGpu
    } else {
        Class::Constant
    };
    let mut summary = format!(
        "the container grew from {len_a} to {len_b} items on the GPU, {} each",
        fmt_bytes(item)
    );
    if let Some(growth) = m.growth_phrase().filter(|_| m.gpu_grows) {
        summary = format!("{growth}: {summary}");
    }
    evidence.into_iter().fold(
        Decision::confirmed(m.class_or(class), summary),
        Decision::with,
    )
}

/// TL105: a watched value in float64.
fn float64_data(hits: &[&Hit], m: &Measures) -> Decision {
    let n = hits.len();
    let doubles = count(hits, |hit| any_value(hit, is_float64));
    if doubles == 0 {
        let dtypes: BTreeSet<&str> = hits
            .iter()
            .flat_map(|hit| &hit.values)
            .filter_map(|v| v.dtype.as_deref())
            .collect();
        let seen = if dtypes.is_empty() {
            "no dtype was read".to_owned()
        } else {
            format!("dtypes seen: {}", join(&dtypes))
        };
        return Decision::not_reproduced(
            m.class(),
            format!("no watched value was float64 ({seen})"),
        );
    }
    let bytes = hits
        .iter()
        .flat_map(|hit| &hit.values)
        .filter(|v| is_float64(v))
        .filter_map(|v| v.bytes)
        .max();
    let summary = match bytes {
        Some(b) => format!(
            "float64 data, {} per value; as float32 it would be {}",
            fmt_bytes(b as f64),
            fmt_bytes(b as f64 / 2.0)
        ),
        None => "float64 data: as float32 it would take half the memory".to_owned(),
    };
    Decision::confirmed(m.class_or(Class::Constant), summary)
        .with(format!("float64 on {doubles}/{n} hits"))
}

/// TL106: a pinning loader with many workers, and pinned memory to show for it.
fn pinned_workers(hits: &[&Hit], m: &Measures, context: &Context, run: &RunSummary) -> Decision {
    let n = hits.len();
    if !context.gpu {
        return Decision::not_reproduced(
            m.class(),
            "pinning needs CUDA: ran without a GPU, so nothing was pinned".to_owned(),
        );
    }
    let pinning = count(hits, |hit| any_value(hit, |v| v.pin_memory == Some(true)));
    let pin_line = format!("pin_memory on {pinning}/{n} hits");
    if pinning == 0 {
        return Decision::not_reproduced(
            m.class(),
            format!("pin_memory was off at runtime on all {n} hits"),
        )
        .with(pin_line);
    }
    let workers = max_over(hits, |hit| max_value(hit, |v| v.workers)).unwrap_or(0);
    let prefetch =
        max_over(hits, |hit| max_value(hit, |v| v.prefetch_factor)).unwrap_or(DEFAULT_PREFETCH);
    let loader_line = format!("{workers} workers, prefetch_factor {prefetch}");
    if workers <= MAX_PINNED_WORKERS {
        let summary = format!(
            "only {workers} workers at runtime (more than {MAX_PINNED_WORKERS} are reported): the pinned batches stay few"
        );
        return Decision::not_reproduced(m.class(), summary)
            .with(pin_line)
            .with(loader_line);
    }
    let at_line = max_over(hits, |hit| hit.pinned).unwrap_or(0);
    let peak = at_line.max(run.peak_pinned.unwrap_or(0));
    let pinned_line = format!(
        "pinned host memory: {} at this line, {} at the run's peak",
        fmt_bytes(at_line as f64),
        fmt_bytes(peak as f64)
    );
    if peak == 0 {
        let summary =
            format!("pin_memory with {workers} workers, but nothing was pinned during the run");
        return Decision::not_reproduced(m.class(), summary)
            .with(pin_line)
            .with(loader_line)
            .with(pinned_line);
    }
    let batches = workers * prefetch + 1;
    let summary = format!(
        "peak pinned {} with {workers} workers × prefetch {prefetch}: about {} per worker ({} per pinned batch)",
        fmt_bytes(peak as f64),
        fmt_bytes(peak as f64 / workers as f64),
        fmt_bytes(peak as f64 / batches as f64),
    );
    Decision::confirmed(m.class_or(Class::Constant), summary)
        .with(pin_line)
        .with(loader_line)
        .with(pinned_line)
}

/// TL107: a graph kept by `retain_graph=True`: constant when each step's graph is dropped,
/// growing when graphs chain.
fn retained_graph(hits: &[&Hit], m: &Measures) -> Decision {
    let n = hits.len();
    if n < 2 {
        // Outside a loop, the retained graph is freed by its next use or when it goes out of
        // scope: there is no per-step cost to confirm.
        return Decision::not_reproduced(
            m.class(),
            "the line ran once: a graph retained outside a loop costs nothing per step".to_owned(),
        );
    }
    if m.gpu_grows || m.graph_grows {
        let growth = m.growth_phrase().unwrap_or_default();
        return Decision::confirmed(
            m.class(),
            format!("{growth}: the retained graphs chain across iterations"),
        );
    }
    // A second backward through the same forward (a GAN's generator loss through the
    // discriminator's pass, losses stepped one after another) needs the graph retained.
    let read: Vec<bool> = hits.iter().filter_map(|hit| hit.reused).collect();
    let reused = read.iter().filter(|&&reused| reused).count();
    if !read.is_empty() && reused * 2 >= read.len() {
        return Decision::not_reproduced(
            m.class(),
            format!(
                "a second backward ran through the retained graph before the line ran again on {reused}/{} hits: that backward is what retain_graph=True keeps the graph for",
                read.len()
            ),
        );
    }
    let node_counts: Vec<u64> = hits
        .iter()
        .filter_map(|hit| max_value(hit, |v| v.nodes))
        .collect();
    let with_grad = count(hits, |hit| any_value(hit, carries_grad));
    if !node_counts.is_empty() {
        let kept = node_counts.iter().filter(|&&nodes| nodes > 0).count();
        let line = format!(
            "a graph reachable on {kept}/{} measured hits",
            node_counts.len()
        );
        if kept == node_counts.len() {
            let nodes = node_counts.iter().max().copied().unwrap_or(0);
            let summary = format!(
                "a retained graph of up to {nodes} nodes on every hit: one step's activations stay alive until the next"
            );
            return Decision::confirmed(m.class_or(Class::Constant), summary).with(line);
        }
        return Decision::not_reproduced(
            m.class(),
            "no graph was retained at this line".to_owned(),
        )
        .with(line);
    }
    let line = format!("grad_fn on {with_grad}/{n} hits (graph size not read)");
    if with_grad == n {
        let summary =
            "the backward root carries a grad_fn on every hit: its graph is retained".to_owned();
        return Decision::confirmed(m.class_or(Class::Constant), summary).with(line);
    }
    Decision::not_reproduced(m.class(), "no graph was retained at this line".to_owned()).with(line)
}

/// TL110: after `backward(create_graph=True)` the parameters' gradients carry graphs that hold
/// the parameters: a cycle autograd never frees. Read as the line starts: a gradient that still
/// holds a graph then was not set to `None` or detached since the last backward, which adds to
/// it, so the graphs chain from step to step.
fn create_graph_cycle(hits: &[&Hit], m: &Measures) -> Decision {
    // The first backward finds no gradient: only hits with gradients to read count.
    let read: Vec<(u64, u64)> = hits
        .iter()
        .filter_map(|hit| Some((hit.grads?, hit.grads_with_graph?)))
        .filter(|(grads, _)| *grads > 0)
        .collect();
    if read.is_empty() {
        let summary = if hits.len() < 2 {
            "the line ran once: no earlier backward's gradients to find"
        } else {
            "no parameter had a gradient when the line started: they are set to None before each backward"
        };
        return Decision::not_reproduced(m.class(), summary.to_owned());
    }
    let holding = read
        .iter()
        .filter(|(_, with_graph)| *with_graph > 0)
        .count();
    let most = read
        .iter()
        .map(|(_, with_graph)| *with_graph)
        .max()
        .unwrap_or(0);
    let grads = read.iter().map(|(grads, _)| *grads).max().unwrap_or(0);
    let line = format!(
        "gradients still holding the last backward's graph as the line started on {holding}/{} hits (up to {most} of {grads} parameters' `.grad`)",
        read.len()
    );
    if holding * 2 < read.len() {
        return Decision::not_reproduced(
            m.class(),
            "the gradients held no graph when the next backward started: they were set to None or detached (`zero_grad()`) in between".to_owned(),
        )
        .with(line);
    }
    if let Some(growth) = m.growth_phrase() {
        return Decision::confirmed(
            m.class(),
            format!("{growth}: each step's graph stays reachable from the gradients, which the next backward adds to"),
        )
        .with(line);
    }
    Decision::confirmed(
        m.class_or(Class::Constant),
        "the gradients still hold the last backward's graph when the next one starts: the graphs chain from step to step, though no growth was measured over these hits".to_owned(),
    )
    .with(line)
}

/// On how many hits the line's value was another object than at the hit before, of how many
/// compared (TL113, TL203); `None` when none was compared.
fn fresh_hits(hits: &[&Hit]) -> Option<(usize, usize)> {
    let fresh: Vec<bool> = hits
        .iter()
        .filter_map(|hit| hit.values.first()?.fresh)
        .collect();
    let new = fresh.iter().filter(|&&fresh| fresh).count();
    (!fresh.is_empty()).then_some((new, fresh.len()))
}

/// TL113: a model, its state or an optimizer made anew at the line on every hit.
fn made_per_step(hits: &[&Hit], m: &Measures) -> Decision {
    let Some((new, compared)) = fresh_hits(hits) else {
        let summary = if hits.len() < 2 {
            "the line ran once: a copy made once costs nothing per step"
        } else {
            "what the line made was not read"
        };
        return Decision::not_reproduced(m.class(), summary.to_owned());
    };
    let line = format!("another object than at the hit before on {new}/{compared} hits");
    if new * 2 < compared {
        return Decision::not_reproduced(
            m.class(),
            "the line gave back the same object on most hits: nothing was copied or rebuilt per step".to_owned(),
        )
        .with(line);
    }
    let value = hits.iter().rev().find_map(|hit| hit.values.first());
    let summary = match value {
        Some(value) if value.kind == "optimizer" => format!(
            "a new optimizer on {new}/{} hits, with state for {} parameters when made: its state is allocated again at the next step() and its step count starts over",
            compared,
            value.len.unwrap_or(0)
        ),
        Some(value) => {
            let held = value
                .bytes
                .filter(|&bytes| bytes > 0)
                .map(|bytes| {
                    let devices = value.devices.as_deref().unwrap_or_default().join(", ");
                    format!(" ({} on {devices})", fmt_bytes(bytes as f64))
                })
                .unwrap_or_default();
            format!(
                "a new copy{held} on {new}/{} hits: allocated again every step, beside the previous one until the name lets it go",
                compared
            )
        }
        None => format!("a new object on {new}/{} hits", compared),
    };
    Decision::confirmed(m.class_or(Class::Constant), summary).with(line)
}

/// What PyTorch raises in a forked worker that touches CUDA once its parent has.
const FORKED_CUDA_ERROR: &str = "Cannot re-initialize CUDA in forked subprocess";

/// TL112: the DataLoader's worker processes hold device memory of their own (a CUDA context
/// each, and whatever the dataset put there), read from NVML's per-process figures.
fn cuda_in_workers(hits: &[&Hit], m: &Measures, context: &Context, run: &RunSummary) -> Decision {
    if !context.gpu {
        return Decision::not_reproduced(
            m.class(),
            "ran without a GPU: the workers had no device to use".to_owned(),
        );
    }
    let workers = max_over(hits, |hit| max_value(hit, |v| v.workers));
    let loader_line = workers.map(|workers| format!("{workers} workers at runtime"));
    let with_loader = |decision: Decision| match &loader_line {
        Some(line) => decision.with(line.clone()),
        None => decision,
    };
    if workers == Some(0) {
        return with_loader(Decision::not_reproduced(
            m.class(),
            "no worker processes at runtime: the dataset ran in the main process".to_owned(),
        ));
    }
    // The other half of the hazard: a forked worker cannot use CUDA at all, and the script
    // dies at its first batch.
    if run
        .failure
        .as_deref()
        .is_some_and(|traceback| traceback.contains(FORKED_CUDA_ERROR))
    {
        return with_loader(Decision::confirmed(
            m.class_or(Class::Constant),
            format!(
                "a forked worker could not use CUDA: the script failed with `RuntimeError: {FORKED_CUDA_ERROR}`"
            ),
        ));
    }
    match run.peak_worker_device {
        None => with_loader(Decision::not_reproduced(
            m.class(),
            "the device's per-process memory could not be read (NVML): what the workers held is not known".to_owned(),
        )),
        Some((_, 0)) => with_loader(Decision::not_reproduced(
            m.class(),
            "the script's worker processes held nothing on the GPU".to_owned(),
        )),
        Some((processes, bytes)) => with_loader(Decision::confirmed(
            m.class_or(Class::Constant),
            format!(
                "{processes} worker process{} held {} on the GPU at once: a CUDA context in each, besides what the dataset put there",
                if processes == 1 { "" } else { "es" },
                fmt_bytes(bytes as f64)
            ),
        )),
    }
}

/// TL203: `torch.compile` given a new function on every hit (the function compiled, not the
/// wrapper it returns, is compared), with dynamo's graph count and the line's own time beside.
fn compiled_per_step(hits: &[&Hit], m: &Measures) -> Decision {
    let mut decision = match fresh_hits(hits) {
        None => {
            let summary = if hits.len() < 2 {
                "the line ran once: a function compiled once is compiled once"
            } else {
                "what the line compiled was not read"
            };
            Decision::not_reproduced(m.class(), summary.to_owned())
        }
        Some((new, compared)) => {
            let line = format!(
                "another function compiled than at the hit before on {new}/{compared} hits"
            );
            if new * 2 < compared {
                Decision::not_reproduced(
                    m.class(),
                    "torch.compile was given the same function on most hits: dynamo's cache answers"
                        .to_owned(),
                )
                .with(line)
            } else {
                let summary = format!(
                    "a new function compiled on {new}/{compared} hits: each is a new object to torch.compile, wrapped, guarded and (when its guards fail) compiled again"
                );
                Decision::confirmed(m.class_or(Class::Constant), summary).with(line)
            }
        }
    };
    let graphs: Vec<u64> = hits.iter().filter_map(|hit| hit.graphs).collect();
    if let (Some(first), Some(last)) = (graphs.first(), graphs.last()) {
        decision = decision.with(format!(
            "graphs dynamo had compiled in the process: {first} when the line first ran, {last} when it last ran"
        ));
    }
    let mut seconds: Vec<f64> = hits.iter().skip(1).filter_map(|hit| hit.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    if let Some(median) = seconds.get(seconds.len() / 2) {
        decision = decision.with(format!(
            "the line itself took {} per hit after the first (median)",
            fmt_seconds(*median)
        ));
    }
    decision
}

/// TL108: a checkpoint whose tensors land on a GPU.
fn loaded_on_gpu(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    let devices: BTreeSet<&str> = hits
        .iter()
        .flat_map(|hit| &hit.values)
        .filter_map(|v| v.devices.as_ref())
        .flatten()
        .map(String::as_str)
        .collect();
    if devices.is_empty() {
        return Decision::not_reproduced(
            m.class(),
            "the loaded object holds no tensors the probe could see".to_owned(),
        );
    }
    let line = format!("devices of the loaded tensors: {}", join(&devices));
    let cuda: Vec<&str> = devices
        .iter()
        .copied()
        .filter(|d| d.starts_with("cuda"))
        .collect();
    if cuda.is_empty() {
        return Decision::not_reproduced(
            m.class(),
            "the loaded tensors all stayed on the CPU".to_owned(),
        )
        .with(line);
    }
    if context.flagged_text.contains("map_location") {
        // The hazard is tensors landing where they were saved; these went where the script
        // asked.
        let summary = format!(
            "the loaded tensors live on {}, where `map_location` put them",
            cuda.join(", ")
        );
        return Decision::not_reproduced(m.class(), summary).with(line);
    }
    let mut summary = format!("the loaded tensors live on {}", cuda.join(", "));
    if let Some(allocated) = hits.iter().filter_map(|hit| hit.allocated).next() {
        summary.push_str(&format!(
            " ({} allocated on the GPU after the line)",
            fmt_bytes(allocated as f64)
        ));
    }
    Decision::confirmed(m.class_or(Class::Constant), summary).with(line)
}

/// TL109: a hook count that rises with the hits.
fn hooks_in_loop(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    let counts = readings(hits, context.warmup, |hit| max_value(hit, |v| v.hooks));
    let (Some(&first), Some(&last)) = (counts.first(), counts.last()) else {
        return Decision::not_reproduced(
            m.class(),
            "the hook count was not read at this line".to_owned(),
        );
    };
    let line = format!("hooks {first} → {last} over {} hits", counts.len());
    let rising = counts.windows(2).filter(|pair| pair[1] > pair[0]).count();
    let pairs = counts.len().saturating_sub(1);
    if last <= first || (rising as f64) <= RISING_SHARE * pairs as f64 {
        let summary = if counts.len() < 2 {
            "the line ran once: no hook count to compare"
        } else {
            "the hook count did not rise with the hits"
        };
        return Decision::not_reproduced(m.class(), summary.to_owned()).with(line);
    }
    let per_hit = (last - first) as f64 / pairs as f64;
    let class = m.class_or(if m.enough {
        Class::GrowsHost
    } else {
        Class::Constant
    });
    let mut summary = format!(
        "a hook is added on every hit ({first} → {last}, {} per hit): each one runs on every later call",
        fmt_number(per_hit)
    );
    if let Some(growth) = m.growth_phrase() {
        summary = format!("{growth}; {summary}");
    }
    Decision::confirmed(class, summary).with(line)
}

/// TL201: cudaMalloc and cudaFree counts that climb with every hit.
fn empty_cache(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    if !context.gpu {
        return Decision::not_reproduced(
            m.class(),
            "ran without a GPU: there is no cache to empty".to_owned(),
        );
    }
    let allocs = counter_climb(hits, context.warmup, |hit| hit.device_allocs);
    let frees = counter_climb(hits, context.warmup, |hit| hit.device_frees);
    let (Some(allocs), Some(frees)) = (allocs, frees) else {
        return Decision::not_reproduced(
            m.class(),
            "the allocator's cudaMalloc/cudaFree counts were not read".to_owned(),
        );
    };
    let line = format!(
        "cudaMalloc {} → {}, cudaFree {} → {} over {} hits",
        allocs.first, allocs.last, frees.first, frees.last, allocs.hits
    );
    if !(allocs.climbs() && frees.climbs()) {
        let summary = format!(
            "the cudaMalloc/cudaFree counts did not climb per hit ({} → {}): the cache had nothing to release",
            allocs.first, allocs.last
        );
        return Decision::not_reproduced(m.class(), summary).with(line);
    }
    let summary = format!(
        "every hit frees the cache and allocates it again: +{} cudaMalloc and +{} cudaFree per hit",
        fmt_number(allocs.per_hit()),
        fmt_number(frees.per_hit())
    );
    Decision::confirmed(m.class_or(Class::Constant), summary).with(line)
}

/// TL202: anomaly detection on while the line runs.
fn anomaly_mode(hits: &[&Hit], m: &Measures, run: &RunSummary) -> Decision {
    let n = hits.len();
    let on = count(hits, |hit| hit.anomaly_enabled == Some(true));
    let line = format!("anomaly detection on at {on}/{n} hits");
    if on == 0 {
        let summary = format!("anomaly detection was off at this line on all {n} hits");
        return Decision::not_reproduced(m.class(), summary).with(line);
    }
    // The cost is per training step: a mode switched on for one diagnostic pass and off again
    // costs nothing after it. The timeline from the line on says how long it stayed on (what
    // ran before the line, imports and data preparation, does not count).
    let since = hits.first().map_or(f64::MIN, |hit| hit.t);
    let after: Vec<bool> = run
        .anomaly_timeline
        .iter()
        .filter(|(t, _)| *t >= since)
        .map(|(_, on)| *on)
        .collect();
    let share = if after.is_empty() {
        run.anomaly_share
    } else {
        Some(after.iter().filter(|on| **on).count() as f64 / after.len() as f64)
    };
    if let Some(share) = share {
        let timeline = format!(
            "anomaly detection on in {:.0}% of the timeline samples from this line on",
            share * 100.0
        );
        if share < ANOMALY_MIN_SHARE {
            let summary = format!(
                "anomaly detection was on at this line but off for {:.0}% of the run from there on: only a short stretch ran under it",
                (1.0 - share) * 100.0
            );
            return Decision::not_reproduced(m.class(), summary)
                .with(line)
                .with(timeline);
        }
        let summary =
            "anomaly detection stays on while the script runs: every op records a traceback and every backward checks for NaN"
                .to_owned();
        return Decision::confirmed(m.class_or(Class::Constant), summary)
            .with(line)
            .with(timeline);
    }
    let summary =
        "anomaly detection is on: every op records a traceback and every backward checks for NaN"
            .to_owned();
    Decision::confirmed(m.class_or(Class::Constant), summary).with(line)
}

/// The reduced-precision floating dtypes a forward can run in.
fn is_half(dtype: Option<&str>) -> bool {
    matches!(dtype, Some("float16" | "bfloat16"))
}

/// A forward that ran in reduced precision: under autocast, or with half parameters or a
/// half output.
fn reduced_precision(forward: &Forward) -> bool {
    forward.autocast == Some(true)
        || is_half(forward.param_dtype.as_deref())
        || is_half(forward.output_dtype.as_deref())
}

/// TL301: the loop's forward as it ran, one per iteration (a forward pre-hook and a forward
/// hook on the module the finding's forward calls): float32 parameters and output with
/// autocast off, on a CUDA device, with grad on.
fn no_mixed_precision(hits: &[&Hit], m: &Measures, context: &Context) -> Decision {
    let n = hits.len();
    let forwards: Vec<&Forward> = hits.iter().filter_map(|hit| hit.forward.as_ref()).collect();
    let seen = forwards.len();
    let modules: BTreeSet<&str> = forwards.iter().map(|f| f.module.as_str()).collect();
    let mut evidence = Vec::new();
    if seen > 0 {
        evidence.push(format!(
            "a forward of `{}` seen on {seen}/{n} iterations",
            join(&modules)
        ));
        let on = count_forwards(&forwards, |f| f.autocast == Some(true));
        let off = count_forwards(&forwards, |f| f.autocast == Some(false));
        let casts: BTreeSet<&str> = forwards
            .iter()
            .filter(|f| f.autocast == Some(true))
            .filter_map(|f| f.autocast_dtype.as_deref())
            .collect();
        evidence.push(if on == 0 {
            format!("autocast for CUDA off at {off}/{seen} forwards")
        } else if casts.is_empty() {
            format!("autocast for CUDA on at {on}/{seen} forwards")
        } else {
            format!(
                "autocast for CUDA on ({}) at {on}/{seen} forwards",
                join(&casts)
            )
        });
        if let Some(last) = forwards.iter().rev().find(|f| f.param_dtype.is_some()) {
            let dtype = last.param_dtype.as_deref().unwrap_or_default();
            let device = last.param_device.as_deref().unwrap_or("an unknown device");
            let bytes = last
                .param_bytes
                .map(|bytes| format!(", {}", fmt_bytes(bytes as f64)))
                .unwrap_or_default();
            evidence.push(format!("parameters: mostly {dtype}, on {device}{bytes}"));
        }
        let outputs: BTreeSet<&str> = forwards
            .iter()
            .filter_map(|f| f.output_dtype.as_deref())
            .collect();
        if !outputs.is_empty() {
            evidence.push(format!("output dtype: {}", join(&outputs)));
        }
        let grad = count_forwards(&forwards, |f| f.grad_enabled == Some(true));
        evidence.push(format!("grad enabled at {grad}/{seen} forwards"));
    }
    let decide = |decision: Decision| evidence.iter().cloned().fold(decision, Decision::with);
    if !context.gpu {
        return decide(Decision::not_reproduced(
            m.class(),
            "ran without a GPU: the forward ran on the CPU, where there are no CUDA activations for mixed precision to halve".to_owned(),
        ));
    }
    if seen == 0 {
        return decide(Decision::not_reproduced(
            m.class(),
            format!(
                "no forward of a module with parameters was seen with grad on in {n} iterations of the loop"
            ),
        ));
    }
    let reduced: Vec<&&Forward> = forwards.iter().filter(|f| reduced_precision(f)).collect();
    if reduced.len() * 2 >= seen {
        let autocast = reduced.iter().find(|f| f.autocast == Some(true));
        let summary = if let Some(forward) = autocast {
            let dtype = forward
                .autocast_dtype
                .as_deref()
                .unwrap_or("reduced precision");
            format!(
                "autocast was on for CUDA ({dtype}) at the forward on {}/{seen} iterations: its matmuls ran, and kept their activations, in {dtype}",
                count_forwards(&forwards, |f| f.autocast == Some(true))
            )
        } else if let Some(forward) = reduced.iter().find(|f| is_half(f.param_dtype.as_deref())) {
            format!(
                "the model's parameters are {}: the forward runs in half precision already",
                forward.param_dtype.as_deref().unwrap_or_default()
            )
        } else {
            let dtype = reduced
                .iter()
                .find_map(|f| f.output_dtype.as_deref())
                .unwrap_or("half precision");
            format!("the forward returned {dtype}: it runs in half precision already")
        };
        return decide(Decision::not_reproduced(m.class(), summary));
    }
    let on_cuda = |f: &Forward| {
        f.param_device
            .as_deref()
            .is_some_and(|device| device.starts_with("cuda"))
    };
    if count_forwards(&forwards, on_cuda) == 0 {
        let devices: BTreeSet<&str> = forwards
            .iter()
            .filter_map(|f| f.param_device.as_deref())
            .collect();
        let summary = if devices.is_empty() {
            "the device of the model's parameters was not read".to_owned()
        } else {
            format!(
                "the model's parameters are on {}, not on a CUDA device: nothing runs on the GPU to halve",
                join(&devices)
            )
        };
        return decide(Decision::not_reproduced(m.class(), summary));
    }
    if count_forwards(&forwards, |f| f.grad_enabled == Some(true)) == 0 {
        return decide(Decision::not_reproduced(
            m.class(),
            format!(
                "grad was off at the forward on all {seen} iterations: it keeps no activations for backward"
            ),
        ));
    }
    let float32 = count_forwards(&forwards, |f| {
        f.autocast == Some(false)
            && on_cuda(f)
            && f.grad_enabled == Some(true)
            && f.param_dtype.as_deref() == Some("float32")
            && f.output_dtype
                .as_deref()
                .is_none_or(|dtype| dtype == "float32")
    });
    if float32 == 0 {
        return decide(Decision::not_reproduced(
            m.class(),
            "the forward's precision could not be read (autocast, or the dtype of its parameters)"
                .to_owned(),
        ));
    }
    let module = forwards
        .iter()
        .rev()
        .find(|f| on_cuda(f))
        .map_or("the model", |f| f.module.as_str());
    decide(Decision::confirmed(
        Class::Constant,
        format!(
            "the forward of `{module}` ran in float32 with autocast off on the GPU on {float32}/{seen} iterations: the activations it keeps for backward are float32, twice what bfloat16 would keep"
        ),
    ))
}

fn count_forwards(forwards: &[&Forward], test: impl Fn(&Forward) -> bool) -> usize {
    forwards.iter().filter(|f| test(f)).count()
}

/// A rule the probe has no predicate for: memory growth alone decides.
fn unknown_rule(code: &str, m: &Measures) -> Decision {
    match m.growth_phrase() {
        Some(growth) => Decision::confirmed(
            m.class(),
            format!("{growth} (no runtime predicate for {code})"),
        ),
        None => Decision::not_reproduced(
            m.class(),
            format!("no runtime predicate for {code}, and memory did not grow"),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Predicates.

fn count(hits: &[&Hit], test: impl Fn(&Hit) -> bool) -> usize {
    hits.iter().filter(|hit| test(hit)).count()
}

fn any_value(hit: &Hit, test: impl Fn(&Value) -> bool) -> bool {
    hit.values.iter().any(test)
}

fn max_value(hit: &Hit, read: impl Fn(&Value) -> Option<u64>) -> Option<u64> {
    hit.values.iter().filter_map(read).max()
}

fn max_over(hits: &[&Hit], read: impl Fn(&Hit) -> Option<u64>) -> Option<u64> {
    hits.iter().filter_map(|hit| read(hit)).max()
}

/// A counter's readings after the warm-up; all of them when fewer than two come after it (a
/// short run: the warm-up readings are better than none). A container that fills during the
/// warm-up and then stays bounded (a rolling window) does not read as growing.
fn readings(hits: &[&Hit], warmup: u64, read: impl Fn(&Hit) -> Option<u64>) -> Vec<u64> {
    let after: Vec<u64> = hits
        .iter()
        .filter(|hit| hit.n > warmup)
        .filter_map(|hit| read(hit))
        .collect();
    if after.len() >= 2 {
        after
    } else {
        hits.iter().filter_map(|hit| read(hit)).collect()
    }
}

/// The first and the last of a counter's readings (after the warm-up, see `readings`).
fn first_last(
    hits: &[&Hit],
    warmup: u64,
    read: impl Fn(&Hit) -> Option<u64>,
) -> Option<(u64, u64)> {
    let readings = readings(hits, warmup, read);
    Some((*readings.first()?, *readings.last()?))
}

fn container_growth(hits: &[&Hit], warmup: u64) -> Option<(u64, u64)> {
    first_last(hits, warmup, |hit| max_value(hit, |v| v.len))
}

fn grad_on(hit: &Hit) -> bool {
    hit.grad_enabled == Some(true) && hit.inference_mode != Some(true)
}

fn carries_grad(value: &Value) -> bool {
    value.grad_fn || value.items_with_grad.is_some_and(|items| items > 0)
}

fn on_cuda(value: &Value) -> bool {
    value.items_on_gpu.is_some_and(|items| items > 0)
        || value
            .device
            .as_deref()
            .is_some_and(|device| device.starts_with("cuda"))
}

fn is_float64(value: &Value) -> bool {
    matches!(
        value.dtype.as_deref(),
        Some("float64" | "torch.float64" | "double")
    )
}

fn join(items: &BTreeSet<&str>) -> String {
    items.iter().copied().collect::<Vec<_>>().join(", ")
}

/// A cumulative counter (cudaMalloc calls) over the hits after the warm-up.
struct Climb {
    first: u64,
    last: u64,
    hits: usize,
    rising: usize,
}

impl Climb {
    fn per_hit(&self) -> f64 {
        (self.last - self.first) as f64 / (self.hits - 1) as f64
    }

    /// Up on more than half of the consecutive readings: each hit pays for it again.
    fn climbs(&self) -> bool {
        self.last > self.first && self.rising as f64 > RISING_SHARE * (self.hits - 1) as f64
    }
}

fn counter_climb(hits: &[&Hit], warmup: u64, read: impl Fn(&Hit) -> Option<u64>) -> Option<Climb> {
    let readings = readings(hits, warmup, read);
    if readings.len() < 2 {
        return None;
    }
    Some(Climb {
        first: readings[0],
        last: readings[readings.len() - 1],
        hits: readings.len(),
        rising: readings.windows(2).filter(|pair| pair[1] > pair[0]).count(),
    })
}

// ---------------------------------------------------------------------------------------------
// Measurements: slopes per hit after the warm-up.

/// One counter after the warm-up: its slope, first and last readings, and how often it rose.
#[derive(Debug, Clone, Copy)]
struct Series {
    slope: Slope,
    first: f64,
    last: f64,
    rising: usize,
    pairs: usize,
    /// Falls to less than half the previous reading: an accumulator reset (every epoch).
    resets: usize,
    /// The median rise between consecutive readings that rose.
    rise_per_hit: f64,
}

impl Series {
    fn of(points: &[(f64, f64)]) -> Option<Self> {
        let slope = fit(points)?;
        Some(Self {
            slope,
            first: points[0].1,
            last: points[points.len() - 1].1,
            rising: points
                .windows(2)
                .filter(|pair| pair[1].1 > pair[0].1)
                .count(),
            pairs: points.len() - 1,
            resets: points
                .windows(2)
                .filter(|pair| pair[1].1 < pair[0].1 / 2.0)
                .count(),
            rise_per_hit: median_rise(points),
        })
    }

    /// Growth per hit: the slope, or for a sawtooth (grows, is reset, grows again) the rise
    /// between resets, which the slope across resets hides.
    fn growth_per_hit(&self) -> f64 {
        if self.resets > 0 {
            self.rise_per_hit
        } else {
            self.slope.per_hit
        }
    }

    fn significant(&self, floor: f64) -> bool {
        self.slope.per_hit > floor.max(SIGNIFICANCE * self.slope.stderr)
    }
}

fn median_rise(points: &[(f64, f64)]) -> f64 {
    let mut rises: Vec<f64> = points
        .windows(2)
        .map(|pair| pair[1].1 - pair[0].1)
        .filter(|rise| *rise > 0.0)
        .collect();
    if rises.is_empty() {
        return 0.0;
    }
    rises.sort_by(f64::total_cmp);
    rises[rises.len() / 2]
}

/// A one-time jump of allocated memory at the first hits.
#[derive(Debug, Clone, Copy)]
struct Spike {
    at: u64,
    bytes: f64,
}

struct Measures {
    /// Hits after the warm-up.
    measured_hits: usize,
    /// Enough of them to call growth (`MIN_GROWTH_HITS`).
    enough: bool,
    gpu: Option<Series>,
    host: Option<Series>,
    /// "host RSS", or "pinned host memory" for TL106.
    host_label: &'static str,
    nodes: Option<Series>,
    /// The watched value itself (a container's items, a tensor's bytes): its resets bound
    /// the growth the line causes.
    held: Option<Series>,
    gpu_grows: bool,
    host_grows: bool,
    graph_grows: bool,
    spike: Option<Spike>,
}

impl Measures {
    fn of(code: &str, hits: &[&Hit], context: &Context) -> Self {
        let warmup = context.warmup;
        let measured_hits = hits.iter().filter(|hit| hit.n > warmup).count();
        let enough = measured_hits >= MIN_GROWTH_HITS;
        let pinned = code == "TL106";
        let gpu = Series::of(&points(hits, warmup, |hit| hit.allocated));
        let host = if pinned {
            Series::of(&points(hits, warmup, |hit| hit.pinned))
        } else {
            Series::of(&points(hits, warmup, |hit| hit.rss))
        };
        let nodes = Series::of(&points(hits, warmup, |hit| max_value(hit, |v| v.nodes)));
        let held = Series::of(&points(hits, warmup, |hit| {
            max_value(hit, |v| v.len).or_else(|| max_value(hit, |v| v.bytes))
        }));
        let host_floor = if pinned {
            PINNED_MIN_SLOPE
        } else {
            HOST_MIN_SLOPE
        };
        let gpu_grows = enough && gpu.is_some_and(|s| s.significant(GPU_MIN_SLOPE));
        let host_grows = enough && host.is_some_and(|s| s.significant(host_floor));
        let graph_grows = enough
            && nodes.is_some_and(|s| {
                let steady = s.slope.per_hit >= NODE_MIN_SLOPE
                    && s.rising as f64 > RISING_SHARE * s.pairs as f64;
                // An accumulator reset every epoch: the graph grows on nearly every hit and
                // is dropped now and then; within each epoch it keeps every step's graph.
                let sawtooth = s.resets > 0
                    && s.rise_per_hit >= NODE_MIN_SLOPE
                    && s.rising as f64 >= SAWTOOTH_RISING_SHARE * s.pairs as f64;
                steady || sawtooth
            });
        let spike = if enough && !gpu_grows {
            find_spike(&points(hits, 0, |hit| hit.allocated), warmup)
        } else {
            None
        };
        Self {
            measured_hits,
            enough,
            gpu,
            host,
            host_label: if pinned {
                "pinned host memory"
            } else {
                "host RSS"
            },
            nodes,
            held,
            gpu_grows,
            host_grows,
            graph_grows,
            spike,
        }
    }

    /// Whether any memory counter was read after the warm-up.
    fn counted(&self) -> bool {
        self.gpu.is_some() || self.host.is_some() || self.nodes.is_some()
    }

    /// How memory behaved, whatever the rule.
    fn class(&self) -> Class {
        if self.gpu_grows {
            Class::GrowsGpu
        } else if self.graph_grows {
            Class::GrowsHostGraph
        } else if self.host_grows {
            Class::GrowsHost
        } else if self.spike.is_some() {
            Class::Spike
        } else {
            Class::None
        }
    }

    /// The memory class, or `otherwise` when nothing moved but the hazard's predicate holds.
    fn class_or(&self, otherwise: Class) -> Class {
        match self.class() {
            Class::None => otherwise,
            class => class,
        }
    }

    fn measured_any(&self) -> bool {
        self.gpu.is_some() || self.nodes.is_some()
    }

    /// "+8.4 MiB per hit on the GPU (±0.1 MiB), autograd graph +8 nodes per hit", or None when
    /// nothing grows.
    fn growth_phrase(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(gpu) = self.gpu.filter(|_| self.gpu_grows) {
            parts.push(per_hit_bytes_at(gpu.slope, " on the GPU"));
        } else if self.graph_grows && self.gpu.is_some() {
            parts.push("GPU flat".to_owned());
        }
        if let Some(nodes) = self.nodes.filter(|_| self.graph_grows) {
            let mut part = format!(
                "autograd graph +{} nodes per hit",
                fmt_number(nodes.growth_per_hit())
            );
            if nodes.resets > 0 {
                part.push_str(&format!(
                    " until it is reset ({} reset{} in {} hits)",
                    nodes.resets,
                    if nodes.resets == 1 { "" } else { "s" },
                    nodes.pairs + 1
                ));
            }
            parts.push(part);
        }
        if let Some(host) = self.host.filter(|_| self.host_grows) {
            parts.push(format!("{} {}", self.host_label, per_hit_bytes(host.slope)));
        }
        if !(self.gpu_grows || self.graph_grows || self.host_grows) {
            return self.spike.map(|spike| {
                format!(
                    "a one-time jump of {} at hit {}, flat afterwards",
                    fmt_signed_bytes(spike.bytes),
                    spike.at
                )
            });
        }
        Some(parts.join(", "))
    }

    /// The measurements as evidence lines.
    fn evidence(&self, warmup: u64) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.enough {
            lines.push(format!(
                "only {} hits after the {warmup} warm-up hits ({MIN_GROWTH_HITS} needed to call growth): no growth rate fitted",
                self.measured_hits
            ));
        }
        if let Some(gpu) = self.gpu {
            let call = verdict_word(self.gpu_grows, self.enough, gpu, GPU_MIN_SLOPE);
            lines.push(format!(
                "GPU allocated {} → {}: {} over {} measured hits{call}",
                fmt_bytes(gpu.first),
                fmt_bytes(gpu.last),
                per_hit_bytes(gpu.slope),
                gpu.slope.hits
            ));
        }
        if let Some(host) = self.host {
            let floor = if self.host_label == "host RSS" {
                HOST_MIN_SLOPE
            } else {
                PINNED_MIN_SLOPE
            };
            let call = verdict_word(self.host_grows, self.enough, host, floor);
            lines.push(format!(
                "{} {} → {}: {}{call}",
                self.host_label,
                fmt_bytes(host.first),
                fmt_bytes(host.last),
                per_hit_bytes(host.slope)
            ));
        }
        if let Some(nodes) = self.nodes {
            // A sawtooth (grows, is reset, grows again): the slope across the resets can be
            // flat or negative while the graph rises on nearly every hit; give the rise.
            let rate = if nodes.resets > 0 {
                format!(
                    "{:+.1} per hit between resets ({} reset{})",
                    nodes.growth_per_hit(),
                    nodes.resets,
                    if nodes.resets == 1 { "" } else { "s" }
                )
            } else {
                format!("{:+.1} per hit", nodes.slope.per_hit)
            };
            lines.push(format!(
                "autograd graph {} → {} nodes: {rate}, rising on {}/{} hits",
                nodes.first, nodes.last, nodes.rising, nodes.pairs
            ));
        }
        if let Some(spike) = self.spike {
            lines.push(format!(
                "allocated jumped {} at hit {}, then stayed flat",
                fmt_signed_bytes(spike.bytes),
                spike.at
            ));
        }
        if !self.counted() {
            lines.push("no memory counters were read at this line after the warm-up".to_owned());
        }
        lines
    }
}

/// Why a slope did not count as growth, for the evidence line (nothing when it did, or when
/// there were too few hits to call it either way).
fn verdict_word(grows: bool, enough: bool, series: Series, floor: f64) -> String {
    if grows || !enough {
        String::new()
    } else if series.slope.per_hit <= floor {
        format!(", under the {} per hit floor", fmt_bytes(floor))
    } else {
        format!(", within noise (under {SIGNIFICANCE}× its standard error)")
    }
}

/// (hit number, reading) for the hits after the warm-up that have the reading.
fn points(hits: &[&Hit], warmup: u64, read: impl Fn(&Hit) -> Option<u64>) -> Vec<(f64, f64)> {
    hits.iter()
        .filter(|hit| hit.n > warmup)
        .filter_map(|hit| read(hit).map(|value| (hit.n as f64, value as f64)))
        .collect()
}

/// Least-squares slope of `y` against `x`, with its standard error.
fn fit(points: &[(f64, f64)]) -> Option<Slope> {
    if points.len() < MIN_FIT_POINTS {
        return None;
    }
    let count = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / count;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / count;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let per_hit = sxy / sxx;
    let residuals: f64 = points
        .iter()
        .map(|p| ((p.1 - mean_y) - per_hit * (p.0 - mean_x)).powi(2))
        .sum();
    let stderr = (residuals / (count - 2.0) / sxx).sqrt();
    Some(Slope {
        per_hit,
        stderr,
        hits: points.len(),
    })
}

/// The largest rise between consecutive readings, when it comes early and the series stays
/// flat after it.
fn find_spike(points: &[(f64, f64)], warmup: u64) -> Option<Spike> {
    if points.len() < 4 {
        return None;
    }
    let (index, jump) = points
        .windows(2)
        .map(|pair| pair[1].1 - pair[0].1)
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let at = points[index + 1].0 as u64;
    if jump < SPIKE_MIN_BYTES || at > warmup + SPIKE_WINDOW {
        return None;
    }
    let after = &points[index + 1..];
    let low = after.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let high = after.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    (high - low <= SPIKE_FLAT_SHARE * jump).then_some(Spike { at, bytes: jump })
}

// ---------------------------------------------------------------------------------------------
// Projection over the user's run.

/// "+1.0 MiB per step → 9.8 GiB after 10,000 steps; 139 GiB free" (one hit taken as one step).
fn projection(class: Class, m: &Measures, context: &Context) -> Option<String> {
    let steps = context.project_steps;
    let after = format!("after {} steps", fmt_count(steps));
    match class {
        Class::GrowsGpu => {
            let gpu = m.gpu?;
            let slope = gpu.growth_per_hit();
            // What the process may still take: from the card's free memory or the allocator's
            // cap, whichever is lower, less what it held at the last hit.
            let limit = match (context.device_free, context.allowed) {
                (Some(free), Some(allowed)) if allowed < free => {
                    Some((allowed, "allowed by the memory cap"))
                }
                (Some(free), _) => Some((free, "free")),
                (None, Some(allowed)) => Some((allowed, "allowed by the memory cap")),
                (None, None) => None,
            };
            let room = limit.map(|(limit, _)| (limit as f64 - gpu.last).max(0.0));
            // A value emptied again and again (a list rebuilt every epoch or every `validate()`)
            // holds one period's growth at most: the projection is that, not `--steps`.
            if let Some(resets) = m.held.map(|held| held.resets).filter(|&r| r > 0) {
                let pairs = m.held.map_or(0, |held| held.pairs);
                let period = ((pairs + 1) / (resets + 1)).max(1) as f64;
                let bounded = slope * period;
                let mut text = format!(
                    "{} per step until the value is emptied again ({resets} reset{} in {} hits): about {} held at most",
                    fmt_signed_bytes(slope),
                    if resets == 1 { "" } else { "s" },
                    pairs + 1,
                    fmt_bytes(bounded)
                );
                if let (Some(room), Some((limit, what))) = (room, limit) {
                    text.push_str(&format!("; {} {what}", fmt_bytes(limit as f64)));
                    if bounded > room {
                        text.push_str(&format!(
                            ": out of memory within one period, after about {} more steps",
                            fmt_count(round_significant(room / slope, 2))
                        ));
                    }
                }
                return Some(text);
            }
            let total = slope * steps as f64;
            let mut text = format!(
                "{} per step → {} {after}",
                fmt_signed_bytes(slope),
                fmt_bytes(total)
            );
            if let (Some(room), Some((limit, what))) = (room, limit) {
                text.push_str(&format!("; {} {what}", fmt_bytes(limit as f64)));
                if total > room {
                    text.push_str(&format!(
                        ": out of memory after about {} more steps",
                        fmt_count(round_significant(room / slope, 2))
                    ));
                }
            }
            Some(text)
        }
        Class::GrowsHostGraph => {
            let mut text = m.nodes.filter(|_| m.graph_grows).map(|nodes| {
                let slope = nodes.growth_per_hit();
                if nodes.resets > 0 {
                    // Bounded by the reset: what one period holds, not the whole run.
                    format!(
                        "+{} autograd nodes per step until the accumulator is reset; about {} hits between resets here",
                        fmt_number(slope),
                        fmt_count(((nodes.pairs + 1) / (nodes.resets + 1)) as u64)
                    )
                } else {
                    format!(
                        "+{} autograd nodes per step → {} nodes {after}",
                        fmt_number(slope),
                        fmt_count((slope * steps as f64).round() as u64)
                    )
                }
            })?;
            // The host memory those nodes hold, when its growth cleared the floor: the evidence
            // calls a slope under it noise, and the projection must not project noise.
            if let Some(host) = m.host.filter(|_| m.host_grows) {
                let slope = host.slope.per_hit;
                text.push_str(&format!(
                    "; {} +{} per step → {}",
                    m.host_label,
                    fmt_bytes(slope),
                    fmt_bytes(slope * steps as f64)
                ));
            }
            Some(text)
        }
        Class::GrowsHost => {
            let slope = m.host?.slope.per_hit;
            Some(format!(
                "{} per step → {} of {} {after}",
                fmt_signed_bytes(slope),
                fmt_bytes(slope * steps as f64),
                m.host_label
            ))
        }
        _ => None,
    }
}

fn round_significant(value: f64, digits: i32) -> u64 {
    if value < 1.0 {
        return 0;
    }
    let scale = 10f64.powi(value.log10().floor() as i32 + 1 - digits);
    let scale = scale.max(1.0);
    ((value / scale).round() * scale) as u64
}

// ---------------------------------------------------------------------------------------------
// The run summary.

/// Expandable segments are suggested when reserved-but-free memory at the reserved peak is at
/// least this share of reserved memory...
const FRAGMENTED_SHARE: f64 = 0.25;
/// ...and at least this much. Below a quarter of the cache is ordinary caching headroom (blocks
/// are rounded up and kept for reuse); below 1 GiB the experimental setting is not worth trying.
/// Either way slivers left by varying batch shapes are what `expandable_segments` fights
/// (hazards §2), and a cudaMalloc retry (the cache was flushed to satisfy a request) shows it
/// directly, so any retry suggests it too.
const FRAGMENTED_MIN: u64 = 1 << 30;

/// The run's readings in time order: the periodic samples and every hit's counters.
pub fn run_readings(samples: &[Sample], hits: &[Hit]) -> Vec<Sample> {
    let mut readings: Vec<Sample> = samples.to_vec();
    readings.extend(hits.iter().map(Sample::of_hit));
    readings.sort_by(|a, b| a.t.total_cmp(&b.t));
    readings
}

/// Summarises the run's counters.
pub fn summarize(
    samples: &[Sample],
    device: &[DeviceSample],
    device_before: Option<u64>,
) -> RunSummary {
    let peak_allocated = samples
        .iter()
        .filter_map(|s| s.allocated.max(s.peak_allocated))
        .max();
    let peak_reserved = samples
        .iter()
        .filter_map(|s| s.reserved.max(s.peak_reserved))
        .max();
    // The sample where reserved memory peaks; the first of equal peaks (`max_by_key` keeps the last).
    let at_reserved_peak = samples
        .iter()
        .filter(|s| s.reserved.is_some())
        .rev()
        .max_by_key(|s| s.reserved);
    let fragmentation =
        at_reserved_peak.and_then(|s| Some(s.reserved?.saturating_sub(s.allocated?)));
    let reserved_at_peak = at_reserved_peak.and_then(|s| s.reserved);
    let device_peak_used = device.iter().map(|d| d.used).max().map(|peak| {
        let before = device_before
            .or(device.first().map(|d| d.used))
            .unwrap_or(0);
        peak.saturating_sub(before)
    });
    let retries = samples
        .iter()
        .filter_map(|s| s.alloc_retries)
        .max()
        .unwrap_or(0);
    let fragmented = match (fragmentation, reserved_at_peak) {
        (Some(free), Some(reserved)) => {
            free >= FRAGMENTED_MIN && free as f64 >= FRAGMENTED_SHARE * reserved as f64
        }
        _ => false,
    };
    let mut summary = RunSummary {
        peak_allocated,
        peak_reserved,
        fragmentation,
        device_peak_used,
        peak_rss: samples.iter().filter_map(|s| s.rss).max(),
        peak_pinned: samples.iter().filter_map(|s| s.pinned).max(),
        peak_worker_device: device
            .iter()
            .filter_map(|d| Some((d.workers?, d.worker_processes.unwrap_or(0))))
            .max_by_key(|&(bytes, _)| bytes)
            .map(|(bytes, processes)| (processes, bytes)),
        allowed: samples.iter().rev().find_map(|s| s.allowed),
        anomaly_share: share(samples, |s| s.anomaly_enabled),
        anomaly_timeline: samples
            .iter()
            .filter_map(|s| Some((s.t, s.anomaly_enabled?)))
            .collect(),
        suggest_expandable_segments: retries > 0 || fragmented,
        notes: Vec::new(),
        failure: None,
    };
    summary.notes = notes(
        &summary,
        reserved_at_peak,
        retries,
        fragmented,
        samples.is_empty(),
    );
    summary
}

/// The share of samples where a flag was read and true (None when it was never read).
fn share(samples: &[Sample], flag: impl Fn(&Sample) -> Option<bool>) -> Option<f64> {
    let read: Vec<bool> = samples.iter().filter_map(flag).collect();
    (!read.is_empty()).then(|| read.iter().filter(|on| **on).count() as f64 / read.len() as f64)
}

fn notes(
    summary: &RunSummary,
    reserved_at_peak: Option<u64>,
    retries: u64,
    fragmented: bool,
    no_samples: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    if no_samples {
        notes.push("no memory counters were sampled (torch was never loaded, or the run was shorter than one sample)".to_owned());
    }
    if let (Some(allocated), Some(reserved)) = (summary.peak_allocated, summary.peak_reserved) {
        notes.push(format!(
            "peak allocated {}, peak reserved {}",
            fmt_bytes(allocated as f64),
            fmt_bytes(reserved as f64)
        ));
        if let (Some(free), Some(at_peak)) =
            (summary.fragmentation, reserved_at_peak.filter(|&r| r > 0))
        {
            let share = format!(
                "{} of the {} reserved at its peak was cached but free ({:.0}%)",
                fmt_bytes(free as f64),
                fmt_bytes(at_peak as f64),
                100.0 * free as f64 / at_peak as f64
            );
            notes.push(if fragmented {
                format!(
                    "fragmentation: {share}, in blocks the requests could not reuse; empty_cache() would only hand them back to the driver, to be reserved again"
                )
            } else {
                format!("not fragmentation: {share}; tensors hold the rest")
            });
        }
    }
    if let Some(used) = summary.device_peak_used {
        notes.push(format!(
            "device memory in use peaked {} above what was used before the script (CUDA context and library workspaces included)",
            fmt_bytes(used as f64)
        ));
    }
    if let Some(rss) = summary.peak_rss {
        notes.push(format!("peak host RSS {}", fmt_bytes(rss as f64)));
    }
    if let Some(pinned) = summary.peak_pinned.filter(|&p| p > 0) {
        notes.push(format!(
            "peak pinned host memory {}",
            fmt_bytes(pinned as f64)
        ));
    }
    if retries > 0 {
        notes.push(format!(
            "{retries} cudaMalloc retr{}: the allocator had to free its cache to satisfy a request",
            if retries == 1 { "y" } else { "ies" }
        ));
    }
    notes
}

// ---------------------------------------------------------------------------------------------
// Numbers for humans: binary units, thousands separators.

/// Bytes in binary units: "512 bytes", "8.4 MiB", "139 GiB" (no decimals from 100 up).
pub fn fmt_bytes(bytes: f64) -> String {
    let (value, unit) = scale_bytes(bytes.abs());
    let sign = if bytes < 0.0 { "-" } else { "" };
    if unit == "bytes" {
        format!("{sign}{value:.0} bytes")
    } else if value >= 99.95 {
        format!("{sign}{value:.0} {unit}")
    } else {
        format!("{sign}{value:.1} {unit}")
    }
}

/// "+8.4 MiB", "-1.0 MiB".
pub fn fmt_signed_bytes(bytes: f64) -> String {
    if bytes < 0.0 {
        fmt_bytes(bytes)
    } else {
        format!("+{}", fmt_bytes(bytes))
    }
}

/// "+8.4 MiB per hit (±0.1 MiB)": the error in the slope's own unit, so the two compare.
fn per_hit_bytes(slope: Slope) -> String {
    per_hit_bytes_at(slope, "")
}

/// "+8.4 MiB per hit on the GPU (±0.1 MiB)", with `place` = " on the GPU".
fn per_hit_bytes_at(slope: Slope, place: &str) -> String {
    let (_, unit) = scale_bytes(slope.per_hit.abs());
    let divisor = unit_size(unit);
    let error = if unit == "bytes" {
        format!("±{:.0} bytes", slope.stderr)
    } else {
        format!("±{:.1} {unit}", slope.stderr / divisor)
    };
    format!(
        "{} per hit{place} ({error})",
        fmt_signed_bytes(slope.per_hit)
    )
}

const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];

fn scale_bytes(bytes: f64) -> (f64, &'static str) {
    let mut value = bytes;
    let mut unit = 0;
    // 1023.96 KiB would print as "1024.0 KiB": move up a unit before rounding can overflow it.
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    (value, UNITS[unit])
}

fn unit_size(unit: &str) -> f64 {
    let index = UNITS.iter().position(|u| *u == unit).unwrap_or(0);
    1024f64.powi(index as i32)
}

/// "10,000".
/// "850 µs", "3.2 ms", "1.40 s".
fn fmt_seconds(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.0} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.1} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

pub fn fmt_count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// "8" for whole numbers, "2.5" otherwise.
fn fmt_number(value: f64) -> String {
    if (value - value.round()).abs() < 0.05 {
        format!("{:.0}", value.round())
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn context() -> Context {
        Context {
            hits_wanted: 30,
            warmup: 5,
            gpu: true,
            device_free: Some(139 * GIB),
            allowed: None,
            project_steps: 10_000,
            ended_early: false,
            flagged_text: String::new(),
            growth_kept_by: None,
        }
    }

    fn cpu_context() -> Context {
        Context {
            gpu: false,
            device_free: None,
            ..context()
        }
    }

    /// The hits of one watched line: grad on, one tensor value, counters set per stream.
    #[derive(Clone)]
    struct Stream {
        hits: Vec<Hit>,
    }

    impl Stream {
        fn new(len: usize) -> Self {
            let hits = (1..=len as u64)
                .map(|n| Hit {
                    t: 1_000.0 + n as f64 * 0.1,
                    n,
                    grad_enabled: Some(true),
                    inference_mode: Some(false),
                    anomaly_enabled: Some(false),
                    values: vec![Value {
                        expr: "value".into(),
                        kind: "tensor".into(),
                        ..Value::default()
                    }],
                    ..Hit::default()
                })
                .collect();
            Self { hits }
        }

        fn each(mut self, values: &[u64], set: impl Fn(&mut Hit, u64)) -> Self {
            assert_eq!(values.len(), self.hits.len(), "one reading per hit");
            for (hit, &value) in self.hits.iter_mut().zip(values) {
                set(hit, value);
            }
            self
        }

        fn hit(mut self, edit: impl Fn(&mut Hit)) -> Self {
            self.hits.iter_mut().for_each(edit);
            self
        }

        fn value(self, edit: impl Fn(&mut Value)) -> Self {
            self.hit(|hit| hit.values.iter_mut().for_each(&edit))
        }

        fn allocated(self, values: &[u64]) -> Self {
            self.each(values, |hit, v| hit.allocated = Some(v))
        }

        fn rss(self, values: &[u64]) -> Self {
            self.each(values, |hit, v| hit.rss = Some(v))
        }

        fn nodes(self, values: &[u64]) -> Self {
            self.each(values, |hit, v| hit.values[0].nodes = Some(v))
        }

        fn len(self, values: &[u64]) -> Self {
            self.each(values, |hit, v| hit.values[0].len = Some(v))
        }

        fn bytes(self, values: &[u64]) -> Self {
            self.each(values, |hit, v| hit.values[0].bytes = Some(v))
        }

        fn grad_fn(self, on: bool) -> Self {
            self.value(|v| v.grad_fn = on)
        }

        fn first(mut self, hits: usize) -> Self {
            self.hits.truncate(hits);
            self
        }

        fn judge(&self, code: &str, context: &Context) -> Verdict {
            let hits: Vec<&Hit> = self.hits.iter().collect();
            judge(code, &hits, context)
        }
    }

    fn has(lines: &[String], needle: &str) -> bool {
        lines.iter().any(|line| line.contains(needle))
    }

    // Recorded streams. Each is what a scenario read right after its watched line ran, on 30
    // hits (an H200, torch 2.11.0+cu130, Python 3.12): `torch.cuda.memory_stats()` allocated
    // bytes, RSS from /proc/self/statm, autograd nodes reachable from the value (bounded walk
    // keeping the node wrappers alive, hazards §9), container length and bytes, hook counts and
    // the allocator's cudaMalloc/cudaFree counts. The model is Linear(1024, 4096) → ReLU →
    // Linear(4096, 10) on batches of 512 unless said otherwise. The warm-up hits are recorded
    // too; `judge` skips them for the slopes.

    /// `total += model(x).pow(2).mean()` in an eval loop with grad on (TL102/TL101).
    const EVAL_ACCUMULATE_ALLOCATED: [u64; 30] = [
        62068224, 72574464, 83080704, 93586944, 104093184, 114599424, 125105664, 135611904,
        146118144, 156624384, 167130624, 177636864, 188143104, 198649344, 209155584, 219661824,
        230168064, 240674304, 251180544, 261686784, 272193024, 282699264, 293205504, 303711744,
        314217984, 324724224, 335230464, 345736704, 356242944, 366749184,
    ];
    const EVAL_ACCUMULATE_RSS: [u64; 30] = [
        871657472, 872013824, 872042496, 872058880, 872087552, 872108032, 872144896, 872153088,
        872165376, 872177664, 872189952, 872202240, 872218624, 872243200, 872284160, 872308736,
        872341504, 872353792, 872361984, 872370176, 872382464, 872390656, 872407040, 872415232,
        872427520, 872439808, 872456192, 872484864, 872525824, 872554496,
    ];
    const EVAL_ACCUMULATE_NODES: [u64; 30] = [
        12, 20, 28, 36, 44, 52, 60, 68, 76, 84, 92, 100, 108, 116, 124, 132, 140, 148, 156, 164,
        172, 180, 188, 196, 204, 212, 220, 228, 236, 244,
    ];

    /// The same accumulation in a training loop (zero_grad, backward, SGD step each hit).
    const TRAIN_ACCUMULATE_ALLOCATED: [u64; 30] = [102074368; 30];
    const TRAIN_ACCUMULATE_RSS: [u64; 30] = [
        1085259776, 1085263872, 1085263872, 1085267968, 1085267968, 1085267968, 1085267968,
        1085267968, 1085267968, 1085267968, 1085267968, 1085267968, 1085267968, 1085267968,
        1085267968, 1085267968, 1085267968, 1085267968, 1085267968, 1085267968, 1085267968,
        1085267968, 1085267968, 1085272064, 1085272064, 1085272064, 1085272064, 1085272064,
        1085272064, 1085272064,
    ];
    const TRAIN_ACCUMULATE_NODES: [u64; 30] = [
        12, 20, 28, 36, 44, 52, 60, 68, 76, 84, 92, 100, 108, 116, 124, 132, 140, 148, 156, 164,
        172, 180, 188, 196, 204, 212, 220, 228, 236, 244,
    ];

    /// The training loop accumulating `loss.item()` instead.
    const TRAIN_ITEM_ALLOCATED: [u64; 30] = [102073856; 30];
    const TRAIN_ITEM_RSS: [u64; 30] = [1104392192; 30];

    /// `out = model(x)` in an eval loop with grad on, nothing kept across batches (TL101).
    const EVAL_GRAD_OUTPUT_ALLOCATED: [u64; 30] = [95621632; 30];
    const EVAL_GRAD_OUTPUT_NODES: [u64; 30] = [9; 30];

    /// The same under `torch.no_grad()`.
    const EVAL_NO_GRAD_OUTPUT_ALLOCATED: [u64; 30] = [85135872; 30];

    /// `out = model(x)` in a training loop with Adam: its state is allocated by the first step.
    const ADAM_FIRST_STEP_SPIKE_ALLOCATED: [u64; 30] = [
        95621632, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536,
        129537536, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536,
        129537536, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536, 129537536,
        129537536, 129537536, 129537536, 129537536, 129537536, 129537536,
    ];
    const ADAM_FIRST_STEP_SPIKE_RSS: [u64; 30] = [
        1104392192, 1159639040, 1159643136, 1159651328, 1159651328, 1159651328, 1159655424,
        1159655424, 1159655424, 1159655424, 1159659520, 1159659520, 1159659520, 1159659520,
        1159663616, 1159663616, 1159663616, 1159663616, 1159667712, 1159667712, 1159667712,
        1159667712, 1159667712, 1159667712, 1159667712, 1159667712, 1159667712, 1159667712,
        1159667712, 1159667712,
    ];

    /// A deque(maxlen=3) of GPU tensors of random size (1-16 MiB), and 0-6 random host buffers
    /// made and dropped per hit: allocated jitters by tens of MiB, with no trend.
    const ROLLING_NOISE_ALLOCATED: [u64; 30] = [
        82837504, 99614720, 110100480, 104857600, 99614720, 100663296, 94371840, 92274688,
        85983232, 94371840, 96468992, 100663296, 95420416, 93323264, 89128960, 87031808, 87031808,
        93323264, 98566144, 99614720, 96468992, 101711872, 92274688, 91226112, 80740352, 80740352,
        77594624, 88080384, 91226112, 102760448,
    ];
    const ROLLING_NOISE_RSS: [u64; 30] = [
        1179578368, 1183768576, 1183768576, 1183768576, 1183768576, 1183768576, 1191108608,
        1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608,
        1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608,
        1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608, 1191108608,
        1191108608, 1191108608,
    ];
    const ROLLING_NOISE_LEN: [u64; 30] = [
        1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    ];
    const ROLLING_NOISE_BYTES: [u64; 30] = [
        13631488, 30408704, 40894464, 36700160, 31457280, 32505856, 25165824, 22020096, 15728640,
        24117248, 26214400, 29360128, 25165824, 24117248, 20971520, 17825792, 17825792, 24117248,
        29360128, 29360128, 26214400, 32505856, 24117248, 23068672, 12582912, 12582912, 9437184,
        19922944, 22020096, 33554432,
    ];

    /// `preds.append(model(x))` under no_grad, a 1024-wide output: 2 MiB per item (TL104).
    const GPU_COLLECTION_ALLOCATED: [u64; 30] = [
        103829504, 105926656, 108023808, 110120960, 112218112, 114315264, 116412416, 118509568,
        120606720, 122703872, 124801024, 126898176, 128995328, 131092480, 133189632, 135286784,
        137383936, 139481088, 141578240, 143675392, 145772544, 147869696, 149966848, 152064000,
        154161152, 156258304, 158355456, 160452608, 162549760, 164646912,
    ];
    const GPU_COLLECTION_LEN: [u64; 30] = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
        26, 27, 28, 29, 30,
    ];
    const GPU_COLLECTION_BYTES: [u64; 30] = [
        2097152, 4194304, 6291456, 8388608, 10485760, 12582912, 14680064, 16777216, 18874368,
        20971520, 23068672, 25165824, 27262976, 29360128, 31457280, 33554432, 35651584, 37748736,
        39845888, 41943040, 44040192, 46137344, 48234496, 50331648, 52428800, 54525952, 56623104,
        58720256, 60817408, 62914560,
    ];

    /// `h = cell(x, h)` with a GRUCell(256, 1024), batch 64, grad on, no detach (TL103).
    const GRU_NO_DETACH_ALLOCATED: [u64; 30] = [
        87384064, 90595328, 93806592, 97017856, 100229120, 103440384, 106651648, 109862912,
        113074176, 116285440, 119496704, 122707968, 125919232, 129130496, 132341760, 135553024,
        138764288, 141975552, 145186816, 148398080, 151609344, 154820608, 158031872, 161243136,
        164454400, 167665664, 170876928, 174088192, 177299456, 180510720,
    ];
    const GRU_NO_DETACH_NODES: [u64; 30] = [
        9, 14, 19, 24, 29, 34, 39, 44, 49, 54, 59, 64, 69, 74, 79, 84, 89, 94, 99, 104, 109, 114,
        119, 124, 129, 134, 139, 144, 149, 154,
    ];

    /// `model.register_forward_hook(store_output)` every step (TL109); the hook stores 2.5 KiB.
    const HOOK_PER_STEP_ALLOCATED: [u64; 30] = [
        85115392, 85117952, 85120512, 85123072, 85125632, 85128192, 85130752, 85133312, 85135872,
        85138432, 85140992, 85143552, 85146112, 85148672, 85151232, 85153792, 85156352, 85158912,
        85161472, 85164032, 85166592, 85169152, 85171712, 85174272, 85176832, 85179392, 85181952,
        85184512, 85187072, 85189632,
    ];
    const HOOK_PER_STEP_HOOKS: [u64; 30] = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
        26, 27, 28, 29, 30,
    ];

    /// `torch.cuda.empty_cache()` after every training step (TL201).
    const EMPTY_CACHE_PER_STEP_DEVICE_ALLOCS: [u64; 30] = [
        86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106,
        107, 108, 109, 110, 111, 112, 113, 114, 115,
    ];
    const EMPTY_CACHE_PER_STEP_DEVICE_FREES: [u64; 30] = [
        81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102,
        103, 104, 105, 106, 107, 108, 109, 110,
    ];

    /// `loss.backward(retain_graph=True)` in a plain training loop with a step (TL107).
    const RETAIN_GRAPH_PLAIN_ALLOCATED: [u64; 30] = [112580096; 30];
    const RETAIN_GRAPH_PLAIN_NODES: [u64; 30] = [11; 30];

    fn eval_accumulation() -> Stream {
        Stream::new(30)
            .allocated(&EVAL_ACCUMULATE_ALLOCATED)
            .rss(&EVAL_ACCUMULATE_RSS)
            .nodes(&EVAL_ACCUMULATE_NODES)
            .grad_fn(true)
    }

    // ---- growth

    #[test]
    fn recorded_eval_accumulation_grows_on_the_gpu() {
        let verdict = eval_accumulation().judge("TL102", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsGpu);
        assert_eq!(verdict.hits, 30);
        let gpu = verdict.gpu_slope.expect("a GPU slope");
        assert!((gpu.per_hit - 10_506_240.0).abs() < 1.0, "{gpu:?}");
        assert_eq!(gpu.hits, 25, "the 5 warm-up hits are skipped");
        assert_eq!(verdict.node_slope.map(|s| s.per_hit.round()), Some(8.0));
        assert_eq!(
            verdict.summary,
            "+10.0 MiB per hit on the GPU (±0.0 MiB), autograd graph +8 nodes per hit: the \
             accumulated value keeps every hit's graph alive"
        );
        assert_eq!(
            verdict.projection.as_deref(),
            Some("+10.0 MiB per step → 97.8 GiB after 10,000 steps; 139 GiB free")
        );
        assert!(
            has(&verdict.evidence, "grad_fn on 30/30 hits"),
            "{:?}",
            verdict.evidence
        );
        assert!(has(
            &verdict.evidence,
            "autograd graph 52 → 244 nodes: +8.0 per hit, rising on 24/24 hits"
        ));
        // The RSS drift of that loop (≈30 KiB per hit) stays under the host floor.
        assert!(
            has(&verdict.evidence, "under the 256 KiB per hit floor"),
            "{:?}",
            verdict.evidence
        );
    }

    #[test]
    fn growth_past_the_free_memory_says_when_it_runs_out() {
        let context = Context {
            device_free: Some(50 * GIB),
            ..context()
        };
        let verdict = eval_accumulation().judge("TL102", &context);
        assert_eq!(
            verdict.projection.as_deref(),
            Some(
                "+10.0 MiB per step → 97.8 GiB after 10,000 steps; 50.0 GiB free: out of memory after about 5,100 more steps"
            )
        );
    }

    /// A list of outputs on the GPU, one item per hit, beside other memory that grows too.
    fn gpu_list(len: impl Fn(u64) -> u64) -> Stream {
        Stream::new(30).hit(|hit| {
            hit.grad_enabled = Some(false);
            hit.allocated = Some(GIB + hit.n * 20 * MIB);
            let value = &mut hit.values[0];
            value.kind = "container".into();
            value.len = Some(len(hit.n));
            value.bytes = value.len.map(|items| items * 20 * MIB);
            value.items_on_gpu = value.len;
            value.device = Some("cuda:0".into());
        })
    }

    #[test]
    fn a_memory_cap_is_the_limit_projections_count_to() {
        // Seen on an H200: a script capped at 3% of the card (4.2 GiB) was told "139 GiB free".
        let context = Context {
            allowed: Some(4 * GIB),
            ..context()
        };
        let verdict = gpu_list(|n| n).judge("TL104", &context);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        // From 1.6 GiB held at the last hit, 2.4 GiB are left at 20 MiB per step.
        assert_eq!(
            verdict.projection.as_deref(),
            Some(
                "+20.0 MiB per step → 195 GiB after 10,000 steps; 4.0 GiB allowed by the memory cap: out of memory after about 120 more steps"
            )
        );
    }

    #[test]
    fn a_list_rebuilt_every_call_is_projected_to_one_period() {
        // Seen on an H200: outputs kept in a list that every `validate()` starts afresh, with
        // "1 reset in 25 hits" counted, were projected to 10,000 steps.
        let context = Context {
            allowed: Some(4 * GIB),
            ..context()
        };
        let verdict = gpu_list(|n| if n <= 20 { n } else { n - 20 }).judge("TL104", &context);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert_eq!(
            verdict.projection.as_deref(),
            Some(
                "+20.0 MiB per step until the value is emptied again (1 reset in 25 hits): about 240 MiB held at most; 4.0 GiB allowed by the memory cap"
            )
        );
    }

    #[test]
    fn recorded_eval_accumulation_confirms_eval_without_no_grad() {
        let verdict = eval_accumulation().judge("TL101", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsGpu);
        assert!(
            verdict.summary.starts_with("+10.0 MiB per hit on the GPU"),
            "{}",
            verdict.summary
        );
        assert!(has(&verdict.evidence, "grad enabled on 30/30 hits"));
    }

    #[test]
    fn recorded_training_accumulation_grows_the_graph_not_the_gpu() {
        let verdict = Stream::new(30)
            .allocated(&TRAIN_ACCUMULATE_ALLOCATED)
            .rss(&TRAIN_ACCUMULATE_RSS)
            .nodes(&TRAIN_ACCUMULATE_NODES)
            .grad_fn(true)
            .judge("TL102", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsHostGraph);
        assert_eq!(verdict.gpu_slope.map(|s| s.per_hit), Some(0.0));
        assert!(
            verdict
                .summary
                .starts_with("GPU flat, autograd graph +8 nodes per hit: "),
            "{}",
            verdict.summary
        );
        let projection = verdict.projection.expect("graph growth is projected");
        assert!(
            projection.starts_with("+8 autograd nodes per step → 80,000 nodes after 10,000 steps"),
            "{projection}"
        );
    }

    #[test]
    fn recorded_gru_state_without_detach_chains_graphs() {
        let verdict = Stream::new(30)
            .allocated(&GRU_NO_DETACH_ALLOCATED)
            .nodes(&GRU_NO_DETACH_NODES)
            .grad_fn(true)
            .judge("TL103", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsGpu);
        assert!(
            verdict.summary.starts_with(
                "+3.1 MiB per hit on the GPU (±0.0 MiB), autograd graph +5 nodes per hit"
            ),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn recorded_gpu_collection_grows_by_one_item_per_hit() {
        let stream = Stream::new(30)
            .allocated(&GPU_COLLECTION_ALLOCATED)
            .len(&GPU_COLLECTION_LEN)
            .bytes(&GPU_COLLECTION_BYTES)
            .hit(|hit| hit.grad_enabled = Some(false))
            .hit(|hit| {
                let value = &mut hit.values[0];
                value.kind = "container".into();
                value.items_on_gpu = value.len;
                value.device = Some("cuda:0".into());
            });
        let verdict = stream.judge("TL104", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsGpu);
        assert_eq!(
            verdict.summary,
            "+2.0 MiB per hit on the GPU (±0.0 MiB): the container grew from 6 to 30 items on the GPU, 2.0 MiB each"
        );
        assert!(
            has(&verdict.evidence, "≈ 1.0 items per hit"),
            "{:?}",
            verdict.evidence
        );
        assert!(has(&verdict.evidence, "container length 6 → 30"));

        // A hook's store (TL111) is judged as the collection it is: one item per forward.
        let hook = stream.judge("TL111", &context());
        assert_eq!(hook.status, Status::Confirmed);
        assert_eq!(hook.class, Class::GrowsGpu);
        assert_eq!(hook.summary, verdict.summary);

        let cpu = stream.judge("TL104", &cpu_context());
        assert_eq!(cpu.status, Status::NotReproduced);
        assert_eq!(
            cpu.summary,
            "ran without a GPU: the tensors stayed on the CPU"
        );
        // The same growth without a grad_fn is no kept graph.
        let detached = stream.judge("TL103", &context());
        assert_eq!(detached.status, Status::NotReproduced);
        assert_eq!(
            detached.class,
            Class::GrowsGpu,
            "the memory class is reported as measured"
        );
    }

    #[test]
    fn recorded_hook_per_step_raises_the_hook_count() {
        let verdict = Stream::new(30)
            .allocated(&HOOK_PER_STEP_ALLOCATED)
            .each(&HOOK_PER_STEP_HOOKS, |hit, v| {
                hit.values[0] = Value {
                    kind: "module".into(),
                    hooks: Some(v),
                    ..Value::default()
                };
            })
            .judge("TL109", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        // The stored outputs add 2.5 KiB per hit: real, exact, and under the GPU floor.
        assert_eq!(verdict.gpu_slope.map(|s| s.per_hit.round()), Some(2560.0));
        assert_eq!(verdict.class, Class::GrowsHost);
        assert!(
            verdict.summary.contains("(6 → 30, 1 per hit)"),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn recorded_empty_cache_per_step_reallocates_every_hit() {
        let stream = Stream::new(30)
            .each(&EMPTY_CACHE_PER_STEP_DEVICE_ALLOCS, |hit, v| {
                hit.device_allocs = Some(v)
            })
            .each(&EMPTY_CACHE_PER_STEP_DEVICE_FREES, |hit, v| {
                hit.device_frees = Some(v)
            });
        let verdict = stream.judge("TL201", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::Constant);
        assert!(
            verdict
                .summary
                .ends_with("+1 cudaMalloc and +1 cudaFree per hit"),
            "{}",
            verdict.summary
        );
        let cpu = stream.judge("TL201", &cpu_context());
        assert_eq!(cpu.status, Status::NotReproduced);

        // The training loop without empty_cache: the counts stay put.
        let steady = Stream::new(30)
            .hit(|hit| hit.device_allocs = Some(26))
            .hit(|hit| hit.device_frees = Some(20))
            .judge("TL201", &context());
        assert_eq!(steady.status, Status::NotReproduced);
    }

    // ---- no growth

    #[test]
    fn recorded_item_accumulation_keeps_nothing() {
        let verdict = Stream::new(30)
            .allocated(&TRAIN_ITEM_ALLOCATED)
            .rss(&TRAIN_ITEM_RSS)
            .value(|v| v.kind = "other".into())
            .judge("TL102", &context());
        assert_eq!(verdict.status, Status::NotReproduced);
        assert_eq!(verdict.class, Class::None);
        assert_eq!(
            verdict.summary,
            "the accumulated value carries no grad_fn: nothing is kept"
        );
        assert!(has(&verdict.evidence, "grad_fn on 0/30 hits"));
        assert_eq!(verdict.projection, None);
    }

    #[test]
    fn recorded_eval_forward_with_grad_is_a_constant_cost() {
        let verdict = Stream::new(30)
            .allocated(&EVAL_GRAD_OUTPUT_ALLOCATED)
            .nodes(&EVAL_GRAD_OUTPUT_NODES)
            .grad_fn(true)
            .judge("TL101", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::Constant);
        assert!(has(&verdict.evidence, "grad enabled on 30/30 hits"));
        assert!(has(
            &verdict.evidence,
            "output carries a grad_fn on 30/30 hits"
        ));
        assert_eq!(verdict.projection, None, "a constant cost is not projected");
    }

    #[test]
    fn recorded_eval_forward_under_no_grad_is_not_reproduced() {
        let verdict = Stream::new(30)
            .allocated(&EVAL_NO_GRAD_OUTPUT_ALLOCATED)
            .hit(|hit| hit.grad_enabled = Some(false))
            .judge("TL101", &context());
        assert_eq!(verdict.status, Status::NotReproduced);
        assert_eq!(
            verdict.summary,
            "grad was disabled at this line on all 30 hits"
        );

        let inference = Stream::new(30)
            .hit(|hit| hit.inference_mode = Some(true))
            .grad_fn(false)
            .judge("TL101", &context());
        assert_eq!(
            inference.summary,
            "grad was disabled at this line on all 30 hits (inference mode on 30)"
        );
    }

    #[test]
    fn recorded_retain_graph_in_a_plain_loop_is_a_constant_cost() {
        let verdict = Stream::new(30)
            .allocated(&RETAIN_GRAPH_PLAIN_ALLOCATED)
            .nodes(&RETAIN_GRAPH_PLAIN_NODES)
            .grad_fn(true)
            .judge("TL107", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::Constant);
        assert!(
            verdict.summary.contains("up to 11 nodes on every hit"),
            "{}",
            verdict.summary
        );

        let released = Stream::new(30).nodes(&[0; 30]).judge("TL107", &context());
        assert_eq!(released.status, Status::NotReproduced);
    }

    #[test]
    fn a_graph_retained_for_a_second_backward_is_not_a_hazard() {
        // A GAN: the discriminator's loss retains the graph that the generator's loss then
        // backpropagates through (the first hit has no previous graph to tell of).
        let verdict = Stream::new(30)
            .nodes(&RETAIN_GRAPH_PLAIN_NODES)
            .grad_fn(true)
            .hit(|hit| hit.reused = (hit.n > 1).then_some(true))
            .judge("TL107", &context());
        assert_eq!(verdict.status, Status::NotReproduced);
        assert!(
            verdict.summary.contains("on 29/29 hits"),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn a_graph_that_is_replaced_every_hit_is_not_kept() {
        // `total = loss` (grad_fn, but one step's graph at a time): TL102 needs growth.
        let verdict = Stream::new(30)
            .allocated(&EVAL_GRAD_OUTPUT_ALLOCATED)
            .nodes(&EVAL_GRAD_OUTPUT_NODES)
            .grad_fn(true)
            .judge("TL102", &context());
        assert_eq!(verdict.status, Status::NotReproduced);
        assert!(
            verdict
                .summary
                .contains("neither GPU memory nor the autograd graph grew over 25 hits")
        );
    }

    // ---- noise

    #[test]
    fn recorded_rolling_buffer_noise_is_not_growth() {
        let stream = Stream::new(30)
            .allocated(&ROLLING_NOISE_ALLOCATED)
            .rss(&ROLLING_NOISE_RSS)
            .len(&ROLLING_NOISE_LEN)
            .bytes(&ROLLING_NOISE_BYTES)
            .hit(|hit| {
                let value = &mut hit.values[0];
                value.kind = "container".into();
                value.items_on_gpu = value.len;
            });
        let verdict = stream.judge("TL104", &context());
        assert_eq!(verdict.status, Status::NotReproduced);
        assert_eq!(verdict.class, Class::None);
        assert_eq!(
            verdict.summary,
            "the container did not grow (length 3 → 3): it is bounded"
        );
        let gpu = verdict.gpu_slope.expect("a GPU slope");
        assert!(
            gpu.per_hit < SIGNIFICANCE * gpu.stderr,
            "jitter is not significant: {gpu:?}"
        );
        // The 7 MiB RSS step (a host buffer the allocator kept) is not host growth either.
        assert!(!stream.judge("TL999", &context()).summary.contains("grows"));
    }

    /// A deterministic jitter of ±6 MiB (a fixed pseudo-random sequence).
    fn jitter(n: usize) -> Vec<i64> {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 33) % (12 * MIB)) as i64 - (6 * MIB) as i64
            })
            .collect()
    }

    fn around(base: u64, per_hit: u64, noise: &[i64]) -> Vec<u64> {
        noise
            .iter()
            .enumerate()
            .map(|(i, &e)| (base + per_hit * i as u64).saturating_add_signed(e))
            .collect()
    }

    #[test]
    fn noisy_growth_is_still_growth_and_noise_alone_is_not() {
        let noise = jitter(30);
        let growing = Stream::new(30)
            .allocated(&around(GIB, 2 * MIB, &noise))
            .grad_fn(true)
            .judge("TL102", &context());
        assert_eq!(growing.class, Class::GrowsGpu, "{:?}", growing.gpu_slope);
        let flat = Stream::new(30)
            .allocated(&around(GIB, 0, &noise))
            .grad_fn(true)
            .judge("TL102", &context());
        assert_ne!(flat.class, Class::GrowsGpu, "{:?}", flat.gpu_slope);
    }

    #[test]
    fn host_rss_alone_needs_a_large_slope() {
        let rss = |per_hit: u64| (0..30).map(|i| GIB + per_hit * i).collect::<Vec<u64>>();
        let small = Stream::new(30)
            .rss(&rss(100 * 1024))
            .judge("TL999", &context());
        assert_eq!(small.class, Class::None);
        let large = Stream::new(30)
            .rss(&rss(MIB))
            .grad_fn(false)
            .judge("TL999", &context());
        assert_eq!(large.class, Class::GrowsHost);
        assert_eq!(
            large.projection.as_deref(),
            Some("+1.0 MiB per step → 9.8 GiB of host RSS after 10,000 steps")
        );
    }

    // ---- spike

    #[test]
    fn recorded_adam_first_step_is_a_spike() {
        let verdict = Stream::new(30)
            .allocated(&ADAM_FIRST_STEP_SPIKE_ALLOCATED)
            .rss(&ADAM_FIRST_STEP_SPIKE_RSS)
            .grad_fn(true)
            .judge("TL101", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::Spike);
        assert_eq!(verdict.gpu_slope.map(|s| s.per_hit), Some(0.0));
        assert!(
            verdict
                .summary
                .starts_with("a one-time jump of +32.3 MiB at hit 2, flat afterwards; "),
            "{}",
            verdict.summary
        );
        assert_eq!(verdict.projection, None);
    }

    // ---- not reached, few hits

    #[test]
    fn a_line_that_never_ran_is_not_reached() {
        let early = judge(
            "TL102",
            &[],
            &Context {
                ended_early: true,
                ..context()
            },
        );
        assert_eq!(early.status, Status::NotReached);
        assert_eq!(early.class, Class::None);
        assert_eq!(early.hits, 0);
        assert_eq!(
            early.summary,
            "the line never ran within the run (the script ended, or was stopped, first)"
        );
        let complete = judge("TL102", &[], &context());
        assert_eq!(complete.summary, "the line never ran within the run");
    }

    #[test]
    fn too_few_hits_confirm_only_a_graph_measured_to_rise() {
        // 7 measured hits: no growth rate, but the graph rose at each of them.
        let verdict = eval_accumulation().first(12).judge("TL102", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(
            verdict.class,
            Class::Constant,
            "no growth class under 20 measured hits"
        );
        assert!(
            has(
                &verdict.evidence,
                "only 7 hits after the 5 warm-up hits (20 needed to call growth)"
            ),
            "{:?}",
            verdict.evidence
        );
        assert!(
            verdict
                .summary
                .starts_with("the autograd graph reachable from the accumulated value rose from"),
            "{}",
            verdict.summary
        );
        assert!(
            !verdict.summary.contains("too few hits"),
            "the summary and the evidence agree: {}",
            verdict.summary
        );
        assert_eq!(verdict.projection, None);
    }

    #[test]
    fn a_grad_fn_alone_is_likely_not_confirmed() {
        // A grad_fn on every hit, graph size flat (or unread) over too few hits to tell.
        let flat = Stream::new(12)
            .grad_fn(true)
            .nodes(&[11; 12])
            .judge("TL102", &context());
        let unread = Stream::new(12).grad_fn(true).judge("TL103", &context());
        for verdict in [flat, unread] {
            assert_eq!(verdict.status, Status::Likely, "{verdict:?}");
            assert_eq!(verdict.class, Class::None);
            assert!(
                verdict.summary.contains("its growth was not measured"),
                "{}",
                verdict.summary
            );
            assert_eq!(verdict.projection, None);
        }
    }

    #[test]
    fn appended_losses_with_a_graph_keep_it() {
        // `losses.append(loss)`: each item keeps 11 nodes, 512 bytes on the GPU (hazards §9).
        let steps: Vec<u64> = (1..=30).collect();
        let verdict = Stream::new(30)
            .allocated(&steps.iter().map(|n| GIB + 512 * n).collect::<Vec<_>>())
            .len(&steps)
            .each(&steps, |hit, v| hit.values[0].items_with_grad = Some(v))
            .nodes(&[11; 30])
            .value(|v| v.kind = "container".into())
            .judge("TL102", &context());
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(verdict.class, Class::GrowsHostGraph);
        assert!(
            verdict
                .summary
                .starts_with("the container grew from 6 to 30 items carrying a grad_fn")
        );
    }

    // ---- the other rules' predicates

    #[test]
    fn float64_values_report_their_bytes_and_the_float32_size() {
        let doubles = Stream::new(3)
            .value(|v| {
                v.dtype = Some("float64".into());
                v.bytes = Some(8 * MIB);
            })
            .judge("TL105", &context());
        assert_eq!(doubles.status, Status::Confirmed);
        assert_eq!(
            doubles.summary,
            "float64 data, 8.0 MiB per value; as float32 it would be 4.0 MiB"
        );
        assert!(has(&doubles.evidence, "float64 on 3/3 hits"));
        let singles = Stream::new(3)
            .value(|v| v.dtype = Some("float32".into()))
            .judge("TL105", &context());
        assert_eq!(singles.status, Status::NotReproduced);
        assert_eq!(
            singles.summary,
            "no watched value was float64 (dtypes seen: float32)"
        );
    }

    fn loader(workers: u64) -> Stream {
        Stream::new(1).value(move |v| {
            *v = Value {
                kind: "loader".into(),
                workers: Some(workers),
                prefetch_factor: Some(2),
                pin_memory: Some(true),
                ..Value::default()
            }
        })
    }

    #[test]
    fn workers_holding_device_memory_confirm_cuda_in_workers() {
        let hits: Vec<Hit> = loader(4).hits;
        let hits: Vec<&Hit> = hits.iter().collect();
        let held = RunSummary {
            peak_worker_device: Some((4, 2_330 * MIB)),
            ..RunSummary::default()
        };
        let verdict = judge_with_run("TL112", &hits, &context(), &held);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "4 worker processes held 2.3 GiB on the GPU at once: a CUDA context in each, besides what the dataset put there"
        );
        let nothing = RunSummary {
            peak_worker_device: Some((0, 0)),
            ..RunSummary::default()
        };
        let verdict = judge_with_run("TL112", &hits, &context(), &nothing);
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        // Forked workers (the default start method) fail instead: as the rule says.
        let failed = RunSummary {
            failure: Some("Traceback (most recent call last):\n  ...\nRuntimeError: Caught RuntimeError in DataLoader worker process 0.\n  ...\nRuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method\n".to_owned()),
            ..nothing.clone()
        };
        let verdict = judge_with_run("TL112", &hits, &context(), &failed);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "a forked worker could not use CUDA: the script failed with `RuntimeError: Cannot re-initialize CUDA in forked subprocess`"
        );
        let cpu = Context {
            gpu: false,
            ..context()
        };
        let verdict = judge_with_run("TL112", &hits, &cpu, &held);
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert!(
            verdict.summary.starts_with("ran without a GPU"),
            "{verdict:?}"
        );
    }

    /// TL301's iterations, each with the forward its hooks read.
    fn forwards(len: usize, forward: Forward) -> Vec<Hit> {
        let mut hits = Stream::new(len).hits;
        for hit in &mut hits {
            hit.values.clear();
            hit.forward = Some(forward.clone());
        }
        hits
    }

    fn float32_forward() -> Forward {
        Forward {
            module: "Sequential".into(),
            autocast: Some(false),
            autocast_dtype: None,
            grad_enabled: Some(true),
            param_dtype: Some("float32".into()),
            param_device: Some("cuda:0".into()),
            param_bytes: Some(16 * MIB),
            output_dtype: Some("float32".into()),
        }
    }

    #[test]
    fn a_float32_forward_on_the_gpu_confirms_no_mixed_precision() {
        let hits = forwards(30, float32_forward());
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert_eq!(verdict.class, Class::Constant, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "the forward of `Sequential` ran in float32 with autocast off on the GPU on 30/30 iterations: the activations it keeps for backward are float32, twice what bfloat16 would keep"
        );
        for line in [
            "a forward of `Sequential` seen on 30/30 iterations",
            "autocast for CUDA off at 30/30 forwards",
            "parameters: mostly float32, on cuda:0, 16.0 MiB",
            "output dtype: float32",
            "grad enabled at 30/30 forwards",
        ] {
            assert!(has(&verdict.evidence, line), "{line}: {verdict:?}");
        }
        // The loop's last header hit ends the loop: no forward in it, still confirmed.
        let mut hits = forwards(30, float32_forward());
        hits.last_mut().unwrap().forward = None;
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert!(
            has(&verdict.evidence, "seen on 29/30 iterations"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_forward_under_autocast_refutes_no_mixed_precision() {
        let hits = forwards(
            30,
            Forward {
                autocast: Some(true),
                autocast_dtype: Some("bfloat16".into()),
                output_dtype: Some("bfloat16".into()),
                ..float32_forward()
            },
        );
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "autocast was on for CUDA (bfloat16) at the forward on 30/30 iterations: its matmuls ran, and kept their activations, in bfloat16"
        );
        assert!(
            has(
                &verdict.evidence,
                "autocast for CUDA on (bfloat16) at 30/30 forwards"
            ),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_bfloat16_model_refutes_no_mixed_precision() {
        let hits = forwards(
            30,
            Forward {
                param_dtype: Some("bfloat16".into()),
                param_bytes: Some(8 * MIB),
                output_dtype: Some("bfloat16".into()),
                ..float32_forward()
            },
        );
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "the model's parameters are bfloat16: the forward runs in half precision already"
        );
        assert!(
            has(
                &verdict.evidence,
                "parameters: mostly bfloat16, on cuda:0, 8.0 MiB"
            ),
            "{verdict:?}"
        );
    }

    #[test]
    fn no_mixed_precision_is_not_confirmed_without_a_gpu_or_a_forward() {
        let hits = forwards(
            30,
            Forward {
                param_device: Some("cpu".into()),
                ..float32_forward()
            },
        );
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &cpu_context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert!(
            verdict.summary.starts_with("ran without a GPU"),
            "{verdict:?}"
        );
        // What was seen is still said.
        assert!(
            has(&verdict.evidence, "parameters: mostly float32, on cpu"),
            "{verdict:?}"
        );
        // On a GPU machine, a model left on the CPU.
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert!(
            verdict
                .summary
                .starts_with("the model's parameters are on cpu"),
            "{verdict:?}"
        );
        // Iterations in which no forward ran with grad on.
        let hits = Stream::new(10).hits;
        let hits: Vec<&Hit> = hits.iter().collect();
        let verdict = judge_with_run("TL301", &hits, &context(), &RunSummary::default());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:?}");
        assert_eq!(
            verdict.summary,
            "no forward of a module with parameters was seen with grad on in 10 iterations of the loop"
        );
        assert_eq!(judge("TL301", &[], &context()).status, Status::NotReached);
    }

    #[test]
    fn pinned_workers_need_pinned_memory_to_show_for_it() {
        let hits: Vec<Hit> = loader(16).hit(|hit| hit.pinned = Some(0)).hits;
        let hits: Vec<&Hit> = hits.iter().collect();
        let run = RunSummary {
            peak_pinned: Some(33 * 64 * MIB),
            ..RunSummary::default()
        };
        let verdict = judge_with_run("TL106", &hits, &context(), &run);
        assert_eq!(verdict.status, Status::Confirmed);
        assert_eq!(
            verdict.summary,
            "peak pinned 2.1 GiB with 16 workers × prefetch 2: about 132 MiB per worker (64.0 MiB per pinned batch)"
        );
        // At the loader's line nothing is pinned yet; without the run's peak it is not shown.
        assert_eq!(
            judge("TL106", &hits, &context()).status,
            Status::NotReproduced
        );
        let few = loader(4)
            .hit(|hit| hit.pinned = Some(GIB))
            .judge("TL106", &context());
        assert_eq!(few.status, Status::NotReproduced);
        let cpu = loader(16).judge("TL106", &cpu_context());
        assert_eq!(
            cpu.summary,
            "pinning needs CUDA: ran without a GPU, so nothing was pinned"
        );
    }

    #[test]
    fn a_checkpoint_on_the_gpu_is_confirmed() {
        let load = |devices: &[&str]| {
            let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
            Stream::new(1)
                .value(move |v| v.devices = Some(devices.clone()))
                .hit(|hit| hit.allocated = Some(192 * MIB))
                .judge("TL108", &context())
        };
        let gpu = load(&["cpu", "cuda:0"]);
        assert_eq!(gpu.status, Status::Confirmed);
        assert_eq!(
            gpu.summary,
            "the loaded tensors live on cuda:0 (192 MiB allocated on the GPU after the line)"
        );
        assert_eq!(load(&["cpu"]).status, Status::NotReproduced);
    }

    #[test]
    fn anomaly_mode_is_read_at_the_line() {
        let on = Stream::new(4)
            .hit(|hit| hit.anomaly_enabled = Some(true))
            .judge("TL202", &context());
        assert_eq!(on.status, Status::Confirmed);
        assert!(has(&on.evidence, "anomaly detection on at 4/4 hits"));
        let off = Stream::new(4).judge("TL202", &context());
        assert_eq!(
            off.summary,
            "anomaly detection was off at this line on all 4 hits"
        );
    }

    #[test]
    fn verdicts_are_deterministic() {
        let stream = eval_accumulation();
        assert_eq!(
            stream.judge("TL102", &context()),
            stream.judge("TL102", &context())
        );
    }

    // ---- run summary

    fn sample(t: f64, allocated: u64, reserved: u64) -> Sample {
        Sample {
            t,
            allocated: Some(allocated),
            reserved: Some(reserved),
            ..Sample::default()
        }
    }

    #[test]
    fn summary_reports_peaks_and_cached_but_free_memory() {
        let samples = [
            sample(0.0, 2 * GIB, 3 * GIB),
            Sample {
                rss: Some(3 * GIB),
                pinned: Some(576 * MIB),
                ..sample(0.1, 12_300 * MIB, 14 * GIB)
            },
            sample(0.2, 11 * GIB, 14 * GIB),
        ];
        let device = [
            DeviceSample {
                t: 0.0,
                used: 8 * GIB,
                ..DeviceSample::default()
            },
            DeviceSample {
                t: 0.1,
                used: 24 * GIB,
                ..DeviceSample::default()
            },
            DeviceSample {
                t: 0.2,
                used: 20 * GIB,
                ..DeviceSample::default()
            },
        ];
        let summary = summarize(&samples, &device, Some(GIB));
        assert_eq!(summary.peak_allocated, Some(12_300 * MIB));
        assert_eq!(summary.peak_reserved, Some(14 * GIB));
        assert_eq!(
            summary.fragmentation,
            Some(14 * GIB - 12_300 * MIB),
            "at the first reserved peak"
        );
        assert_eq!(summary.device_peak_used, Some(23 * GIB));
        assert_eq!(summary.peak_rss, Some(3 * GIB));
        assert_eq!(summary.peak_pinned, Some(576 * MIB));
        assert!(
            !summary.suggest_expandable_segments,
            "12% cached but free is ordinary caching"
        );
        assert_eq!(
            summary.notes[0],
            "peak allocated 12.0 GiB, peak reserved 14.0 GiB"
        );
        assert_eq!(
            summary.notes[1],
            "not fragmentation: 2.0 GiB of the 14.0 GiB reserved at its peak was cached but free (14%); tensors hold the rest"
        );
        assert!(has(
            &summary.notes,
            "peaked 23.0 GiB above what was used before the script"
        ));
        assert!(has(&summary.notes, "peak pinned host memory 576 MiB"));
    }

    #[test]
    fn expandable_segments_only_when_the_numbers_show_fragmentation() {
        let suggest =
            |samples: &[Sample]| summarize(samples, &[], None).suggest_expandable_segments;
        assert!(
            suggest(&[sample(0.0, 10 * GIB, 20 * GIB)]),
            "half the cache unusable"
        );
        let fragmented = summarize(&[sample(0.0, 10 * GIB, 20 * GIB)], &[], None);
        assert!(has(
            &fragmented.notes,
            "fragmentation: 10.0 GiB of the 20.0 GiB reserved at its peak was cached but free (50%), in blocks the requests could not reuse"
        ));
        assert!(
            !suggest(&[sample(0.0, 200 * MIB, GIB)]),
            "a large share, but under 1 GiB"
        );
        assert!(
            !suggest(&[sample(0.0, 90 * GIB, 94 * GIB)]),
            "4 GiB, but under a quarter"
        );
        let retried = Sample {
            alloc_retries: Some(3),
            ..sample(0.0, GIB, GIB)
        };
        let summary = summarize(&[retried], &[], None);
        assert!(summary.suggest_expandable_segments);
        assert!(has(&summary.notes, "3 cudaMalloc retries"));
    }

    #[test]
    fn the_runs_peaks_include_hits_between_two_samples() {
        // Seen on an H200: 30 hits of a leaking loop ran within one sampling period, and the
        // probe stopped the script once they were in, so the summary said "peak allocated
        // 55.0 MiB" beside a line's evidence "GPU allocated 73.0 MiB → 169 MiB".
        let samples = [
            sample(0.0, 55 * MIB, 70 * MIB),
            sample(0.1, 40 * MIB, 70 * MIB),
        ];
        let hits = Stream::new(3)
            .allocated(&[73 * MIB, 121 * MIB, 169 * MIB])
            .hit(|hit| hit.reserved = Some(180 * MIB))
            .hits;
        let readings = run_readings(&samples, &hits);
        assert!(
            readings.windows(2).all(|pair| pair[0].t <= pair[1].t),
            "in time order"
        );
        let summary = summarize(&readings, &[], None);
        assert_eq!(summary.peak_allocated, Some(169 * MIB));
        assert_eq!(summary.peak_reserved, Some(180 * MIB));
        assert_eq!(summary.fragmentation, Some(180 * MIB - 73 * MIB));
    }

    #[test]
    fn summary_of_nothing_says_so() {
        let summary = summarize(&[], &[], None);
        assert_eq!(
            summary,
            RunSummary {
                notes: summary.notes.clone(),
                ..RunSummary::default()
            }
        );
        assert!(has(&summary.notes, "no memory counters were sampled"));
    }

    // ---- numbers

    #[test]
    fn numbers_use_binary_units_and_thousands_separators() {
        assert_eq!(fmt_bytes(0.0), "0 bytes");
        assert_eq!(fmt_bytes(512.0), "512 bytes");
        assert_eq!(fmt_bytes(1536.0), "1.5 KiB");
        assert_eq!(fmt_bytes(8.4 * MIB as f64), "8.4 MiB");
        assert_eq!(fmt_bytes(1023.99 * 1024.0), "1.0 MiB");
        assert_eq!(fmt_bytes(139.0 * GIB as f64), "139 GiB");
        assert_eq!(fmt_signed_bytes(-(MIB as f64)), "-1.0 MiB");
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(10_000), "10,000");
        assert_eq!(fmt_count(1_234_567), "1,234,567");
    }

    #[test]
    fn one_mib_per_step_projects_to_ten_gib() {
        let allocated: Vec<u64> = (0..30).map(|i| GIB + i * MIB).collect();
        let verdict = Stream::new(30)
            .allocated(&allocated)
            .grad_fn(true)
            .judge("TL102", &context());
        assert_eq!(
            verdict.projection.as_deref(),
            Some("+1.0 MiB per step → 9.8 GiB after 10,000 steps; 139 GiB free")
        );
    }

    #[test]
    fn a_constant_cost_confirmed_without_counters_says_so_in_its_summary() {
        let verdict = Stream::new(30).grad_fn(true).judge("TL101", &cpu_context());
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:?}");
        assert!(
            verdict.summary.ends_with(
                "(its cost is not measured here: no memory counter was read at this line after the warm-up)"
            ),
            "{}",
            verdict.summary
        );
    }

    #[test]
    fn host_growth_under_the_floor_is_not_projected() {
        // Seen on the CPU: "host RSS ... +235 KiB per hit (±19.4 KiB), under the 256 KiB per
        // hit floor" in the evidence, and "host RSS +235 KiB per step → 2.2 GiB" projected.
        let nodes: Vec<u64> = (0..30u64).map(|i| 46 + 7 * i).collect();
        let rss: Vec<u64> = (0..30u64).map(|i| 600 * MIB + i * 235 * 1024).collect();
        let verdict = Stream::new(30)
            .grad_fn(true)
            .nodes(&nodes)
            .rss(&rss)
            .judge("TL102", &cpu_context());
        assert_eq!(verdict.class, Class::GrowsHostGraph, "{verdict:#?}");
        assert!(has(&verdict.evidence, "under the 256 KiB per hit floor"));
        assert_eq!(
            verdict.projection.as_deref(),
            Some("+7 autograd nodes per step → 70,000 nodes after 10,000 steps")
        );
    }

    #[test]
    fn a_graph_reset_every_epoch_still_grows_between_resets() {
        // `train_loss = train_loss + loss`, reset to 0 every 8 batches (power_load_mlp.py):
        // the slope across resets is flat, the graph grows on nearly every hit.
        let nodes: Vec<u64> = (0..30u64).map(|i| 10 + 8 * (i % 8)).collect();
        let verdict = Stream::new(30)
            .grad_fn(true)
            .nodes(&nodes)
            .judge("TL102", &cpu_context());
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:#?}");
        assert_eq!(verdict.class, Class::GrowsHostGraph);
        assert!(
            verdict
                .summary
                .contains("+8 nodes per hit until it is reset"),
            "{}",
            verdict.summary
        );
        // Seen on the GPU: "autograd graph 34 → 54 nodes: -0.8 per hit, rising on 23/24 hits".
        assert!(
            has(
                &verdict.evidence,
                "nodes: +8.0 per hit between resets (3 resets), rising on"
            ),
            "{:?}",
            verdict.evidence
        );
        let projection = verdict.projection.unwrap_or_default();
        assert!(
            projection.contains("until the accumulator is reset"),
            "{projection}"
        );
    }

    #[test]
    fn a_graph_that_drops_once_is_not_a_sawtooth_without_rises() {
        let nodes: Vec<u64> = (0..30u64).map(|i| if i < 15 { 40 } else { 10 }).collect();
        let verdict = Stream::new(30)
            .grad_fn(true)
            .nodes(&nodes)
            .judge("TL102", &cpu_context());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:#?}");
    }

    #[test]
    fn a_module_attribute_with_a_graph_is_a_constant_cost() {
        // `self.last_pair_dist = d` in forward: replaced every call, one graph held.
        let nodes = [6u64; 30];
        let verdict = Stream::new(30)
            .grad_fn(true)
            .value(|v| v.expr = "self.last_pair_dist".into())
            .nodes(&nodes)
            .judge("TL103", &cpu_context());
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:#?}");
        assert_eq!(verdict.class, Class::Constant);
        assert!(
            verdict
                .summary
                .contains("`self.last_pair_dist` keeps the last call's graph")
        );
        // A local that is replaced every step (then detached by the next line) is not kept.
        let local = Stream::new(30)
            .grad_fn(true)
            .value(|v| v.expr = "h".into())
            .nodes(&nodes)
            .judge("TL103", &cpu_context());
        assert_eq!(local.status, Status::NotReproduced, "{local:#?}");
    }

    #[test]
    fn a_graph_retained_once_outside_a_loop_is_not_a_hazard() {
        let verdict = Stream::new(1)
            .grad_fn(true)
            .nodes(&[20])
            .judge("TL107", &context());
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:#?}");
        assert!(verdict.summary.contains("ran once"));
    }

    #[test]
    fn anomaly_mode_must_stay_on_for_the_run() {
        let hits = Stream::new(1).hit(|hit| hit.anomaly_enabled = Some(true));
        let hits: Vec<&Hit> = hits.hits.iter().collect();
        let sample = |on: bool| Sample {
            anomaly_enabled: Some(on),
            ..Sample::default()
        };
        let mostly_off: Vec<Sample> = (0..20).map(|i| sample(i < 2)).collect();
        let run = summarize(&mostly_off, &[], None);
        let verdict = judge_with_run("TL202", &hits, &context(), &run);
        assert_eq!(verdict.status, Status::NotReproduced, "{verdict:#?}");
        assert!(
            verdict.summary.contains("off for 90% of the run"),
            "{}",
            verdict.summary
        );
        let mostly_on: Vec<Sample> = (0..20).map(|i| sample(i > 0)).collect();
        let run = summarize(&mostly_on, &[], None);
        let verdict = judge_with_run("TL202", &hits, &context(), &run);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:#?}");
    }

    #[test]
    fn a_checkpoint_loaded_where_map_location_says_is_not_the_hazard() {
        let stream = Stream::new(1).value(|v| v.devices = Some(vec!["cuda:0".into()]));
        let flagged = stream.judge("TL108", &context());
        assert_eq!(flagged.status, Status::Confirmed, "{flagged:#?}");
        let chosen = stream.judge(
            "TL108",
            &Context {
                flagged_text: "torch.load(path, map_location=device)".into(),
                ..context()
            },
        );
        assert_eq!(chosen.status, Status::NotReproduced, "{chosen:#?}");
        assert!(chosen.summary.contains("where `map_location` put them"));
    }

    #[test]
    fn anomaly_mode_counts_the_run_from_its_line_on() {
        // `with detect_anomaly():` around training that starts after a long data preparation:
        // off before the line, on after it.
        let hits = Stream::new(1).hit(|hit| hit.anomaly_enabled = Some(true));
        let hit_time = hits.hits[0].t;
        let hits: Vec<&Hit> = hits.hits.iter().collect();
        let samples: Vec<Sample> = (0..40)
            .map(|i| {
                let t = hit_time - 3.0 + 0.1 * i as f64;
                Sample {
                    t,
                    anomaly_enabled: Some(t >= hit_time),
                    ..Sample::default()
                }
            })
            .collect();
        let run = summarize(&samples, &[], None);
        assert!(run.anomaly_share.is_some_and(|share| share < 0.5));
        let verdict = judge_with_run("TL202", &hits, &context(), &run);
        assert_eq!(verdict.status, Status::Confirmed, "{verdict:#?}");
    }
}
