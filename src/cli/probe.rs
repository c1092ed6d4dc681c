//! `torchlint probe`: lint a script, run it under the probe, print the verdicts.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};

use super::{ColorChoice, RuleSelection, print_error, print_errors, use_color};
use crate::probe::launcher;
use crate::probe::{self, Job, Options};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeFormat {
    Full,
    Json,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub command: Option<ProbeCommand>,
    /// The training script to run (as `python SCRIPT ARGS...` would). Left out when what
    /// follows `--` is a launcher's command line (`-- torchrun --nproc-per-node 2 train.py`).
    pub script: Option<PathBuf>,
    /// Arguments for the script, after `--`; or, with no SCRIPT, the distributed launcher's
    /// whole command line (`torchrun ...`, `python -m torch.distributed.run ...`).
    #[arg(last = true, value_name = "ARGS")]
    pub script_args: Vec<String>,
    /// The Python interpreter (default: the active virtual environment's, else `python3`).
    #[arg(long, value_name = "PY")]
    pub python: Option<PathBuf>,
    /// The GPU to watch (and the only one the script sees), as the CUDA driver numbers them.
    #[arg(long, value_name = "N")]
    pub gpu: Option<usize>,
    /// Stop once every watched line ran this many times.
    #[arg(long, value_name = "K", default_value_t = 30)]
    pub hits: u64,
    /// Stop after this many seconds at most [default: 300, none with --until-exit].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Let the script run to its end (or its out-of-memory error) once every watched line has
    /// its hits, instead of stopping it there: the run's peaks and the post-mortem then cover
    /// the whole run.
    #[arg(long)]
    pub until_exit: bool,
    /// Cap the device memory the script's allocator may hold, in GiB (as the script's own
    /// `torch.cuda.set_per_process_memory_fraction` would): a leak that would take hours to
    /// fill a large card runs out of memory within the probe's run, with the post-mortem.
    #[arg(long, value_name = "GIB")]
    pub max_memory: Option<f64>,
    /// Record the stack of every live device allocation and report the lines holding the most
    /// memory at the peak (and at an out-of-memory error), and the lines whose memory grows;
    /// on with --max-memory.
    #[arg(long)]
    pub attribute: bool,
    /// The line of the script that starts a training step (a loop's header), for --attribute's
    /// growth per step [default: the loop a finding names as running once per step].
    #[arg(long, value_name = "LINE")]
    pub step_line: Option<usize>,
    /// Steps to project growth over ("+1.0 MiB per step -> 9.8 GiB after 10,000 steps").
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub steps: u64,
    /// Which rules to watch (as in `check`), and the config file.
    #[command(flatten)]
    pub rules: RuleSelection,
    /// Also write a self-contained HTML report (memory timeline, hits, verdicts) to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// How to print the verdicts.
    #[arg(long, value_enum, default_value_t = ProbeFormat::Full)]
    pub output_format: ProbeFormat,
    /// When to color the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Run the script as a distributed job of N processes on this host, through PyTorch's own
    /// launcher (`python -m torch.distributed.run --standalone --nproc-per-node N`), the probe
    /// inside every rank; each watched line gets a verdict per rank.
    #[arg(long, value_name = "N")]
    pub nproc_per_node: Option<usize>,
    /// Hosts in the job: only 1 (with --nproc-per-node); probe a job over several hosts host
    /// by host, then `torchlint probe merge`.
    #[arg(long, value_name = "N")]
    pub nnodes: Option<usize>,
    /// Also watch this line as if the rule had flagged it (`TL102:41`; repeatable).
    #[arg(long, hide = true, value_name = "CODE:LINE", value_parser = parse_watch)]
    pub watch: Vec<(String, usize)>,
}

fn parse_watch(text: &str) -> Result<(String, usize), String> {
    let (code, line) = text
        .split_once(':')
        .ok_or_else(|| format!("expected CODE:LINE, got `{text}`"))?;
    let line = line
        .parse::<usize>()
        .map_err(|_| format!("expected a line number after `:`, got `{line}`"))?;
    Ok((code.to_owned(), line))
}

/// `--timeout` when it is not given (and `--until-exit` is not either).
const DEFAULT_TIMEOUT_SECS: f64 = 300.0;

#[derive(Debug, Subcommand)]
pub enum ProbeCommand {
    /// Merge the JSON reports of a distributed job's hosts into one report
    Merge {
        /// One report per host (`torchlint probe --output-format json -- torchrun ... >
        /// host0.json`).
        #[arg(required = true, value_name = "REPORT")]
        reports: Vec<PathBuf>,
        /// Also write a self-contained HTML report (no memory timeline) to this file.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// How to print the merged report.
        #[arg(long, value_enum, default_value_t = ProbeFormat::Full)]
        output_format: ProbeFormat,
        /// When to color the output.
        #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
        color: ColorChoice,
    },
}

pub fn run(args: ProbeArgs) -> u8 {
    crate::checker::install_panic_hook();
    if let Some(ProbeCommand::Merge {
        reports,
        report,
        output_format,
        color,
    }) = &args.command
    {
        return merge(reports, *output_format, *color, report.as_deref());
    }
    if args.nproc_per_node == Some(0) {
        print_error("--nproc-per-node must be at least 1");
        return 2;
    }
    match args.nnodes {
        Some(0) => {
            print_error("--nnodes must be at least 1");
            return 2;
        }
        Some(hosts) if hosts > 1 => {
            print_error(&format!(
                "--nnodes {hosts}: the probe runs one host's ranks; probe each host with its launcher's command line after `--` (`torchlint probe --output-format json -- torchrun --nnodes {hosts} --node-rank 0 ... train.py > host0.json`), then combine the reports with `torchlint probe merge host0.json host1.json`"
            ));
            return 2;
        }
        Some(_) if args.nproc_per_node.is_none() => {
            print_error(if args.script.is_none() && !args.script_args.is_empty() {
                "--nnodes goes on the launcher's command line, not before it"
            } else {
                "--nnodes 1 goes with --nproc-per-node N, the ranks to run (`torchlint probe train.py --nnodes 1 --nproc-per-node 2`)"
            });
            return 2;
        }
        _ => {}
    }
    // The script, its arguments and how to launch it: `probe SCRIPT [--nproc-per-node N] --
    // ARGS`, or `probe -- LAUNCHER ... SCRIPT ARGS`.
    let (script, script_args, job) = match (args.script, launcher::parse(&args.script_args)) {
        (Some(script), _) => (
            script,
            args.script_args,
            args.nproc_per_node.map(|ranks| Job {
                launcher: None,
                ranks: Some(ranks),
            }),
        ),
        (None, Some(Ok(launched))) if args.nproc_per_node.is_none() => (
            launched.script,
            launched.script_args,
            Some(Job {
                launcher: Some(launched.command),
                ranks: launched.nproc_per_node,
            }),
        ),
        (None, Some(Ok(_))) => {
            print_error("--nproc-per-node goes on the launcher's command line, not before it");
            return 2;
        }
        (None, Some(Err(error))) => {
            print_error(&format!("cannot probe that launcher command: {error}"));
            return 2;
        }
        (None, None) => {
            print_error(
                "name the training script (`torchlint probe train.py -- ARGS`), or give the launcher's whole command line after `--` (`torchlint probe -- torchrun --nproc-per-node 2 train.py`)",
            );
            return 2;
        }
    };
    if args.hits == 0 {
        print_error("--hits must be at least 1");
        return 2;
    }
    if args
        .timeout
        .is_some_and(|secs| !(secs > 0.0 && secs.is_finite()))
    {
        print_error("--timeout must be a positive number of seconds");
        return 2;
    }
    if args
        .max_memory
        .is_some_and(|gib| !(gib > 0.0 && gib.is_finite()))
    {
        print_error("--max-memory must be a positive number of GiB");
        return 2;
    }
    // Watching to the end means no time limit unless one is asked for.
    let timeout = match (args.timeout, args.until_exit) {
        (Some(secs), _) => Some(secs),
        (None, false) => Some(DEFAULT_TIMEOUT_SECS),
        (None, true) => None,
    };
    let settings_for = |host_only: bool| {
        args.rules
            .resolver_for_run(host_only)
            .and_then(|resolver| resolver.for_file(&script))
    };
    let (settings, host_settings) = match settings_for(false)
        .and_then(|settings| settings_for(true).map(|host| (settings, host)))
    {
        Ok(both) => both,
        Err(error) => {
            print_errors(&error);
            return 2;
        }
    };
    let options = Options {
        script,
        script_args,
        python: args.python,
        gpu: args.gpu,
        hits: args.hits,
        timeout: timeout.map(std::time::Duration::from_secs_f64),
        until_exit: args.until_exit,
        max_memory: args
            .max_memory
            .map(|gib| (gib * (1u64 << 30) as f64) as u64),
        // A cap asks for the out-of-memory error: its post-mortem names the lines holding it.
        attribute: args.attribute || args.max_memory.is_some(),
        step_line: args.step_line,
        steps: args.steps,
        settings: Arc::clone(&settings),
        host_settings,
        extra_watches: args.watch,
        script_stdout_to_stderr: args.output_format == ProbeFormat::Json,
        job,
    };
    let probed = match probe::run(&options) {
        Ok(probed) => probed,
        Err(error) => {
            print_error(&error);
            return 2;
        }
    };
    let mut out = Vec::new();
    let written = match args.output_format {
        ProbeFormat::Full => {
            let color = use_color(
                args.color,
                std::io::IsTerminal::is_terminal(&std::io::stdout()),
            );
            probe::render_full(&probed, color, &mut out)
        }
        ProbeFormat::Json => probe::render_json(&probed.report, &mut out),
    };
    if let Err(error) = written.and_then(|()| super::check::emit(&out, None)) {
        print_error(&error.to_string());
        return 2;
    }
    if let Some(path) = &args.report {
        let page = probe::html::render(&probed.report);
        if let Err(error) = crate::files::write_output(path, page.as_bytes()) {
            print_error(&format!(
                "{}: cannot write the HTML report: {error}",
                path.display()
            ));
            return 2;
        }
    }
    let code = probed.report.exit_code();
    if let Some(status) = probed.report.script_failure() {
        eprintln!(
            "torchlint probe: the script failed (exit status {status}); the probe exits with {code}"
        );
    }
    code
}

/// `torchlint probe merge REPORT...`.
fn merge(
    paths: &[PathBuf],
    format: ProbeFormat,
    color: ColorChoice,
    html: Option<&std::path::Path>,
) -> u8 {
    let mut hosts = Vec::new();
    for path in paths {
        let read = std::fs::read(path)
            .map_err(|error| format!("{}: cannot read the report: {error}", path.display()))
            .and_then(|bytes| {
                serde_json::from_slice(&bytes).map_err(|error| {
                    format!(
                        "{}: not a JSON report of `torchlint probe --output-format json` ({error})",
                        path.display()
                    )
                })
            });
        match read {
            Ok(report) => hosts.push(probe::merge::HostReport {
                name: path.display().to_string(),
                report,
            }),
            Err(error) => {
                print_error(&error);
                return 2;
            }
        }
    }
    let hosts_line = probe::merge::hosts_line(&hosts);
    let merged = match probe::merge::merge(hosts) {
        Ok(merged) => merged,
        Err(error) => {
            print_error(&error);
            return 2;
        }
    };
    // The text and HTML reports render the probe's own report type; JSON prints the merged
    // JSON as it is.
    let report = (format == ProbeFormat::Full || html.is_some())
        .then(|| probe::merge::to_report(&merged, hosts_line));
    let mut out = Vec::new();
    let written = match (format, &report) {
        (ProbeFormat::Full, Some(Ok(report))) => {
            let color = use_color(color, std::io::IsTerminal::is_terminal(&std::io::stdout()));
            probe::render_full_report(report, color, &mut out)
        }
        (ProbeFormat::Full, Some(Err(error))) => {
            print_error(error);
            return 2;
        }
        _ => serde_json::to_string_pretty(&merged)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}")),
    };
    if let Err(error) = written.and_then(|()| super::check::emit(&out, None)) {
        print_error(&error.to_string());
        return 2;
    }
    if let (Some(path), Some(report)) = (html, &report) {
        let report = match report {
            Ok(report) => report,
            Err(error) => {
                print_error(&format!("{}: no HTML report: {error}", path.display()));
                return 2;
            }
        };
        let page = probe::html::render_without_timeline(
            report,
            "No memory timeline: the hosts' JSON reports carry the verdicts and each rank's peaks, not the memory series. A host's own probe draws its timeline (--report FILE).",
        );
        if let Err(error) = crate::files::write_output(path, page.as_bytes()) {
            print_error(&format!(
                "{}: cannot write the HTML report: {error}",
                path.display()
            ));
            return 2;
        }
    }
    let code = probe::merge::exit_code(&merged);
    if let Some(status) = merged["exit"]["status"]
        .as_i64()
        .filter(|status| *status != 0)
    {
        eprintln!(
            "torchlint probe merge: the script failed (exit status {status}); exits with {code}"
        );
    }
    code
}
