//! The one diagnostic model every rule produces and every renderer consumes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

// A finding's severity and its fix's applicability are the rule file's words (a rule's default
// severity, a declarative fix's applicability), defined with the rule metadata below this layer.
use crate::rule_meta::RuleMeta;
pub use crate::rule_meta::{Applicability, Severity};
use crate::semantic::cross_file::Assumption;
use crate::source::{SourceFile, TextRange};

/// A secondary span that explains the finding (the loop that makes it per-step, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub range: TextRange,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    pub range: TextRange,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    pub message: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}

#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub rule: Arc<RuleMeta>,
    /// The rule's default severity, unless the finding is graver or milder than usual.
    pub severity: Severity,
    pub message: String,
    pub range: TextRange,
    pub labels: Vec<Label>,
    pub help: Option<String>,
    pub fix: Option<Fix>,
    /// What the finding takes for granted about other files; the project pass drops it when
    /// that turns out false.
    pub assumption: Option<Assumption>,
}

impl Diagnostic {
    pub fn new(rule: &Arc<RuleMeta>, message: impl Into<String>, range: TextRange) -> Self {
        Diagnostic {
            rule: Arc::clone(rule),
            severity: rule.severity,
            message: message.into(),
            range,
            labels: Vec::new(),
            help: rule.help.clone(),
            fix: None,
            assumption: None,
        }
    }

    pub fn assuming(mut self, assumption: Option<Assumption>) -> Self {
        self.assumption = assumption;
        self
    }

    pub fn with_label(mut self, range: TextRange, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            range,
            message: message.into(),
        });
        self
    }

    pub fn code(&self) -> &str {
        &self.rule.code
    }

    pub fn severity(&self) -> Severity {
        self.severity
    }
}

/// Everything found in one file, with the text the diagnostics point into.
#[derive(Debug, Clone)]
pub struct FileDiagnostics {
    pub source: Arc<SourceFile>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Sorts by line, column and code so that output is deterministic.
pub fn sort(source: &SourceFile, diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        let la = source.location(a.range.start);
        let lb = source.location(b.range.start);
        la.cmp(&lb)
            .then_with(|| a.rule.code.cmp(&b.rule.code))
            .then_with(|| a.range.end.cmp(&b.range.end))
            .then_with(|| a.message.cmp(&b.message))
    });
}
