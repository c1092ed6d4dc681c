//! Resets and bounds of a container inside a loop: whether the loop clears or re-initialises
//! what it keeps (`acc = []`, `acc.clear()`), whether the container stays bounded, and so which
//! enclosing loops a container outlives.

use crate::syntax::Node;

use super::per_batch::per_batch_reason;
use super::position::Position;
use crate::parse::{Descend, FIELDS, KINDS, Visit, walk};
use crate::semantic::scope::Site;

/// Whether the loop resets the container now and then (`if step % k == 0: running = 0.0`,
/// `buffer.clear()` after a flush): what it holds is bounded by the reset interval.
pub fn reset_in_loop<'a>(checker: &impl Position<'a>, loop_node: Node<'a>, name: &str) -> bool {
    let Some(body) = checker.field(loop_node, FIELDS.body) else {
        return false;
    };
    let assignment = format!("{name} = ");
    let clear = format!("{name}.clear()");
    let delete = format!("del {name}[:]");
    let lines: Vec<&str> = checker.node_text(body).lines().collect();
    lines.iter().enumerate().any(|(at, line)| {
        let indent = line.len() - line.trim_start().len();
        let line = line.trim();
        if line == clear || line == delete {
            return true;
        }
        let Some(value) = line.strip_prefix(&assignment) else {
            return false;
        };
        // A value continued on the next lines is not read here: not a reset.
        let continued = value.trim_end().ends_with(['(', '[', '{', '\\', ',']);
        // `{key: 0 for key in running}` reads only the old keys.
        let value = value.replace(&format!(" in {name}"), " in _");
        if continued
            || value
                .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '.')
                .any(|word| word == name)
        {
            return false;
        }
        // `if ema is None: ema = loss` starts the average on the first step, once; so does
        // the `else:` of `if ema is not None:` or `if ema and other:`.
        let header_at = lines[..at].iter().rposition(|header| {
            !header.trim().is_empty() && header.len() - header.trim_start().len() < indent
        });
        let Some(header_at) = header_at else {
            return true;
        };
        let header = lines[header_at].trim();
        let first_value = if header.starts_with("if ") {
            tests_unset(header, name) || off_by_default(checker, header)
        } else if header == "else:" {
            let else_indent = lines[header_at].len() - header.len();
            lines[..header_at]
                .iter()
                .rev()
                .find(|line| {
                    let trimmed = line.trim_start();
                    line.len() - trimmed.len() == else_indent
                        && (trimmed.starts_with("if ") || trimmed.starts_with("elif "))
                })
                .is_some_and(|condition| tests_set(condition.trim(), name))
        } else {
            false
        };
        !first_value
    })
}

/// `if output_dir and i % step == 0:` where the function's `output_dir` defaults to `None`: a
/// flush that a default call never takes, so it bounds nothing on the default path.
fn off_by_default<'a>(checker: &impl Position<'a>, header: &str) -> bool {
    let condition = header.trim_start_matches("if ").trim_end_matches(':');
    let first = condition.split(" and ").next().unwrap_or("").trim();
    if first.is_empty() || !first.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return false;
    }
    let Some(parameters) = checker
        .current_function()
        .and_then(|(function, _)| checker.field(function, FIELDS.parameters))
    else {
        return false;
    };
    let mut cursor = parameters.walk();
    parameters.named_children(&mut cursor).any(|parameter| {
        (parameter.kind_id() == KINDS.default_parameter
            || parameter.kind_id() == KINDS.typed_default_parameter)
            && checker
                .field(parameter, FIELDS.name)
                .is_some_and(|name| checker.node_text(name) == first)
            && checker.field(parameter, FIELDS.value).is_some_and(|value| {
                matches!(
                    checker.node_text(value),
                    "None" | "False" | "0" | "\"\"" | "''"
                )
            })
    })
}

/// `if ema is None:`, `if not ema:`: a branch taken while the accumulator holds nothing yet.
fn tests_unset(header: &str, name: &str) -> bool {
    header.contains(&format!("{name} is None")) || header.contains(&format!("not {name}"))
}

/// `if ema is not None:`, `if ema and other:`: a condition whose `else:` is taken while the
/// accumulator holds nothing yet.
fn tests_set(header: &str, name: &str) -> bool {
    let condition = header
        .trim_start_matches("elif ")
        .trim_start_matches("if ")
        .trim_end_matches(':');
    let set = format!("{name} is not None");
    condition
        .split(" and ")
        .flat_map(|operand| operand.split(" or "))
        .map(|operand| operand.trim().trim_matches(['(', ')']).trim())
        .any(|operand| operand == name || operand == set)
}

/// Whether a loop empties the container on each iteration: `feats.clear()`, `del feats[:]`,
/// `self.buf = []`.
fn clears<'a>(checker: &impl Position<'a>, loop_node: Node<'a>, name: &str) -> bool {
    let Some(body) = checker.field(loop_node, FIELDS.body) else {
        return false;
    };
    // A clearing statement is one short line that names the container: reading only those
    // keeps this cheap on loops whose bodies are long.
    let longest = name.len() + "=list()".len() + 8;
    let mut cursor = body.walk();
    let statements: Vec<Node<'_>> = body.named_children(&mut cursor).collect();
    statements.into_iter().any(|statement| {
        let text = checker.node_text(statement);
        if text.len() > longest || !text.contains(name) {
            return false;
        }
        let text = text.replace(' ', "");
        text == format!("{name}.clear()")
            || text == format!("del{name}[:]")
            || (name.contains('.')
                && [
                    format!("{name}=[]"),
                    format!("{name}={{}}"),
                    format!("{name}=list()"),
                ]
                .contains(&text))
    })
}

/// The statement that last (re)initialises a plain-name container before `statement` in the
/// same scope: `acc = []`, `total = 0.0`.
fn initialisation<'a>(
    checker: &impl Position<'a>,
    container: Node<'a>,
    statement: Node<'a>,
) -> Option<Node<'a>> {
    if container.kind_id() != KINDS.identifier {
        return None;
    }
    let name = checker.node_text(container);
    let scope = checker.analysis().scope_at(container);
    let (found_in, bindings) =
        checker
            .model()
            .scopes
            .lookup(scope, name, container.start_byte())?;
    if found_in != scope {
        return None;
    }
    bindings
        .iter()
        .rev()
        .filter(|binding| binding.offset <= statement.start_byte())
        .find_map(|binding| match binding.site {
            // `acc = acc + v` rebinds without resetting: not an initialisation.
            Site::Value { value, parent, .. } if !mentions(checker, value, name) => {
                Some(parent).filter(|p| p.kind_id() == KINDS.assignment)
            }
            _ => None,
        })
}

fn mentions<'a>(checker: &impl Position<'a>, node: Node<'a>, name: &str) -> bool {
    let mut found = false;
    walk(node, |visit| {
        if let Visit::Enter(inner) = visit
            && inner.kind_id() == KINDS.identifier
            && checker.node_text(inner) == name
        {
            found = true;
        }
        if found { Descend::No } else { Descend::Yes }
    });
    found
}

/// Whether `statement` runs on every iteration of `loop_node`: it is in the loop's body, not
/// under an `if`, `try` or a nested loop.
fn contains_unconditionally<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
    statement: Node<'a>,
) -> bool {
    let Some(body) = checker.field(loop_node, FIELDS.body) else {
        return false;
    };
    if !body.byte_range().contains(&statement.start_byte()) {
        return false;
    }
    let mut node = statement;
    while let Some(parent) = node.parent() {
        if parent.id() == body.id() {
            return true;
        }
        let kind = parent.kind();
        let transparent = matches!(
            kind,
            "block" | "expression_statement" | "with_statement" | "assignment"
        );
        if !transparent {
            return false;
        }
        node = parent;
    }
    let _ = checker;
    false
}

/// Whether a container only keeps the last few items: the loop pops from it
/// (`recent.pop(0)`, `del recent[0]`) or it is a `deque(maxlen=...)`.
pub fn bounded<'a>(checker: &impl Position<'a>, container: &str, loop_node: Node<'a>) -> bool {
    let region = checker.node_text(loop_node);
    if [".pop(", ".popleft("]
        .iter()
        .any(|pop| region.contains(&format!("{container}{pop}")))
        || region.contains(&format!("del {container}["))
    {
        return true;
    }
    let assignment = format!("{container} = ");
    checker.text().match_indices(&assignment).any(|(at, _)| {
        let line = checker.text()[at..].lines().next().unwrap_or("");
        line.contains("deque(") && line.contains("maxlen")
    })
}

/// Which enclosing loops a container outlives at `statement`: those the container's
/// (unconditional) initialisation is outside of. For `self.x` attributes and names bound
/// outside the function, every enclosing loop.
pub fn carrying_loops<'a>(
    checker: &impl Position<'a>,
    container: Node<'a>,
    statement: Node<'a>,
) -> Vec<Node<'a>> {
    let loops = checker.enclosing_loops();
    let carried = loops_outlived(checker, container, statement);
    // A container reset on every batch holds one batch's worth (chunks of one input, the
    // time steps of one sequence).
    if let Some(resetting) = loops.get(carried.len())
        && per_batch_reason(checker, *resetting).is_some()
    {
        return Vec::new();
    }
    carried
}

/// The enclosing loops, innermost first, that the container outlives: up to the first one
/// that (re)initialises or clears it.
pub fn loops_outlived<'a>(
    checker: &impl Position<'a>,
    container: Node<'a>,
    statement: Node<'a>,
) -> Vec<Node<'a>> {
    let loops = checker.enclosing_loops();
    let name = checker.node_text(container);
    let init = initialisation(checker, container, statement);
    let carried: Vec<Node<'a>> = loops
        .iter()
        .copied()
        .take_while(|loop_node| {
            !init.is_some_and(|init| contains_unconditionally(checker, *loop_node, init))
                && !clears(checker, *loop_node, name)
        })
        .collect();
    carried
}
