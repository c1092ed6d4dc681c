//! The command line: `torchlint [check] [PATH...]`, `torchlint rule CODE|--all`.
//! Exit codes follow Ruff: 0 no findings, 1 findings, 2 usage, config, IO or internal error.

mod check;
mod clean;
mod probe;
mod rule;
mod watch;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::render::OutputFormat;

#[derive(Debug, Parser)]
#[command(
    name = "torchlint",
    version,
    about = "Find the memory hazards in PyTorch training code before they OOM at epoch 3.",
    args_conflicts_with_subcommands = true,
    after_help = "With no subcommand, `torchlint [PATH...]` runs `check`."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    check: CheckArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Lint files and folders (the default).
    Check(CheckArgs),
    /// Print the documentation of a rule, or of every rule.
    Rule(RuleArgs),
    /// Run a training script and confirm which findings really cost memory.
    ///
    /// On a GPU it also reads the device's memory; without one (CPU mode) it reads the
    /// allocator's counters, host memory and the autograd graph. Exits with the script's status
    /// when the script fails, else 1 when a finding is confirmed, else 0 (2: torchlint's own
    /// errors).
    Probe(probe::ProbeArgs),
    /// Serve diagnostics to editors over the Language Server Protocol (stdio).
    ///
    /// LSP 3.17 over stdin and stdout; start it as the editor's language server for Python
    /// files, with no arguments. Tested clients: VS Code (the extension in editors/vscode) and
    /// Neovim, 0.7 and later (editors/neovim); any LSP client can start `torchlint server`
    /// (editors/README.md).
    ///
    /// It offers diagnostics as you type (pushed, or pulled: `textDocument/diagnostic`,
    /// `workspace/diagnostic`), quick fixes to ignore a finding on its line or its rule in the
    /// file, the rule's fix where it has one, and on hover the finding, its fix and a link to
    /// the rule's page. Each open file is linted with its project's files as context and the
    /// project's config files (`.torchlint.toml`, `torchlint.toml`, `pyproject.toml`),
    /// reloaded when they change.
    ///
    /// Settings, as `initializationOptions` or under `torchlint` in
    /// `workspace/didChangeConfiguration`: `select` and `ignore`, lists of rule codes or
    /// prefixes (`{"select": ["TL1"], "ignore": ["TL104"]}`), applied over the config files as
    /// `--select`/`--ignore` are.
    ///
    /// Logging: the server sends its own lines (a file it cannot lint, a rule that failed) as
    /// `window/logMessage`, which clients show in their log (VS Code: Output, torchlint;
    /// Neovim: `:LspLog`). To see every message exchanged, turn on the client's trace (VS Code:
    /// `"torchlint.trace.server": "verbose"`; Neovim: `vim.lsp.set_log_level("debug")`). Stdout
    /// carries the protocol and nothing else.
    Server,
    /// Remove the result caches (`.torchlint_cache`) under the given folders.
    ///
    /// Default: the current folder. Only folders carrying torchlint's `CACHEDIR.TAG` go.
    Clean(CleanArgs),
}

#[derive(Debug, Args)]
struct CleanArgs {
    /// Folders to clean, each with its subfolders.
    paths: Vec<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// Which rules run, and the config file: the same for `check` and `probe`.
#[derive(Debug, Clone, Args)]
pub struct RuleSelection {
    /// Rules to enable, replacing the configured selection (codes, prefixes, names or ALL).
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub select: Option<Vec<String>>,
    /// Rules to disable.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub ignore: Vec<String>,
    /// Rules to enable in addition to the configured selection.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub extend_select: Vec<String>,
    /// A config file to use for every file, instead of discovering one per folder; or a
    /// setting, as TOML `KEY = VALUE` with the config file's keys, over every config file
    /// (`--config 'ignore = ["TL104"]'`, `--config 'empty-cache-in-loop.max-gated-interval =
    /// 20'`). Repeatable: one file at most, settings applied in the order given; --select,
    /// --ignore and the other flags apply over them. A value naming an existing file, or ending
    /// in `.toml`, is a path.
    #[arg(long, value_name = "FILE | KEY=VALUE")]
    pub config: Vec<OsString>,
    /// Exclusion patterns replacing the configured ones (and the built-in list).
    #[arg(long, value_delimiter = ',', value_name = "PATTERNS")]
    pub exclude: Option<Vec<String>>,
    /// Exclusion patterns added to the configured ones.
    #[arg(long, value_delimiter = ',', value_name = "PATTERNS")]
    pub extend_exclude: Vec<String>,
    /// Rules to turn off in files matching a pattern, added to the configured
    /// `per-file-ignores`: `PATTERN:RULE`, comma-separated (`'tests/*:TL108,*.ipynb:TL2'`).
    #[arg(long, value_delimiter = ',', value_name = "PATTERN:RULE")]
    pub per_file_ignores: Vec<String>,
}

impl RuleSelection {
    /// The resolver that turns config files plus these selectors into each file's settings.
    pub fn resolver(
        &self,
    ) -> Result<crate::settings::resolver::Resolver, crate::discovery::FileError> {
        self.resolver_for_run(false)
    }

    /// [`RuleSelection::resolver`] for a run that may put nothing on a GPU (`host_only`: the
    /// probe without one).
    pub fn resolver_for_run(
        &self,
        host_only: bool,
    ) -> Result<crate::settings::resolver::Resolver, crate::discovery::FileError> {
        use crate::settings::inline::ConfigArgument;
        let arguments = self
            .config
            .iter()
            .map(|value| ConfigArgument::parse(value))
            .collect::<Result<Vec<_>, _>>()?;
        let (config_file, inline) = ConfigArgument::split(arguments)?;
        // `PATTERN:RULE` pairs, grouped by pattern in the order given.
        let mut per_file_ignores: Vec<(String, Vec<String>)> = Vec::new();
        for pair in &self.per_file_ignores {
            let Some((pattern, rule)) = pair.rsplit_once(':') else {
                return Err(crate::discovery::FileError::command_line(format!(
                    "--per-file-ignores takes PATTERN:RULE pairs, like `tests/*:TL108`; `{pair}` has no `:`"
                )));
            };
            match per_file_ignores.iter_mut().find(|(p, _)| p == pattern) {
                Some((_, rules)) => rules.push(rule.to_owned()),
                None => per_file_ignores.push((pattern.to_owned(), vec![rule.to_owned()])),
            }
        }
        let overrides = crate::settings::CliOverrides {
            inline,
            select: self.select.clone(),
            extend_select: self.extend_select.clone(),
            ignore: self.ignore.clone(),
            exclude: self.exclude.clone(),
            extend_exclude: self.extend_exclude.clone(),
            per_file_ignores,
            host_only,
        };
        crate::settings::resolver::Resolver::new(overrides, config_file.as_deref())
    }
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Files or folders to lint; `-` reads from stdin. Defaults to the current folder.
    pub paths: Vec<PathBuf>,
    /// The name of the file stdin stands for (for config, per-file ignores and output); given,
    /// stdin is linted, with or without `-` (as Ruff does).
    #[arg(long, value_name = "PATH")]
    pub stdin_filename: Option<PathBuf>,
    #[command(flatten)]
    pub rules: RuleSelection,
    /// How to print findings.
    #[arg(long, value_enum, default_value_t = OutputFormat::Full)]
    pub output_format: OutputFormat,
    /// Write the findings to this file instead of stdout (written atomically).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Exit with 0 even when there are findings (errors still exit with 2).
    #[arg(long)]
    pub exit_zero: bool,
    /// When to color the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print how many findings each rule produced, instead of the findings: a table, or JSON
    /// with `--output-format json`.
    #[arg(long)]
    pub statistics: bool,
    /// Print only the findings: no summary line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also print, on stderr, what the run did besides linting the named files: the other
    /// files of their project it read for facts, those it left unread for their size
    /// (`context-size-limit`), the files it linted twice and why, results from the cache.
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Report and fail only on findings not recorded in this baseline file.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Record the current findings in the baseline file (`--baseline`, default
    /// `torchlint-baseline.json`) instead of reporting them.
    #[arg(long)]
    pub write_baseline: bool,
    /// Apply the excludes to files named on the command line too (the pre-commit hook passes
    /// this: it names every staged file).
    #[arg(long)]
    pub force_exclude: bool,
    /// Print the files that would be linted, and exit.
    #[arg(long)]
    pub show_files: bool,
    /// Lint again whenever a Python file, notebook or config file under the paths changes,
    /// clearing the screen between runs, until interrupted.
    #[arg(long, conflicts_with_all = ["show_files", "show_settings", "write_baseline", "stdin_filename"])]
    pub watch: bool,
    /// Print the settings the first file found is linted with (which config file, the
    /// enabled rules, excludes, per-file ignores, rule options), then exit.
    #[arg(long, conflicts_with = "show_files")]
    pub show_settings: bool,
    /// Neither read nor write the result cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Where the result cache lives (default: `.torchlint_cache` in the project root).
    #[arg(long, value_name = "DIR", env = "TORCHLINT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Discover, read and parse exactly as a normal run, but run no rule (for benchmarks).
    #[arg(long, hide = true)]
    pub parse_only: bool,
    /// Apply the safe fixes (and the unsafe ones with `--unsafe-fixes`), then report what is
    /// left.
    #[arg(long, overrides_with = "no_fix", conflicts_with_all = ["watch", "write_baseline"])]
    pub fix: bool,
    /// Do not apply fixes, whatever the config's `fix = true` says.
    #[arg(long, overrides_with = "fix")]
    pub no_fix: bool,
    /// Let `--fix` and `--diff` apply unsafe fixes too (they may change what the code does).
    #[arg(long, overrides_with = "no_unsafe_fixes")]
    pub unsafe_fixes: bool,
    /// Leave unsafe fixes out, whatever the config's `unsafe-fixes = true` says.
    #[arg(long, overrides_with = "unsafe_fixes")]
    pub no_unsafe_fixes: bool,
    /// Print a unified diff of what `--fix` would change, and change nothing (exit 1 when
    /// there is a diff).
    #[arg(long, conflicts_with_all = ["fix", "watch", "write_baseline"])]
    pub diff: bool,
    /// Add `# noqa: CODE` to every line with a finding (merged into the line's own `# noqa:`,
    /// other tools' codes kept), for adopting torchlint on an old code base; then exit.
    #[arg(long, conflicts_with_all = ["fix", "diff", "watch", "write_baseline"])]
    pub add_noqa: bool,
    /// Apply the fixes as `--fix` does, but report neither the findings left nor fail for
    /// them: exit 0 unless a file could not be linted.
    #[arg(long, conflicts_with_all = ["diff", "watch", "write_baseline", "add_noqa"])]
    pub fix_only: bool,
    /// List the fixes applied, by file and rule, after the findings left.
    #[arg(long)]
    pub show_fixes: bool,
    /// Fixes applied by the rounds of this `--fix` run so far (each round lints again).
    #[arg(skip)]
    pub fixed: check::Fixed,
    #[arg(skip)]
    pub fix_rounds: usize,
}

#[derive(Debug, Args)]
struct RuleArgs {
    /// A rule code (`TL108`) or name (`load-without-map-location`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    rule: Option<String>,
    /// Print every rule.
    #[arg(long)]
    all: bool,
    /// Markdown text, or JSON.
    #[arg(long, value_enum, default_value_t = rule::RuleFormat::Text)]
    output_format: rule::RuleFormat,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    let status = match cli.command {
        Some(Command::Check(args)) => check::run(args),
        None => check::run(cli.check),
        Some(Command::Rule(args)) => rule::run(args.rule.as_deref(), args.all, args.output_format),
        Some(Command::Probe(args)) => probe::run(args),
        Some(Command::Server) => crate::server::run(),
        Some(Command::Clean(args)) => clean::run(&args.paths, args.quiet),
    };
    ExitCode::from(status)
}

/// Whether to color what goes to a stream.
pub fn use_color(choice: ColorChoice, stream_is_terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            stream_is_terminal
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var("TERM").map_or(true, |term| term != "dumb")
        }
    }
}

/// Prints an error and the further ones it carries, each as `error: ...`: a command-line
/// error as its message alone (it names the flag), a file's with the file and line.
pub fn print_errors(error: &crate::discovery::FileError) {
    for error in error.all() {
        if error.is_command_line() {
            print_error(&error.message);
        } else {
            let shown = crate::discovery::FileError {
                path: crate::discovery::display_path(&error.path),
                more: Vec::new(),
                ..error.clone()
            };
            print_error(&shown.to_string());
        }
    }
}

/// Prints an error to stderr as `error: ...`, red on a terminal.
pub fn print_error(message: &str) {
    let color = use_color(ColorChoice::Auto, std::io::stderr().is_terminal());
    if color {
        eprintln!("\x1b[1;31merror\x1b[0m: {message}");
    } else {
        eprintln!("error: {message}");
    }
}
