//! `torchlint probe`: run a training script on the GPU and settle, line by line, whether the
//! findings the linter reports really cost memory.
//!
//! The pieces, in the order a run uses them: the script is linted (the engine `check` uses),
//! findings whose rules have a runtime signature become a `plan`; an embedded Python runner
//! (`runner.py`) executes the script as `__main__` and watches only those lines, streaming
//! `events` over a pipe (`session`) while `device` samples the GPU's used memory through NVML,
//! without a CUDA context of its own (`processes` tells the script's processes from the rest);
//! `verdict` turns each line's hits into confirmed / not reproduced / not reached;
//! the `report` is printed (`render`) and optionally written as one HTML page (`html`).

pub mod attribution;
pub mod budget;
mod device;
pub mod events;
pub mod html;
pub mod launcher;
pub mod merge;
pub mod plan;
mod processes;
mod ranks;
mod render;
pub mod report;
mod session;
pub mod verdict;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use render::{render_full, render_full_report, render_json};

use crate::diagnostic::Diagnostic;
use crate::linter;
use crate::settings::Settings;
use crate::source::{self, SourceFile};
use events::{DeviceSample, Event, Hit};
use plan::{Plan, Target};
use report::{DeviceInfo, FindingRef, Footprint, MemorySource, ProbeReport, Stop, WatchedFinding};
use verdict::Status;

/// The runner, written to a private temp dir for each run.
const RUNNER: &str = include_str!("runner.py");

/// Hits at the start of each line that are not measured (allocator caches, cuDNN autotuning,
/// lazy initialisation; hazards.md §7).
const WARMUP_HITS: u64 = 5;

/// How often torchlint reads the device's used memory.
const DEVICE_SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Rules with a runtime signature: the probe knows what to read at their lines (each rule's
/// "How the probe confirms it").
const WATCHED_RULES: &[&str] = &[
    "TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL107", "TL108", "TL109", "TL110",
    "TL111", "TL112", "TL113", "TL201", "TL202", "TL203", "TL301",
];

pub struct Options {
    pub script: PathBuf,
    pub script_args: Vec<String>,
    pub python: Option<PathBuf>,
    pub gpu: Option<usize>,
    pub hits: u64,
    /// None: no limit (`--until-exit` without `--timeout`).
    pub timeout: Option<Duration>,
    /// Let the script run to its end once the watched lines have their hits.
    pub until_exit: bool,
    /// `--max-memory`, in bytes: the cap the runner sets on the script's allocator.
    pub max_memory: Option<u64>,
    /// Attribute live device memory to the lines that allocated it.
    pub attribute: bool,
    /// `--step-line`: the line that starts a training step (else the loop a finding names).
    pub step_line: Option<usize>,
    pub steps: u64,
    pub settings: Arc<Settings>,
    /// The same settings for a run without a GPU ([`crate::settings::CliOverrides::host_only`]):
    /// the findings then say host memory where the code names CUDA.
    pub host_settings: Arc<Settings>,
    /// Lines to watch as if a rule had flagged them (`--watch TL102:41`): how the dev-corpus
    /// check proves that the probe does not confirm the traps the linter rightly leaves alone.
    pub extra_watches: Vec<(String, usize)>,
    /// Send the script's stdout to our stderr, so that ours carries only the report (JSON).
    pub script_stdout_to_stderr: bool,
    /// Run the script as a distributed job (`--nproc-per-node`, or a launcher's command line).
    pub job: Option<Job>,
}

/// A distributed job: how to launch it and how many ranks this host runs.
pub struct Job {
    /// The launcher and its options, the training script left out (None: PyTorch's own,
    /// `python -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node RANKS`).
    pub launcher: Option<Vec<String>>,
    /// The ranks this host runs, when known before they start (else each rank says).
    pub ranks: Option<usize>,
}

/// Seconds since the Unix epoch: the clock the runner's events use too.
pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

/// A probe run: the report, and the linted script its findings point into.
pub struct Probed {
    pub report: ProbeReport,
    pub source: Arc<SourceFile>,
    /// The watched findings, in the order of `report.findings`.
    pub diagnostics: Vec<Diagnostic>,
}

pub fn run(options: &Options) -> Result<Probed, String> {
    let script = &options.script;
    let bytes = std::fs::read(script)
        .map_err(|error| format!("{}: cannot read the script: {error}", script.display()))?;
    let text = source::decode(&bytes).map_err(|error| format!("{}: {error}", script.display()))?;
    let source = SourceFile::new(script.clone(), text);
    let device = match Device::open(options.gpu.unwrap_or(0)) {
        Ok(device) => Ok(Arc::new(device)),
        Err(reason) if options.gpu.is_some() => {
            return Err(format!(
                "cannot watch GPU {}: {reason}",
                options.gpu.unwrap_or(0)
            ));
        }
        Err(reason) => Err(reason),
    };
    // Without a GPU the script's tensors stay on the CPU: the findings say so.
    let settings = if device.is_ok() {
        &options.settings
    } else {
        &options.host_settings
    };
    let (_tree, outcome) = linter::lint_source(&source, settings)
        .map_err(|skipped| format!("{}: {skipped}", script.display()))?;
    let extra = extra_diagnostics(&source, &options.extra_watches)?;
    if let Some(line) = options
        .step_line
        .filter(|&line| line == 0 || line > source.line_starts().len())
    {
        return Err(format!("--step-line {line}: the script has no line {line}"));
    }
    let (watched, unwatched): (Vec<&Diagnostic>, Vec<&Diagnostic>) = outcome
        .diagnostics
        .iter()
        .chain(&extra)
        .partition(|diagnostic| WATCHED_RULES.contains(&diagnostic.code()));

    let mut report = ProbeReport {
        script: script.display().to_string(),
        // A job's launcher first, as the user typed it.
        command: (options.job.iter())
            .flat_map(|job| job.launcher.iter().flatten().cloned())
            .chain(std::iter::once(script.display().to_string()))
            .chain(options.script_args.iter().cloned())
            .collect(),
        python: None,
        torch: None,
        mechanism: None,
        device: device.as_ref().ok().map(|device| DeviceInfo {
            index: device.index,
            name: device.name.clone(),
            total: device.total,
            used_before: device.used_before,
            source: device.source.clone(),
        }),
        footprint: Default::default(),
        cpu_mode_reason: device.as_ref().err().cloned(),
        max_memory: options.max_memory,
        budget: None,
        attribution: None,
        budgets: Vec::new(),
        steps: Vec::new(),
        findings: Vec::new(),
        unwatched: unwatched.iter().map(|d| finding_ref(&source, d)).collect(),
        summary: Default::default(),
        stop: Stop::ScriptExited,
        exit: None,
        out_of_memory: None,
        started: now(),
        duration: 0.0,
        samples: Vec::new(),
        device_samples: Vec::new(),
        hits: Vec::new(),
        runner_errors: Vec::new(),
        ranks: Vec::new(),
        failed_rank: None,
    };
    // With no finding to watch the script still runs: the run's own numbers (its peak, the
    // cache, the host's memory, how it ended) are what a script that runs out of memory with
    // nothing flagged needs.
    let watched_diagnostics: Vec<Diagnostic> = watched.iter().map(|d| (*d).clone()).collect();

    let folder = tempfile::Builder::new()
        .prefix("torchlint-probe-")
        .tempdir()
        .map_err(|error| format!("cannot create a temporary folder for the runner: {error}"))?;
    let python = options
        .python
        .clone()
        .unwrap_or_else(session::default_python);
    let distributed = options.job.as_ref().map(|job| session::Distributed {
        launcher: job.launcher.clone().unwrap_or_else(|| {
            let ranks = job.ranks.unwrap_or(1).to_string();
            let python = python.display().to_string();
            [
                &python,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nnodes",
                "1",
            ]
            .into_iter()
            .chain(["--nproc-per-node", &ranks])
            .map(str::to_owned)
            .collect()
        }),
        ranks: job.ranks,
        socket: folder.path().join("events.sock"),
    });
    let absolute = std::path::absolute(script).unwrap_or_else(|_| script.clone());
    let targets: Vec<Target> = watched
        .iter()
        .enumerate()
        .map(|(id, diagnostic)| target(id, &source, diagnostic, options.hits))
        .collect();
    let plan = Plan {
        script: absolute.display().to_string(),
        argv: std::iter::once(script.display().to_string())
            .chain(options.script_args.iter().cloned())
            .collect(),
        hits: options.hits,
        warmup: WARMUP_HITS,
        events_fd: session::EVENTS_FD,
        events_socket: distributed
            .as_ref()
            .map(|job| job.socket.display().to_string()),
        read_device: device
            .as_ref()
            .is_ok_and(|device| device.source != MemorySource::Nvml),
        max_memory: options.max_memory,
        attribute: options.attribute,
        targets: {
            let mut planned = targets.clone();
            if options.attribute
                && let Some(line) = options.step_line.or_else(|| step_line(&source, &watched))
            {
                // The training loop's header: a step starts each time it runs.
                planned.push(Target {
                    id: targets.len(),
                    code: STEP_RULE.to_owned(),
                    line,
                    column: 1,
                    end_line: line,
                    text: String::new(),
                    hits: 0,
                    forward: None,
                });
            }
            planned
        },
    };
    let runner = folder.path().join("torchlint_probe_runner.py");
    let plan_path = folder.path().join("plan.json");
    std::fs::write(&runner, RUNNER)
        .and_then(|()| std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap_or_default()))
        .map_err(|error| format!("cannot write the runner: {error}"))?;

    let session = session::Session {
        python: &python,
        runner: &runner,
        plan: &plan_path,
        visible_devices: options.gpu.map(visible_device),
        timeout: options.timeout,
        until_exit: options.until_exit,
        hits: targets.iter().map(|target| target.hits).collect(),
        labels: targets
            .iter()
            .map(|target| format!("{}:{}", target.code, target.line))
            .collect(),
        progress: true,
        script_stdout_to_stderr: options.script_stdout_to_stderr,
        distributed,
    };
    let sampler = device
        .as_ref()
        .ok()
        .map(|device| device.sample(DEVICE_SAMPLE_EVERY));
    let others = other_devices(options, device.as_ref().ok());
    let other_samplers: Vec<(u32, device::Sampler)> = others
        .iter()
        .map(|other| (other.index as u32, other.sample(DEVICE_SAMPLE_EVERY)))
        .collect();
    let outcome = session.run();
    let sampled = sampler.map(|sampler| sampler.finish()).unwrap_or_default();
    let device_samples = sampled.samples;
    // Each GPU's most held by each of the script's processes (by pid).
    let mut held_by_device: Vec<(u32, std::collections::BTreeMap<u32, u64>)> = Vec::new();
    if let Ok(device) = &device {
        held_by_device.push((device.index as u32, sampled.held));
    }
    for (index, sampler) in other_samplers {
        held_by_device.push((index, sampler.finish().held));
    }
    // The temp dir (runner and plan) is removed here, whatever happened.
    drop(folder);
    let outcome = outcome?;

    report.started = outcome.started;
    report.duration = outcome.duration;
    report.stop = outcome.stop;
    report.device_samples = device_samples;
    report.footprint = Footprint {
        device: report
            .device_samples
            .iter()
            .filter_map(|sample| sample.probe)
            .max(),
        host_peak_rss: own_peak_rss(),
    };
    let assembly = Assembly {
        options,
        targets: &targets,
        watched: &watched,
        source: &source,
        python: &python,
        absolute: &absolute,
    };
    let report = if options.job.is_some() {
        let mut channels = outcome.channels;
        channels.sort_by_key(|channel| channel.rank);
        let mut pids: Vec<(u32, u32)> = Vec::new();
        let ranks: Vec<(u32, ProbeReport)> = channels
            .into_iter()
            .enumerate()
            .map(|(index, channel)| {
                let rank = channel.rank.unwrap_or(index as u32);
                if let Some(pid) = channel.events.iter().find_map(|event| match event {
                    Event::Start(start) => Some(start.pid),
                    _ => None,
                }) {
                    pids.push((rank, pid));
                }
                (
                    rank,
                    assembly.assemble(report.clone(), channel.events, None),
                )
            })
            .collect();
        let mut merged = ranks::merge(report, ranks, outcome.status);
        ranks::record_held(&mut merged.ranks, &pids, &held_by_device);
        merged
    } else {
        let events = outcome
            .channels
            .into_iter()
            .next()
            .map(|channel| channel.events)
            .unwrap_or_default();
        assembly.assemble(report, events, outcome.status)
    };
    Ok(Probed {
        report,
        source: Arc::new(source),
        diagnostics: watched_diagnostics,
    })
}

/// The GPUs besides `primary` that a distributed job's ranks may compute on, each watched
/// for what the ranks hold of it: none when the script sees one GPU only (`--gpu`), or when
/// memory is read inside the script (without NVML the probe sees no device of its own).
fn other_devices(options: &Options, primary: Option<&Arc<Device>>) -> Vec<Device> {
    let Some(primary) = primary else {
        return Vec::new();
    };
    if options.job.is_none() || options.gpu.is_some() || primary.source != MemorySource::Nvml {
        return Vec::new();
    }
    (0..device::count())
        .filter(|&index| index != primary.index)
        .filter_map(|index| Device::open(index).ok())
        .filter(|device| device.source == MemorySource::Nvml)
        .collect()
}

/// What turns one process's events into a report: the plan's targets and the findings they
/// watch.
struct Assembly<'a> {
    options: &'a Options,
    targets: &'a [Target],
    watched: &'a [&'a Diagnostic],
    source: &'a SourceFile,
    python: &'a std::path::Path,
    absolute: &'a std::path::Path,
}

impl Assembly<'_> {
    /// `report` (the run's frame: script, device, timing) completed with what one process
    /// sent: its hits, samples and exit, and each watched line's verdict.
    fn assemble(
        &self,
        mut report: ProbeReport,
        events: Vec<Event>,
        status: Option<std::process::ExitStatus>,
    ) -> ProbeReport {
        let Assembly {
            options,
            targets,
            watched,
            source,
            python,
            absolute,
        } = *self;
        let mut hits_by_target: Vec<Vec<Hit>> = vec![Vec::new(); targets.len()];
        let mut reached_start = false;
        let mut out_of_memory = None;
        let mut budgets = Vec::new();
        let mut attributions = Vec::new();
        for event in events {
            match event {
                Event::Start(start) => {
                    reached_start = true;
                    report.python = Some(start.python);
                    report.torch = start.torch;
                    report.mechanism = Some(start.mechanism);
                    for unarmed in start.unarmed {
                        let what = match targets.get(unarmed.target) {
                            Some(target) => format!("line {}", target.line),
                            None => "the step line (--attribute)".to_owned(),
                        };
                        report
                            .runner_errors
                            .push(format!("{what} not watched: {}", unarmed.why));
                    }
                }
                Event::Hit(hit) => {
                    if let Some(list) = hits_by_target.get_mut(hit.target) {
                        list.push(hit.clone());
                    }
                    report.hits.push(hit);
                }
                Event::Sample(sample) => {
                    // Without NVML, the script's process is where the device is read.
                    if let (Some(used), Some(DeviceInfo { source, .. })) =
                        (sample.device_used, &report.device)
                        && *source != MemorySource::Nvml
                    {
                        report.device_samples.push(DeviceSample {
                            t: sample.t,
                            used,
                            ..DeviceSample::default()
                        });
                    }
                    report.samples.push(sample);
                }
                Event::Complete { .. } => {}
                Event::OutOfMemory(error) => out_of_memory = Some(error),
                Event::Budget(budget) => budgets.push(budget),
                Event::Attribution(attribution) => attributions.push(attribution),
                Event::Exit(exit) => report.exit = Some(exit),
                Event::Error { message, .. } => report.runner_errors.push(message),
            }
        }
        if !reached_start {
            report.stop = Stop::RunnerFailed;
            if let Some(status) = status {
                report.runner_errors.push(format!(
                    "the runner ended before starting the script ({status}); is `{}` a Python 3.8+ interpreter?",
                    python.display()
                ));
            }
        }
        // Without NVML, the first reading from inside the script stands for "before".
        let device_before = report.device.as_ref().and_then(|device| {
            device
                .used_before
                .or(report.device_samples.first().map(|sample| sample.used))
        });
        // The run's numbers first: some verdicts need them (pinned memory peaks after the
        // DataLoader line ran, not at it).
        let readings = verdict::run_readings(&report.samples, &report.hits);
        report.summary = verdict::summarize(&readings, &report.device_samples, device_before);
        report.summary.failure = report.exit.as_ref().and_then(|exit| exit.traceback.clone());
        let context = verdict::Context {
            hits_wanted: options.hits,
            warmup: WARMUP_HITS,
            gpu: report.device.is_some(),
            device_free: report
                .device
                .as_ref()
                .map(|d| d.total.saturating_sub(device_before.unwrap_or(0))),
            allowed: report.summary.allowed,
            project_steps: options.steps,
            ended_early: report.stop != Stop::Complete,
            flagged_text: String::new(),
            growth_kept_by: None,
        };
        // A watched line's verdict; `growth_kept_by` names the line that keeps what the loop grows.
        let judge = |index: usize, growth_kept_by: Option<String>| {
            let context = verdict::Context {
                flagged_text: targets[index].text.clone(),
                growth_kept_by,
                ..context.clone()
            };
            let mut hits: Vec<&Hit> = hits_by_target[index].iter().collect();
            hits.sort_by_key(|hit| hit.n);
            verdict::judge_with_run(watched[index].code(), &hits, &context, &report.summary)
        };
        for (index, diagnostic) in watched.iter().enumerate() {
            let verdict = judge(index, None);
            report.findings.push(WatchedFinding {
                finding: finding_ref(source, diagnostic),
                verdict,
                ranks: Vec::new(),
            });
        }
        // One loop's growth, seen by every watched line in it, belongs to the line that keeps
        // something: an evaluation forward (TL101) whose own graph does not grow is judged again
        // with the growth counted there.
        let keeper = report.findings.iter().find(|watched| {
            matches!(
                watched.finding.code.as_str(),
                "TL102" | "TL103" | "TL104" | "TL111"
            ) && watched.verdict.status == verdict::Status::Confirmed
                && watched.verdict.class.grows()
        });
        if let Some(keeper) =
            keeper.map(|k| format!("line {} ({})", k.finding.line, k.finding.code))
        {
            for (index, finding) in report.findings.iter_mut().enumerate() {
                if finding.finding.code == "TL101" && finding.verdict.class.grows() {
                    finding.verdict = judge(index, Some(keeper.clone()));
                }
            }
        }
        report.budget = budget::for_run(&budgets);
        let budget_at_out_of_memory = budget::at_out_of_memory(&budgets);
        report.budgets = budgets;
        report.steps = attributions
            .iter()
            .filter_map(|snapshot| Some((snapshot.step?, snapshot.t)))
            .collect();
        if options.attribute && attributions.is_empty() && reached_start {
            report.runner_errors.push(
                "no allocation stacks were read (--attribute): the script never initialised CUDA"
                    .to_owned(),
            );
        }
        let findings_at = attribution::FindingsAt::of(&report, absolute);
        report.attribution = attribution::for_run(&attributions, &findings_at);
        // Read once every finding has its verdict: the post-mortem names those on its stack.
        report.out_of_memory = out_of_memory.map(|error| {
            let held_by = attribution::at_out_of_memory(&attributions, &findings_at);
            post_mortem(error, budget_at_out_of_memory, held_by, absolute, &report)
        });

        report
    }
}

use device::Device;

/// The out-of-memory error with the findings on the script's lines of its stack.
fn post_mortem(
    error: events::OutOfMemory,
    budget: Option<budget::Split>,
    held_by: Vec<attribution::Held>,
    script: &std::path::Path,
    report: &ProbeReport,
) -> report::PostMortem {
    let script = std::fs::canonicalize(script).unwrap_or_else(|_| script.to_owned());
    let lines: Vec<usize> = error
        .stack
        .iter()
        .filter(|frame| std::path::Path::new(&frame.file) == script)
        .map(|frame| frame.line)
        .collect();
    let findings_on_stack = report
        .findings
        .iter()
        .map(|watched| &watched.finding)
        .chain(&report.unwatched)
        .filter(|finding| lines.contains(&finding.line))
        .map(|finding| format!("{}:{}", finding.code, finding.line))
        .collect();
    report::PostMortem {
        fragmentation: budget::out_of_memory_verdict(&error),
        error,
        findings_on_stack,
        budget,
        held_by,
    }
}

/// torchlint's own peak resident memory, in bytes.
fn own_peak_rss() -> Option<u64> {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0).then_some(usage)
    }?;
    // Kilobytes on Linux, bytes on macOS.
    let scale = if cfg!(target_os = "macos") { 1 } else { 1024 };
    u64::try_from(usage.ru_maxrss).ok().map(|rss| rss * scale)
}

/// Findings made up for `--watch CODE:LINE`: the whole line, under that rule.
fn extra_diagnostics(
    source: &SourceFile,
    watches: &[(String, usize)],
) -> Result<Vec<Diagnostic>, String> {
    let registry = crate::rule_meta::RuleRegistry::builtin();
    watches
        .iter()
        .map(|(code, line)| {
            let rule = registry
                .get(code)
                .ok_or_else(|| format!("--watch {code}:{line}: no rule {code}"))?;
            if *line == 0 || *line > source.line_starts().len() {
                return Err(format!(
                    "--watch {code}:{line}: the script has no line {line}"
                ));
            }
            let range = source.line_range(line - 1);
            let indent = source.text()[range.clone()].len()
                - source.text()[range.clone()].trim_start().len();
            Ok(Diagnostic::new(
                rule,
                "watched on request (--watch)",
                range.start + indent..range.end,
            ))
        })
        .collect()
}

fn finding_ref(source: &SourceFile, diagnostic: &Diagnostic) -> FindingRef {
    let location = source.location(diagnostic.range.start);
    let line = source.text()[source.line_range(location.row - 1)].trim();
    FindingRef {
        code: diagnostic.rule.code.clone(),
        name: diagnostic.rule.name.clone(),
        message: diagnostic.message.clone(),
        line: location.row,
        column: location.column,
        source: line.to_owned(),
        // The help says how and why; a fix's title only where there is no help.
        fix: diagnostic
            .help
            .clone()
            .or_else(|| diagnostic.fix.as_ref().map(|fix| fix.message.clone())),
    }
}

/// The plan's code for the step boundary the runner snapshots allocation stacks at.
const STEP_RULE: &str = "STEP";

/// The header line of the loop a finding names as running once per step or batch (the linter's
/// "this loop runs ... once per ..." label).
fn step_line(source: &SourceFile, watched: &[&Diagnostic]) -> Option<usize> {
    watched
        .iter()
        .flat_map(|diagnostic| &diagnostic.labels)
        .find(|label| {
            label
                .message
                .starts_with(crate::semantic::per_batch::PER_BATCH_LOOP_LABEL)
        })
        .map(|label| source.location(label.range.start).row)
}

fn target(id: usize, source: &SourceFile, diagnostic: &Diagnostic, hits: u64) -> Target {
    let start = source.location(diagnostic.range.start);
    let end = source.location(diagnostic.range.end);
    let code = diagnostic.rule.code.clone();
    // A growth rule is confirmed only by growth measured at its line: with fewer hits than a
    // growth fit needs, the probe would judge it before it could see it (`likely`).
    let hits = if verdict::GROWTH_RULES.contains(&code.as_str()) {
        hits.max(WARMUP_HITS + verdict::MIN_GROWTH_HITS as u64)
    } else {
        hits
    };
    // TL301's one label is the loop's forward call.
    let forward = diagnostic
        .labels
        .first()
        .filter(|_| code == "TL301")
        .map(|label| source.text()[label.range.clone()].to_owned());
    Target {
        id,
        code,
        line: start.row,
        column: start.column,
        end_line: end.row,
        text: source.text()[diagnostic.range.clone()].to_owned(),
        hits,
        forward,
    }
}

/// `CUDA_VISIBLE_DEVICES` for the script so that it sees exactly GPU `index`: the driver
/// numbers GPUs within what `CUDA_VISIBLE_DEVICES` already allows, so pick from that list.
fn visible_device(index: usize) -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .nth(index)
            .map_or_else(|| index.to_string(), |entry| entry.trim().to_owned()),
        _ => index.to_string(),
    }
}

impl ProbeReport {
    /// The script's own status when it failed (so that a CI step probing it fails as running
    /// it would; 1 for a status outside 1-255, as a signal's), else 1 when a finding is
    /// confirmed, else 0 (as `check`: findings that hold fail the run).
    pub fn exit_code(&self) -> u8 {
        if let Some(status) = self.script_failure() {
            return u8::try_from(status)
                .ok()
                .filter(|code| *code != 0)
                .unwrap_or(1);
        }
        if self
            .findings
            .iter()
            .any(|finding| finding.verdict.status == Status::Confirmed)
        {
            1
        } else {
            0
        }
    }

    /// The status the script exited with by itself, when it was not 0.
    pub fn script_failure(&self) -> Option<i32> {
        self.exit
            .as_ref()
            .map(|exit| exit.status)
            .filter(|status| *status != 0)
    }
}
