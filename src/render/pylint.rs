//! Pylint's parseable format, `path:line: [CODE] message`, one finding per line: what editors
//! and CI tools that parse Pylint's output read. In a notebook the line is the cell's, and the
//! message says which cell.

use std::io::{self, Write};

use super::{Report, cell_note, span};

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    for (source, diagnostic) in report.diagnostics() {
        let (start, _) = span(source, diagnostic);
        writeln!(
            out,
            "{}:{}: [{}] {}{}",
            crate::escape::path(source.name()),
            start.row,
            diagnostic.code(),
            diagnostic.message,
            cell_note(&start)
        )?;
    }
    Ok(())
}
