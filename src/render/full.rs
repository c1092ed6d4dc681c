//! Rich terminal output: each finding with its source snippet, labels and help, rendered by
//! codespan-reporting.

use std::io::{self, Write};
use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic as Rendered, Label, LabelStyle, Severity};
use codespan_reporting::files::{Error, Files};
use codespan_reporting::term::{self, Config};
use termcolor::{Buffer, WriteColor};

use super::Report;
use crate::diagnostic::{Applicability, Diagnostic, FileDiagnostics};

/// The files of a report, as codespan sees them; the line index is the one `SourceFile`
/// already built.
struct FileDb<'a> {
    files: &'a [FileDiagnostics],
}

impl<'a> Files<'a> for FileDb<'a> {
    type FileId = usize;
    type Name = String;
    type Source = &'a str;

    fn name(&'a self, id: usize) -> Result<String, Error> {
        let file = self.files.get(id).ok_or(Error::FileMissing)?;
        Ok(file.source.name().display().to_string())
    }

    fn source(&'a self, id: usize) -> Result<&'a str, Error> {
        let file = self.files.get(id).ok_or(Error::FileMissing)?;
        Ok(file.source.text())
    }

    fn line_index(&'a self, id: usize, byte_index: usize) -> Result<usize, Error> {
        let file = self.files.get(id).ok_or(Error::FileMissing)?;
        Ok(file.source.line_index(byte_index))
    }

    fn line_range(&'a self, id: usize, line_index: usize) -> Result<Range<usize>, Error> {
        let file = self.files.get(id).ok_or(Error::FileMissing)?;
        let starts = file.source.line_starts();
        let start = *starts.get(line_index).ok_or(Error::LineTooLarge {
            given: line_index,
            max: starts.len() - 1,
        })?;
        let end = starts
            .get(line_index + 1)
            .copied()
            .unwrap_or(file.source.text().len());
        Ok(start..end)
    }
}

pub fn render(report: &Report<'_>, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let rendered: Vec<Rendered<usize>> = report
        .files
        .iter()
        .enumerate()
        .flat_map(|(id, file)| {
            file.diagnostics
                .iter()
                .map(move |diagnostic| to_codespan(id, diagnostic))
        })
        .collect();
    emit(report.files, &rendered, color, out)
}

/// Writes codespan diagnostics whose file ids index `files` (the probe adds its own notes to
/// the findings before they get here).
pub(crate) fn emit(
    files: &[FileDiagnostics],
    rendered: &[Rendered<usize>],
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let db = FileDb { files };
    let config = Config::default();
    let mut buffer = if color {
        Buffer::ansi()
    } else {
        Buffer::no_color()
    };
    for diagnostic in rendered {
        term::emit_to_write_style(&mut buffer, &config, &db, diagnostic)
            .map_err(io::Error::other)?;
    }
    buffer.reset()?;
    out.write_all(buffer.as_slice())
}

pub(crate) fn to_codespan(file: usize, diagnostic: &Diagnostic) -> Rendered<usize> {
    let severity = match diagnostic.severity() {
        crate::diagnostic::Severity::Error => Severity::Error,
        crate::diagnostic::Severity::Warning => Severity::Warning,
        crate::diagnostic::Severity::Info => Severity::Note,
    };
    let mut labels = vec![
        Label::new(LabelStyle::Primary, file, diagnostic.range.clone())
            .with_message(diagnostic.rule.name.clone()),
    ];
    labels.extend(diagnostic.labels.iter().map(|label| {
        Label::new(LabelStyle::Secondary, file, label.range.clone())
            .with_message(label.message.clone())
    }));
    let mut notes = Vec::new();
    if let Some(help) = &diagnostic.help {
        notes.push(format!("help: {help}"));
    }
    if let Some(fix) = &diagnostic.fix {
        let safety = match fix.applicability {
            Applicability::Safe => "",
            Applicability::Unsafe => " (unsafe: check it keeps your semantics)",
            Applicability::DisplayOnly => " (suggestion)",
        };
        notes.push(format!("fix: {}{safety}", fix.message));
    }
    notes.push(format!("docs: `torchlint rule {}`", diagnostic.rule.code));
    Rendered::new(severity)
        .with_code(diagnostic.rule.code.clone())
        .with_message(diagnostic.message.clone())
        .with_labels(labels)
        .with_notes(notes)
}
