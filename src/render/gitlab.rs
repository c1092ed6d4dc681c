//! GitLab Code Quality JSON (the `codequality` report artifact): one issue per finding, with a
//! fingerprint that stays the same while the finding does, so merge requests show only what
//! changed.

use std::io::{self, Write};

use serde::Serialize;

use super::{Report, cell_note, span};
use crate::diagnostic::Severity;
use crate::fingerprint::Fingerprinter;

#[derive(Serialize)]
struct Issue<'a> {
    description: String,
    check_name: &'a str,
    fingerprint: String,
    severity: &'static str,
    location: Location,
}

#[derive(Serialize)]
struct Location {
    path: String,
    lines: Lines,
}

#[derive(Serialize)]
struct Lines {
    begin: usize,
    end: usize,
}

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut fingerprints = Fingerprinter::default();
    let issues: Vec<Issue<'_>> = report
        .diagnostics()
        .map(|(source, diagnostic)| {
            let (start, end) = span(source, diagnostic);
            let path = source.name().display().to_string();
            let fingerprint = fingerprints.fingerprint(&path, source, diagnostic);
            Issue {
                description: format!(
                    "{}: {}{}",
                    diagnostic.code(),
                    diagnostic.message,
                    cell_note(&start)
                ),
                check_name: diagnostic.code(),
                fingerprint: fingerprint.hash,
                severity: match diagnostic.severity() {
                    Severity::Error => "critical",
                    Severity::Warning => "major",
                    Severity::Info => "minor",
                },
                location: Location {
                    path,
                    lines: Lines {
                        begin: start.row,
                        end: end.row,
                    },
                },
            }
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &issues).map_err(io::Error::other)?;
    writeln!(out)
}
