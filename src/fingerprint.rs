//! Finding fingerprints that survive edits elsewhere in the file: a hash of the rule, the file
//! and the flagged source text with its whitespace normalized, plus which occurrence of that
//! text it is — never the line number. GitLab's Code Quality report and the baseline both use
//! them, so a finding keeps its identity while lines above it come and go.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::diagnostic::Diagnostic;
use crate::source::SourceFile;

/// Hands out fingerprints for the findings of one or more files, in source order.
#[derive(Default)]
pub struct Fingerprinter {
    /// Findings already seen per file, rule and normalized text: the occurrence index keeps
    /// identical findings in one file apart.
    seen: HashMap<(String, String, String), usize>,
}

/// One finding's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// 64 hex digits (SHA-256).
    pub hash: String,
    /// The flagged text, whitespace collapsed: what a reader of a baseline recognizes.
    pub flagged: String,
}

impl Fingerprinter {
    /// The fingerprint of `diagnostic` in `source`, filed under `path` (how the caller names
    /// the file: the shown path, or a path relative to the baseline). Call in source order.
    pub fn fingerprint(
        &mut self,
        path: &str,
        source: &SourceFile,
        diagnostic: &Diagnostic,
    ) -> Fingerprint {
        let text = source
            .text()
            .get(diagnostic.range.clone())
            .unwrap_or_default();
        let flagged = normalize(text);
        let occurrence = self
            .seen
            .entry((
                path.to_owned(),
                diagnostic.code().to_owned(),
                flagged.clone(),
            ))
            .and_modify(|n| *n += 1)
            .or_insert(0);
        let mut hash = Sha256::new();
        for part in [path, diagnostic.code(), &flagged] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hash.update((*occurrence as u64).to_le_bytes());
        Fingerprint {
            hash: hash
                .finalize()
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect(),
            flagged,
        }
    }
}

/// Whitespace runs become one space, so re-indenting a block or re-wrapping a call keeps the
/// finding's identity.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_whitespace() {
        assert_eq!(normalize("  a +=\n\t  b  "), "a += b");
    }
}
