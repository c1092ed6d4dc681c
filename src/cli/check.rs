//! `torchlint check`: discover, lint in parallel, render, and choose the exit code.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashSet as HashSet;

use super::{CheckArgs, print_error, print_errors, use_color};
use crate::baseline::{self, Baseline};
use crate::cache::record::Records;
use crate::cache::{self, Cache};
use crate::checker::InternalError;
use crate::diagnostic::{Diagnostic, FileDiagnostics};
use crate::discovery::{self, FileError, LintTarget, display_path};
use crate::fix;
use crate::linter::IO_ERROR;
use crate::project::run::{self, Outcome};
use crate::render::{self, OutputFormat, Report};
use crate::rule_meta::RuleMeta;
use crate::settings::{OptionSource, Settings};
use crate::source::{self, SourceFile};

pub fn run(mut args: CheckArgs) -> u8 {
    if args.watch {
        return super::watch::run(args);
    }
    crate::checker::install_panic_hook();
    let resolver = match args.rules.resolver() {
        Ok(resolver) => Arc::new(resolver),
        Err(error) => {
            print_errors(&error);
            return 2;
        }
    };
    // Command-line selectors and `--config` pairs are checked once, up front, against the
    // current folder's rules (with the errors of its config file, if it has any too).
    if let Err(error) = resolver.for_folder(Path::new("."))
        && error.all().any(FileError::is_command_line)
    {
        print_errors(&error);
        return 2;
    }

    if args.statistics
        && !matches!(
            args.output_format,
            OutputFormat::Full | OutputFormat::Concise | OutputFormat::Json
        )
    {
        print_error(&format!(
            "`--statistics` prints a table, or JSON with `--output-format json`; `--output-format {}` has no place for it: drop one of the two",
            clap::ValueEnum::to_possible_value(&args.output_format)
                .map_or_else(String::new, |value| value.get_name().to_owned())
        ));
        return 2;
    }
    let dash = args.paths.iter().any(|path| path == Path::new("-"));
    if dash && args.paths.len() > 1 {
        print_error("`-` (stdin) cannot be combined with other paths");
        return 2;
    }
    // As Ruff: `--stdin-filename` means the file comes on stdin, `-` or not.
    let reads_stdin = dash || args.stdin_filename.is_some();
    if reads_stdin && !dash && !args.paths.is_empty() && !args.quiet {
        for path in &args.paths {
            eprintln!(
                "warning: ignoring {} in favour of stdin (`--stdin-filename` names what stdin holds)",
                crate::escape::path(path)
            );
        }
    }

    // The config's `fix = true` and `unsafe-fixes = true` (the current folder's, as the
    // selectors above), unless a flag says otherwise; `fix` only where the run would write
    // nothing else (not with `--diff`, `--add-noqa`, a baseline to write, or stdin).
    if args.fix_rounds == 0
        && let Ok(settings) = resolver.for_folder(Path::new("."))
    {
        let writes_otherwise = args.diff || args.add_noqa || args.write_baseline || args.fix_only;
        if settings.fix == Some(true) && !args.no_fix && !reads_stdin && !writes_otherwise {
            args.fix = true;
        }
        if settings.unsafe_fixes == Some(true) && !args.no_unsafe_fixes {
            args.unsafe_fixes = true;
        }
    }

    let mut errors: Vec<FileError> = Vec::new();
    // The paths that could not be linted (missing, unreadable, not text): also entries of the
    // machine-readable reports (TL003).
    let mut unlintable: Vec<FileError> = Vec::new();
    let mut outcomes = Vec::new();
    let mut settings_used: Vec<Arc<Settings>> = Vec::new();
    let mut cache: Option<Cache> = None;
    let mut linted_paths: Vec<PathBuf> = Vec::new();
    // stdin with `--fix`, `--fix-only` or `--diff`: its text as read, and as fixed.
    let mut stdin_fixed: Option<(Vec<u8>, Vec<u8>)> = None;

    if reads_stdin {
        let name = args
            .stdin_filename
            .clone()
            .unwrap_or_else(|| PathBuf::from("-"));
        let settings = match &args.stdin_filename {
            Some(path) => resolver.for_file(path),
            None => resolver.for_folder(Path::new(".")),
        };
        match settings {
            Ok(settings) => {
                let read = crate::files::read_source_stream(
                    &mut io::stdin().lock(),
                    crate::files::MAX_STDIN_BYTES,
                );
                let outcome = match read {
                    Ok(bytes) => {
                        if let Some(label) = source::unknown_coding_declaration(&bytes)
                            && !args.quiet
                        {
                            eprintln!(
                                "warning: {}: declares the unknown encoding `{label}`; linted as UTF-8, which its bytes are",
                                crate::escape::path(&name)
                            );
                        }
                        if (args.fix || args.fix_only || args.diff) && !args.parse_only {
                            let (outcome, fixed_text, fixed) = fix_stdin(
                                &name,
                                &bytes,
                                &settings,
                                fix::Allowed::with_unsafe(args.unsafe_fixes),
                            );
                            args.fixed = fixed;
                            stdin_fixed = Some((bytes, fixed_text));
                            outcome
                        } else {
                            run::lint_alone(&name, &bytes, &settings, args.parse_only)
                        }
                    }
                    Err(error) => Outcome::Failed(FileError::new(
                        &name,
                        format!("cannot read stdin: {error}"),
                    )),
                };
                outcomes.push(outcome);
                settings_used.push(settings);
            }
            Err(error) => errors.push(error),
        }
    } else {
        let paths = if args.paths.is_empty() {
            vec![PathBuf::from(".")]
        } else {
            args.paths.clone()
        };
        let named = if args.force_exclude {
            discovery::Named::Excluded
        } else {
            discovery::Named::Linted
        };
        let discovered = discovery::discover_with(&paths, &resolver, named);
        unlintable.extend(discovered.errors.iter().cloned());
        errors.extend(discovered.errors.into_iter().map(|mut error| {
            if args.paths.contains(&error.path) && looks_like_a_subcommand(&error.path) {
                error.message.push_str(SUBCOMMANDS_HINT);
            }
            error
        }));
        if args.show_settings {
            return show_settings(&discovered.targets, &errors, args.output_file.as_deref());
        }
        if args.show_files {
            return show_files(&discovered.targets, &errors, args.output_file.as_deref());
        }
        let location =
            (!args.no_cache && !args.parse_only).then(|| cache_location(&args, &resolver));
        // The cache folder is made first, so that it appearing is no change to the project; then
        // the clock starts: a file changed after this may have been read either way. (The
        // config of this folder was read just before, well within the record's margin.)
        let records = location.as_deref().and_then(|location| {
            cache::prepare(location).ok()?;
            Some(Records::new(location))
        });
        let started = std::time::SystemTime::now();
        let replayed = records
            .as_ref()
            .filter(|_| errors.is_empty())
            .and_then(|records| records.replay(&discovered.targets));
        if let Some(replayed) = replayed {
            if args.verbose {
                eprintln!(
                    "note: no file of the run changed since the last run: its results come from the cache (`--no-cache` lints afresh)"
                );
            }
            outcomes = replayed;
        } else if args.parse_only {
            outcomes = run::parse_targets(&discovered.targets);
        } else {
            cache = location.as_deref().map(Cache::open);
            // Named files are linted with the rest of their project as context: what its
            // other files import, pass and call decides findings here (its callers disable
            // grad). Folders named on the command line bring none: they are linted whole.
            let named_files: HashSet<PathBuf> = paths
                .iter()
                .filter(|path| path.is_file())
                .filter_map(|path| std::path::absolute(path).ok())
                .collect();
            let files: Vec<&LintTarget> = discovered
                .targets
                .iter()
                .filter(|target| {
                    std::path::absolute(&target.path).is_ok_and(|path| named_files.contains(&path))
                })
                .collect();
            let context = run::project_context(&files, &discovered.targets, &resolver);
            let all: Vec<LintTarget> = discovered
                .targets
                .iter()
                .chain(&context.targets)
                .cloned()
                .collect();
            if all.len() == 1 {
                // One file: linted on this thread. Starting a pool of workers to hand it to
                // cost more than linting a short file.
                let _ = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .use_current_thread()
                    .build_global();
            }
            let run = run::lint_project(
                &all,
                discovered.targets.len(),
                &run::Overrides::new(),
                cache.as_ref(),
            );
            if args.verbose {
                for note in &run.notes {
                    eprintln!("note: {note}");
                }
            }
            let mut warned = false;
            for checked in run.checked {
                if let Some(warning) = checked.warning {
                    warned = true;
                    if !args.quiet {
                        eprintln!("warning: {warning}");
                    }
                }
                outcomes.push(checked.outcome);
            }
            if let Some(records) = &records
                && !warned
                && errors.is_empty()
                && context.errors.is_empty()
            {
                records.record(
                    &discovered.targets,
                    &outcomes,
                    &context.targets,
                    context.walked,
                    started,
                );
            }
        }
        linted_paths = discovered
            .targets
            .iter()
            .map(|target| display_path(&target.path))
            .collect();
        for target in &discovered.targets {
            if !settings_used
                .iter()
                .any(|s| Arc::ptr_eq(s, &target.settings))
            {
                settings_used.push(Arc::clone(&target.settings));
            }
        }
    }

    let mut files = Vec::new();
    let mut internal: Vec<(PathBuf, InternalError)> = Vec::new();
    let mut parsed = 0;
    for outcome in outcomes {
        match outcome {
            Outcome::Linted {
                file,
                internal_errors,
            } => {
                internal.extend(
                    internal_errors
                        .into_iter()
                        .map(|error| (file.source.name().to_owned(), error)),
                );
                if !file.diagnostics.is_empty() {
                    files.push(file);
                }
            }
            Outcome::Clean => {}
            Outcome::Parsed => parsed += 1,
            Outcome::Failed(error) => {
                unlintable.push(error.clone());
                errors.push(error);
            }
        }
    }

    if args.parse_only {
        if !args.quiet {
            eprintln!("parsed {parsed} files");
        }
        return report_errors(&errors, &internal, 0);
    }
    if args.add_noqa && reads_stdin {
        print_error("`--add-noqa` changes files: name them instead of passing stdin");
        return 2;
    }
    // As Ruff: stdin's fixed text goes to stdout (`--diff`: the diff), the findings left to
    // stderr.
    let mut report_to_stderr = false;
    if let Some((read, fixed_text)) = &stdin_fixed {
        let name = args
            .stdin_filename
            .clone()
            .unwrap_or_else(|| PathBuf::from("-"));
        if args.diff {
            let would = args.fixed.total();
            let diff = fix::unified_diff(
                &crate::escape::path(&name).to_string(),
                &String::from_utf8_lossy(read),
                &String::from_utf8_lossy(fixed_text),
            );
            let _ = emit(diff.as_bytes(), None);
            if !args.quiet {
                eprintln!(
                    "Would fix {would} finding{}.",
                    if would == 1 { "" } else { "s" }
                );
            }
            return report_errors(&errors, &internal, u8::from(would > 0));
        }
        if let Err(error) = emit(fixed_text, None)
            && error.kind() != io::ErrorKind::BrokenPipe
        {
            print_error(&error.to_string());
            return 2;
        }
        report_to_stderr = args.output_file.is_none();
    }
    if args.add_noqa {
        let added = add_noqa(&files);
        for error in &added.errors {
            eprintln!(
                "warning: {}: {}",
                crate::escape::path(&error.path),
                error.message
            );
        }
        if !args.quiet {
            eprintln!(
                "Added {} noqa directive{}.",
                added.lines,
                if added.lines == 1 { "" } else { "s" }
            );
        }
        return report_errors(&errors, &internal, 0);
    }
    let allowed = fix::Allowed::with_unsafe(args.unsafe_fixes);
    if args.diff {
        let diffs = fix_files(&files, allowed, false);
        errors.extend(diffs.errors);
        let _ = emit(diffs.diff.as_bytes(), None);
        let would = diffs.fixed.total();
        if !args.quiet {
            eprintln!(
                "Would fix {would} finding{}.",
                if would == 1 { "" } else { "s" }
            );
        }
        return report_errors(&errors, &internal, u8::from(would > 0));
    }
    if (args.fix || args.fix_only) && !reads_stdin && args.fix_rounds < MAX_FIX_ROUNDS {
        let written = fix_files(&files, allowed, true);
        if written.fixed.total() > 0 {
            for error in &written.errors {
                eprintln!(
                    "warning: {}: {}",
                    crate::escape::path(&error.path),
                    error.message
                );
            }
            // Lint the fixed files again: what is left (and fixes that overlapped one just
            // applied) is the next round's, as in Ruff.
            return run(CheckArgs {
                fixed: args.fixed.clone().merged(written.fixed),
                fix_rounds: args.fix_rounds + 1,
                ..args
            });
        }
        errors.extend(written.errors);
    }

    if let Some(cache) = cache {
        let location = cache.location().to_owned();
        if let Err(error) = cache.save()
            && !args.quiet
        {
            eprintln!(
                "warning: cannot write the result cache in {}: {error} (pass `--no-cache` to skip it)",
                crate::escape::path(&location)
            );
        }
    }

    let baseline_path = args
        .baseline
        .clone()
        .unwrap_or_else(|| PathBuf::from(baseline::DEFAULT_PATH));
    if args.write_baseline {
        return write_baseline(
            &baseline_path,
            &files,
            &linted_paths,
            &errors,
            &internal,
            args.quiet,
        );
    }
    let mut applied = None;
    if let Some(path) = &args.baseline {
        match Baseline::read(path) {
            Ok(baseline) => applied = Some(baseline.apply(path, &mut files, &linted_paths)),
            Err(error) => {
                errors.push(error);
                return report_errors(&errors, &internal, 2);
            }
        }
    }

    let rules = enabled_rules(&settings_used);
    // A CI step that reads only the report sees the files it could not lint as failed, not
    // clean; the text formats have them on stderr (as every format does).
    if !matches!(
        args.output_format,
        OutputFormat::Full | OutputFormat::Concise
    ) {
        files.extend(unlintable_entries(&unlintable, &resolver));
        files.sort_by(|a, b| a.source.name().cmp(b.source.name()));
    }
    let report = Report {
        files: &files,
        rules: &rules,
        fixes: allowed,
    };
    let count = report.count();
    let mut rendered = Vec::new();
    let to_terminal = args.output_file.is_none() && io::stdout().is_terminal();
    let color = use_color(args.color, to_terminal);
    let written = if args.fix_only {
        // Ruff's `--fix-only`: what was fixed, never what is left.
        write_fix_only(&mut rendered, &args)
    } else if args.statistics {
        write_statistics(&report, args.output_format, &mut rendered)
    } else {
        render::render(args.output_format, &report, color, &mut rendered).and_then(|()| {
            let text_format = matches!(
                args.output_format,
                OutputFormat::Full | OutputFormat::Concise
            );
            if text_format && !args.quiet {
                let listed = if args.show_fixes {
                    args.fixed.write(&mut rendered)
                } else {
                    Ok(())
                };
                listed
                    .and_then(|()| {
                        write_summary(
                            &mut rendered,
                            count,
                            files.len(),
                            args.fixed.total(),
                            errors.is_empty() && internal.is_empty(),
                        )
                    })
                    .and_then(|()| write_fix_hint(&mut rendered, &files, args.unsafe_fixes))
            } else {
                Ok(())
            }
        })
    };
    if let Err(error) = written.and_then(|()| {
        if report_to_stderr {
            io::stderr().write_all(&rendered)
        } else {
            emit(&rendered, args.output_file.as_deref())
        }
    }) && error.kind() != io::ErrorKind::BrokenPipe
    {
        print_error(&error.to_string());
        return report_errors(&errors, &internal, 2);
    }
    if args.fix_only {
        return report_errors(&errors, &internal, 0);
    }

    if let Some(applied) = &applied
        && !args.quiet
    {
        report_baseline(applied, args.baseline.as_deref().unwrap_or(&baseline_path));
    }
    let findings_status = if count > 0 && !args.exit_zero { 1 } else { 0 };
    report_errors(&errors, &internal, findings_status)
}

/// TL003 (`io-error`) entries for the paths that could not be linted, where the settings of
/// the path enable it: at line 1, with the error as the message (Ruff's `E902`).
fn unlintable_entries(
    unlintable: &[FileError],
    resolver: &crate::settings::resolver::Resolver,
) -> Vec<FileDiagnostics> {
    unlintable
        .iter()
        .filter_map(|error| {
            let settings = resolver.for_file(&error.path).ok()?;
            if !settings.is_enabled(IO_ERROR) {
                return None;
            }
            let rule = settings.registry.get(IO_ERROR)?;
            let message = format!("{}: {}", rule.message, error.message);
            let source = SourceFile::new(display_path(&error.path), String::new());
            Some(FileDiagnostics {
                source: Arc::new(source),
                diagnostics: vec![Diagnostic::new(rule, message, 0..0)],
            })
        })
        .collect()
}

fn enabled_rules(settings: &[Arc<Settings>]) -> Vec<Arc<RuleMeta>> {
    let mut rules: BTreeMap<String, Arc<RuleMeta>> = BTreeMap::new();
    for settings in settings {
        for rule in settings.enabled_rules() {
            rules
                .entry(rule.code.clone())
                .or_insert_with(|| Arc::clone(rule));
        }
    }
    rules.into_values().collect()
}

/// `--fix-only`'s report: the `--show-fixes` list if asked, and how many findings were fixed.
fn write_fix_only(out: &mut Vec<u8>, args: &CheckArgs) -> io::Result<()> {
    if args.quiet {
        return Ok(());
    }
    if args.show_fixes {
        args.fixed.write(out)?;
    }
    let fixed = args.fixed.total();
    writeln!(
        out,
        "Fixed {fixed} {}.",
        if fixed == 1 { "finding" } else { "findings" }
    )
}

fn write_summary(
    out: &mut Vec<u8>,
    count: usize,
    files: usize,
    fixed: usize,
    clean_run: bool,
) -> io::Result<()> {
    let plural = |n: usize| if n == 1 { "finding" } else { "findings" };
    if count == 0 {
        if fixed > 0 {
            writeln!(
                out,
                "Found {fixed} {} ({fixed} fixed, 0 remaining).",
                plural(fixed)
            )?;
        } else if clean_run {
            writeln!(out, "All checks passed!")?;
        }
        return Ok(());
    }
    if fixed > 0 {
        return writeln!(
            out,
            "Found {} {} ({fixed} fixed, {count} remaining).",
            count + fixed,
            plural(count + fixed)
        );
    }
    writeln!(
        out,
        "Found {count} {} in {files} {}.",
        plural(count),
        if files == 1 { "file" } else { "files" }
    )
}

/// Ruff's hint under the summary: how many findings `--fix` (or `--unsafe-fixes`) would fix.
fn write_fix_hint(
    out: &mut Vec<u8>,
    files: &[FileDiagnostics],
    unsafe_fixes: bool,
) -> io::Result<()> {
    let fixes = files
        .iter()
        .flat_map(|file| &file.diagnostics)
        .filter_map(|diagnostic| diagnostic.fix.as_ref());
    let (safe, unsafe_) = fixes.fold((0, 0), |(safe, unsafe_), fix| match fix.applicability {
        crate::diagnostic::Applicability::Safe => (safe + 1, unsafe_),
        crate::diagnostic::Applicability::Unsafe => (safe, unsafe_ + 1),
        crate::diagnostic::Applicability::DisplayOnly => (safe, unsafe_),
    });
    let fixable = if unsafe_fixes { safe + unsafe_ } else { safe };
    let hidden = (unsafe_ > 0 && !unsafe_fixes).then(|| {
        format!(
            "{unsafe_} hidden fix{} can be enabled with the `--unsafe-fixes` option",
            if unsafe_ == 1 { "" } else { "es" }
        )
    });
    match (fixable, hidden) {
        (0, None) => Ok(()),
        (0, Some(hidden)) => writeln!(out, "No fixes available ({hidden})."),
        (fixable, None) => writeln!(out, "[*] {fixable} fixable with the `--fix` option."),
        (fixable, Some(hidden)) => writeln!(
            out,
            "[*] {fixable} fixable with the `--fix` option ({hidden})."
        ),
    }
}

/// What `--add-noqa` did: how many lines got a directive, and the files it left alone.
#[derive(Default)]
struct Added {
    lines: usize,
    errors: Vec<FileError>,
}

/// `--add-noqa`: each file's finding lines get `# noqa: CODE`, written atomically.
fn add_noqa(files: &[FileDiagnostics]) -> Added {
    let mut round = Added::default();
    for file in files {
        let path = file.source.name();
        if path.extension().is_some_and(|ext| ext == "ipynb") {
            continue; // A notebook's rows are its cells', not the file's.
        }
        let mut rows: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for diagnostic in &file.diagnostics {
            let row = file.source.location(diagnostic.range.start).row;
            let codes = rows.entry(row).or_default();
            if !codes.contains(&diagnostic.rule.code) {
                codes.push(diagnostic.rule.code.clone());
            }
        }
        let Some(bom) = bom_if_unchanged(file, "no noqa added", &mut round.errors) else {
            continue;
        };
        let Ok(tree) = crate::parse::parse(file.source.text(), None) else {
            continue;
        };
        let (text, added, skipped) = crate::suppression::add_noqa(&file.source, &tree, &rows);
        for row in skipped {
            round.errors.push(FileError::new(
                path,
                format!("line {row} ends inside a string or a continuation: no noqa added there"),
            ));
        }
        if added == 0 {
            continue;
        }
        match write_with_bom(path, bom, &text) {
            Ok(()) => round.lines += added,
            Err(error) => round
                .errors
                .push(FileError::new(path, format!("cannot add noqa: {error}"))),
        }
    }
    round
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The BOM of a linted file about to be rewritten, when its bytes on disk are still the linted
/// text (after that BOM); None when it cannot be read, or changed since it was linted (or is
/// not UTF-8): then `errors` says `not_done` and to run again.
fn bom_if_unchanged(
    file: &FileDiagnostics,
    not_done: &str,
    errors: &mut Vec<FileError>,
) -> Option<bool> {
    let bytes = std::fs::read(file.source.name()).ok()?;
    let (bom, body) = match bytes.strip_prefix(BOM) {
        Some(body) => (true, body),
        None => (false, &bytes[..]),
    };
    if body == file.source.text().as_bytes() {
        return Some(bom);
    }
    errors.push(FileError::new(
        file.source.name(),
        format!("{not_done}: it changed since it was linted, or is not UTF-8; run again"),
    ));
    None
}

/// Replaces a file atomically with `text`, after the BOM it had.
fn write_with_bom(path: &Path, bom: bool, text: &str) -> io::Result<()> {
    let mut out = Vec::with_capacity(text.len() + BOM.len());
    if bom {
        out.extend_from_slice(BOM);
    }
    out.extend_from_slice(text.as_bytes());
    write_fixed(path, &out)
}

/// Replaces a file atomically with `bytes`. A read-only file is left as it is: the rename would
/// replace it all the same, but its owner marked it not to be changed (a vendored or generated
/// module).
fn write_fixed(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|metadata| metadata.permissions().readonly()) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the file is read-only; make it writable to have it fixed",
        ));
    }
    crate::files::write_output(path, bytes)
}

/// The fixes a `--fix` run applied, by file and rule (`--show-fixes`), over all its rounds.
#[derive(Debug, Default, Clone)]
pub struct Fixed {
    by_file: BTreeMap<PathBuf, BTreeMap<(String, String), usize>>,
}

impl Fixed {
    pub fn total(&self) -> usize {
        self.by_file.values().flat_map(BTreeMap::values).sum()
    }

    fn add(&mut self, path: &Path, diagnostic: &Diagnostic) {
        *self
            .by_file
            .entry(path.to_owned())
            .or_default()
            .entry((diagnostic.rule.code.clone(), diagnostic.rule.name.clone()))
            .or_default() += 1;
    }

    fn merged(mut self, other: Fixed) -> Fixed {
        for (path, rules) in other.by_file {
            let into = self.by_file.entry(path).or_default();
            for (rule, count) in rules {
                *into.entry(rule).or_default() += count;
            }
        }
        self
    }

    /// Ruff's `--show-fixes` list: `Fixed N findings:`, then each file and `count × CODE
    /// (name)`.
    fn write(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let total = self.total();
        if total == 0 {
            return Ok(());
        }
        writeln!(
            out,
            "Fixed {total} {}:",
            if total == 1 { "finding" } else { "findings" }
        )?;
        for (path, rules) in &self.by_file {
            writeln!(out, "- {}:", crate::escape::path(path))?;
            for ((code, name), count) in rules {
                writeln!(out, "    {count} × {code} ({name})")?;
            }
        }
        writeln!(out)
    }
}

/// stdin with `--fix`, `--fix-only` or `--diff`: its text fixed in rounds, as files are (each
/// round lints the fixed text again). The last round's outcome, the fixed bytes (a BOM kept)
/// and what was fixed. A notebook is fixed in its cells.
fn fix_stdin(
    name: &Path,
    bytes: &[u8],
    settings: &Settings,
    allowed: fix::Allowed,
) -> (Outcome, Vec<u8>, Fixed) {
    let mut current = bytes.to_vec();
    let mut fixed = Fixed::default();
    let notebook = name.extension().is_some_and(|ext| ext == "ipynb");
    for _ in 0..MAX_FIX_ROUNDS {
        let outcome = run::lint_alone(name, &current, settings, false);
        let applied = match &outcome {
            Outcome::Linted { file, .. } if notebook => fix_cells(&current, file, allowed)
                .ok()
                .flatten()
                .map(|cells| {
                    for at in cells.fixed {
                        fixed.add(name, &file.diagnostics[at]);
                    }
                    cells.bytes
                }),
            Outcome::Linted { file, .. } => {
                fix::apply(file.source.text(), &file.diagnostics, allowed).map(|applied| {
                    for &at in &applied.fixed {
                        fixed.add(name, &file.diagnostics[at]);
                    }
                    let text = applied.text.into_bytes();
                    if current.starts_with(BOM) {
                        [BOM, &text].concat()
                    } else {
                        text
                    }
                })
            }
            _ => None,
        };
        let Some(bytes) = applied else {
            return (outcome, current, fixed);
        };
        current = bytes;
    }
    (
        run::lint_alone(name, &current, settings, false),
        current,
        fixed,
    )
}

/// Fixes never loop for ever: a fix that keeps producing fixable findings stops here (Ruff's
/// bound is 100 rounds; ours fix one finding kind each).
const MAX_FIX_ROUNDS: usize = 10;

/// What a round of fixes did: how many it applied, the diff (`--diff`), and the files it could
/// not fix.
#[derive(Default)]
struct FixRound {
    fixed: Fixed,
    diff: String,
    errors: Vec<FileError>,
}

/// Applies the allowed fixes of each file: written back atomically (`write`), or as a diff. A
/// file is fixed only when its bytes on disk are still the ones linted, as UTF-8 (a BOM is
/// kept).
fn fix_files(files: &[FileDiagnostics], allowed: fix::Allowed, write: bool) -> FixRound {
    let mut round = FixRound::default();
    for file in files {
        let path = file.source.name();
        if file.diagnostics.iter().all(|d| d.fix.is_none()) {
            continue;
        }
        if path.extension().is_some_and(|ext| ext == "ipynb") {
            fix_notebook(file, allowed, write, &mut round);
            continue;
        }
        let Some(bom) = bom_if_unchanged(file, "not fixed", &mut round.errors) else {
            continue;
        };
        let Some(applied) = fix::apply(file.source.text(), &file.diagnostics, allowed) else {
            continue;
        };
        if write {
            if let Err(error) = write_with_bom(path, bom, &applied.text) {
                round.errors.push(FileError::new(
                    path,
                    format!("cannot write the fixes: {error}"),
                ));
                continue;
            }
        } else {
            round.diff.push_str(&fix::unified_diff(
                &crate::escape::path(path).to_string(),
                file.source.text(),
                &applied.text,
            ));
        }
        for &at in &applied.fixed {
            round.fixed.add(path, &file.diagnostics[at]);
        }
    }
    round
}

/// A notebook's fixes, made in its cells (`notebook::CellSources`): the JSON rewritten where a
/// cell changed and kept byte for byte elsewhere, written atomically or shown as a diff of the
/// file.
fn fix_notebook(file: &FileDiagnostics, allowed: fix::Allowed, write: bool, round: &mut FixRound) {
    let path = file.source.name();
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let FixedCells {
        bytes: fixed,
        fixed: applied,
    } = match fix_cells(&bytes, file, allowed) {
        Ok(Some(fixed)) => fixed,
        Ok(None) => return,
        Err(message) => {
            round.errors.push(FileError::new(path, message));
            return;
        }
    };
    if write {
        if let Err(error) = write_fixed(path, &fixed) {
            round.errors.push(FileError::new(
                path,
                format!("cannot write the fixes: {error}"),
            ));
            return;
        }
    } else {
        round.diff.push_str(&fix::unified_diff(
            &crate::escape::path(path).to_string(),
            &String::from_utf8_lossy(&bytes),
            &String::from_utf8_lossy(&fixed),
        ));
    }
    for at in applied {
        round.fixed.add(path, &file.diagnostics[at]);
    }
}

/// A notebook with fixes made in its cells: its new bytes, and which findings were fixed.
struct FixedCells {
    bytes: Vec<u8>,
    fixed: Vec<usize>,
}

/// The bytes of a notebook with the allowed fixes of its findings made in its cells; `None`
/// when no fix applies. A fix on a line the linter read otherwise than it is written (IPython
/// syntax it replaced) is left. An error when the bytes are not the notebook linted.
fn fix_cells(
    bytes: &[u8],
    file: &FileDiagnostics,
    allowed: fix::Allowed,
) -> Result<Option<FixedCells>, &'static str> {
    let cells = crate::notebook::CellSources::read(bytes)
        .filter(|cells| cells.text() == file.source.text())
        .ok_or("not fixed: it changed since it was linted, or its JSON repeats a key; run again")?;
    let mut diagnostics = file.diagnostics.clone();
    for diagnostic in &mut diagnostics {
        if diagnostic
            .fix
            .as_ref()
            .is_some_and(|fix| !fix.edits.iter().all(|edit| cells.maps(edit.range.clone())))
        {
            diagnostic.fix = None;
        }
    }
    let Some(applied) = fix::apply(file.source.text(), &diagnostics, allowed) else {
        return Ok(None);
    };
    let edits = applied
        .fixed
        .iter()
        .filter_map(|&at| diagnostics[at].fix.as_ref())
        .flat_map(|fix| &fix.edits)
        .map(|edit| (edit.range.clone(), edit.content.as_str()));
    Ok(Some(FixedCells {
        bytes: cells.apply(edits),
        fixed: applied.fixed,
    }))
}

fn write_statistics(
    report: &Report<'_>,
    format: OutputFormat,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let mut counts: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for (_, diagnostic) in report.diagnostics() {
        counts
            .entry(diagnostic.code())
            .or_insert((0, &diagnostic.rule.name))
            .0 += 1;
    }
    let mut rows: Vec<(&str, usize, &str)> = counts
        .into_iter()
        .map(|(code, (count, name))| (code, count, name))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if format == OutputFormat::Json {
        let json: Vec<serde_json::Value> = rows
            .iter()
            .map(|(code, count, name)| serde_json::json!({"code": code, "name": name, "count": count}))
            .collect();
        serde_json::to_writer_pretty(&mut *out, &json)?;
        return writeln!(out);
    }
    let width = rows
        .iter()
        .map(|row| row.1.to_string().len())
        .max()
        .unwrap_or(1);
    for (code, count, name) in rows {
        writeln!(out, "{count:>width$}\t{code}\t{name}")?;
    }
    Ok(())
}

/// Writes the output to stdout, or to a file; an error names where it could not be written.
pub(super) fn emit(bytes: &[u8], file: Option<&Path>) -> io::Result<()> {
    match file {
        None => crate::files::write_stdout(bytes).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot write the report to stdout: {error}"),
            )
        }),
        Some(path) => crate::files::write_output(path, bytes).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "{}: cannot write the findings: {error}",
                    crate::escape::path(path)
                ),
            )
        }),
    }
}

fn report_errors(errors: &[FileError], internal: &[(PathBuf, InternalError)], status: u8) -> u8 {
    for error in errors.iter().flat_map(FileError::all) {
        let shown = FileError {
            path: display_path(&error.path),
            more: Vec::new(),
            ..error.clone()
        };
        print_error(&shown.to_string());
    }
    for (path, error) in internal {
        print_error(&format!(
            "internal error in {} ({}) while linting {}: {}. This is a torchlint bug: the rule was skipped for this file and the other rules' findings are reported. Please report it with the file, or silence it with `--ignore {}`.",
            error.rule.code,
            error.rule.name,
            crate::escape::path(path),
            error.message,
            error.rule.code
        ));
    }
    if errors.is_empty() && internal.is_empty() {
        status
    } else {
        2
    }
}

/// What a missing path that may have been meant as a subcommand (`torchlint clena`) adds.
const SUBCOMMANDS_HINT: &str =
    "; if a subcommand was meant, they are: check, rule, probe, server, clean (`torchlint --help`)";

/// A missing path that is a bare word: no folder, no extension.
fn looks_like_a_subcommand(path: &Path) -> bool {
    let text = path.to_string_lossy();
    !path.exists()
        && !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `--show-settings`: the effective settings of the first file found, as Ruff's flag shows
/// them, in words.
fn show_settings(targets: &[LintTarget], errors: &[FileError], output: Option<&Path>) -> u8 {
    let Some(target) = targets.first() else {
        print_error("no file to show the settings of: the paths given hold no Python file");
        return report_errors(errors, &[], 2);
    };
    let settings = &target.settings;
    let mut out = String::new();
    let path = crate::escape::path(&display_path(&target.path));
    out.push_str(&format!("Settings for {path}\n"));
    out.push_str(&format!(
        "  config file: {}\n",
        settings
            .config_path
            .as_deref()
            .map_or_else(|| "none (the defaults)".to_owned(), crate::escape::path)
    ));
    if !settings.inline_overrides.is_empty() {
        out.push_str("  over it, from the command line:\n");
        for pair in &settings.inline_overrides {
            out.push_str(&format!(
                "    --config '{}'\n",
                crate::escape::control_characters(pair)
            ));
        }
    }
    out.push_str(&format!(
        "  project root: {}\n",
        crate::escape::path(&settings.project_root)
    ));
    let rules = settings.enabled_rules();
    out.push_str(&format!("  enabled rules ({}):\n", rules.len()));
    for rule in rules {
        let off = if settings.is_ignored_for_file(&target.path, rule) {
            " (off in this file: per-file-ignores)"
        } else {
            ""
        };
        out.push_str(&format!("    {} {}{off}\n", rule.code, rule.name));
    }
    let excludes: Vec<&str> = settings.exclude_patterns().collect();
    out.push_str(&format!("  exclude: {}\n", excludes.join(", ")));
    out.push_str("  per-file-ignores:");
    let mut any = false;
    for (pattern, selectors) in settings.per_file_ignore_patterns() {
        any = true;
        let quoted: Vec<String> = selectors.iter().map(|s| format!("\"{s}\"")).collect();
        out.push_str(&format!("\n    \"{pattern}\" = [{}]", quoted.join(", ")));
    }
    out.push_str(if any { "\n" } else { " none\n" });
    out.push_str("  rule options:\n");
    for rule in rules {
        for option in &rule.options {
            let value = settings
                .rule_option(rule, &option.name)
                .map_or_else(String::new, |value| value.to_string());
            let origin = match settings.rule_option_source(rule, &option.name) {
                OptionSource::Default => " (default)",
                OptionSource::ConfigFile => "",
                OptionSource::CommandLine => " (--config)",
            };
            out.push_str(&format!(
                "    {} {}.{} = {value}{origin}\n",
                rule.code, rule.name, option.name
            ));
        }
    }
    out.push_str(&format!(
        "  context files over {} bytes are not read\n",
        settings.context_size_limit
    ));
    if let Err(error) = emit(out.as_bytes(), output)
        && error.kind() != io::ErrorKind::BrokenPipe
    {
        print_error(&error.to_string());
        return 2;
    }
    report_errors(errors, &[], 0)
}

/// `--show-files`: the files a run would lint, one per line, sorted.
fn show_files(targets: &[LintTarget], errors: &[FileError], output: Option<&Path>) -> u8 {
    let mut listing = Vec::new();
    for target in targets {
        listing.extend_from_slice(crate::escape::path(&display_path(&target.path)).as_bytes());
        listing.push(b'\n');
    }
    if let Err(error) = emit(&listing, output)
        && error.kind() != io::ErrorKind::BrokenPipe
    {
        print_error(&error.to_string());
        return 2;
    }
    report_errors(errors, &[], 0)
}

fn cache_location(args: &CheckArgs, resolver: &crate::settings::resolver::Resolver) -> PathBuf {
    if let Some(folder) = &args.cache_dir {
        return folder.clone();
    }
    let root = resolver
        .for_folder(Path::new("."))
        .map(|settings| settings.project_root.clone())
        .unwrap_or_else(|_| PathBuf::from("."));
    root.join(cache::FOLDER)
}

fn write_baseline(
    path: &Path,
    files: &[FileDiagnostics],
    linted: &[PathBuf],
    errors: &[FileError],
    internal: &[(PathBuf, InternalError)],
    quiet: bool,
) -> u8 {
    // Entries of files this run did not lint are kept; a broken existing baseline is replaced.
    let previous = if path.exists() {
        Baseline::read(path).unwrap_or_default()
    } else {
        Baseline::default()
    };
    let baseline = previous.record(path, files, linted);
    if let Err(error) = crate::files::write_output(path, &baseline.to_json()) {
        print_error(&format!(
            "{}: cannot write the baseline: {error}",
            crate::escape::path(path)
        ));
        return 2;
    }
    if !quiet {
        let count = baseline.len();
        eprintln!(
            "Wrote {count} {} to {}.",
            if count == 1 { "finding" } else { "findings" },
            crate::escape::path(path)
        );
    }
    report_errors(errors, internal, 0)
}

fn report_baseline(applied: &baseline::Applied, path: &Path) {
    if applied.known > 0 {
        eprintln!(
            "{} {} in the baseline not shown ({}).",
            applied.known,
            if applied.known == 1 {
                "finding"
            } else {
                "findings"
            },
            crate::escape::path(path)
        );
    }
    if applied.fixed.is_empty() {
        return;
    }
    eprintln!(
        "{} baseline {} no longer found (fixed); `--write-baseline` drops them:",
        applied.fixed.len(),
        if applied.fixed.len() == 1 {
            "entry is"
        } else {
            "entries are"
        }
    );
    for entry in &applied.fixed {
        eprintln!("  {}: {} `{}`", entry.file, entry.code, entry.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file replaced between its lint and the write of its fixes (an editor saving, a
    /// checkout): the fixes, made for the old text, are not written over the new one; the
    /// file is named with what to do. A notebook likewise.
    #[test]
    fn a_file_replaced_after_it_was_linted_is_not_overwritten_with_its_fixes() {
        let folder = tempfile::tempdir().unwrap();
        let settings =
            Settings::defaults(folder.path(), &crate::settings::CliOverrides::default()).unwrap();
        let linted = "import torch\nstate = torch.load(\"a.pt\")\n";
        let notebook = format!(
            "{{\"cells\": [{{\"cell_type\": \"code\", \"metadata\": {{}}, \"outputs\": [], \"source\": {}}}], \"metadata\": {{}}}}",
            serde_json::to_string(linted).unwrap()
        );
        for (name, before, after) in [
            (
                "train.py",
                linted.to_owned(),
                linted.replace("a.pt", "b.pt"),
            ),
            (
                "train.ipynb",
                notebook.clone(),
                notebook.replace("a.pt", "b.pt"),
            ),
        ] {
            let path = folder.path().join(name);
            let Outcome::Linted { file, .. } =
                run::lint_alone(&path, before.as_bytes(), &settings, false)
            else {
                panic!("{name}: TL108 expected");
            };
            assert!(file.diagnostics.iter().any(|d| d.fix.is_some()), "{name}");
            std::fs::write(&path, &after).unwrap();
            let round = fix_files(&[file], fix::Allowed::SafeAndUnsafe, true);
            assert_eq!(round.fixed.total(), 0, "{name}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{name}");
            let [error] = round.errors.as_slice() else {
                panic!("{name}: one error expected, got {:?}", round.errors.len());
            };
            assert_eq!(error.path, path);
            assert!(
                error.message.contains("changed since it was linted")
                    && error.message.contains("run again"),
                "{name}: {}",
                error.message
            );
            // Put back as it was linted, the same fixes are written.
            std::fs::write(&path, &before).unwrap();
            let Outcome::Linted { file, .. } =
                run::lint_alone(&path, before.as_bytes(), &settings, false)
            else {
                panic!("{name}: TL108 expected");
            };
            let round = fix_files(&[file], fix::Allowed::SafeAndUnsafe, true);
            assert_eq!(round.fixed.total(), 1, "{name}");
            assert!(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .contains("map_location"),
                "{name}"
            );
        }
    }
}
