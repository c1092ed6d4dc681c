//! Branches of `if` statements that cannot run in one pass with a given use: the binding in
//! the `else:` of `if self.training or not self.track_running_stats:` never reaches code under
//! `if self.training and self.track_running_stats:`. The conditions are read as boolean
//! expressions of their operands (`self.training`, `args.eval`), each the same value wherever
//! its text is the same, unless the name being bound is part of it.

use crate::syntax::Node;

use super::analysis::Analysis;
use crate::parse::{FIELDS, KINDS, mentions_word};

/// At most this many operands are shared between two nodes' conditions: every assignment of
/// them is tried.
const MAX_SHARED: usize = 4;

/// A condition a node runs under: the expression, and whether it holds (`true`) or fails.
type Guard<'a> = (Node<'a>, bool);

impl<'a> Analysis<'a> {
    /// Whether the binding at `binding` (a node of its statement) and the use `usage` sit in
    /// branches that exclude each other, `name` being the name bound.
    pub(super) fn exclusive_branches(
        &self,
        binding: Node<'a>,
        usage: Node<'a>,
        name: &str,
        function_start: usize,
    ) -> bool {
        // Cheap first, on the list of `if` statements: the binding is in one that ends before
        // the use, and the use in one that starts after the binding.
        if !self.in_separate_ifs(binding.start_byte(), usage.start_byte(), function_start) {
            return false;
        }
        let mut guards = self.guards(binding, function_start);
        let theirs = self.guards(usage, function_start);
        if guards.is_empty() || theirs.is_empty() {
            return false;
        }
        guards.extend(theirs);
        let mut operands: Vec<&str> = Vec::new();
        for (condition, _) in &guards {
            self.operands(*condition, &mut operands);
        }
        // Only operands the rebinding cannot change, written in both nodes' conditions (or
        // twice in one) can make the two exclusive.
        operands.sort_unstable();
        let mut shared: Vec<&str> = operands
            .chunk_by(|a, b| a == b)
            .filter(|same| same.len() > 1)
            .map(|same| same[0])
            .filter(|operand| !mentions_word(operand, name))
            .collect();
        if shared.is_empty() {
            return false;
        }
        shared.truncate(MAX_SHARED);
        // Exclusive when every assignment of the shared operands makes some guard fail.
        (0..1u32 << shared.len()).all(|bits| {
            let value = |operand: &str| {
                shared
                    .iter()
                    .position(|known| *known == operand)
                    .map(|at| bits & (1 << at) != 0)
            };
            guards.iter().any(|(condition, holds)| {
                self.evaluate(*condition, &value).map(|v| v != *holds) == Some(true)
            })
        })
    }

    /// Whether an `if` statement of the function holds `binding` and ends before `usage`, and
    /// another starting after `binding` holds `usage`.
    fn in_separate_ifs(&self, binding: usize, usage: usize, function_start: usize) -> bool {
        let statements = self.if_statements();
        let after_binding = statements.partition_point(|s| s.start_byte() <= binding);
        let closed_before_use = statements[..after_binding]
            .iter()
            .rev()
            .take_while(|s| s.start_byte() >= function_start)
            .any(|s| s.end_byte() > binding && s.end_byte() <= usage);
        closed_before_use
            && statements[after_binding..]
                .iter()
                .take_while(|s| s.start_byte() <= usage)
                .any(|s| s.end_byte() > usage)
    }

    /// The file's `if` statements, by start (the skeleton's order): the ones that hold a node
    /// are found in this list.
    fn if_statements(&self) -> &[Node<'a>] {
        self.if_statements.get_or_init(|| {
            self.model
                .skeleton
                .iter()
                .filter(|step| step.enter && step.kind == KINDS.if_statement)
                .map(|step| step.node)
                .collect()
        })
    }

    /// The conditions a node runs under inside its function: those of the `if` statements
    /// that hold it (found in the list, not by climbing the tree, which costs a descent from
    /// the root per step).
    fn guards(&self, node: Node<'a>, function_start: usize) -> Vec<Guard<'a>> {
        let offset = node.start_byte();
        let statements = self.if_statements();
        let before = statements.partition_point(|s| s.start_byte() <= offset);
        let mut guards = Vec::new();
        for statement in statements[..before]
            .iter()
            .rev()
            .take_while(|s| s.start_byte() >= function_start)
            .filter(|s| s.end_byte() > offset)
        {
            let mut cursor = statement.walk();
            let branch = statement
                .named_children(&mut cursor)
                .skip(1)
                .find(|branch| branch.byte_range().contains(&offset));
            if let Some(branch) = branch {
                self.branch_guards(*statement, branch, &mut guards);
            }
        }
        guards
    }

    /// What `branch` (the consequence, an `elif` or the `else` of `statement`) runs under.
    fn branch_guards(&self, statement: Node<'a>, branch: Node<'a>, guards: &mut Vec<Guard<'a>>) {
        let Some(condition) = statement.child_by_field_id(FIELDS.condition) else {
            return;
        };
        let kind = branch.kind_id();
        if kind != KINDS.elif_clause && kind != KINDS.else_clause {
            if statement
                .child_by_field_id(FIELDS.consequence)
                .is_some_and(|consequence| consequence.id() == branch.id())
            {
                guards.push((condition, true));
            }
            return;
        }
        // Every earlier condition failed; an `elif`'s own holds.
        guards.push((condition, false));
        let mut cursor = statement.walk();
        let elifs = statement
            .named_children(&mut cursor)
            .filter(|alternative| alternative.kind_id() == KINDS.elif_clause);
        for alternative in elifs {
            let Some(own) = alternative.child_by_field_id(FIELDS.condition) else {
                continue;
            };
            if alternative.id() == branch.id() {
                guards.push((own, true));
                break;
            }
            guards.push((own, false));
        }
    }

    /// The operands of a boolean expression, by text.
    fn operands(&self, condition: Node<'a>, out: &mut Vec<&'a str>) {
        let kind = condition.kind_id();
        if kind == KINDS.boolean_operator {
            for side in [FIELDS.left, FIELDS.right] {
                if let Some(side) = condition.child_by_field_id(side) {
                    self.operands(side, out);
                }
            }
        } else if kind == KINDS.not_operator || kind == KINDS.parenthesized_expression {
            if let Some(inner) = condition.named_child(0) {
                self.operands(inner, out);
            }
        } else {
            out.push(self.text(condition));
        }
    }

    /// A boolean expression's value given some operands' values: `None` when it depends on
    /// others.
    fn evaluate(&self, condition: Node<'a>, value: &dyn Fn(&str) -> Option<bool>) -> Option<bool> {
        let kind = condition.kind_id();
        if kind == KINDS.not_operator {
            return self.evaluate(condition.named_child(0)?, value).map(|v| !v);
        }
        if kind == KINDS.parenthesized_expression {
            return self.evaluate(condition.named_child(0)?, value);
        }
        if kind == KINDS.boolean_operator {
            let left = self.evaluate(condition.child_by_field_id(FIELDS.left)?, value);
            let right = self.evaluate(condition.child_by_field_id(FIELDS.right)?, value);
            let operator = condition.child_by_field_id(FIELDS.operator)?;
            return if self.text(operator) == "and" {
                match (left, right) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            } else {
                match (left, right) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }
            };
        }
        value(self.text(condition))
    }
}
