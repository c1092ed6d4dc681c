//! Renderers: the same diagnostics as rich terminal output, one line each, Ruff-compatible
//! JSON (or JSON Lines), SARIF 2.1.0, GitHub Actions annotations, GitLab Code Quality JSON,
//! JUnit XML, Pylint's parseable lines or reviewdog's rdjson. Rendering never looks back at the tree.

mod concise;
mod excerpt;
pub(crate) mod full;
mod github;
mod gitlab;
mod json;
mod junit;
mod pylint;
mod rdjson;
mod sarif;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::ValueEnum;

use crate::diagnostic::{Diagnostic, FileDiagnostics};
use crate::rule_meta::RuleMeta;
use crate::source::{DisplayLocation, SourceFile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Source snippets with labels and help (codespan-reporting).
    Full,
    /// One line per finding: `path:line:col: CODE message` (`path:cell N:line L:col` in notebooks).
    Concise,
    /// A JSON array with Ruff's field names.
    Json,
    /// The JSON format's objects, one per line.
    JsonLines,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// GitHub Actions workflow annotations.
    Github,
    /// GitLab Code Quality JSON.
    Gitlab,
    /// JUnit XML, one test case per finding.
    Junit,
    /// Pylint's parseable format: `path:line: [CODE] message`.
    Pylint,
    /// Reviewdog Diagnostic Format JSON, fixes as suggestions.
    Rdjson,
}

/// What the renderers need: the findings per file (sorted), and the rules that were enabled
/// (SARIF lists them as the tool's rules).
pub struct Report<'a> {
    pub files: &'a [FileDiagnostics],
    pub rules: &'a [Arc<RuleMeta>],
    /// The fixes this run would apply with `--fix`: the text formats mark their findings
    /// `[*]`, as Ruff does.
    pub fixes: crate::fix::Allowed,
}

impl Report<'_> {
    /// `[*] ` before the message of a finding `--fix` would fix in this run.
    pub fn fix_mark(&self, diagnostic: &Diagnostic) -> &'static str {
        if diagnostic
            .fix
            .as_ref()
            .is_some_and(|fix| self.fixes.admits(fix))
        {
            "[*] "
        } else {
            ""
        }
    }
}

impl Report<'_> {
    pub fn diagnostics(&self) -> impl Iterator<Item = (&SourceFile, &Diagnostic)> {
        self.files.iter().flat_map(|file| {
            file.diagnostics
                .iter()
                .map(move |diagnostic| (&*file.source, diagnostic))
        })
    }

    pub fn count(&self) -> usize {
        self.files.iter().map(|file| file.diagnostics.len()).sum()
    }
}

pub fn render(
    format: OutputFormat,
    report: &Report<'_>,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        OutputFormat::Full => full::render(report, color, out),
        OutputFormat::Concise => concise::render(report, color, out),
        OutputFormat::Json => json::render(report, out),
        OutputFormat::Sarif => sarif::render(report, out),
        OutputFormat::Github => github::render(report, out),
        OutputFormat::Gitlab => gitlab::render(report, out),
        OutputFormat::Junit => junit::render(report, out),
        OutputFormat::JsonLines => json::render_lines(report, out),
        OutputFormat::Pylint => pylint::render(report, out),
        OutputFormat::Rdjson => rdjson::render(report, out),
    }
}

/// Start and end of a diagnostic as the user sees them (in a notebook: cell-relative rows).
fn span(source: &SourceFile, diagnostic: &Diagnostic) -> (DisplayLocation, DisplayLocation) {
    source.display_span(&diagnostic.range)
}

/// `row:column`, or `cell N:line row:column` in a notebook, as concise output shows it after
/// the path.
fn position(location: &DisplayLocation) -> String {
    match location.cell {
        Some(cell) => format!("cell {cell}:line {}:{}", location.row, location.column),
        None => format!("{}:{}", location.row, location.column),
    }
}

/// ` (cell N, line row)` for a notebook, nothing for a plain file: the formats whose line
/// numbers a reader would otherwise take for lines of the `.ipynb` file add it to the message.
fn cell_note(location: &DisplayLocation) -> String {
    match location.cell {
        Some(cell) => format!(" (cell {cell}, line {})", location.row),
        None => String::new(),
    }
}

/// The absolute form of a shown path (JSON and SARIF carry absolute paths, as Ruff's do).
///
/// The text formats (full, concise, github, junit) show names through [`crate::escape::path`]
/// (`bad\xff.py`, `new\nline.py`). The JSON formats carry them unescaped, a newline or an
/// escape character as JSON escapes it; JSON strings cannot hold a byte that is not UTF-8, so
/// JSON and GitLab show U+FFFD for one, and SARIF's `file://` URI percent-encodes it (`%FF`),
/// which names the file exactly.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
