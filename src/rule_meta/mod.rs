//! What torchlint knows about a rule besides its check, as data: identity, severity, message,
//! docs, options, the examples that double as its first tests, and a declarative rule's
//! `[[match]]` spec. Read from the rule files (`rule_file`) into the registry (`registry`).
//! Settings select rules by it and a finding carries it, so it sits below both; the checks
//! and the per-node-kind dispatch that run a rule stay in `rules`.

pub mod applicability;
pub mod declarative;
pub mod registry;
pub mod rule_file;
pub mod severity;

use std::path::PathBuf;
use std::sync::Arc;

pub use applicability::Applicability;
use declarative::DeclarativeRule;
pub use registry::RuleRegistry;
use rule_file::{Docs, Documentation};
pub use severity::Severity;

/// The fixed documentation layout, in order. Every built-in rule has all of them.
pub const DOC_SECTIONS: [&str; 6] = [
    "What it does",
    "Why it costs memory",
    "Example",
    "Use instead",
    "How the probe confirms it",
    "Options",
];

/// The optional section of a rule with a fix, after `Use instead`: whether `--fix` applies it
/// as safe or only with `--unsafe-fixes`, and why.
pub const FIX_SAFETY_SECTION: &str = "Fix safety";

/// The order sections come in: [`DOC_SECTIONS`] with the optional fix-safety section.
pub const LAYOUT: [&str; 7] = [
    DOC_SECTIONS[0],
    DOC_SECTIONS[1],
    DOC_SECTIONS[2],
    DOC_SECTIONS[3],
    FIX_SAFETY_SECTION,
    DOC_SECTIONS[4],
    DOC_SECTIONS[5],
];

/// The optional last section holding extra examples; they run as tests but are not printed
/// by `torchlint rule`.
pub const TEST_CASES_SECTION: &str = "Test cases";

pub const DOCS_BASE_URL: &str = "https://github.com/torchlint/torchlint/blob/main/rules";

#[derive(Debug)]
pub struct RuleMeta {
    pub code: String,
    pub name: String,
    pub pack: String,
    pub severity: Severity,
    pub enabled_by_default: bool,
    /// The finding's message; declarative rules may use `{capture}` placeholders.
    pub message: String,
    pub help: Option<String>,
    /// The documentation, read when asked for: [`RuleMeta::summary`], [`RuleMeta::sections`],
    /// [`RuleMeta::examples`].
    pub(crate) documentation: Documentation,
    pub options: Vec<RuleOption>,
    /// Rules (by code) whose finding on the same line tells of the same hazard as this one's:
    /// one finding is reported, this rule's, with the other's message as a label
    /// (`outs.append(model(x))` in evaluation code is TL101's, not TL101's and TL102's).
    pub supersedes: Vec<String>,
    pub implementation: Implementation,
    pub origin: Origin,
}

#[derive(Debug, Clone)]
pub struct DocSection {
    pub title: String,
    pub body: String,
}

#[derive(Debug)]
pub enum Implementation {
    /// A module under `src/rules/` with the rule's name (`rules::rust_check`).
    Rust,
    /// A tree-sitter query plus context predicates, written in the rule file.
    Declarative(Arc<DeclarativeRule>),
    /// Produced by the engine itself (syntax errors).
    Engine,
}

#[derive(Debug, Clone)]
pub enum Origin {
    /// Compiled into the binary from `rules/<pack>/<name>.md`.
    Builtin { path: &'static str },
    /// Loaded from a user pack named in `extend-rule-packs`.
    User { path: PathBuf },
}

impl Origin {
    pub fn display(&self) -> String {
        match self {
            Origin::Builtin { path } => (*path).to_owned(),
            Origin::User { path } => path.display().to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleKind {
    Flagged,
    NotFlagged,
}

#[derive(Debug, Clone)]
pub struct Example {
    pub kind: ExampleKind,
    /// The snippet with `# expect: CODE` markers removed.
    pub code: String,
    /// 1-based lines of the snippet expected to be reported (by this rule).
    pub expected_lines: Vec<usize>,
    /// 1-based line of the snippet's opening fence in the rule file, for test failures.
    pub file_line: usize,
}

#[derive(Debug, Clone)]
pub struct RuleOption {
    pub name: String,
    pub kind: OptionKind,
    pub default: toml::Value,
    pub doc: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    Boolean,
    Integer,
    String,
    StringList,
}

impl OptionKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "boolean" => Some(OptionKind::Boolean),
            "integer" => Some(OptionKind::Integer),
            "string" => Some(OptionKind::String),
            "list-of-strings" => Some(OptionKind::StringList),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OptionKind::Boolean => "boolean",
            OptionKind::Integer => "integer",
            OptionKind::String => "string",
            OptionKind::StringList => "list-of-strings",
        }
    }

    /// The kind in a sentence: "takes {an integer}".
    pub fn described(self) -> &'static str {
        match self {
            OptionKind::Boolean => "a boolean",
            OptionKind::Integer => "an integer",
            OptionKind::String => "a string",
            OptionKind::StringList => "a list of strings",
        }
    }

    pub fn accepts(self, value: &toml::Value) -> bool {
        match self {
            OptionKind::Boolean => value.is_bool(),
            OptionKind::Integer => value.is_integer(),
            OptionKind::String => value.is_str(),
            OptionKind::StringList => value
                .as_array()
                .is_some_and(|items| items.iter().all(toml::Value::is_str)),
        }
    }
}

impl RuleMeta {
    pub fn url(&self) -> Option<String> {
        match &self.origin {
            Origin::Builtin { path } => Some(format!(
                "{DOCS_BASE_URL}/{}",
                path.trim_start_matches("rules/")
            )),
            Origin::User { .. } => None,
        }
    }

    /// The documentation as Markdown, as `torchlint rule` prints it.
    pub fn markdown(&self) -> String {
        let mut out = format!("# {} ({})\n\n", self.name, self.code);
        out.push_str(&format!(
            "Pack: `{}` · Default severity: {} · {}\n",
            self.pack,
            self.severity.as_str(),
            if self.enabled_by_default {
                "enabled by default"
            } else {
                "not enabled by default (opt in with `--extend-select`)"
            }
        ));
        for section in self.sections() {
            out.push_str(&format!(
                "\n## {}\n\n{}\n",
                section.title,
                section.body.trim()
            ));
        }
        out
    }

    /// The documentation, or where in the rule file (a byte offset) and why it cannot be read.
    pub fn parse_documentation(&self) -> Result<&Docs, (usize, String)> {
        self.documentation.parse(&self.code, &self.message)
    }

    fn docs(&self) -> &Docs {
        self.documentation.docs(&self.code, &self.message)
    }

    /// First sentence of "What it does", for one-line listings and SARIF.
    pub fn summary(&self) -> &str {
        &self.docs().summary
    }

    /// The documentation sections, in the fixed order, with example markers removed.
    pub fn sections(&self) -> &[DocSection] {
        &self.docs().sections
    }

    pub fn examples(&self) -> &[Example] {
        &self.docs().examples
    }

    pub fn option(&self, name: &str) -> Option<&RuleOption> {
        self.options.iter().find(|option| option.name == name)
    }
}
