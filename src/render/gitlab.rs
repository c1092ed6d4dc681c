//! GitLab Code Quality JSON (the `codequality` report artifact): one issue per finding, with a
//! fingerprint that stays the same while the finding does, so merge requests show only what
//! changed.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Report, cell_note, span};
use crate::diagnostic::Severity;

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
    // Several findings can share a file, rule and flagged text: the occurrence index keeps their
    // fingerprints apart without tying them to line numbers.
    let mut seen: HashMap<(String, &str, &str), usize> = HashMap::new();
    let issues: Vec<Issue<'_>> = report
        .diagnostics()
        .map(|(source, diagnostic)| {
            let (start, end) = span(source, diagnostic);
            let path = source.name().display().to_string();
            let flagged = &source.text()[diagnostic.range.clone()];
            let occurrence = seen
                .entry((path.clone(), diagnostic.code(), flagged))
                .and_modify(|n| *n += 1)
                .or_insert(0);
            let mut hash = Sha256::new();
            for part in [path.as_str(), diagnostic.code(), flagged] {
                hash.update(part.as_bytes());
                hash.update([0]);
            }
            hash.update(occurrence.to_le_bytes());
            Issue {
                description: format!(
                    "{}: {}{}",
                    diagnostic.code(),
                    diagnostic.message,
                    cell_note(&start)
                ),
                check_name: diagnostic.code(),
                fingerprint: hash
                    .finalize()
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect(),
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
