//! The edits rules' fixes are made of, where several rules make the same one: a method called
//! on an expression (`loss.item()`, `pred.detach().cpu()`, `x.detach()`), the items a stored
//! list or tuple literal holds, each of which such a fix goes on, and a statement removed (a
//! Rust rule's or a declarative rule's `remove-statement`).

use crate::syntax::Node;

use crate::checker::Checker;
use crate::diagnostic::{Edit, Fix};
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};
use crate::rule_meta::Applicability;

/// `node` with `.method()` called on it (`method` written with its dot and parentheses,
/// `".item()"`): in parentheses unless it is a primary expression, where a call binds tighter
/// than any operator around it (`(loss * 2).item()`, not `loss * 2.item()`).
pub fn call_method(checker: &Checker<'_>, node: Node<'_>, method: &str) -> Edit {
    let text = checker.node_text(node);
    let primary = [
        KINDS.identifier,
        KINDS.attribute,
        KINDS.call,
        KINDS.subscript,
        KINDS.parenthesized_expression,
    ]
    .contains(&node.kind_id());
    Edit {
        range: node.byte_range(),
        content: if primary {
            format!("{text}{method}")
        } else {
            format!("({text}){method}")
        },
    }
}

/// The items of a list or tuple literal (`[rec, kl]`, `(out, labels)`): what a fix that moves
/// or converts a stored value goes on, one by one. `None` for any other expression.
pub fn literal_items<'a>(node: Node<'a>) -> Option<Vec<Node<'a>>> {
    let literal = [KINDS.list, KINDS.tuple, KINDS.expression_list].contains(&node.kind_id());
    literal.then(|| {
        let mut cursor = node.walk();
        node.named_children(&mut cursor)
            .filter(|item| item.kind_id() != KINDS.comment)
            .collect()
    })
}

/// Whether `value` is the argument of `acc.extend(value)`, which adds its items one by one: a
/// method called on it would go on the iterable, not on what is kept.
pub fn extended_by<'a>(checker: &Checker<'a>, value: Node<'a>) -> bool {
    value
        .parent()
        .and_then(|arguments| arguments.parent())
        .and_then(|call| checker.callee(call))
        .is_some_and(|callee| checker.node_text(callee).ends_with(".extend"))
}

/// The method `node` is a call of (`"detach"` for `out.detach()`), if it is one.
pub fn method_called<'a>(checker: &Checker<'a>, node: Node<'a>) -> Option<&'a str> {
    if node.kind_id() != KINDS.call {
        return None;
    }
    let callee = checker.callee(node)?;
    if callee.kind_id() != KINDS.attribute {
        return None;
    }
    checker
        .field(callee, crate::parse::FIELDS.attribute)
        .map(|attribute| checker.node_text(attribute))
}

/// Removes the statement `node` is (an expression statement of it alone, such as a call): its
/// whole line, or `pass` in its place where it is the only statement of its block. `None` where
/// the statement shares its line with other code, or `node` is not a statement of its own.
pub fn remove_statement(checker: &Checker<'_>, node: Node<'_>) -> Option<Edit> {
    let statement = node
        .parent()
        .filter(|parent| parent.kind_id() == KINDS.expression_statement)?;
    let block = statement.parent()?;
    let text = checker.source.text();
    let line_start = line_start(text, statement.start_byte());
    let line_end = line_end(text, statement.end_byte());
    let alone = text[line_start..statement.start_byte()].trim().is_empty()
        && text[statement.end_byte()..line_end].trim().is_empty();
    if !alone {
        return None;
    }
    let mut cursor = block.walk();
    let statements = block
        .named_children(&mut cursor)
        .filter(|child| child.kind_id() != KINDS.comment)
        .count();
    Some(if statements == 1 && block.kind_id() != KINDS.module {
        Edit {
            range: statement.byte_range(),
            content: "pass".to_owned(),
        }
    } else {
        Edit {
            range: line_start..line_end,
            content: String::new(),
        }
    })
}

/// An unsafe fix keeping what `edits` write instead of what was kept: its message names the
/// one new text (`Keep \`loss.item()\` instead`), or is `several` where there are more edits.
pub fn keep_instead(edits: Vec<Edit>, several: impl FnOnce() -> String) -> Fix {
    let message = match edits.as_slice() {
        [one] => format!(
            "Keep `{}` instead",
            crate::source::snippet(&one.content, 60)
        ),
        _ => several(),
    };
    Fix {
        message,
        applicability: Applicability::Unsafe,
        edits,
    }
}

/// A `with` statement replaced by its body, dedented to the statement's own indentation
/// (`with detect_anomaly():` around training, the block kept). Only a single manager bound to
/// no name (`as x` would leave the name unbound), with the body on lines of its own, and only
/// where dedenting changes no string: a body line not indented as the block is, or a string
/// spanning lines (whose lines dedenting would rewrite), gives no fix.
pub fn unwrap_with<'a>(checker: &Checker<'a>, statement: Node<'a>) -> Option<Edit> {
    if statement.kind_id() != KINDS.with_statement {
        return None;
    }
    let mut cursor = statement.walk();
    let clause = statement
        .named_children(&mut cursor)
        .find(|child| child.kind() == "with_clause")?;
    let mut cursor = clause.walk();
    let items: Vec<Node<'_>> = clause
        .named_children(&mut cursor)
        .filter(|child| child.kind_id() == KINDS.with_item)
        .collect();
    let [item] = items.as_slice() else {
        return None;
    };
    if item
        .named_child(0)
        .is_none_or(|value| value.kind_id() == KINDS.as_pattern)
    {
        return None;
    }
    let body = checker.field(statement, FIELDS.body)?;
    let text = checker.source.text();
    let start = line_start(text, statement.start_byte());
    let indent = &text[start..statement.start_byte()];
    if !indent.trim().is_empty() {
        return None;
    }
    // The body's lines: from the line after the header's colon to the end of the block.
    let mut cursor = statement.walk();
    let colon = statement
        .children(&mut cursor)
        .filter(|child| child.kind() == ":")
        .last()?;
    let body_start = line_end(text, colon.end_byte());
    if body.start_byte() < body_start || multiline_string_in(body, checker.text()) {
        return None;
    }
    let end = line_end(text, body.end_byte());
    let inner = &text[line_start(text, body.start_byte())..body.start_byte()];
    let mut content = String::with_capacity(end - body_start);
    for line in text[body_start..end].split_inclusive('\n') {
        if line.trim().is_empty() {
            content.push_str(&line[indentation(line).len()..]);
            continue;
        }
        let rest = line.strip_prefix(inner)?;
        content.push_str(indent);
        content.push_str(rest);
    }
    Some(Edit {
        range: start..end,
        content,
    })
}

/// Whether some string in `node` spans lines.
fn multiline_string_in(node: Node<'_>, text: &str) -> bool {
    let mut found = false;
    walk(node, |visit| match visit {
        Visit::Enter(inner) if !found && inner.kind_id() == KINDS.string => {
            found = text[inner.byte_range()].contains('\n');
            Descend::No
        }
        Visit::Enter(_) if !found => Descend::Yes,
        _ => Descend::No,
    });
    found
}

/// Where the line holding byte `at` starts.
pub fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |newline| newline + 1)
}

/// Where the line holding byte `at` ends, after its line break.
fn line_end(text: &str, at: usize) -> usize {
    text[at..]
        .find('\n')
        .map_or(text.len(), |newline| at + newline + 1)
}

/// The spaces and tabs a line starts with.
fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// Lines inserted before the first statement of `block` (a loop's body), at its indentation:
/// `write(indent, unit)` gives them, `unit` being one level of the file's indentation there
/// (the block's own less its header's). None where the block starts on its header's line.
pub fn insert_at_block_start(
    checker: &Checker<'_>,
    block: Node<'_>,
    write: impl FnOnce(&str, &str) -> String,
) -> Option<Edit> {
    let text = checker.source.text();
    let start = line_start(text, block.start_byte());
    let indent = &text[start..block.start_byte()];
    let header_start = line_start(text, block.parent()?.start_byte());
    let outer = indentation(&text[header_start..]);
    if !indent.trim().is_empty() || header_start == start {
        return None;
    }
    let unit = indent
        .strip_prefix(outer)
        .filter(|unit| !unit.is_empty())
        .unwrap_or("    ");
    Some(Edit {
        range: start..start,
        content: write(indent, unit),
    })
}

/// `argument` (a positional argument or a `keyword=value`) removed from its argument list, with
/// the comma that separates it from its neighbour.
pub fn remove_argument(argument: Node<'_>) -> Option<Edit> {
    let list = argument.parent()?;
    let mut cursor = list.walk();
    let items: Vec<Node<'_>> = list
        .named_children(&mut cursor)
        .filter(|item| item.kind_id() != KINDS.comment)
        .collect();
    let at = items.iter().position(|item| item.id() == argument.id())?;
    let range = match (
        at.checked_sub(1).map(|before| items[before]),
        items.get(at + 1),
    ) {
        // `f(a, retain_graph=True)`: from the end of the one before.
        (Some(before), _) => before.end_byte()..argument.end_byte(),
        // `f(retain_graph=True, b)`: up to the start of the next.
        (None, Some(next)) => argument.start_byte()..next.start_byte(),
        (None, None) => argument.byte_range(),
    };
    Some(Edit {
        range,
        content: String::new(),
    })
}

/// A fix shown and never applied (the change takes a judgement the rule cannot make).
pub fn suggestion(message: impl Into<String>, edits: Vec<Edit>) -> Fix {
    Fix {
        message: message.into(),
        applicability: Applicability::DisplayOnly,
        edits,
    }
}
