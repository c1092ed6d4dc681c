//! Declarative rules: a tree-sitter pattern plus torch-aware context predicates, evaluated
//! at the node the pattern starts at, during the checker's single walk. The rule file's spec
//! (`rule_meta::declarative`) is data; this module runs it against the checker's context.

use std::sync::Arc;

use tree_sitter::{QueryCursor, QueryMatch, StreamingIterator};

use crate::checker::{Checker, GradMode, last_part_is};
use crate::diagnostic::{Diagnostic, Edit, Fix};
pub use crate::parse::{ArgumentLookup, find_argument};
use crate::parse::{FIELDS, KINDS};
use crate::rule_meta::declarative::{
    DeclarativeRule, FixEdit, FixSpec, GradRequirement, MatchClause, Predicate,
};
use crate::rule_meta::{Applicability, RuleMeta};
use crate::syntax::Node;

/// Runs clause `index` of a rule at `node` (whose kind is the clause's root kind): its
/// prefilter first, so that the query is compiled only once a node passes it.
pub fn run_clause<'a>(
    rule: &Arc<RuleMeta>,
    spec: &DeclarativeRule,
    index: usize,
    node: Node<'a>,
    checker: &Checker<'a>,
    cursor: &mut QueryCursor,
    out: &mut Vec<Diagnostic>,
) {
    if !holds_words(spec, index, checker) {
        return;
    }
    for (field, to) in spec.prefilter(index) {
        let child = if *field == FIELDS.function {
            // Skip resolving callees that cannot end in any of the names.
            let may_match =
                checker.may_resolve_to(node, |last| to.iter().any(|name| last_part_is(name, last)));
            if !may_match {
                return;
            }
            checker.callee(node)
        } else {
            node.child_by_field_id(*field)
        };
        let resolves = child
            .and_then(|child| checker.qualified_name(child))
            .is_some_and(|name| to.contains(&name));
        if !resolves {
            return;
        }
    }
    let clause = &spec.clauses()[index];
    let source = checker.text().as_bytes();
    // The query runs on tree-sitter's own node; what it captures is read back as ours.
    let Some(ts_node) = checker.tree.ts_node(node) else {
        return;
    };
    let mut matches = cursor.matches(&clause.query, ts_node, source);
    while let Some(found) = matches.next() {
        // The rule's other clauses' patterns share the query; they run at their own turn.
        if found.pattern_index != clause.pattern {
            continue;
        }
        if let Some(diagnostic) = evaluate(rule, clause, node, found, checker) {
            out.push(diagnostic);
        }
    }
}

/// Whether the file spells a name each `resolves` predicate of the clause accepts (see
/// [`crate::rule_meta::declarative::Words`]); asked once per file and clause.
fn holds_words(spec: &DeclarativeRule, index: usize, checker: &Checker<'_>) -> bool {
    let words = spec.words(index);
    if words.is_empty() {
        return true;
    }
    let key = (std::ptr::from_ref(spec) as usize, index);
    if let Some(&holds) = checker.holds_words.borrow().get(&key) {
        return holds;
    }
    let text = checker.text().as_bytes();
    let holds = words.iter().all(|any_of| {
        any_of
            .iter()
            .any(|word| memchr::memmem::find(text, word.as_bytes()).is_some())
    });
    checker.holds_words.borrow_mut().insert(key, holds);
    holds
}

fn evaluate<'a>(
    rule: &Arc<RuleMeta>,
    clause: &MatchClause,
    root: Node<'a>,
    found: &QueryMatch<'_, 'a>,
    checker: &Checker<'a>,
) -> Option<Diagnostic> {
    let capture = |index: u32| captured(checker, found, index);
    let report = clause.report.and_then(capture).unwrap_or(root);
    let mut labels = Vec::new();

    for predicate in &clause.require {
        let holds = match predicate {
            Predicate::Resolves { capture: index, to } => capture(*index)
                .and_then(|node| checker.qualified_name(node))
                .is_some_and(|name| to.contains(&name)),
            Predicate::LacksArgument {
                capture: index,
                argument,
            } => capture(*index).is_some_and(|node| {
                matches!(
                    find_argument(
                        node,
                        checker.text(),
                        argument.keyword.as_deref(),
                        argument.position
                    ),
                    ArgumentLookup::Absent
                )
            }),
            Predicate::HasArgument {
                capture: index,
                argument,
                equals,
                may_be_none,
            } => capture(*index).is_some_and(|node| {
                match find_argument(
                    node,
                    checker.text(),
                    argument.keyword.as_deref(),
                    argument.position,
                ) {
                    ArgumentLookup::Found(value) => {
                        equals
                            .as_ref()
                            .is_none_or(|wanted| checker.node_text(value).trim() == wanted)
                            && (!may_be_none || checker.analysis.may_be_none(value))
                    }
                    _ => false,
                }
            }),
            Predicate::Inside(context) => {
                let (holds, evidence) = checker.context_holds(*context, root);
                if let Some(evidence) = evidence {
                    labels.push((evidence.range, evidence.reason));
                }
                holds
            }
            Predicate::NotInside(context) => !checker.context_holds(*context, root).0,
            Predicate::Grad(requirement) => matches!(
                (requirement, checker.grad_mode(root)),
                (GradRequirement::Disabled, GradMode::Disabled)
                    | (
                        GradRequirement::Enabled,
                        GradMode::Enabled | GradMode::FromCaller
                    )
            ),
            Predicate::StatementNotMatching(regex) => !regex.is_match(checker.statement_text(root)),
            Predicate::ContainsTraining { capture: index } => {
                match capture(*index).and_then(|node| checker.contains_training(node)) {
                    Some(range) => {
                        labels.push((range, "training runs in here".to_owned()));
                        true
                    }
                    None => false,
                }
            }
        };
        if !holds {
            return None;
        }
    }

    let template = clause.message.as_deref().unwrap_or(&rule.message);
    let message = fill_placeholders(template, &clause.query, found, checker);
    let mut diagnostic = Diagnostic::new(rule, message, report.byte_range());
    for (range, message) in labels {
        diagnostic = diagnostic.with_label(range, message);
    }
    if let Some(fix) = &clause.fix {
        let applicability = if !fix.safe_if_passed_to.is_empty()
            && report.kind_id() == KINDS.call
            && checker
                .analysis
                .result_only_passed_to(report, &fix.safe_if_passed_to)
        {
            Applicability::Safe
        } else {
            fix.applicability
        };
        diagnostic.fix = fix_edit(fix, &clause.query, found, checker).map(|edit| Fix {
            message: fix.message.clone(),
            applicability,
            edits: vec![edit],
        });
    }
    Some(diagnostic)
}

/// Replaces `{capture}` in a message with the captured source text (first line, shortened).
fn fill_placeholders(
    template: &str,
    query: &tree_sitter::Query,
    found: &QueryMatch<'_, '_>,
    checker: &Checker<'_>,
) -> String {
    let source = checker.text();
    let mut message = template.to_owned();
    for (index, name) in query.capture_names().iter().enumerate() {
        let placeholder = format!("{{{name}}}");
        if !message.contains(&placeholder) {
            continue;
        }
        let text = found
            .nodes_for_capture_index(index as u32)
            .next()
            .map(|node| crate::rules::snippet(&source[node.byte_range()], 60))
            .unwrap_or_default();
        message = message.replace(&placeholder, &text);
    }
    message
}

fn fix_edit<'a>(
    fix: &FixSpec,
    query: &tree_sitter::Query,
    found: &QueryMatch<'_, 'a>,
    checker: &Checker<'a>,
) -> Option<Edit> {
    match &fix.edit {
        FixEdit::Replace { capture, template } => {
            let node = captured(checker, found, *capture)?;
            let mut content = template.clone();
            for (index, name) in query.capture_names().iter().enumerate() {
                let placeholder = format!("{{{name}}}");
                if !content.contains(&placeholder) {
                    continue;
                }
                // A capture the match left empty (an optional one): no fix rather than a
                // placeholder written into the code.
                let captured = found.nodes_for_capture_index(index as u32).next()?;
                content = content.replace(&placeholder, &checker.text()[captured.byte_range()]);
            }
            Some(Edit {
                range: node.byte_range(),
                content,
            })
        }
        FixEdit::RemoveStatement { capture } => {
            crate::rules::edits::remove_statement(checker, captured(checker, found, *capture)?)
        }
        FixEdit::Unwrap { capture } => {
            crate::rules::edits::unwrap_with(checker, captured(checker, found, *capture)?)
        }
        FixEdit::AppendArgument { capture, text } => {
            let node = captured(checker, found, *capture)?;
            let arguments = if node.kind_id() == KINDS.call {
                node.child_by_field_id(FIELDS.arguments)?
            } else {
                node
            };
            if arguments.kind_id() != KINDS.argument_list {
                return None;
            }
            let last = (0..arguments.named_child_count()).rev().find_map(|i| {
                arguments
                    .named_child(i as u32)
                    .filter(|n| n.kind_id() != KINDS.comment)
            });
            Some(match last {
                Some(last) => Edit {
                    range: last.end_byte()..last.end_byte(),
                    content: format!(", {text}"),
                },
                None => {
                    let close = arguments.end_byte().saturating_sub(1);
                    Edit {
                        range: close..close,
                        content: text.clone(),
                    }
                }
            })
        }
    }
}

/// The first node a match captured under `index`, as the compact tree holds it.
fn captured<'a>(checker: &Checker<'a>, found: &QueryMatch<'_, 'a>, index: u32) -> Option<Node<'a>> {
    let node = found.nodes_for_capture_index(index).next()?;
    checker.tree.node_for(node)
}
