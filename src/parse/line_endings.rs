//! Old Mac line endings. CPython takes a lone `\r` as a line break, tree-sitter-python does
//! not: a file whose lines end in `\r` alone parses as one long line of syntax errors (every
//! line a false TL001, rules firing on the misparse, and 1M lines taking seconds and hundreds
//! of MB). The parser reads a copy with each lone `\r` turned into `\n`: the same length, so
//! every byte offset, and with [`crate::source`] counting a lone `\r` as a line break, every
//! row and column, stays that of the real text.

use std::borrow::Cow;

/// `text` with each `\r` that no `\n` follows replaced by `\n`; borrowed when there is none.
pub fn for_parser(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let has_lone_cr = memchr::memchr_iter(b'\r', bytes).any(|at| bytes.get(at + 1) != Some(&b'\n'));
    if !has_lone_cr {
        return Cow::Borrowed(text);
    }
    let mut normalized = bytes.to_vec();
    for at in memchr::memchr_iter(b'\r', bytes) {
        if bytes.get(at + 1) != Some(&b'\n') {
            normalized[at] = b'\n';
        }
    }
    // Swapping one ASCII byte for another keeps the text UTF-8.
    Cow::Owned(String::from_utf8(normalized).expect("ASCII for ASCII keeps UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_cr_becomes_lf_and_crlf_stays() {
        assert_eq!(for_parser("a\rb\r\nc\r"), "a\nb\r\nc\n");
        assert!(matches!(for_parser("a\r\nb\n"), Cow::Borrowed(_)));
        assert!(matches!(for_parser(""), Cow::Borrowed(_)));
    }
}
