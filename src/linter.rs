//! The engine's entry point: lint one source text (a file, stdin, an editor buffer) with one
//! set of settings. Parse once, build the semantic model, run every rule in one walk, then
//! apply per-file ignores and suppression comments.

use std::path::Path;
use std::sync::Arc;

use tree_sitter::Tree;

use crate::checker::{self, InternalError};
use crate::diagnostic::{self, Diagnostic};
use crate::parse;
use crate::project::CalledNames;
use crate::semantic::SemanticModel;
use crate::settings::Settings;
use crate::source::SourceFile;
use crate::suppression::Suppressions;

/// The code of the engine's own syntax-error rule.
pub const SYNTAX_ERROR: &str = "TL001";

/// The kinds of files torchlint reads. Notebooks are turned into Python text plus a cell map
/// (`notebook`) before they reach [`lint_source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Python,
    Stub,
    Notebook,
}

impl SourceKind {
    pub fn from_path(path: &Path) -> Option<SourceKind> {
        match path.extension()?.to_str()? {
            "py" => Some(SourceKind::Python),
            "pyi" => Some(SourceKind::Stub),
            "ipynb" => Some(SourceKind::Notebook),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
pub struct LintOutcome {
    pub diagnostics: Vec<Diagnostic>,
    pub internal_errors: Vec<InternalError>,
    /// The names the file calls, for the project pass (also when the file is ignored: its
    /// call sites still count).
    pub called: CalledNames,
}

/// Parses and lints `source`. Returns the tree so that an editor can re-parse incrementally
/// after edits (`tree.edit(...)` then [`lint_parsed`] with `parse::parse(text, Some(&tree))`);
/// no tree when the text cannot be handed to the parser at all.
pub fn lint_source(source: &SourceFile, settings: &Settings) -> (Option<Tree>, LintOutcome) {
    if let Err(unparsable) = parse::check_parsable(source.text()) {
        return (None, unparsable_outcome(source, &unparsable, settings));
    }
    let tree = parse::parse(source.text(), None);
    let outcome = lint_parsed(source, &tree, settings);
    (Some(tree), outcome)
}

fn unparsable_outcome(
    source: &SourceFile,
    unparsable: &parse::Unparsable,
    settings: &Settings,
) -> LintOutcome {
    let diagnostics = match settings.registry.get(SYNTAX_ERROR) {
        Some(rule) if settings.is_enabled(SYNTAX_ERROR) => {
            let line = source.line_range(source.line_index(unparsable.offset));
            vec![Diagnostic::new(rule, unparsable.message.clone(), line)]
        }
        _ => Vec::new(),
    };
    LintOutcome {
        diagnostics,
        ..LintOutcome::default()
    }
}

/// Lints an already parsed source.
pub fn lint_parsed(source: &SourceFile, tree: &Tree, settings: &Settings) -> LintOutcome {
    let model = SemanticModel::build(tree, source.text(), settings.dispatch().kinds());
    let called = CalledNames::new(model.calls_by_name.keys().copied());
    let suppressions = Suppressions::from_comments(source, &model.comments);
    if suppressions.ignores_whole_file() {
        return LintOutcome {
            called,
            ..LintOutcome::default()
        };
    }

    let mut diagnostics = syntax_errors(source, &model, settings);
    let (found, internal_errors) = checker::check(source, tree, &model, settings);
    diagnostics.extend(found);

    diagnostics.retain(|diagnostic| {
        let row = source.location(diagnostic.range.start).row;
        !suppressions.is_suppressed(diagnostic.code(), row)
            && !settings.is_ignored_for_file(source.name(), &diagnostic.rule)
    });
    diagnostic::sort(source, &mut diagnostics);
    diagnostics.dedup_by(|a, b| a.rule.code == b.rule.code && a.range == b.range);
    LintOutcome {
        diagnostics,
        internal_errors,
        called,
    }
}

fn syntax_errors(
    source: &SourceFile,
    model: &SemanticModel,
    settings: &Settings,
) -> Vec<Diagnostic> {
    if model.syntax_errors.is_empty() || !settings.is_enabled(SYNTAX_ERROR) {
        return Vec::new();
    }
    let Some(rule) = settings.registry.get(SYNTAX_ERROR) else {
        return Vec::new();
    };
    let rule = Arc::clone(rule);
    model
        .syntax_errors
        .iter()
        .map(|error| {
            let message = match &error.missing {
                Some(token) => format!("syntax error: expected `{token}`"),
                None => {
                    let text = &source.text()[error.range.clone()];
                    let first_line = text.lines().next().unwrap_or("").trim();
                    if first_line.is_empty() {
                        "syntax error: unexpected input".to_owned()
                    } else {
                        let shown: String = first_line.chars().take(40).collect();
                        let ellipsis = if shown.len() < first_line.len() {
                            "..."
                        } else {
                            ""
                        };
                        format!("syntax error: cannot parse `{shown}{ellipsis}`")
                    }
                }
            };
            // Point at the first line of the unparsable region: a whole-file ERROR node
            // would otherwise underline everything.
            let range = error.range.clone();
            let line_end = source.line_range(source.line_index(range.start)).end;
            let end = range.end.min(line_end.max(range.start));
            Diagnostic::new(&rule, message, range.start..end)
        })
        .collect()
}
