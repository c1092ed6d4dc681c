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
    /// Each directive that names codes, as written: for the unused ones (TL002).
    directives: Vec<Directive>,
}

/// One `# noqa: CODES`, `# torchlint: ignore[CODES]` or `# torchlint: ignore-file[CODES]`.
#[derive(Debug)]
struct Directive {
    /// The comment that holds it.
    comment: TextRange,
    /// Its row; `None` for a whole-file directive.
    row: Option<usize>,
    codes: Vec<String>,
}

/// A directive's codes that suppress nothing (`Suppressions::unused`).
#[derive(Debug, PartialEq, Eq)]
pub struct Unused {
    pub comment: TextRange,
    pub codes: Vec<String>,
    pub whole_file: bool,
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
                let whole_file = captures.name("file").is_some();
                suppressions.remember(range, (!whole_file).then_some(row), &codes);
                if whole_file {
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
                suppressions.remember(range, Some(row), &codes);
                suppressions.add_line(row, codes);
            }
        }
        suppressions
    }

    fn remember(&mut self, comment: &TextRange, row: Option<usize>, codes: &Codes) {
        if let Codes::Only(codes) = codes {
            self.directives.push(Directive {
                comment: comment.clone(),
                row,
                codes: codes.clone(),
            });
        }
    }

    /// The directives' codes that suppress no finding: of the codes `is_rule` knows (a `# noqa`
    /// naming another tool's codes, `E501`, is that tool's), those with no finding on the
    /// directive's line (or, for `ignore-file`, in the file). `fired` lists every finding's
    /// code and row before suppression. A bare `# noqa` or `# torchlint: ignore` is never
    /// unused: it may be there for another tool, or for a rule the run has not selected.
    pub fn unused(&self, fired: &[(&str, usize)], is_rule: impl Fn(&str) -> bool) -> Vec<Unused> {
        self.directives
            .iter()
            .filter_map(|directive| {
                let codes: Vec<String> = directive
                    .codes
                    .iter()
                    .filter(|code| is_rule(code))
                    .filter(|code| {
                        !fired.iter().any(|(fired, row)| {
                            fired == code && directive.row.is_none_or(|line| line == *row)
                        })
                    })
                    .cloned()
                    .collect();
                (!codes.is_empty()).then(|| Unused {
                    comment: directive.comment.clone(),
                    codes,
                    whole_file: directive.row.is_none(),
                })
            })
            .collect()
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

/// `--add-noqa`: the text with `# noqa: CODE` on every line a finding starts on (1-based rows,
/// the codes each needs), merged into the line's own `# noqa: ...` where it has one (other
/// tools' codes kept), else appended after two spaces. A line that ends inside a string, or in
/// a backslash continuation, cannot take a comment: it is left out and returned. Returns the
/// new text, how many lines got a directive, and the rows left out.
pub fn add_noqa(
    source: &SourceFile,
    tree: &tree_sitter::Tree,
    rows: &std::collections::BTreeMap<usize, Vec<String>>,
) -> (String, usize, Vec<usize>) {
    let text = source.text();
    let mut edits: Vec<(TextRange, String)> = Vec::new();
    let mut skipped = Vec::new();
    for (&row, codes) in rows {
        let line = source.line_range(row - 1);
        let content = &text[line.clone()];
        if content.trim_end().ends_with('\\') || ends_in_string(tree, line.end) {
            skipped.push(row);
            continue;
        }
        // Where the line's text ends (trailing blanks left out): a comment ends there.
        let end = line.start + content.trim_end().len();
        let comment = comment_on_line(tree, line.start, end);
        let existing = comment.and_then(|range| {
            let captures = NOQA.captures(&text[range.clone()])?;
            Some((range.start, captures))
        });
        match existing {
            Some((start, captures)) => {
                let Some(listed) = captures.name("codes") else {
                    continue; // A bare `# noqa` already covers every code.
                };
                let have = parse_codes(Some(listed.as_str()));
                let new: Vec<&str> = codes
                    .iter()
                    .filter(|code| !have.covers(code))
                    .map(String::as_str)
                    .collect();
                if new.is_empty() {
                    continue;
                }
                let at = start + listed.end();
                edits.push((at..at, format!(", {}", new.join(", "))));
            }
            None => edits.push((end..end, format!("  # noqa: {}", codes.join(", ")))),
        }
    }
    let added = edits.len();
    let mut out = String::with_capacity(text.len() + 24 * added);
    let mut at = 0;
    for (range, content) in edits {
        out.push_str(&text[at..range.start]);
        out.push_str(&content);
        at = range.end;
    }
    out.push_str(&text[at..]);
    (out, added, skipped)
}

/// The comment token on a line, if any (the last one: a line holds at most one).
fn comment_on_line(tree: &tree_sitter::Tree, start: usize, end: usize) -> Option<TextRange> {
    let last = end.max(start + 1) - 1;
    let mut node = tree.root_node().descendant_for_byte_range(last, last)?;
    loop {
        if node.kind() == "comment" && node.start_byte() >= start {
            return Some(node.byte_range());
        }
        node = node.parent()?;
    }
}

/// Whether the end of a line falls inside a string literal (a triple-quoted one going on).
fn ends_in_string(tree: &tree_sitter::Tree, end: usize) -> bool {
    let Some(mut node) = tree
        .root_node()
        .descendant_for_byte_range(end.saturating_sub(1), end)
    else {
        return false;
    };
    loop {
        if node.kind() == "string" && node.end_byte() > end {
            return true;
        }
        match node.parent() {
            Some(parent) => node = parent,
            None => return false,
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
    fn codes_that_suppress_nothing_are_unused() {
        let s = suppressions(
            "a  # noqa: TL101, E501\nb  # torchlint: ignore[TL102,TL108]\nc  # noqa\n# torchlint: ignore-file[TL201]\n",
        );
        let is_rule = |code: &str| code.starts_with("TL");
        let unused = s.unused(&[("TL102", 2)], is_rule);
        let shown: Vec<(Vec<String>, bool)> = unused
            .into_iter()
            .map(|unused| (unused.codes, unused.whole_file))
            .collect();
        assert_eq!(
            shown,
            [
                (vec!["TL101".to_owned()], false),
                (vec!["TL108".to_owned()], false),
                (vec!["TL201".to_owned()], true),
            ]
        );
        // A finding on another line uses a whole-file directive, not a line's.
        let all = [("TL201", 9), ("TL101", 1), ("TL102", 2), ("TL108", 2)];
        assert!(s.unused(&all, is_rule).is_empty());
    }

    #[test]
    fn file_forms() {
        let s = suppressions("# torchlint: ignore-file[TL108]\nx\n");
        assert!(s.is_suppressed("TL108", 2) && !s.is_suppressed("TL201", 2));
        assert!(!s.ignores_whole_file());
        assert!(suppressions("# torchlint: ignore-file\n").ignores_whole_file());
    }

    #[test]
    fn add_noqa_leaves_a_line_that_ends_inside_a_string() {
        let text = "x = f(\"\"\"a\n\"\"\")\ny = g(1, \\\n  2)\n";
        let source = SourceFile::new("a.py", text.into());
        let tree = crate::parse::parse(text, None).unwrap();
        let rows = std::collections::BTreeMap::from([
            (1, vec!["TL108".to_owned()]),
            (3, vec!["TL108".to_owned()]),
        ]);
        let (out, added, skipped) = add_noqa(&source, &tree, &rows);
        assert_eq!((out.as_str(), added, skipped), (text, 0, vec![1, 3]));
    }
}
