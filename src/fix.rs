//! Applying fixes: the edits of a file's fixable findings, together, as Ruff applies them.
//!
//! A fix is applied whole or not at all; a fix whose edits overlap one already applied waits
//! for the next round (the caller lints the fixed text again and applies what is left, up to a
//! bound). A fixed text that parses with more syntax errors than before is not kept.

use crate::diagnostic::{Applicability, Diagnostic, Fix};

/// Which fixes a run applies: safe ones always, unsafe ones with `--unsafe-fixes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    Safe,
    SafeAndUnsafe,
}

impl Allowed {
    /// Safe fixes, and the unsafe ones too when `unsafe_fixes` (`--unsafe-fixes`, the
    /// editor's `unsafeFixes`).
    pub fn with_unsafe(unsafe_fixes: bool) -> Allowed {
        if unsafe_fixes {
            Allowed::SafeAndUnsafe
        } else {
            Allowed::Safe
        }
    }

    pub fn admits(self, fix: &Fix) -> bool {
        match fix.applicability {
            Applicability::Safe => true,
            Applicability::Unsafe => self == Allowed::SafeAndUnsafe,
            Applicability::DisplayOnly => false,
        }
    }
}

/// The text with the admitted fixes applied, and which findings' fixes were (their indices in
/// the slice given).
#[derive(Debug, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    pub fixed: Vec<usize>,
}

/// Applies the admitted fixes of `diagnostics` to `text` (in the order of their first edit;
/// one whose edits overlap an applied one is left for the next round). `None` when none
/// applies, or when the result would parse with more syntax errors than `text` does.
pub fn apply(text: &str, diagnostics: &[Diagnostic], allowed: Allowed) -> Option<Applied> {
    let mut fixes: Vec<(usize, &Fix)> = diagnostics
        .iter()
        .enumerate()
        .filter_map(|(at, diagnostic)| diagnostic.fix.as_ref().map(|fix| (at, fix)))
        .filter(|(_, fix)| allowed.admits(fix) && !fix.edits.is_empty())
        .collect();
    fixes.sort_by_key(|(_, fix)| fix.edits.iter().map(|edit| edit.range.start).min());
    let mut edits = Vec::new();
    let mut fixed = Vec::new();
    for (at, fix) in fixes {
        let overlaps = fix.edits.iter().any(|edit| {
            edits.iter().any(|taken: &&crate::diagnostic::Edit| {
                // Two edits at one offset (an insertion beside a replacement) overlap too:
                // their order would be a guess.
                edit.range.start < taken.range.end && taken.range.start < edit.range.end
                    || edit.range.start == taken.range.start
            })
        });
        let in_text = fix.edits.iter().all(|edit| {
            edit.range.end <= text.len()
                && text.is_char_boundary(edit.range.start)
                && text.is_char_boundary(edit.range.end)
        });
        if !overlaps && in_text {
            edits.extend(&fix.edits);
            fixed.push(at);
        }
    }
    if fixed.is_empty() {
        return None;
    }
    edits.sort_by_key(|edit| (edit.range.start, edit.range.end));
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for edit in edits {
        out.push_str(&text[at..edit.range.start]);
        out.push_str(&edit.content);
        at = edit.range.end;
    }
    out.push_str(&text[at..]);
    (syntax_errors(&out) <= syntax_errors(text)).then_some(Applied { text: out, fixed })
}

/// How many syntax errors (ERROR and missing nodes) tree-sitter finds in a text.
fn syntax_errors(text: &str) -> usize {
    let Ok(tree) = crate::parse::parse(text, None) else {
        return usize::MAX;
    };
    if !tree.root_node().has_error() {
        return 0;
    }
    let mut count = 0;
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        if node.is_error() || node.is_missing() {
            count += 1;
        }
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return count;
            }
        }
    }
}

/// A unified diff of a file's fix, as `--diff` prints it (`a/` and `b/` before the name).
pub fn unified_diff(name: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Edit;
    use std::sync::Arc;

    fn finding(
        applicability: Applicability,
        edits: &[(std::ops::Range<usize>, &str)],
    ) -> Diagnostic {
        let rule = Arc::new(
            crate::rule_meta::RuleRegistry::builtin()
                .get("TL108")
                .unwrap()
                .clone(),
        );
        let mut diagnostic = Diagnostic::new(&rule, "m", 0..1);
        diagnostic.fix = Some(Fix {
            message: "fix".into(),
            applicability,
            edits: edits
                .iter()
                .map(|(range, content)| Edit {
                    range: range.clone(),
                    content: (*content).to_owned(),
                })
                .collect(),
        });
        diagnostic
    }

    #[test]
    fn admitted_fixes_apply_together_and_overlapping_ones_wait() {
        let text = "a = f(x)\nb = g(y)\n";
        let diagnostics = [
            finding(Applicability::Safe, &[(7..7, ", 1")]),
            finding(Applicability::Unsafe, &[(16..16, ", 2")]),
            finding(Applicability::Safe, &[(7..8, ", 3)")]),
        ];
        let safe = apply(text, &diagnostics, Allowed::Safe).unwrap();
        assert_eq!(
            safe,
            Applied {
                text: "a = f(x, 1)\nb = g(y)\n".into(),
                fixed: vec![0]
            }
        );
        let all = apply(text, &diagnostics, Allowed::SafeAndUnsafe).unwrap();
        assert_eq!(all.text, "a = f(x, 1)\nb = g(y, 2)\n");
        assert_eq!(
            all.fixed,
            [0, 1],
            "the overlapping third waits for the next round"
        );
    }

    #[test]
    fn a_fix_that_breaks_the_syntax_is_not_kept() {
        let text = "a = f(x)\n";
        let breaking = [finding(Applicability::Safe, &[(7..8, "")])];
        assert_eq!(apply(text, &breaking, Allowed::Safe), None);
        let display = [finding(Applicability::DisplayOnly, &[(7..7, ", 1")])];
        assert_eq!(apply(text, &display, Allowed::SafeAndUnsafe), None);
    }

    #[test]
    fn the_diff_names_the_file_as_git_does() {
        let diff = unified_diff("train.py", "a\nb\n", "a\nc\n");
        assert_eq!(
            diff,
            "--- a/train.py\n+++ b/train.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
    }
}
