//! The one diagnostic model every rule produces and every renderer consumes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::rules::RuleMeta;
use crate::semantic::cross_file::Assumption;
use crate::source::{SourceFile, TextRange};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "error" => Some(Severity::Error),
            "warning" => Some(Severity::Warning),
            "info" => Some(Severity::Info),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

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

/// Ruff's fix applicability levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    Safe,
    Unsafe,
    DisplayOnly,
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
