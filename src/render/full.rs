//! Rich terminal output: each finding with its source snippet, labels and help, rendered by
//! codespan-reporting. A notebook's cells are shown as files of their own, with their own
//! line numbers.

use std::borrow::Cow;
use std::io::{self, Write};
use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic as Rendered, Label, LabelStyle, Severity};
use codespan_reporting::files::{Error, Files};
use codespan_reporting::term::{self, Config};
use termcolor::{Buffer, WriteColor};

use super::Report;
use super::excerpt::Excerpt;
use crate::diagnostic::{Applicability, Diagnostic, FileDiagnostics};
use crate::source::SourceFile;

/// What codespan shows as one file: a whole source file, or one cell of a notebook, named
/// `nb.ipynb:cell 4` and holding only that cell's text, so that the header (`nb.ipynb:cell 4:2:5`)
/// and the gutter count the cell's lines.
struct View<'a> {
    name: String,
    text: &'a str,
    /// Where `text` starts in the source's text.
    base: usize,
    /// Where each line of `text` starts (relative to `base`).
    line_starts: Cow<'a, [usize]>,
}

/// The views of a report's files, in order: one per plain file, one per cell of a notebook.
struct FileDb<'a> {
    views: Vec<View<'a>>,
    /// For each file of the report, the index of its first view.
    first_view: Vec<usize>,
}

impl<'a> FileDb<'a> {
    fn new(files: &'a [FileDiagnostics]) -> Self {
        let mut views = Vec::new();
        let mut first_view = Vec::with_capacity(files.len());
        for file in files {
            first_view.push(views.len());
            let source = &*file.source;
            let name = crate::escape::path(source.name());
            let before = views.len();
            views.extend(
                source
                    .cell_ranges()
                    .map(|(number, range)| cell_view(source, &name, number, range)),
            );
            if views.len() == before {
                views.push(View {
                    name,
                    text: source.text(),
                    base: 0,
                    line_starts: Cow::Borrowed(source.line_starts()),
                });
            }
        }
        FileDb { views, first_view }
    }

    /// The view holding a range of file `file`'s text, and the range within that view.
    fn locate(&self, file: usize, range: &Range<usize>) -> Option<(usize, Range<usize>)> {
        let first = *self.first_view.get(file)?;
        let end = self
            .first_view
            .get(file + 1)
            .copied()
            .unwrap_or(self.views.len());
        let views = self.views.get(first..end)?;
        let index = views
            .partition_point(|view| view.base <= range.start)
            .saturating_sub(1);
        let view = views.get(index)?;
        // A range running on past its cell is cut at the cell's end.
        let start = range.start.saturating_sub(view.base).min(view.text.len());
        let end = range
            .end
            .saturating_sub(view.base)
            .clamp(start, view.text.len());
        Some((first + index, start..end))
    }

    /// The diagnostic with each label moved into the view that holds it.
    fn localize(&self, diagnostic: &Rendered<usize>) -> Rendered<usize> {
        let mut diagnostic = diagnostic.clone();
        for label in &mut diagnostic.labels {
            if let Some((view, range)) = self.locate(label.file_id, &label.range) {
                label.file_id = view;
                label.range = range;
            }
        }
        diagnostic
    }

    fn view(&self, id: usize) -> Result<&View<'a>, Error> {
        self.views.get(id).ok_or(Error::FileMissing)
    }
}

fn cell_view<'a>(
    source: &'a SourceFile,
    name: &str,
    number: usize,
    range: Range<usize>,
) -> View<'a> {
    let starts = source.line_starts();
    let first = starts.partition_point(|&start| start < range.start);
    let last = starts.partition_point(|&start| start <= range.end);
    let line_starts = starts
        .get(first..last)
        .unwrap_or_default()
        .iter()
        .map(|start| start - range.start)
        .collect();
    View {
        name: format!("{name}:cell {number}"),
        text: source.text().get(range.clone()).unwrap_or_default(),
        base: range.start,
        line_starts: Cow::Owned(line_starts),
    }
}

impl<'a> Files<'a> for FileDb<'a> {
    type FileId = usize;
    type Name = String;
    type Source = &'a str;

    fn name(&'a self, id: usize) -> Result<String, Error> {
        Ok(self.view(id)?.name.clone())
    }

    fn source(&'a self, id: usize) -> Result<&'a str, Error> {
        Ok(self.view(id)?.text)
    }

    fn line_index(&'a self, id: usize, byte_index: usize) -> Result<usize, Error> {
        let starts = &self.view(id)?.line_starts;
        Ok(starts
            .partition_point(|&start| start <= byte_index)
            .saturating_sub(1))
    }

    fn line_range(&'a self, id: usize, line_index: usize) -> Result<Range<usize>, Error> {
        let view = self.view(id)?;
        let starts = &view.line_starts;
        let start = *starts.get(line_index).ok_or(Error::LineTooLarge {
            given: line_index,
            max: starts.len().saturating_sub(1),
        })?;
        let end = starts
            .get(line_index + 1)
            .copied()
            .unwrap_or(view.text.len());
        Ok(start..end)
    }
}

/// The views of one finding with its long lines cut (see `excerpt`): views holding a long line
/// it points at are replaced by excerpts, the others are the file database's.
struct Cropped<'d, 'a> {
    db: &'d FileDb<'a>,
    excerpts: Vec<(usize, Excerpt)>,
}

impl<'d, 'a> Cropped<'d, 'a> {
    /// The finding's views with long lines cut, and the finding with its labels moved into
    /// them; `None` when every line it shows is short.
    fn new(db: &'d FileDb<'a>, diagnostic: &Rendered<usize>) -> Option<(Self, Rendered<usize>)> {
        let mut views: Vec<usize> = diagnostic.labels.iter().map(|l| l.file_id).collect();
        views.sort_unstable();
        views.dedup();
        let excerpts: Vec<(usize, Excerpt)> = views
            .into_iter()
            .filter_map(|id| {
                let view = db.views.get(id)?;
                let points: Vec<usize> = diagnostic
                    .labels
                    .iter()
                    .filter(|l| l.file_id == id)
                    .flat_map(|l| [l.range.start, l.range.end])
                    .collect();
                Some((id, Excerpt::cut(view.text, &view.line_starts, &points)?))
            })
            .collect();
        if excerpts.is_empty() {
            return None;
        }
        let cropped = Cropped { db, excerpts };
        let mut diagnostic = diagnostic.clone();
        for label in &mut diagnostic.labels {
            if let Some(excerpt) = cropped.excerpt(label.file_id) {
                label.range =
                    excerpt.to_excerpt(label.range.start)..excerpt.to_excerpt(label.range.end);
            }
        }
        Some((cropped, diagnostic))
    }

    fn excerpt(&self, id: usize) -> Option<&Excerpt> {
        self.excerpts
            .iter()
            .find(|(view, _)| *view == id)
            .map(|(_, excerpt)| excerpt)
    }
}

impl<'c> Files<'c> for Cropped<'_, '_> {
    type FileId = usize;
    type Name = String;
    type Source = &'c str;

    fn name(&'c self, id: usize) -> Result<String, Error> {
        self.db.name(id)
    }

    fn source(&'c self, id: usize) -> Result<&'c str, Error> {
        match self.excerpt(id) {
            Some(excerpt) => Ok(&excerpt.text),
            None => self.db.source(id),
        }
    }

    fn line_index(&'c self, id: usize, byte_index: usize) -> Result<usize, Error> {
        match self.excerpt(id) {
            Some(excerpt) => Ok(excerpt
                .line_starts
                .partition_point(|&start| start <= byte_index)
                .saturating_sub(1)),
            None => self.db.line_index(id, byte_index),
        }
    }

    fn line_range(&'c self, id: usize, line_index: usize) -> Result<Range<usize>, Error> {
        let Some(excerpt) = self.excerpt(id) else {
            return self.db.line_range(id, line_index);
        };
        let starts = &excerpt.line_starts;
        let start = *starts.get(line_index).ok_or(Error::LineTooLarge {
            given: line_index,
            max: starts.len().saturating_sub(1),
        })?;
        let end = starts
            .get(line_index + 1)
            .copied()
            .unwrap_or(excerpt.text.len());
        Ok(start..end)
    }

    /// The file's line number, not the excerpt's.
    fn line_number(&'c self, id: usize, line_index: usize) -> Result<usize, Error> {
        let first = self.excerpt(id).map_or(0, |excerpt| excerpt.first_line);
        Ok(first + line_index + 1)
    }

    /// The column in the file's line, counting the characters the excerpt left out.
    fn column_number(
        &'c self,
        id: usize,
        line_index: usize,
        byte_index: usize,
    ) -> Result<usize, Error> {
        let Some(excerpt) = self.excerpt(id) else {
            return self.db.column_number(id, line_index, byte_index);
        };
        let view = self.db.view(id)?;
        let line = excerpt.first_line + line_index;
        let line_start = *view.line_starts.get(line).ok_or(Error::LineTooLarge {
            given: line,
            max: view.line_starts.len().saturating_sub(1),
        })?;
        let offset = excerpt.to_view(byte_index).max(line_start);
        Ok(view
            .text
            .get(line_start..offset)
            .map_or(1, |text| text.chars().count() + 1))
    }
}

pub fn render(report: &Report<'_>, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let rendered: Vec<Rendered<usize>> = report
        .files
        .iter()
        .enumerate()
        .flat_map(|(id, file)| {
            file.diagnostics.iter().map(move |diagnostic| {
                let mut rendered = to_codespan(id, diagnostic);
                rendered.message.insert_str(0, report.fix_mark(diagnostic));
                rendered
            })
        })
        .collect();
    emit(report.files, &rendered, color, out)
}

/// Writes codespan diagnostics whose file ids index `files` and whose ranges are offsets in
/// those files' texts (the probe adds its own notes to the findings before they get here).
pub(crate) fn emit(
    files: &[FileDiagnostics],
    rendered: &[Rendered<usize>],
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let db = FileDb::new(files);
    let config = Config::default();
    let mut buffer = if color {
        Buffer::ansi()
    } else {
        Buffer::no_color()
    };
    for diagnostic in rendered {
        let diagnostic = db.localize(diagnostic);
        let result = match Cropped::new(&db, &diagnostic) {
            Some((cropped, diagnostic)) => {
                term::emit_to_write_style(&mut buffer, &config, &cropped, &diagnostic)
            }
            None => term::emit_to_write_style(&mut buffer, &config, &db, &diagnostic),
        };
        result.map_err(io::Error::other)?;
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
