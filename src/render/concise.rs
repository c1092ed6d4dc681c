//! `path:line:col: CODE message`, one finding per line; in a notebook
//! `path:cell N:line L:col: CODE message`.

use std::io::{self, Write};

use super::{Report, position, span};

pub fn render(report: &Report<'_>, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let (bold, red, reset) = if color {
        ("\x1b[1m", "\x1b[1;31m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    for (source, diagnostic) in report.diagnostics() {
        let (start, _) = span(source, diagnostic);
        writeln!(
            out,
            "{bold}{}{reset}:{}: {red}{}{reset} {}{}",
            crate::escape::path(source.name()),
            position(&start),
            diagnostic.code(),
            report.fix_mark(diagnostic),
            diagnostic.message
        )?;
    }
    Ok(())
}
