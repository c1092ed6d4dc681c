//! The probe's terminal and JSON output. `full` shows each watched finding as `check` does,
//! with the verdict and its evidence as notes, then the run's numbers and a verdict table.

use std::io::{self, Write};
use std::sync::Arc;

use codespan_reporting::diagnostic::Severity;

use super::Probed;
use super::report::ProbeReport;
use super::verdict::{Status, fmt_bytes};
use crate::diagnostic::FileDiagnostics;
use crate::render::full;

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
            let verdict = &watched.verdict;
            let mut rendered = full::to_codespan(0, diagnostic);
            // The header says what the probe found; the lint's own severity is in `check`.
            rendered.severity = match verdict.status {
                Status::Confirmed => Severity::Error,
                Status::NotReproduced | Status::NotReached => Severity::Note,
            };
            rendered.message = format!("{}: {}", status_word(verdict.status), diagnostic.message);
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
        })
        .collect();
    full::emit(&files, &rendered, color, out)?;
    write_run(report, out)?;
    write_table(report, out)
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Confirmed => "confirmed",
        Status::NotReproduced => "not reproduced",
        Status::NotReached => "not reached",
    }
}

fn write_run(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "probe of {}", report.script)?;
    match (&report.device, &report.cpu_mode_reason) {
        (Some(device), _) => writeln!(
            out,
            "  device: GPU {} {} ({} total, {} in use before the script)",
            device.index,
            device.name,
            fmt_bytes(device.total as f64),
            fmt_bytes(device.used_before as f64)
        )?,
        (None, Some(reason)) => writeln!(out, "  device: none, CPU mode ({reason})")?,
        (None, None) => writeln!(out, "  device: none, CPU mode")?,
    }
    if let (Some(python), Some(mechanism)) = (&report.python, &report.mechanism) {
        writeln!(out, "  python: {python}, lines watched with {mechanism}")?;
    }
    writeln!(
        out,
        "  run: {} after {:.1} s",
        report.stop.describe(),
        report.duration
    )?;
    if let Some(exit) = &report.exit {
        writeln!(out, "  script: exited with status {}", exit.status)?;
        if let Some(traceback) = &exit.traceback {
            for line in traceback.lines() {
                writeln!(out, "    {line}")?;
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
            "\nNothing to watch: no finding in this script has a runtime signature."
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
    let confirmed = report
        .findings
        .iter()
        .filter(|f| f.verdict.status == Status::Confirmed)
        .count();
    writeln!(
        out,
        "\n{confirmed} of {} watched finding{} confirmed.",
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" }
    )
}

pub fn render_json(report: &ProbeReport, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
    writeln!(out)
}
