//! A JSON array with Ruff's field names (`code`, `message`, `filename`, `location`,
//! `end_location`, `fix`, `url`, `noqa_row`, `cell`), plus `name` and `severity`. In a
//! notebook, as in Ruff, `cell` is the 1-based cell number and every row is the cell's.
//! `json-lines` writes the same objects, one per line.

use std::io::{self, Write};

use serde::Serialize;

use super::{Report, absolute, span};
use crate::diagnostic::{Applicability, Severity};
use crate::source::{DisplayLocation, SourceFile};

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    cell: Option<usize>,
    code: &'a str,
    end_location: JsonLocation,
    filename: String,
    fix: Option<JsonFix<'a>>,
    location: JsonLocation,
    message: &'a str,
    name: &'a str,
    noqa_row: usize,
    severity: Severity,
    url: Option<String>,
}

#[derive(Serialize)]
struct JsonLocation {
    column: usize,
    row: usize,
}

impl From<DisplayLocation> for JsonLocation {
    fn from(location: DisplayLocation) -> Self {
        JsonLocation {
            column: location.column,
            row: location.row,
        }
    }
}

#[derive(Serialize)]
struct JsonFix<'a> {
    applicability: Applicability,
    edits: Vec<JsonEdit<'a>>,
    message: &'a str,
}

#[derive(Serialize)]
struct JsonEdit<'a> {
    content: &'a str,
    end_location: JsonLocation,
    location: JsonLocation,
}

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &entries(report))?;
    writeln!(out)
}

/// JSON Lines: each finding's object on a line of its own (a stream a tool can read as it
/// comes, or `grep`).
pub fn render_lines(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    for entry in entries(report) {
        serde_json::to_writer(&mut *out, &entry)?;
        writeln!(out)?;
    }
    Ok(())
}

fn entries<'r>(report: &'r Report<'_>) -> Vec<JsonDiagnostic<'r>> {
    report
        .diagnostics()
        .map(|(source, diagnostic)| {
            let (start, end) = span(source, diagnostic);
            JsonDiagnostic {
                cell: start.cell,
                code: diagnostic.code(),
                end_location: end.into(),
                filename: absolute(source.name()).display().to_string(),
                fix: diagnostic.fix.as_ref().map(|fix| JsonFix {
                    applicability: fix.applicability,
                    edits: fix
                        .edits
                        .iter()
                        .map(|edit| JsonEdit {
                            content: &edit.content,
                            end_location: location(source, edit.range.end),
                            location: location(source, edit.range.start),
                        })
                        .collect(),
                    message: &fix.message,
                }),
                location: start.into(),
                message: &diagnostic.message,
                name: &diagnostic.rule.name,
                noqa_row: start.row,
                severity: diagnostic.severity(),
                url: diagnostic.rule.url(),
            }
        })
        .collect()
}

fn location(source: &SourceFile, offset: usize) -> JsonLocation {
    source.display_location(offset).into()
}
