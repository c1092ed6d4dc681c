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
        let path = escape(&file.source.name().display().to_string());
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

fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            // XML 1.0 has no way to write most control characters: drop them.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a < b && \"c\" > 'd'\u{1}"),
            "a &lt; b &amp;&amp; &quot;c&quot; &gt; &apos;d&apos;"
        );
    }
}
