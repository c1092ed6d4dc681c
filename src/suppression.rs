//! Suppression comments: `# torchlint: ignore[TL102]`, `# torchlint: ignore`, `# noqa: TL102`,
//! bare `# noqa` on a line, and `# torchlint: ignore-file[...]` for the whole file. Only real
//! comments count (a `"# noqa"` inside a string does not).

use rustc_hash::FxHashMap as HashMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::source::{SourceFile, TextRange};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codes {
    All,
    Only(Vec<String>),
}

impl Codes {
    fn covers(&self, code: &str) -> bool {
        match self {
            Codes::All => true,
            Codes::Only(codes) => codes.iter().any(|c| c == code),
        }
    }

    fn merge(&mut self, other: Codes) {
        match (&mut *self, other) {
            (Codes::All, _) => {}
            (_, Codes::All) => *self = Codes::All,
            (Codes::Only(mine), Codes::Only(theirs)) => mine.extend(theirs),
        }
    }
}

#[derive(Debug, Default)]
pub struct Suppressions {
    file: Option<Codes>,
    /// By 1-based row.
    lines: HashMap<usize, Codes>,
}

static NOQA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?").unwrap()
});
static TORCHLINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"#\s*torchlint:\s*ignore(?P<file>-file)?(?:\[(?P<codes>[^\]]*)\])?").unwrap()
});

impl Suppressions {
    pub fn from_comments(source: &SourceFile, comments: &[TextRange]) -> Self {
        let mut suppressions = Suppressions::default();
        for range in comments {
            let comment = &source.text()[range.clone()];
            // Most comments are prose: skip them before running the regexes.
            if !may_suppress(comment.as_bytes()) {
                continue;
            }
            let row = source.location(range.start).row;
            for captures in TORCHLINT.captures_iter(comment) {
                let codes = parse_codes(captures.name("codes").map(|m| m.as_str()));
                if captures.name("file").is_some() {
                    match &mut suppressions.file {
                        Some(existing) => existing.merge(codes),
                        None => suppressions.file = Some(codes),
                    }
                } else {
                    suppressions.add_line(row, codes);
                }
            }
            if let Some(captures) = NOQA.captures(comment) {
                let codes = parse_codes(captures.name("codes").map(|m| m.as_str()));
                suppressions.add_line(row, codes);
            }
        }
        suppressions
    }

    fn add_line(&mut self, row: usize, codes: Codes) {
        match self.lines.get_mut(&row) {
            Some(existing) => existing.merge(codes),
            None => {
                self.lines.insert(row, codes);
            }
        }
    }

    /// Whether the whole file is exempt from every rule.
    pub fn ignores_whole_file(&self) -> bool {
        self.file == Some(Codes::All)
    }

    pub fn is_suppressed(&self, code: &str, row: usize) -> bool {
        self.file.as_ref().is_some_and(|codes| codes.covers(code))
            || self.lines.get(&row).is_some_and(|codes| codes.covers(code))
    }
}

/// Whether a comment mentions `noqa` (in any case) or `torchlint`: both hold an `n`, which
/// memchr finds far faster than comparing every window of the comment.
fn may_suppress(comment: &[u8]) -> bool {
    memchr::memchr2_iter(b'n', b'N', comment).any(|at| {
        let rest = &comment[at..];
        rest.get(..4)
            .is_some_and(|word| word.eq_ignore_ascii_case(b"noqa"))
            || (at >= 7 && comment[at - 7..].starts_with(b"torchlint"))
    })
}

fn parse_codes(text: Option<&str>) -> Codes {
    match text {
        None => Codes::All,
        Some(text) => {
            let codes: Vec<String> = text
                .split([',', ' ', '\t'])
                .map(str::trim)
                .filter(|code| !code.is_empty())
                .map(str::to_ascii_uppercase)
                .collect();
            if codes.is_empty() {
                Codes::All
            } else {
                Codes::Only(codes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_comments_that_may_suppress_reach_the_regexes() {
        for comment in [
            "# noqa",
            "# NoQA: TL101",
            "#noqa:TL102",
            "# torchlint: ignore[TL101]",
            "x  # torchlint: ignore-file",
        ] {
            assert!(may_suppress(comment.as_bytes()), "{comment}");
        }
        for comment in [
            "# nothing to see",
            "# no qa",
            "# noq",
            "# torch lint",
            "# Torchlint",
            "",
            "#n",
        ] {
            assert!(!may_suppress(comment.as_bytes()), "{comment}");
        }
    }

    fn suppressions(text: &str) -> Suppressions {
        let source = SourceFile::new("x.py", text.to_owned());
        let comments: Vec<TextRange> = text
            .match_indices('#')
            .map(|(i, _)| {
                let end = text[i..].find('\n').map_or(text.len(), |n| i + n);
                i..end
            })
            .collect();
        // Keep only the first '#' of each line as the comment start.
        let mut seen_rows = std::collections::HashSet::new();
        let comments: Vec<TextRange> = comments
            .into_iter()
            .filter(|r| seen_rows.insert(source.location(r.start).row))
            .collect();
        Suppressions::from_comments(&source, &comments)
    }

    #[test]
    fn line_forms() {
        let s = suppressions(
            "a  # noqa: TL102, TL201\nb  # NOQA\nc  # torchlint: ignore[TL108]\nd  # torchlint: ignore\ne  # type: ignore  # noqa:TL101\n",
        );
        assert!(s.is_suppressed("TL102", 1) && s.is_suppressed("TL201", 1));
        assert!(!s.is_suppressed("TL108", 1));
        assert!(s.is_suppressed("TL999", 2));
        assert!(s.is_suppressed("TL108", 3) && !s.is_suppressed("TL102", 3));
        assert!(s.is_suppressed("TL108", 4));
        assert!(s.is_suppressed("TL101", 5) && !s.is_suppressed("TL102", 5));
        assert!(!s.is_suppressed("TL108", 6));
    }

    #[test]
    fn file_forms() {
        let s = suppressions("# torchlint: ignore-file[TL108]\nx\n");
        assert!(s.is_suppressed("TL108", 2) && !s.is_suppressed("TL201", 2));
        assert!(!s.ignores_whole_file());
        assert!(suppressions("# torchlint: ignore-file\n").ignores_whole_file());
    }
}
