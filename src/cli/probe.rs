//! `torchlint probe`: lint a script, run it under the probe, print the verdicts.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::{ColorChoice, RuleSelection, print_error, print_errors, use_color};
use crate::probe::{self, Options};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeFormat {
    Full,
    Json,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The training script to run (as `python SCRIPT ARGS...` would).
    pub script: PathBuf,
    /// Arguments for the script, after `--`.
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
    /// Stop after this many seconds at most.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub timeout: f64,
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

pub fn run(args: ProbeArgs) -> u8 {
    crate::checker::install_panic_hook();
    if args.hits == 0 {
        print_error("--hits must be at least 1");
        return 2;
    }
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        print_error("--timeout must be a positive number of seconds");
        return 2;
    }
    let settings_for = |host_only: bool| {
        args.rules
            .resolver_for_run(host_only)
            .and_then(|resolver| resolver.for_file(&args.script))
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
        script: args.script,
        script_args: args.script_args,
        python: args.python,
        gpu: args.gpu,
        hits: args.hits,
        timeout: std::time::Duration::from_secs_f64(args.timeout),
        steps: args.steps,
        settings: Arc::clone(&settings),
        host_settings,
        extra_watches: args.watch,
        script_stdout_to_stderr: args.output_format == ProbeFormat::Json,
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
