//! The engine's entry point: lint one source text (a file, stdin, an editor buffer) with one
//! set of settings. Parse once, build the semantic model, run every rule in one walk, then
//! apply per-file ignores and suppression comments.

use std::sync::Arc;

use tree_sitter::Tree;

use crate::syntax::SyntaxTree;

use crate::checker::{self, Findings, InternalError};
use crate::diagnostic::{self, Diagnostic};
use crate::parse;
use crate::rules::Dispatch;
use crate::semantic::SemanticModel;
use crate::semantic::analysis::ProjectView;
use crate::semantic::cross_file::{Assumption, CalledNames, GraphCall, effective_graph_calls};
use crate::semantic::facts::{FactBase, Question};
use crate::semantic::frameworks::Frameworks;
use crate::semantic::summary::{Demand, FileSummary};
use crate::settings::Settings;
use crate::source::SourceFile;
pub use crate::source::SourceKind;
use crate::suppression::Suppressions;

/// The code of the engine's own syntax-error rule.
pub const SYNTAX_ERROR: &str = "TL001";
/// Reported for a path that could not be linted, in the machine-readable formats (`cli::check`).
pub const IO_ERROR: &str = "TL003";
/// The engine's rule for suppression comments that suppress nothing (off by default).
pub const UNUSED_SUPPRESSION: &str = "TL002";

#[derive(Debug, Default)]
pub struct LintOutcome {
    pub diagnostics: Vec<Diagnostic>,
    pub internal_errors: Vec<InternalError>,
    /// The names the file calls, for the project pass (also when the file is ignored: its
    /// call sites still count).
    pub called: CalledNames,
    /// What other files of the project need to know of this one (empty outside a project).
    pub summary: FileSummary,
    /// What this file asked the project's fact base, with the answers its findings rest on.
    pub questions: Vec<Question>,
    /// Calls that pass a graph-carrying tensor to the project's functions.
    pub graph_calls: Vec<GraphCall>,
}

/// A file's place in a project: the fact base it reads other files' facts from, and which of
/// its own names other files import.
#[derive(Clone, Copy)]
pub struct ProjectContext<'a> {
    pub facts: &'a FactBase,
    /// The file's index in the fact base, if it is one of its files.
    pub file: Option<usize>,
    /// The dotted path relative imports start from.
    pub module: &'a str,
    pub demand: &'a Demand,
    /// Whether the run reads this file's findings, or only its facts.
    pub findings: Findings,
}

/// Parses and lints `source`. Returns the tree so that an editor can re-parse incrementally
/// after edits (`tree.edit(...)` then [`lint_parsed`] with `parse::parse(text, Some(&tree))`);
/// no tree when the text cannot be handed to the parser at all. A file too dense or too slow
/// to parse is not linted: the caller reports it like a file it cannot read.
pub fn lint_source(
    source: &SourceFile,
    settings: &Settings,
) -> Result<(Option<Tree>, LintOutcome), parse::Skipped> {
    lint_source_in(source, settings, None)
}

/// [`lint_source`] for a file of a project.
pub fn lint_source_in(
    source: &SourceFile,
    settings: &Settings,
    project: Option<ProjectContext<'_>>,
) -> Result<(Option<Tree>, LintOutcome), parse::Skipped> {
    if let Err(unparsable) = parse::check_parsable(source.text()) {
        return Ok((None, unparsable_outcome(source, &unparsable, settings)));
    }
    let tree = parse::parse(source.text(), None)?;
    let outcome = lint_parsed_in(source, &tree, settings, project);
    Ok((Some(tree), outcome))
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
    lint_parsed_in(source, tree, settings, None)
}

/// [`lint_parsed`] for a file of a project.
pub fn lint_parsed_in(
    source: &SourceFile,
    tree: &Tree,
    settings: &Settings,
    project: Option<ProjectContext<'_>>,
) -> LintOutcome {
    let tree = &SyntaxTree::new(tree.clone());
    let model = SemanticModel::build(
        tree,
        source.text(),
        Dispatch::of(settings).kinds(),
        Frameworks::of(settings),
    );
    let called = CalledNames::new(model.calls_by_name.keys().copied());
    let suppressions = Suppressions::from_comments(source, &model.comments);
    let view = project.map(|project| {
        (
            ProjectView {
                facts: project.facts,
                file: project.file,
                module: project.module,
            },
            project.demand,
        )
    });
    if suppressions.ignores_whole_file() {
        // Its findings are ignored, not what other files import from it.
        let summary = view.map(|(view, demand)| {
            let analysis =
                crate::semantic::analysis::Analysis::new(&model, tree.root_node(), source.text())
                    .with_project(view);
            crate::semantic::summary::summarize(&analysis, view.module, demand)
        });
        return LintOutcome {
            called,
            summary: summary.unwrap_or_default(),
            ..LintOutcome::default()
        };
    }

    let findings = project.map_or(Findings::Made, |project| project.findings);
    let checked = checker::check(source, tree, &model, settings, view, findings);
    if findings == Findings::FactsOnly {
        return LintOutcome {
            internal_errors: checked.internal_errors,
            called,
            summary: checked.summary,
            questions: checked.questions,
            graph_calls: checked.graph_calls,
            ..LintOutcome::default()
        };
    }
    let mut diagnostics = syntax_errors(source, &model, settings);
    diagnostics.extend(checked.diagnostics);
    let internal_errors = checked.internal_errors;

    // What the suppressions named and nothing fired for, asked before they drop what did.
    let unused = if settings.is_enabled(UNUSED_SUPPRESSION) {
        unused_suppressions(source, settings, &suppressions, &diagnostics)
    } else {
        Vec::new()
    };
    diagnostics.retain(|diagnostic| {
        let row = source.location(diagnostic.range.start).row;
        !suppressions.is_suppressed(diagnostic.code(), row)
            && !settings.is_ignored_for_file(source.name(), &diagnostic.rule)
    });
    diagnostics.extend(unused);
    diagnostic::sort(source, &mut diagnostics);
    // Outside a project, only this file's own calls can confirm what waits for a caller.
    if project.is_none() {
        keep_graph_argument_findings(&mut diagnostics, &checked.graph_calls);
    }
    // One finding per rule and range; of twins, the one that waits for no caller.
    diagnostics.dedup_by(|later, kept| {
        let twins = later.rule.code == kept.rule.code && later.range == kept.range;
        if twins && waits_for_a_caller(kept) && !waits_for_a_caller(later) {
            std::mem::swap(later, kept);
        }
        twins
    });
    merge_superseded(&mut diagnostics, source);
    // The config's fix selection (`fixable`, `unfixable`, `extend-safe-fixes`, ...). A
    // notebook's fixes are edits of its cells' joined text, which `--fix` makes in the cells.
    for diagnostic in &mut diagnostics {
        if let Some(fix) = &mut diagnostic.fix {
            fix.applicability =
                settings.fix_applicability(&diagnostic.rule.code, fix.applicability);
        }
    }
    LintOutcome {
        diagnostics,
        internal_errors,
        called,
        summary: checked.summary,
        questions: checked.questions,
        graph_calls: checked.graph_calls,
    }
}

/// TL002 findings: the codes of suppression comments that suppress nothing in `diagnostics`
/// (every finding of the file, before suppression).
fn unused_suppressions(
    source: &SourceFile,
    settings: &Settings,
    suppressions: &Suppressions,
    diagnostics: &[Diagnostic],
) -> Vec<Diagnostic> {
    let Some(rule) = settings.registry.get(UNUSED_SUPPRESSION) else {
        return Vec::new();
    };
    if settings.is_ignored_for_file(source.name(), rule) {
        return Vec::new();
    }
    let fired: Vec<(&str, usize)> = diagnostics
        .iter()
        .map(|diagnostic| {
            let row = source.location(diagnostic.range.start).row;
            (diagnostic.code(), row)
        })
        .collect();
    // `# noqa: TL002` names no finding it could suppress but TL002's own: it silences TL002 on
    // its line, as Ruff's `RUF100` is silenced.
    let is_rule = |code: &str| code != UNUSED_SUPPRESSION && settings.registry.get(code).is_some();
    suppressions
        .unused(&fired, is_rule)
        .into_iter()
        .filter(|unused| {
            let row = source.location(unused.comment.start).row;
            unused.whole_file || !suppressions.is_suppressed(UNUSED_SUPPRESSION, row)
        })
        .map(|unused| {
            let codes: Vec<String> = unused
                .codes
                .iter()
                .map(|code| {
                    let enabled = settings.is_enabled(code);
                    if enabled {
                        format!("`{code}`")
                    } else {
                        format!("`{code}` (not enabled)")
                    }
                })
                .collect();
            let place = if unused.whole_file {
                "in this file"
            } else {
                "on this line"
            };
            let message = rule
                .message
                .replace("{codes}", &codes.join(", "))
                .replace("{place}", place);
            Diagnostic::new(rule, message, unused.comment)
        })
        .collect()
}

/// One finding per hazard: of a rule's finding and one on the same line by a rule it
/// supersedes (`RuleMeta::supersedes`), resting on the same assumption, the first is kept and
/// the second becomes its label. Suppressions and ignores have already run, so a user who
/// silenced the first still sees the second.
fn merge_superseded(diagnostics: &mut Vec<Diagnostic>, source: &SourceFile) {
    if diagnostics.iter().all(|d| d.rule.supersedes.is_empty()) {
        return;
    }
    let row = |diagnostic: &Diagnostic| source.location(diagnostic.range.start).row;
    let mut merged = vec![false; diagnostics.len()];
    for at in 0..diagnostics.len() {
        if merged[at] || diagnostics[at].rule.supersedes.is_empty() {
            continue;
        }
        for other in 0..diagnostics.len() {
            let (kept, dropped) = (&diagnostics[at], &diagnostics[other]);
            if other == at
                || merged[other]
                || !kept.rule.supersedes.contains(&dropped.rule.code)
                || row(kept) != row(dropped)
                || kept.assumption != dropped.assumption
            {
                continue;
            }
            let label = format!("{} also: {}", dropped.rule.code, dropped.message);
            let range = dropped.range.clone();
            diagnostics[at].labels.push(crate::diagnostic::Label {
                range,
                message: label,
            });
            merged[other] = true;
        }
    }
    let mut at = 0;
    diagnostics.retain(|_| {
        at += 1;
        !merged[at - 1]
    });
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
                Some(token) => {
                    format!(
                        "syntax error: expected `{}`",
                        crate::source::snippet(token, 40)
                    )
                }
                None => {
                    let text = &source.text()[error.range.clone()];
                    let end = memchr::memchr2(b'\n', b'\r', text.as_bytes()).unwrap_or(text.len());
                    let first_line = text[..end].trim();
                    if first_line.is_empty() {
                        "syntax error: unexpected input".to_owned()
                    } else {
                        format!(
                            "syntax error: cannot parse `{}`",
                            crate::source::snippet(first_line, 40)
                        )
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

fn waits_for_a_caller(diagnostic: &Diagnostic) -> bool {
    matches!(
        diagnostic.assumption,
        Some(Assumption::GraphArgument { .. })
    )
}

/// Keeps a finding that waits for a graph-carrying argument (`Assumption::GraphArgument`)
/// only if one of `calls` passes one, and says where; drops the others.
pub fn keep_graph_argument_findings(
    diagnostics: &mut Vec<crate::diagnostic::Diagnostic>,
    calls: &[GraphCall],
) {
    if !diagnostics
        .iter()
        .any(|d| matches!(d.assumption, Some(Assumption::GraphArgument { .. })))
    {
        return;
    }
    let calls = effective_graph_calls(calls);
    let calls = calls.as_slice();
    let mut kept = Vec::with_capacity(diagnostics.len());
    for mut diagnostic in std::mem::take(diagnostics) {
        let Some(Assumption::GraphArgument {
            function,
            parameter,
            name,
            per_batch,
            expects,
            device,
        }) = &diagnostic.assumption
        else {
            kept.push(diagnostic);
            continue;
        };
        let Some(call) = calls
            .iter()
            .find(|call| call.satisfies(function, *parameter, name, *per_batch, *expects, *device))
        else {
            continue;
        };
        diagnostic.message = diagnostic.message.replace("{caller}", &call.site);
        diagnostic.assumption = None;
        kept.push(diagnostic);
    }
    // A finding the file made for a caller of its own (`meter.update(loss)` beside the meter)
    // may now be there twice; they are sorted, so twins are neighbours.
    kept.dedup_by(|a, b| a.rule.code == b.rule.code && a.range == b.range);
    *diagnostics = kept;
}
