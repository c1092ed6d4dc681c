//! The probe's terminal and JSON output. `full` shows each watched finding as `check` does,
//! with the verdict and its evidence as notes, then the run's numbers and a verdict table.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

use codespan_reporting::diagnostic::{Diagnostic as Rendered, Label, Severity};

use super::Probed;
use super::attribution::{Attributed, Growing, Held};
use super::budget::Split;
use super::ranks::RankRun;
use super::report::{DeviceInfo, FindingRef, PostMortem, ProbeReport};
use super::verdict::{Status, Verdict, fmt_bytes, fmt_signed_bytes};
use crate::diagnostic::FileDiagnostics;
use crate::render::full;
use crate::source::SourceFile;

pub fn render_full(probed: &Probed, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let report = &probed.report;
    let files = [FileDiagnostics {
        source: Arc::clone(&probed.source),
        diagnostics: Vec::new(),
    }];
    let rendered: Vec<_> = probed
        .diagnostics
        .iter()
        .zip(&report.findings)
        .map(|(diagnostic, watched)| {
            with_verdict(
                full::to_codespan(0, diagnostic),
                &diagnostic.message,
                &watched.verdict,
            )
        })
        .collect();
    full::emit(&files, &rendered, color, out)?;
    write_run(report, out)?;
    write_table(report, out)
}

/// [`render_full`] for a report read back from JSON (`probe merge`), which has no linted
/// script: each finding is shown on its line as the report names it, from the script when it is
/// at hand and still has that line, else from the line the report quotes.
pub fn render_full_report(
    report: &ProbeReport,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let source = Arc::new(quoted_source(report));
    let files = [FileDiagnostics {
        source: Arc::clone(&source),
        diagnostics: Vec::new(),
    }];
    let rendered: Vec<_> = report
        .findings
        .iter()
        .map(|watched| {
            let finding = &watched.finding;
            let range = flagged_range(&source, finding).unwrap_or(0..0);
            let mut notes = Vec::new();
            if let Some(help) = &finding.fix {
                notes.push(format!("help: {help}"));
            }
            notes.push(format!("docs: `torchlint rule {}`", finding.code));
            let base = Rendered::new(Severity::Note)
                .with_code(finding.code.clone())
                .with_labels(vec![
                    Label::primary(0, range).with_message(finding.name.clone()),
                ])
                .with_notes(notes);
            with_verdict(base, &finding.message, &watched.verdict)
        })
        .collect();
    full::emit(&files, &rendered, color, out)?;
    write_run(report, out)?;
    write_table(report, out)
}

/// The script the report's findings point into: the file itself when every flagged line is
/// still there as the report quotes it, else a stand-in holding only those lines.
fn quoted_source(report: &ProbeReport) -> SourceFile {
    let name = PathBuf::from(&report.script);
    let on_disk = std::fs::read(&name)
        .ok()
        .and_then(|bytes| crate::source::decode(&bytes).ok())
        .map(|text| SourceFile::new(name.clone(), text));
    if let Some(file) = on_disk
        && (report.findings.iter()).all(|watched| flagged_range(&file, &watched.finding).is_some())
    {
        return file;
    }
    let last = (report.findings.iter())
        .map(|watched| watched.finding.line)
        .max()
        .unwrap_or(0);
    let mut lines = vec![String::new(); last];
    for watched in &report.findings {
        let finding = &watched.finding;
        if let Some(slot) = finding.line.checked_sub(1).and_then(|at| lines.get_mut(at))
            && slot.is_empty()
        {
            // Indented so that the finding's column is where the quoted line starts.
            *slot = format!(
                "{}{}",
                " ".repeat(finding.column.saturating_sub(1)),
                finding.source
            );
        }
    }
    SourceFile::new(name, lines.join("\n") + "\n")
}

/// Where `finding` is in `source`: from its column to the end of its line, when that line reads
/// as the report quotes it.
fn flagged_range(source: &SourceFile, finding: &FindingRef) -> Option<std::ops::Range<usize>> {
    let line = finding.line.checked_sub(1)?;
    if line >= source.line_starts().len() {
        return None;
    }
    let range = source.line_range(line);
    let text = &source.text()[range.clone()];
    if text.trim() != finding.source {
        return None;
    }
    let column = finding.column.saturating_sub(1);
    let start = (text.char_indices().map(|(at, _)| at))
        .chain(std::iter::once(text.len()))
        .nth(column)?;
    let end = text.trim_end().len().max(start);
    Some(range.start + start..range.start + end)
}

/// A finding as `check` shows it, headed by the probe's verdict, with the verdict's evidence
/// before the lint's own help.
fn with_verdict(
    mut rendered: Rendered<usize>,
    message: &str,
    verdict: &Verdict,
) -> Rendered<usize> {
    // The header says what the probe found; the lint's own severity is in `check`.
    rendered.severity = match verdict.status {
        Status::Confirmed => Severity::Error,
        Status::Likely => Severity::Warning,
        Status::NotReproduced | Status::NotReached => Severity::Note,
    };
    rendered.message = format!("{}: {message}", status_word(verdict.status));
    let mut notes = vec![format!("probe: {}", verdict.summary)];
    notes.extend(
        verdict
            .evidence
            .iter()
            .map(|line| format!("evidence: {line}")),
    );
    if let Some(projection) = &verdict.projection {
        notes.push(format!("projection: {projection}"));
    }
    // Keep the lint's help and docs pointers after the evidence.
    notes.append(&mut rendered.notes);
    rendered.notes = notes;
    rendered
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Confirmed => "confirmed",
        Status::Likely => "likely",
        Status::NotReproduced => "not reproduced",
        Status::NotReached => "not reached",
    }
}

/// The cap on the script's allocator, and whose it is: `--max-memory`'s, or the script's own
/// `set_per_process_memory_fraction`.
pub fn memory_cap(report: &ProbeReport) -> Option<String> {
    match (report.summary.allowed, report.max_memory) {
        (Some(allowed), Some(asked)) if allowed.abs_diff(asked) <= asked / 100 => Some(format!(
            "{} for the script's allocator (--max-memory)",
            fmt_bytes(allowed as f64)
        )),
        (Some(allowed), _) => Some(format!(
            "{} for the script's allocator (set_per_process_memory_fraction in the script)",
            fmt_bytes(allowed as f64)
        )),
        (None, Some(asked)) => Some(format!(
            "{} asked (--max-memory), not in effect: the script never initialised CUDA, or the cap could not be set",
            fmt_bytes(asked as f64)
        )),
        (None, None) => None,
    }
}

fn write_run(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "probe of {}", report.script)?;
    match (&report.device, &report.cpu_mode_reason) {
        (Some(device), _) => {
            writeln!(
                out,
                "  device: GPU {} {} ({})",
                device.index,
                device.name,
                device_figures(device)
            )?;
            writeln!(out, "  device memory from: {}", device.source.describe())?;
        }
        (None, Some(reason)) => writeln!(out, "  device: none, CPU mode ({reason})")?,
        (None, None) => writeln!(out, "  device: none, CPU mode")?,
    }
    if let Some(peak) = device_peak_shares(report) {
        writeln!(out, "  device at its peak: {peak}")?;
    }
    if let Some(cap) = memory_cap(report) {
        writeln!(out, "  memory cap: {cap}")?;
    }
    writeln!(out, "  probe's own footprint: {}", footprint(report))?;
    if let (Some(python), Some(mechanism)) = (&report.python, &report.mechanism) {
        writeln!(out, "  python: {python}, lines watched with {mechanism}")?;
    }
    writeln!(
        out,
        "  run: {} after {:.1} s",
        report.stop.describe(),
        report.duration
    )?;
    if !report.ranks.is_empty() {
        writeln!(out, "  ranks: {}", ranks_line(report))?;
    }
    if let Some(exit) = &report.exit {
        match report.failed_rank {
            Some(rank) => writeln!(
                out,
                "  script: rank {rank} failed first, with status {}",
                exit.status
            )?,
            None => writeln!(out, "  script: exited with status {}", exit.status)?,
        }
        if let Some(traceback) = &exit.traceback {
            for line in traceback.lines() {
                writeln!(out, "    {line}")?;
            }
        }
    }
    if let Some(post_mortem) = &report.out_of_memory {
        for (at, line) in post_mortem_lines(post_mortem).iter().enumerate() {
            let indent = if at == 0 { "  " } else { "    " };
            writeln!(out, "{indent}{line}")?;
        }
        if let Some(split) = &post_mortem.budget {
            write_budget(out, split, "    ", "")?;
        }
        if !post_mortem.held_by.is_empty() {
            writeln!(out, "    held at the error, by the line that allocated it:")?;
            for line in held_lines(&post_mortem.held_by) {
                writeln!(out, "      {line}")?;
            }
        }
    }
    for note in &report.summary.notes {
        writeln!(out, "  {note}")?;
    }
    if report.summary.suggest_expandable_segments {
        writeln!(
            out,
            "  help: the cache holds memory it cannot reuse; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        )?;
    }
    for error in &report.runner_errors {
        writeln!(out, "  warning: {error}")?;
    }
    Ok(())
}

fn write_table(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    if report.findings.is_empty() {
        writeln!(
            out,
            "\nNo finding to watch (none in this script has a runtime signature): the script ran for the run's numbers above."
        )?;
    } else {
        writeln!(out)?;
        writeln!(
            out,
            "{:<15} {:>5}  {:<6} {:>5}  summary",
            "verdict", "line", "rule", "hits"
        )?;
        for watched in &report.findings {
            writeln!(
                out,
                "{:<15} {:>5}  {:<6} {:>5}  {}",
                status_word(watched.verdict.status),
                watched.finding.line,
                watched.finding.code,
                watched.verdict.hits,
                watched.verdict.summary
            )?;
        }
    }
    for finding in &report.unwatched {
        writeln!(
            out,
            "not watched     {:>5}  {:<6}        no runtime signature",
            finding.line, finding.code
        )?;
    }
    write_memory(report, out)?;
    let confirmed = report
        .findings
        .iter()
        .filter(|f| f.verdict.status == Status::Confirmed)
        .count();
    let likely = report
        .findings
        .iter()
        .filter(|f| f.verdict.status == Status::Likely)
        .count();
    let likely = if likely > 0 {
        format!(", {likely} likely (shape seen, growth not measured)")
    } else {
        String::new()
    };
    writeln!(
        out,
        "\n{confirmed} of {} watched finding{} confirmed{likely}.",
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" }
    )
}

/// One run's memory as the report shows it: its split at the peak and the lines holding it,
/// each heading after `prefix` (`rank 1: ` in a job of several ranks).
pub(super) struct Memory<'r> {
    pub prefix: String,
    pub split: Option<&'r Split>,
    pub attribution: Option<&'r Attributed>,
}

/// The memory the report shows: the run's own, or in a job of several ranks each rank's (the
/// report's own are the lowest rank's).
pub(super) fn memory_sections(report: &ProbeReport) -> Vec<Memory<'_>> {
    if report.ranks.len() > 1 {
        return (report.ranks.iter())
            .map(|rank| Memory {
                prefix: format!("rank {}: ", rank.rank),
                split: rank.budget.as_ref(),
                attribution: rank.attribution.as_ref(),
            })
            .collect();
    }
    vec![Memory {
        prefix: String::new(),
        split: report.budget.as_ref(),
        attribution: report.attribution.as_ref(),
    }]
}

/// Under the verdicts: how the memory split at the run's peak, and the lines holding it.
fn write_memory(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    for memory in memory_sections(report) {
        write_split_and_lines(out, &memory)?;
    }
    Ok(())
}

fn write_split_and_lines(out: &mut dyn Write, memory: &Memory) -> io::Result<()> {
    let Memory {
        prefix,
        split,
        attribution,
    } = memory;
    if split.is_none() && attribution.is_none() {
        return Ok(());
    }
    writeln!(out)?;
    if let Some(split) = split {
        write_budget(out, split, "", prefix)?;
    }
    if let Some(attributed) = attribution {
        writeln!(
            out,
            "{prefix}held at the peak, by the line that allocated it ({} snapshot{}):",
            attributed.snapshots,
            if attributed.snapshots == 1 { "" } else { "s" }
        )?;
        for line in held_lines(&attributed.at_peak) {
            writeln!(out, "  {line}")?;
        }
        if !attributed.growing.is_empty() {
            writeln!(out, "{prefix}growing from snapshot to snapshot:")?;
            for line in growing_lines(&attributed.growing) {
                writeln!(out, "  {line}")?;
            }
        }
    }
    Ok(())
}

pub fn render_json(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
    writeln!(out)
}

/// Total memory and what was in use before the script started.
pub(super) fn device_figures(device: &DeviceInfo) -> String {
    let before = match device.used_before {
        Some(used) => format!("{} in use before the script", fmt_bytes(used as f64)),
        None => "in use before the script: not read".to_owned(),
    };
    format!("{} total, {before}", fmt_bytes(device.total as f64))
}

/// The device's used memory at its peak, and the script's processes' share of it.
pub(super) fn device_peak_shares(report: &ProbeReport) -> Option<String> {
    let peak = report
        .device_samples
        .iter()
        .max_by_key(|sample| sample.used)?;
    // None of the script's processes among NVML's: in another PID namespace (a container)
    // they cannot be told apart, and "0 B by the script" would be wrong.
    let script = peak.script.filter(|bytes| *bytes > 0)?;
    Some(format!(
        "{} in use, {} of it by the script's processes, {} by other processes and the driver",
        fmt_bytes(peak.used as f64),
        fmt_bytes(script as f64),
        fmt_bytes(peak.used.saturating_sub(script) as f64)
    ))
}

/// What the probe itself took: device memory (none: it keeps no CUDA context) and host memory.
pub(super) fn footprint(report: &ProbeReport) -> String {
    let device = match (&report.device, report.footprint.device) {
        (None, _) => None,
        (Some(_), Some(0)) => Some("0 B on the device (no CUDA context)".to_owned()),
        (Some(_), Some(bytes)) => Some(format!("{} on the device", fmt_bytes(bytes as f64))),
        (Some(_), None) => Some("none on the device (no CUDA context; not measured)".to_owned()),
    };
    let host = report
        .footprint
        .host_peak_rss
        .map(|rss| format!("{} peak RSS on the host", fmt_bytes(rss as f64)));
    let parts: Vec<String> = device.into_iter().chain(host).collect();
    if parts.is_empty() {
        "not measured".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The out-of-memory post-mortem: where it asked and how much, the memory at that moment, and
/// the findings on its stack.
pub(super) fn post_mortem_lines(post_mortem: &PostMortem) -> Vec<String> {
    let error = &post_mortem.error;
    let place = match error.stack.first() {
        Some(frame) => format!(
            "{}:{}",
            std::path::Path::new(&frame.file)
                .file_name()
                .map_or(frame.file.as_str(), |name| name
                    .to_str()
                    .unwrap_or_default()),
            frame.line
        ),
        None => "a line outside the script".to_owned(),
    };
    let asked = match error.requested {
        Some(bytes) => format!("{place} asked for {}", fmt_bytes(bytes as f64)),
        None => format!("at {place}"),
    };
    let mut then = Vec::new();
    if let Some(allocated) = error.allocated {
        then.push(format!("{} allocated", fmt_bytes(allocated as f64)));
    }
    if let Some(reserved) = error.reserved {
        let cached = reserved.saturating_sub(error.allocated.unwrap_or(reserved));
        then.push(format!(
            "{} reserved ({} of it cached but free)",
            fmt_bytes(reserved as f64),
            fmt_bytes(cached as f64)
        ));
    }
    if let Some(allowed) = error.allowed {
        then.push(format!(
            "the process capped at {} (set_per_process_memory_fraction)",
            fmt_bytes(allowed as f64)
        ));
    }
    if let (Some(free), Some(total)) = (error.device_free, error.device_total) {
        then.push(format!(
            "{} of {} free on the device",
            fmt_bytes(free as f64),
            fmt_bytes(total as f64)
        ));
    }
    let mut lines = vec![if then.is_empty() {
        format!("out of memory: {asked}")
    } else {
        format!("out of memory: {asked}; then {}", then.join(", "))
    }];
    if !post_mortem.findings_on_stack.is_empty() {
        lines.push(format!(
            "findings on its stack: {}",
            post_mortem.findings_on_stack.join(", ")
        ));
    }
    if let Some(verdict) = &post_mortem.fragmentation {
        lines.push(verdict.clone());
    }
    lines
}

/// One row per line holding memory: where, bytes, share, the findings there.
pub(super) fn held_lines(held: &[Held]) -> Vec<String> {
    let width = held.iter().map(|h| h.place.len()).max().unwrap_or(0);
    held.iter()
        .map(|h| {
            format!(
                "{:<width$}  {:>10}  {:>4.0}%  {}",
                h.place,
                fmt_bytes(h.bytes as f64),
                100.0 * h.share,
                h.findings.join(", ")
            )
            .trim_end()
            .to_owned()
        })
        .collect()
}

/// One row per growing line; one without a finding says so.
pub(super) fn growing_lines(growing: &[Growing]) -> Vec<String> {
    let width = growing.iter().map(|g| g.place.len()).max().unwrap_or(0);
    growing
        .iter()
        .map(|g| {
            let findings = if g.findings.is_empty() {
                "unflagged growth".to_owned()
            } else {
                g.findings.join(", ")
            };
            let rate = g
                .per_step
                .map(|bytes| format!("{} per step, ", fmt_signed_bytes(bytes)))
                .unwrap_or_default();
            format!(
                "{:<width$}  {rate}{} → {}, rising in {} of {} snapshots  {findings}",
                g.place,
                fmt_bytes(g.first as f64),
                fmt_bytes(g.last as f64),
                g.rising,
                g.snapshots - 1
            )
        })
        .collect()
}

/// A budget table under a heading at `indent` (after `heading`: `rank 1: `), its rows two
/// spaces further in.
fn write_budget(out: &mut dyn Write, split: &Split, indent: &str, heading: &str) -> io::Result<()> {
    for (at, line) in split.lines().iter().enumerate() {
        if at == 0 {
            writeln!(out, "{indent}{heading}{line}")?;
        } else {
            writeln!(out, "{indent}  {line}")?;
        }
    }
    Ok(())
}

/// How one rank of a distributed job ended, and what it held: `exited 1` and `RuntimeError:
/// ...`, `on cuda:1`, `peak 335 MiB allocated on the device`, `peak 1.0 GiB host RSS`,
/// `also 1.1 GiB on cuda:0`.
pub(super) fn rank_entry(rank: &RankRun) -> (String, Vec<String>) {
    let ended = match rank.status {
        Some(status) => format!("exited {status}"),
        None => "ended by the probe".to_owned(),
    };
    let details = [
        rank.error.clone(),
        rank.device.map(|device| format!("on cuda:{device}")),
        rank.peak_allocated
            .map(|bytes| format!("peak {} allocated on the device", fmt_bytes(bytes as f64))),
        rank.peak_rss
            .map(|bytes| format!("peak {} host RSS", fmt_bytes(bytes as f64))),
    ]
    .into_iter()
    .flatten()
    // Memory this rank's process put on another rank's GPU (a context, a `torch.load`
    // without `map_location`): what that GPU's rank does not have.
    .chain(rank.held_elsewhere().map(|held| {
        format!(
            "also {} on cuda:{}",
            fmt_bytes(held.bytes as f64),
            held.device
        )
    }))
    .collect();
    (ended, details)
}

/// A distributed job's ranks and how each ended: `0 exited 0 (peak 650 MiB host RSS); 1 exited
/// 1 (RuntimeError: ...)`.
fn ranks_line(report: &ProbeReport) -> String {
    let ranks: Vec<String> = report
        .ranks
        .iter()
        .map(|rank| {
            let (ended, details) = rank_entry(rank);
            if details.is_empty() {
                format!("{} {ended}", rank.rank)
            } else {
                format!("{} {ended} ({})", rank.rank, details.join(", "))
            }
        })
        .collect();
    format!(
        "{} through torch.distributed.run: {}",
        report.ranks.len(),
        ranks.join("; ")
    )
}
