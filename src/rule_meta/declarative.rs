//! The `[[match]]` tables of a declarative rule file, validated into a [`DeclarativeRule`]: the
//! rule as written, its patterns compiled against the grammar. `rules::declarative` runs it.

use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;

use tree_sitter::{CaptureQuantifier, Query, QueryErrorKind};

use super::Applicability;
use crate::parse::python;

/// A rule written as data: one or more tree-sitter patterns, each with context predicates.
/// A rule's `[[match]]` clauses. Compiling a tree-sitter query costs milliseconds, more than
/// linting a small file: the built-in rules (validated by the test suite) compile theirs when
/// a clause first runs, so a run that meets none of their node kinds pays nothing; a user
/// pack's are compiled when it loads, so that a bad pattern is an error at its line.
pub struct DeclarativeRule {
    /// The node kind each clause starts at, known without compiling it (the dispatch table).
    root_kinds: Vec<u16>,
    /// Each clause's cheap test before its query runs (or is compiled).
    prefilters: Vec<Prefilter>,
    /// Each clause's words the file must hold for it to match at all (see [`Words`]).
    words: Vec<Words>,
    /// What the clauses are built from until they are.
    pending: std::sync::Mutex<Option<Pending>>,
    clauses: std::sync::OnceLock<Vec<MatchClause>>,
}

struct Pending {
    raw: Vec<Spanned<RawMatch>>,
    toml_text: String,
    message: String,
}

impl std::fmt::Debug for DeclarativeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclarativeRule")
            .field("root_kinds", &self.root_kinds)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct MatchClause {
    /// The rule's query, shared by its clauses: compiling one scans the grammar's whole parse
    /// table (about 2.5 ms for Python) once per query, and each pattern adds its own analysis,
    /// so a rule compiles its distinct patterns at once (see `shared_query`).
    pub query: Arc<Query>,
    /// This clause's pattern in `query`.
    pub pattern: usize,
    /// Node kind the pattern starts at; the checker runs the clause only on such nodes.
    pub root_kind: u16,
    /// Capture the finding is reported at; `None` reports the whole matched node.
    pub report: Option<u32>,
    pub message: Option<String>,
    pub require: Vec<Predicate>,
    pub fix: Option<FixSpec>,
}

/// `(field, names)`: the root's child in that field must resolve to one of the names.
/// `resolves` conditions on captures that are direct field children of the root
/// (`function: (_) @callee`), checked before the query runs, which skips the query (and its
/// compiling) for nearly every node; the full predicate still runs on matches.
pub type Prefilter = Vec<(u16, Vec<String>)>;

/// For each `resolves` predicate of a clause, the last parts of the names it accepts: a name
/// resolves through the file's own imports, so the file's text spells its last part (in the
/// call, or in the import that binds it, `as` another name or not). A file that lacks every
/// word of some predicate cannot match the clause anywhere, and is not matched against it:
/// compiling a query costs milliseconds (TL202's `with` patterns, 12 ms), matching one at
/// every node of its kind more.
pub type Words = Vec<Vec<String>>;

fn words(raw: &RawMatch) -> Words {
    raw.require
        .iter()
        .filter_map(|predicate| {
            let to = predicate.get_ref().to.as_ref()?;
            predicate.get_ref().resolves.as_ref()?;
            let mut last: Vec<String> = to
                .iter()
                .filter_map(|name| name.rsplit('.').next())
                .map(str::to_owned)
                .collect();
            if to.is_empty() || last.iter().any(String::is_empty) {
                return None;
            }
            last.sort();
            last.dedup();
            Some(last)
        })
        .collect()
}

/// The `resolves` predicates of a clause on captures bound to a direct field of its root, read
/// off the raw table: cheap enough to ask at every node of the root's kind, before the query
/// is compiled or run. A predicate the clause's validation would reject is left out here.
fn prefilter(raw: &RawMatch) -> Prefilter {
    let direct = direct_field_captures(raw.pattern.get_ref());
    raw.require
        .iter()
        .filter_map(|predicate| {
            let predicate = predicate.get_ref();
            let (name, to) = (predicate.resolves.as_ref()?, predicate.to.as_ref()?);
            if to.is_empty() {
                return None;
            }
            let (field, _) = direct.iter().find(|(_, capture)| capture == name)?;
            let field = python().field_id_for_name(field)?.get();
            Some((field, to.clone()))
        })
        .collect()
}

#[derive(Debug, Clone)]
pub enum Predicate {
    /// The captured expression resolves through imports to one of these qualified names.
    Resolves {
        capture: u32,
        to: Vec<String>,
    },
    /// The captured call (or its argument list) has no such argument.
    LacksArgument {
        capture: u32,
        argument: ArgumentRef,
    },
    /// The captured call has the argument, optionally with this literal value, or with a value
    /// that may be `None` (a literal, a parameter defaulting to it, a branch of a conditional).
    HasArgument {
        capture: u32,
        argument: ArgumentRef,
        equals: Option<String>,
        may_be_none: bool,
    },
    Inside(Context),
    NotInside(Context),
    Grad(GradRequirement),
    /// The captured node's subtree trains a model (a training loop, or a call of a function
    /// that contains one).
    ContainsTraining {
        capture: u32,
    },
    /// The statement holding the match (a compound statement's header only) does not match
    /// this regex: a way to say what the surrounding code must not be about.
    StatementNotMatching(regex::Regex),
}

/// An argument named by keyword, by position, or both (`torch.load(f, "cpu")`).
#[derive(Debug, Clone)]
pub struct ArgumentRef {
    pub keyword: Option<String>,
    pub position: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Any `for`/`while` loop.
    Loop,
    /// A loop that runs once per batch: it trains, or iterates a data loader.
    PerBatchLoop,
    /// A loop that calls `.backward()` or `optimizer.step()` (not only in a nested loop).
    TrainingLoop,
    Function,
    ModuleLevel,
    ExceptHandler,
    /// The node is the context manager of a `with` statement.
    WithItem,
    /// Inside an `if` whose condition names a debug flag (`args.debug`, `DEBUG_ANOMALY`).
    DebugGuard,
}

pub const CONTEXTS: [(&str, Context); 8] = [
    ("loop", Context::Loop),
    ("per-batch-loop", Context::PerBatchLoop),
    ("training-loop", Context::TrainingLoop),
    ("function", Context::Function),
    ("module-level", Context::ModuleLevel),
    ("except-handler", Context::ExceptHandler),
    ("with-item", Context::WithItem),
    ("debug-guard", Context::DebugGuard),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradRequirement {
    Enabled,
    Disabled,
}

#[derive(Debug, Clone)]
pub struct FixSpec {
    pub message: String,
    pub applicability: Applicability,
    pub edit: FixEdit,
    /// Methods (`load_state_dict`) such that the fix is safe where everything the reported
    /// call returns goes into an argument of one of them.
    pub safe_if_passed_to: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum FixEdit {
    /// Append `text` as the last argument of the captured call or argument list.
    AppendArgument { capture: u32, text: String },
    /// Replace the captured node with `template`, its `{name}` placeholders filled with the
    /// whole source text of the captures they name (ast-grep's rewrite).
    Replace { capture: u32, template: String },
    /// Remove the statement the captured node is (its whole line; `pass` where it is the only
    /// statement of its block).
    RemoveStatement { capture: u32 },
    /// Replace the captured `with` statement by its body, dedented (only a single manager
    /// bound to no name).
    Unwrap { capture: u32 },
}

/// A validation failure, with the byte offset in the TOML text it concerns.
#[derive(Debug)]
pub struct SpecError {
    pub offset: usize,
    pub message: String,
}

impl SpecError {
    fn at(offset: usize, message: impl Into<String>) -> Self {
        SpecError {
            offset,
            message: message.into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawMatch {
    pattern: Spanned<String>,
    report: Option<Spanned<String>>,
    message: Option<String>,
    #[serde(default)]
    require: Vec<Spanned<RawPredicate>>,
    fix: Option<Spanned<RawFix>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPredicate {
    resolves: Option<String>,
    to: Option<Vec<String>>,
    lacks_argument: Option<String>,
    has_argument: Option<String>,
    keyword: Option<String>,
    position: Option<usize>,
    equals: Option<String>,
    may_be_none: Option<bool>,
    inside: Option<String>,
    not_inside: Option<String>,
    grad: Option<String>,
    contains_training: Option<String>,
    statement_not_matching: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawFix {
    message: String,
    applicability: Option<String>,
    append_argument: Option<String>,
    text: Option<String>,
    replace: Option<String>,
    with: Option<String>,
    remove_statement: Option<String>,
    unwrap: Option<String>,
    #[serde(default)]
    safe_if_passed_to: Vec<String>,
}

const FIX_KINDS: &str =
    "`append-argument` (with `text`), `replace` (with `with`), `remove-statement` or `unwrap`";

/// `{name}` in a message: the text of the capture `@name`.
static PLACEHOLDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"\{([A-Za-z_][A-Za-z0-9_.\-]*)\}").expect("a valid regex")
});

const PREDICATE_KINDS: &str = "`resolves`, `lacks-argument`, `has-argument`, `inside`, `not-inside`, `grad`, `contains-training`, `statement-not-matching`";

impl DeclarativeRule {
    /// Checks the raw tables' root kinds, and with `compile` builds (and so validates) every
    /// clause now. `toml_text` is the front matter the spans point into. `message` is the
    /// rule's message, which clauses without a message of their own report.
    pub fn from_raw(
        raw: Vec<Spanned<RawMatch>>,
        toml_text: &str,
        message: &str,
        compile: bool,
    ) -> Result<Self, SpecError> {
        if raw.is_empty() {
            return Err(SpecError::at(
                0,
                "a declarative rule needs at least one `[[match]]` table",
            ));
        }
        let prefilters = raw
            .iter()
            .map(|clause| prefilter(clause.get_ref()))
            .collect();
        let words = raw.iter().map(|clause| words(clause.get_ref())).collect();
        let rule = |root_kinds, pending| DeclarativeRule {
            root_kinds,
            prefilters,
            words,
            pending: std::sync::Mutex::new(pending),
            clauses: std::sync::OnceLock::new(),
        };
        if compile {
            let clauses = build(raw, toml_text, message)?;
            let rule = rule(
                clauses.iter().map(|clause| clause.root_kind).collect(),
                None,
            );
            let _ = rule.clauses.set(clauses);
            return Ok(rule);
        }
        let root_kinds = raw
            .iter()
            .map(|clause| root_kind_id(&clause.get_ref().pattern))
            .collect::<Result<_, _>>()?;
        Ok(rule(
            root_kinds,
            Some(Pending {
                raw,
                toml_text: toml_text.to_owned(),
                message: message.to_owned(),
            }),
        ))
    }

    /// The node kind each clause starts at.
    pub fn root_kinds(&self) -> &[u16] {
        &self.root_kinds
    }

    /// A clause's test before its query: `(field, names)` pairs, each a field of the root
    /// whose qualified name must be one of the names.
    pub fn prefilter(&self, clause: usize) -> &Prefilter {
        &self.prefilters[clause]
    }

    /// The words a file must hold for the clause to match in it: one of each list.
    pub fn words(&self, clause: usize) -> &Words {
        &self.words[clause]
    }

    /// The clauses, compiled on first use.
    pub fn clauses(&self) -> &[MatchClause] {
        self.clauses.get_or_init(|| {
            let pending = self
                .lock_pending()
                .take()
                .expect("a rule not compiled when loaded is pending until it is");
            build(pending.raw, &pending.toml_text, &pending.message).unwrap_or_else(|error| {
                panic!("a built-in rule is valid (tested): {}", error.message)
            })
        })
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Option<Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn build(
    raw: Vec<Spanned<RawMatch>>,
    toml_text: &str,
    message: &str,
) -> Result<Vec<MatchClause>, SpecError> {
    let shared = shared_query(&raw);
    raw.into_iter()
        .enumerate()
        .map(|(index, clause)| {
            let compiled = shared
                .as_ref()
                .map(|(query, patterns)| (Arc::clone(query), patterns[index]));
            MatchClause::from_raw(clause, toml_text, message, compiled)
        })
        .collect()
}

/// One query holding every distinct pattern of the clauses, and each clause's pattern in it:
/// clauses written with the same pattern (TL108's two, which differ in their predicates) share
/// one, as each pattern adds its own analysis of the grammar to the query's compiling. None
/// when the query's patterns are not the distinct texts in order (a pattern with an error, or
/// with no or two patterns in it), and each clause is then compiled alone, to say which is
/// wrong and where.
fn shared_query(raw: &[Spanned<RawMatch>]) -> Option<(Arc<Query>, Vec<usize>)> {
    let mut distinct: Vec<&str> = Vec::new();
    let patterns: Vec<usize> = raw
        .iter()
        .map(|clause| {
            let pattern = clause.get_ref().pattern.get_ref().as_str();
            distinct
                .iter()
                .position(|known| *known == pattern)
                .unwrap_or_else(|| {
                    distinct.push(pattern);
                    distinct.len() - 1
                })
        })
        .collect();
    let mut text = String::new();
    let mut starts = Vec::with_capacity(distinct.len());
    for pattern in &distinct {
        starts.push(text.len());
        text.push_str(pattern);
        text.push('\n');
    }
    let query = Query::new(&python(), &text).ok()?;
    let aligned = query.pattern_count() == distinct.len()
        && starts.iter().enumerate().all(|(index, &start)| {
            let end = starts.get(index + 1).copied().unwrap_or(text.len());
            (start..end).contains(&query.start_byte_for_pattern(index))
        });
    aligned.then(|| (Arc::new(query), patterns))
}

/// One clause's pattern compiled by itself, its errors pointing into the rule file.
fn compile_alone(
    pattern: &str,
    toml_text: &str,
    pattern_span: std::ops::Range<usize>,
) -> Result<Query, SpecError> {
    let query = Query::new(&python(), pattern).map_err(|error| {
        let offset = pattern_error_offset(toml_text, pattern_span.clone(), error.row);
        let what = match error.kind {
            QueryErrorKind::NodeType => "unknown node type",
            QueryErrorKind::Field => "unknown field",
            QueryErrorKind::Capture => "unknown capture",
            QueryErrorKind::Syntax => "syntax error",
            QueryErrorKind::Structure => "impossible pattern structure",
            QueryErrorKind::Predicate => "bad predicate",
            QueryErrorKind::Language => "language error",
        };
        SpecError::at(
            offset,
            format!(
                "invalid tree-sitter pattern: {what} at pattern line {}, column {}: {}",
                error.row + 1,
                error.column + 1,
                error.message.trim()
            ),
        )
    })?;
    if query.pattern_count() != 1 {
        return Err(SpecError::at(
            pattern_span.start,
            format!(
                "`pattern` must hold exactly one pattern (found {}); write one `[[match]]` table per pattern",
                query.pattern_count()
            ),
        ));
    }
    Ok(query)
}

/// The id of the node kind a clause's pattern starts at, read off its text.
fn root_kind_id(pattern: &Spanned<String>) -> Result<u16, SpecError> {
    let root_kind = root_kind(pattern.get_ref()).ok_or_else(|| {
        SpecError::at(
            pattern.span().start,
            "`pattern` must start with a named node, such as `(call ...)`",
        )
    })?;
    let id = crate::parse::kind_id(&root_kind);
    if id == 0 {
        return Err(SpecError::at(
            pattern.span().start,
            format!("`{root_kind}` is not a Python node type"),
        ));
    }
    Ok(id)
}

impl MatchClause {
    /// A clause from its table; `compiled`: the rule's shared query and this clause's pattern
    /// in it, else the clause's pattern is compiled here.
    fn from_raw(
        raw: Spanned<RawMatch>,
        toml_text: &str,
        rule_message: &str,
        compiled: Option<(Arc<Query>, usize)>,
    ) -> Result<Self, SpecError> {
        let clause_offset = raw.span().start;
        let raw = raw.into_inner();
        let pattern_span = raw.pattern.span();
        let pattern = raw.pattern.into_inner();
        let (query, pattern_index) = match compiled {
            Some(compiled) => compiled,
            None => (
                Arc::new(compile_alone(&pattern, toml_text, pattern_span.clone())?),
                0,
            ),
        };
        let root_kind = root_kind(&pattern).ok_or_else(|| {
            SpecError::at(
                pattern_span.start,
                "`pattern` must start with a named node, such as `(call ...)`",
            )
        })?;
        let root_kind_id = crate::parse::kind_id(&root_kind);
        if root_kind_id == 0 {
            return Err(SpecError::at(
                pattern_span.start,
                format!("`{root_kind}` is not a Python node type"),
            ));
        }

        // The shared query names the captures of every clause: this clause has those its
        // own pattern binds.
        let own = query.capture_quantifiers(pattern_index);
        let in_pattern = |index: &u32| own[*index as usize] != CaptureQuantifier::Zero;
        let capture = |name: &str, offset: usize| -> Result<u32, SpecError> {
            query
                .capture_index_for_name(name)
                .filter(in_pattern)
                .ok_or_else(|| {
                    let known: Vec<String> = query
                        .capture_names()
                        .iter()
                        .enumerate()
                        .filter(|(index, _)| in_pattern(&(*index as u32)))
                        .map(|(_, c)| format!("@{c}"))
                        .collect();
                    SpecError::at(
                        offset,
                        format!(
                            "the pattern has no capture `@{name}` (it has: {})",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    )
                })
        };

        let report = match &raw.report {
            Some(report) => Some(capture(report.get_ref(), report.span().start)?),
            None => query.capture_index_for_name("report").filter(in_pattern),
        };

        let mut require = Vec::new();
        for predicate in raw.require {
            let offset = predicate.span().start;
            require.push(predicate_from_raw(
                predicate.into_inner(),
                offset,
                &capture,
            )?);
        }

        let fix = match raw.fix {
            None => None,
            Some(fix) => {
                let offset = fix.span().start;
                let fix = fix.into_inner();
                let applicability = match fix.applicability.as_deref() {
                    None | Some("unsafe") => Applicability::Unsafe,
                    Some("safe") => Applicability::Safe,
                    Some("display-only") => Applicability::DisplayOnly,
                    Some(other) => {
                        return Err(SpecError::at(
                            offset,
                            format!(
                                "unknown fix applicability `{other}` (expected `safe`, `unsafe` or `display-only`)"
                            ),
                        ));
                    }
                };
                let edit = match (
                    (fix.append_argument, fix.text),
                    (fix.replace, fix.with),
                    (fix.remove_statement, fix.unwrap),
                ) {
                    ((Some(target), Some(text)), (None, None), (None, None)) => {
                        FixEdit::AppendArgument {
                            capture: capture(&target, offset)?,
                            text,
                        }
                    }
                    ((None, None), (Some(target), Some(template)), (None, None)) => {
                        // A placeholder no capture fills would be written into the user's code.
                        for placeholder in PLACEHOLDER.captures_iter(&template) {
                            capture(&placeholder[1], offset).map_err(|error| {
                                SpecError::at(
                                    error.offset,
                                    format!("the fix's `{}`: {}", &placeholder[0], error.message),
                                )
                            })?;
                        }
                        FixEdit::Replace {
                            capture: capture(&target, offset)?,
                            template,
                        }
                    }
                    ((None, None), (None, None), (Some(target), None)) => {
                        FixEdit::RemoveStatement {
                            capture: capture(&target, offset)?,
                        }
                    }
                    ((None, None), (None, None), (None, Some(target))) => FixEdit::Unwrap {
                        capture: capture(&target, offset)?,
                    },
                    _ => {
                        return Err(SpecError::at(
                            offset,
                            format!("a `fix` needs exactly one of {FIX_KINDS}"),
                        ));
                    }
                };
                Some(FixSpec {
                    message: fix.message,
                    applicability,
                    edit,
                    safe_if_passed_to: fix.safe_if_passed_to,
                })
            }
        };

        // A placeholder no capture fills would be printed as it is, braces and all.
        let message = raw.message.as_deref().unwrap_or(rule_message);
        for placeholder in PLACEHOLDER.captures_iter(message) {
            capture(&placeholder[1], clause_offset).map_err(|error| {
                SpecError::at(
                    error.offset,
                    format!("the message's `{}`: {}", &placeholder[0], error.message),
                )
            })?;
        }
        Ok(MatchClause {
            query,
            pattern: pattern_index,
            root_kind: root_kind_id,
            report,
            message: raw.message,
            require,
            fix,
        })
    }
}

fn predicate_from_raw(
    raw: RawPredicate,
    offset: usize,
    capture: &dyn Fn(&str, usize) -> Result<u32, SpecError>,
) -> Result<Predicate, SpecError> {
    let discriminators = [
        raw.resolves.is_some(),
        raw.lacks_argument.is_some(),
        raw.has_argument.is_some(),
        raw.inside.is_some(),
        raw.not_inside.is_some(),
        raw.grad.is_some(),
        raw.contains_training.is_some(),
        raw.statement_not_matching.is_some(),
    ];
    match discriminators.iter().filter(|&&set| set).count() {
        1 => {}
        0 => {
            return Err(SpecError::at(
                offset,
                format!("a `require` entry needs one of {PREDICATE_KINDS}"),
            ));
        }
        _ => {
            return Err(SpecError::at(
                offset,
                format!(
                    "a `require` entry takes exactly one of {PREDICATE_KINDS}; split it into several entries"
                ),
            ));
        }
    }
    let unexpected = |key: &str| {
        SpecError::at(
            offset,
            format!("`{key}` does not belong with this kind of `require` entry"),
        )
    };
    let argument_keys_used = raw.keyword.is_some() || raw.position.is_some();

    if let Some(name) = raw.resolves {
        if argument_keys_used || raw.equals.is_some() {
            return Err(unexpected("keyword/position/equals"));
        }
        let to = raw.to.filter(|to| !to.is_empty()).ok_or_else(|| {
            SpecError::at(offset, "`resolves` needs `to = [\"qualified.name\", ...]`")
        })?;
        return Ok(Predicate::Resolves {
            capture: capture(&name, offset)?,
            to,
        });
    }
    if raw.to.is_some() {
        return Err(unexpected("to"));
    }
    let argument = || -> Result<ArgumentRef, SpecError> {
        if raw.keyword.is_none() && raw.position.is_none() {
            return Err(SpecError::at(
                offset,
                "name the argument with `keyword = \"...\"`, `position = N` (0-based), or both",
            ));
        }
        Ok(ArgumentRef {
            keyword: raw.keyword.clone(),
            position: raw.position,
        })
    };
    if raw.may_be_none.is_some() && raw.has_argument.is_none() {
        return Err(unexpected("may-be-none"));
    }
    if let Some(name) = &raw.lacks_argument {
        if raw.equals.is_some() {
            return Err(unexpected("equals"));
        }
        return Ok(Predicate::LacksArgument {
            capture: capture(name, offset)?,
            argument: argument()?,
        });
    }
    if let Some(name) = &raw.has_argument {
        if raw.equals.is_some() && raw.may_be_none.is_some() {
            return Err(unexpected("equals with may-be-none"));
        }
        return Ok(Predicate::HasArgument {
            capture: capture(name, offset)?,
            argument: argument()?,
            equals: raw.equals.clone(),
            may_be_none: raw.may_be_none.unwrap_or(false),
        });
    }
    if argument_keys_used || raw.equals.is_some() {
        return Err(unexpected("keyword/position/equals"));
    }
    let context = |name: &str| -> Result<Context, SpecError> {
        CONTEXTS
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, context)| *context)
            .ok_or_else(|| {
                let known: Vec<&str> = CONTEXTS.iter().map(|(name, _)| *name).collect();
                SpecError::at(
                    offset,
                    format!(
                        "unknown context `{name}` (expected one of: {})",
                        known.join(", ")
                    ),
                )
            })
    };
    if let Some(name) = raw.inside {
        return Ok(Predicate::Inside(context(&name)?));
    }
    if let Some(name) = raw.not_inside {
        return Ok(Predicate::NotInside(context(&name)?));
    }
    if let Some(grad) = raw.grad {
        return match grad.as_str() {
            "enabled" => Ok(Predicate::Grad(GradRequirement::Enabled)),
            "disabled" => Ok(Predicate::Grad(GradRequirement::Disabled)),
            other => Err(SpecError::at(
                offset,
                format!("unknown grad mode `{other}` (expected `enabled` or `disabled`)"),
            )),
        };
    }
    if let Some(pattern) = raw.statement_not_matching {
        return regex::Regex::new(&pattern)
            .map(Predicate::StatementNotMatching)
            .map_err(|error| SpecError::at(offset, format!("invalid regex `{pattern}`: {error}")));
    }
    let name = raw.contains_training.unwrap_or_default();
    Ok(Predicate::ContainsTraining {
        capture: capture(&name, offset)?,
    })
}

/// The node type a pattern starts with: `(call ...)` → `call`.
fn root_kind(pattern: &str) -> Option<String> {
    let mut rest = pattern.trim_start();
    // Skip leading comments (`; ...`).
    while let Some(stripped) = rest.strip_prefix(';') {
        rest = stripped
            .split_once('\n')
            .map_or("", |(_, after)| after)
            .trim_start();
    }
    let rest = rest.strip_prefix('(')?.trim_start();
    let kind: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!kind.is_empty() && kind != "_").then_some(kind)
}

/// The captures bound to a direct, single field child of the pattern's root:
/// `(call function: (_) @callee ...)` gives `("function", "callee")`. Anything this small
/// reader is unsure of (alternations, quantifiers, nesting) is left out, never guessed.
fn direct_field_captures(pattern: &str) -> Vec<(String, String)> {
    let tokens = tokenize(pattern);
    let mut found = Vec::new();
    // tokens[0] = "(", tokens[1] = root kind; depth 1 starts after them.
    if tokens.len() < 3 || tokens[0] != "(" {
        return found;
    }
    let mut i = 2;
    while i < tokens.len() {
        let token = tokens[i];
        if token == ")" {
            break;
        }
        // `field: (...) @capture` with nothing after the node but the capture.
        if i + 2 < tokens.len() && tokens[i + 1] == ":" && is_name(token) {
            let field = token;
            let node_start = i + 2;
            let Some(node_end) = node_end(&tokens, node_start) else {
                return found;
            };
            let mut j = node_end;
            let quantified = matches!(tokens.get(j), Some(&"*" | &"+" | &"?"));
            if quantified {
                j += 1;
            }
            let alternation = tokens[node_start] == "[";
            while tokens.get(j) == Some(&"@") {
                if let Some(capture) = tokens.get(j + 1)
                    && !quantified
                    && !alternation
                {
                    found.push((field.to_owned(), (*capture).to_owned()));
                }
                j += 2;
            }
            i = j;
            continue;
        }
        // Any other child: skip it whole.
        match node_end(&tokens, i) {
            Some(end) => i = end,
            None => return found,
        }
        while matches!(tokens.get(i), Some(&"*" | &"+" | &"?")) {
            i += 1;
        }
        while tokens.get(i) == Some(&"@") {
            i += 2;
        }
    }
    found
}

/// Index just past the node starting at `start` (a parenthesized or bracketed group, or
/// a single token).
fn node_end(tokens: &[&str], start: usize) -> Option<usize> {
    let open = *tokens.get(start)?;
    if open != "(" && open != "[" {
        return Some(start + 1);
    }
    let mut depth = 0usize;
    for (offset, token) in tokens[start..].iter().enumerate() {
        match *token {
            "(" | "[" => depth += 1,
            ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return Some(start + offset + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_name(token: &str) -> bool {
    token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits a query into `(`, `)`, `[`, `]`, `:`, `@`, quantifiers, names and string
/// literals; comments are dropped.
fn tokenize(pattern: &str) -> Vec<&str> {
    let bytes = pattern.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
        } else if b == b';' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if b == b'"' {
            let start = i;
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
            tokens.push(&pattern[start..i]);
        } else if b"()[]:@*+?!.".contains(&b) {
            tokens.push(&pattern[i..i + 1]);
            i += 1;
        } else {
            let start = i;
            while i < bytes.len()
                && !bytes[i].is_ascii_whitespace()
                && !b"()[]:@;\"".contains(&bytes[i])
            {
                i += 1;
            }
            tokens.push(&pattern[start..i]);
        }
    }
    tokens
}

/// Byte offset in the TOML text of line `row` of a pattern string literal.
fn pattern_error_offset(toml_text: &str, span: std::ops::Range<usize>, row: usize) -> usize {
    let literal = &toml_text[span.clone()];
    let multiline_opening = ["'''\n", "\"\"\"\n", "'''\r\n", "\"\"\"\r\n"]
        .iter()
        .find(|opening| literal.starts_with(**opening));
    let mut offset = span.start + multiline_opening.map_or(0, |opening| opening.len());
    for _ in 0..row {
        match toml_text[offset..span.end].find('\n') {
            Some(newline) => offset += newline + 1,
            None => break,
        }
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_field_captures_are_found_and_nothing_is_guessed() {
        let found = direct_field_captures(
            "(call\n  function: (_) @callee\n  arguments: (argument_list (string) @s) @args) @call",
        );
        assert_eq!(
            found,
            [
                ("function".to_owned(), "callee".to_owned()),
                ("arguments".to_owned(), "args".to_owned())
            ]
        );
        assert!(direct_field_captures("(call function: [(identifier) (attribute)] @f)").is_empty());
        assert!(
            direct_field_captures("(call (argument_list (_)* @a) function: (_)? @f)").is_empty()
        );
        assert!(
            direct_field_captures("(with_statement (with_clause (with_item value: (call) @c)))")
                .is_empty()
        );
    }

    #[test]
    fn root_kind_skips_comments_and_rejects_wildcards() {
        assert_eq!(
            root_kind("  ; a comment\n (call) @c").as_deref(),
            Some("call")
        );
        assert_eq!(root_kind("(_) @x"), None);
        assert_eq!(root_kind("[(call) (attribute)]"), None);
    }
}
