//! GitHub Actions workflow commands: `::warning title=...,file=...,line=...::message`.

use std::io::{self, Write};

use super::{Report, position, span};
use crate::diagnostic::Severity;

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    for (source, diagnostic) in report.diagnostics() {
        let (start, end) = span(source, diagnostic);
        let level = match diagnostic.severity() {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let path = crate::escape::path(source.name());
        writeln!(
            out,
            "::{level} title={},file={},line={},col={},endLine={},endColumn={}::{}",
            escape_property(&format!(
                "torchlint ({} {})",
                diagnostic.code(),
                diagnostic.rule.name
            )),
            escape_property(&path),
            start.row,
            start.column,
            end.row,
            end.column,
            // The line is the cell's in a notebook: the message names the cell.
            escape_data(&format!(
                "{path}:{}: {} {}",
                position(&start),
                diagnostic.code(),
                diagnostic.message
            )),
        )?;
    }
    Ok(())
}

/// Escaping from `@actions/core`'s `command.ts`.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_actions_core() {
        assert_eq!(escape_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(escape_property("a:b,c"), "a%3Ab%2Cc");
    }
}
