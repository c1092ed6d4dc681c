//! Branches gated to run once every N steps of a loop: `if step % 100 == 0:`,
//! `elif (i + 1) % args.accumulation_steps == 0:`, `if not batch_idx % k:`. A statement in
//! such a branch runs once per N batches, not once per batch, and costs a step that much less.

use crate::syntax::Node;

use crate::parse::{FIELDS, KINDS, text};

/// How often a gated branch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval<'a> {
    /// Every N steps, N written as a number.
    Every(u64),
    /// Every N steps, N computed (`args.log_every`): the expression.
    Computed(&'a str),
}

/// The interval of the branch of `if_statement` that holds `node`: its `if` or `elif`
/// condition gated on a step count. `None` when the branch runs on other conditions, or when
/// `node` is in the `else` (which runs on most steps).
pub fn interval_of_branch<'a>(
    if_statement: Node<'a>,
    node: Node<'a>,
    source: &'a str,
) -> Option<Interval<'a>> {
    let inside = |branch: Node<'a>| {
        branch.start_byte() <= node.start_byte() && node.end_byte() <= branch.end_byte()
    };
    let condition = if if_statement
        .child_by_field_id(FIELDS.consequence)
        .is_some_and(inside)
    {
        if_statement.child_by_field_id(FIELDS.condition)?
    } else {
        let mut cursor = if_statement.walk();
        let elif = if_statement
            .named_children(&mut cursor)
            .find(|branch| branch.kind_id() == KINDS.elif_clause && inside(*branch))?;
        elif.child_by_field_id(FIELDS.condition)?
    };
    interval(condition, source)
}

/// The step interval a condition tests: `x % N == 0` (or `== k`), `not x % N`, either side of
/// an `and`.
pub fn interval<'a>(condition: Node<'_>, source: &'a str) -> Option<Interval<'a>> {
    let k = &*KINDS;
    let kind = condition.kind_id();
    if kind == k.parenthesized_expression {
        return interval(condition.named_child(0)?, source);
    }
    if kind == k.boolean_operator {
        // `a and b` runs only when both hold: the gate of either bounds it; `a or b` may run
        // on every step.
        if condition
            .child_by_field_id(FIELDS.operator)
            .is_none_or(|operator| text(operator, source) != "and")
        {
            return None;
        }
        let left = condition.child_by_field_id(FIELDS.left)?;
        let right = condition.child_by_field_id(FIELDS.right)?;
        return interval(left, source).or_else(|| interval(right, source));
    }
    if kind == k.not_operator {
        return modulo(condition.child_by_field_id(FIELDS.argument)?, source);
    }
    if kind == k.comparison_operator {
        // `x % N == 0`: two operands around one `==`.
        let mut cursor = condition.walk();
        let equals = condition
            .children(&mut cursor)
            .any(|child| !child.is_named() && text(child, source) == "==");
        if !equals || condition.named_child_count() != 2 {
            return None;
        }
        let (left, right) = (condition.named_child(0)?, condition.named_child(1)?);
        return if right.kind_id() == k.integer {
            modulo(left, source)
        } else if left.kind_id() == k.integer {
            modulo(right, source)
        } else {
            None
        };
    }
    None
}

/// `x % N`: the interval N.
fn modulo<'a>(expression: Node<'_>, source: &'a str) -> Option<Interval<'a>> {
    let k = &*KINDS;
    if expression.kind_id() == k.parenthesized_expression {
        return modulo(expression.named_child(0)?, source);
    }
    if expression.kind_id() != k.binary_operator
        || expression
            .child_by_field_id(FIELDS.operator)
            .is_none_or(|operator| text(operator, source) != "%")
    {
        return None;
    }
    let divisor = expression.child_by_field_id(FIELDS.right)?;
    let written = text(divisor, source);
    if divisor.kind_id() != k.integer {
        return Some(Interval::Computed(written));
    }
    Some(
        written
            .replace('_', "")
            .parse()
            .map_or(Interval::Computed(written), Interval::Every),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate a condition reads as, spelt out (`Every(5)`, `Computed("n")`).
    fn gate(condition: &str) -> Option<String> {
        let source = format!("if {condition}:\n    f()\n");
        let tree = crate::parse::parse(&source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let statement = tree.root_node().named_child(0).unwrap();
        let condition = statement.child_by_field_id(FIELDS.condition).unwrap();
        interval(condition, &source).map(|interval| format!("{interval:?}"))
    }

    #[test]
    fn reads_step_gates() {
        let cases = [
            ("step % 1000 == 0", "Every(1000)"),
            ("(step + 1) % 10 == 0", "Every(10)"),
            ("0 == i % 5", "Every(5)"),
            ("not batch_idx % 100", "Every(100)"),
            ("rank == 0 and step % 50 == 0", "Every(50)"),
            ("step % 2 == 1", "Every(2)"),
            ("i % args.log_every == 0", "Computed(\"args.log_every\")"),
        ];
        for (condition, expected) in cases {
            assert_eq!(gate(condition).as_deref(), Some(expected), "{condition}");
        }
    }

    #[test]
    fn other_conditions_are_no_gates() {
        for condition in [
            "step % 10 == 0 or force",
            "step % 10 != 0",
            "torch.cuda.is_available()",
            "step > 100",
            "a == b",
        ] {
            assert_eq!(gate(condition), None, "{condition}");
        }
    }
}
