//! JUnit XML, which CI systems (GitLab, Jenkins, Azure) show as test results: one test suite
//! per file, one failed test case per finding; a run without findings is one passing case.

use std::io::{self, Write};

use super::{Report, position, span};

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    let total = report.count();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="torchlint" tests="{}" failures="{total}">"#,
        total.max(1)
    )?;
    if total == 0 {
        writeln!(
            out,
            r#"  <testsuite name="torchlint" tests="1" failures="0">"#
        )?;
        writeln!(
            out,
            r#"    <testcase name="no findings" classname="torchlint"/>"#
        )?;
        writeln!(out, "  </testsuite>")?;
    }
    for file in report
        .files
        .iter()
        .filter(|file| !file.diagnostics.is_empty())
    {
        let path = escape(&crate::escape::path(file.source.name()));
        let count = file.diagnostics.len();
        writeln!(
            out,
            r#"  <testsuite name="{path}" tests="{count}" failures="{count}">"#
        )?;
        for diagnostic in &file.diagnostics {
            let (start, _) = span(&file.source, diagnostic);
            let position = position(&start);
            writeln!(
                out,
                r#"    <testcase name="{} ({}) at {position}" classname="{path}" file="{path}" line="{}">"#,
                diagnostic.code(),
                escape(&diagnostic.rule.name),
                start.row
            )?;
            writeln!(
                out,
                r#"      <failure message="{}" type="{}">{path}:{position}: {} {}</failure>"#,
                escape(&diagnostic.message),
                diagnostic.code(),
                diagnostic.code(),
                escape(&diagnostic.message)
            )?;
            writeln!(out, "    </testcase>")?;
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}

/// Text for an attribute value or element content: markup escaped, `\t` `\n` `\r` as
/// character references (attribute-value normalisation would turn them into spaces, and
/// line-end normalisation a `\r` into `\n`), and every character XML 1.0 cannot carry at all
/// (`Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]`: the other
/// controls, U+FFFE, U+FFFF) as U+FFFD.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' => escaped.push_str("&#9;"),
            '\n' => escaped.push_str("&#10;"),
            '\r' => escaped.push_str("&#13;"),
            c if is_xml_char(c) => escaped.push(c),
            _ => escaped.push(char::REPLACEMENT_CHARACTER),
        }
    }
    escaped
}

/// XML 1.0's `Char` production (Rust's `char` has no surrogates to exclude).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{FFFD}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a < b && \"c\" > 'd'\u{1}"),
            "a &lt; b &amp;&amp; &quot;c&quot; &gt; &apos;d&apos;\u{FFFD}"
        );
    }

    #[test]
    fn replaces_what_xml_cannot_carry_and_keeps_whitespace_through_normalisation() {
        assert_eq!(
            escape("\u{FFFE}\u{FFFF}\u{0}\u{1b}\u{7f}\u{D7FF}\u{E000}\u{FFFD}\u{10000}"),
            "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{7f}\u{D7FF}\u{E000}\u{FFFD}\u{10000}"
        );
        assert_eq!(escape("a\tb\nc\rd"), "a&#9;b&#10;c&#13;d");
    }
}
