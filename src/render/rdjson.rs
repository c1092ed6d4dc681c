//! Reviewdog Diagnostic Format (`rdjson`): one JSON object whose `diagnostics` reviewdog posts
//! as review comments, with each fix as a suggestion. Lines and columns count from 1; in a
//! notebook they are the cell's, and the message says which cell.

use std::io::{self, Write};

use serde::Serialize;

use super::{Report, absolute, cell_note, span};
use crate::diagnostic::Severity;
use crate::source::{DisplayLocation, SourceFile};

#[derive(Serialize)]
struct Document<'a> {
    source: Source,
    diagnostics: Vec<Entry<'a>>,
}

#[derive(Serialize)]
struct Source {
    name: &'static str,
    url: &'static str,
}

#[derive(Serialize)]
struct Entry<'a> {
    message: String,
    location: Location,
    severity: &'static str,
    code: Code<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    suggestions: Vec<Suggestion<'a>>,
}

#[derive(Serialize)]
struct Location {
    path: String,
    range: Range,
}

#[derive(Serialize)]
struct Range {
    start: Position,
    end: Position,
}

#[derive(Serialize)]
struct Position {
    line: usize,
    column: usize,
}

#[derive(Serialize)]
struct Code<'a> {
    value: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

#[derive(Serialize)]
struct Suggestion<'a> {
    range: Range,
    text: &'a str,
}

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    let diagnostics = report
        .diagnostics()
        .map(|(source, diagnostic)| {
            let (start, end) = span(source, diagnostic);
            Entry {
                message: format!("{}{}", diagnostic.message, cell_note(&start)),
                location: Location {
                    path: absolute(source.name()).display().to_string(),
                    range: Range {
                        start: position(&start),
                        end: position(&end),
                    },
                },
                severity: match diagnostic.severity() {
                    Severity::Error => "ERROR",
                    Severity::Warning => "WARNING",
                    Severity::Info => "INFO",
                },
                code: Code {
                    value: diagnostic.code(),
                    url: diagnostic.rule.url(),
                },
                suggestions: diagnostic
                    .fix
                    .iter()
                    .flat_map(|fix| &fix.edits)
                    .map(|edit| Suggestion {
                        range: Range {
                            start: at(source, edit.range.start),
                            end: at(source, edit.range.end),
                        },
                        text: &edit.content,
                    })
                    .collect(),
            }
        })
        .collect();
    let document = Document {
        source: Source {
            name: "torchlint",
            url: "https://github.com/torchlint/torchlint",
        },
        diagnostics,
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

fn position(location: &DisplayLocation) -> Position {
    Position {
        line: location.row,
        column: location.column,
    }
}

fn at(source: &SourceFile, offset: usize) -> Position {
    position(&source.display_location(offset))
}
