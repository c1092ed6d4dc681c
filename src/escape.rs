//! How text from outside torchlint (file names, quoted source code) is shown in the text
//! formats and on stderr: one escaping, in one place. Control characters become `\n`, `\r`,
//! `\t` or `\xNN` (`\u{NN}` past ASCII), so a name or a quote can neither break a line of
//! `concise` or `github` output nor move a terminal's cursor; bytes of a file name that are not
//! UTF-8 become `\xNN` (`bad\xff.py`), as they are, rather than U+FFFD (a name that does not
//! exist). Backslashes stay as they are: Windows paths read as usual. JSON, SARIF and GitLab
//! output carry names unescaped (see `render`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

/// `text` with its control characters escaped; borrowed when it has none.
pub fn control_characters(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    push_escaped(&mut shown, text);
    Cow::Owned(shown)
}

fn push_escaped(shown: &mut String, text: &str) {
    for character in text.chars() {
        match character {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if c.is_ascii_control() => {
                let _ = write!(shown, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(shown, "\\u{{{:x}}}", c as u32);
            }
            c => shown.push(c),
        }
    }
}

/// A path as the text formats and error messages show it.
pub fn path(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut shown = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        push_escaped(&mut shown, chunk.valid());
        for byte in chunk.invalid() {
            let _ = write!(shown, "\\x{byte:02x}");
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(control_characters("plain"), "plain");
        assert_eq!(
            control_characters("a\nb\r\tc\x1b[31m\x7f\u{85}"),
            "a\\nb\\r\\tc\\x1b[31m\\x7f\\u{85}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn paths_show_invalid_bytes_and_control_characters() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let name = OsStr::from_bytes(b"dir/bad\xff\xfe.py");
        assert_eq!(path(Path::new(name)), "dir/bad\\xff\\xfe.py");
        assert_eq!(path(Path::new("new\nline\x1b.py")), "new\\nline\\x1b.py");
        assert_eq!(path(Path::new("caf\u{e9}.py")), "caf\u{e9}.py");
    }
}
