//! Accumulations: the statements that keep a value in a container (`acc += v`,
//! `acc.append(v)`, `acc[k] = v`, `acc = torch.cat([acc, v])`), which calls are forward passes,
//! and whether a container outlives its function. Asked from a place in the rule walk
//! ([`Position`]), like [`super::per_batch`], [`super::resets`] and
//! [`super::graph_arguments`]; the rules read the answers and report.

use std::sync::LazyLock;

use crate::syntax::Node;

use super::per_batch::first_line;
use super::position::Position;
use crate::parse::{FIELDS, KINDS};
use crate::semantic::scope::Site;
use crate::semantic::values::Kind;

pub use crate::semantic::forward::Forward;

/// A call that runs a model: `model(x)`, `self(x)`, `self.encoder(x)`, `model.decode(z)`.
pub fn forward_call<'a>(checker: &impl Position<'a>, call: Node<'a>) -> Option<Forward<'a>> {
    checker.analysis().forward_call(call)
}

/// How a statement puts a value into a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `acc += v`
    AugmentedAdd,
    /// `acc = acc + v`
    Rebind,
    /// `acc.append(v)`, `acc.extend(v)`, `acc.insert(i, v)`
    Append,
    /// `acc[k] = v`
    Store,
    /// `acc = torch.cat([acc, v])`
    Concat,
}

#[derive(Clone, Copy)]
pub struct Accumulation<'a> {
    /// The container expression (`total`, `self.history`, `bank`).
    pub container: Node<'a>,
    /// The value stored.
    pub value: Node<'a>,
    pub how: How,
}

/// Recognises `acc += v`, `acc = acc + v`, `acc.append(v)`, `acc[k] = v` at a statement node
/// (augmented assignment, assignment) or call.
pub fn accumulation<'a>(checker: &impl Position<'a>, node: Node<'a>) -> Option<Accumulation<'a>> {
    // Several memory rules ask at each statement: the answer is kept for the last one.
    if let Some((id, found)) = checker.accumulation_memo().get()
        && id == node.id()
    {
        return found;
    }
    let kind = node.kind_id();
    let found = if accumulation_shaped(checker, node, kind) {
        find_accumulation(checker, node, kind)
    } else {
        None
    };
    checker.accumulation_memo().set(Some((node.id(), found)));
    found
}

fn find_accumulation<'a>(
    checker: &impl Position<'a>,
    node: Node<'a>,
    kind: u16,
) -> Option<Accumulation<'a>> {
    if kind == KINDS.augmented_assignment {
        let operator = checker
            .field(node, FIELDS.operator)
            .map(|o| checker.node_text(o))?;
        if operator != "+=" && operator != "-=" {
            return None;
        }
        let mut container = checker.field(node, FIELDS.left)?;
        // `stats["loss"] += loss` accumulates into `stats`.
        if container.kind_id() == KINDS.subscript {
            container = checker.field(container, FIELDS.value)?;
        }
        if container.kind_id() != KINDS.identifier && container.kind_id() != KINDS.attribute {
            return None;
        }
        let right = checker.field(node, FIELDS.right)?;
        // `preds += [out]` extends a list like `append`.
        if right.kind_id() == KINDS.list && operator == "+=" {
            return Some(Accumulation {
                container,
                value: right.named_child(0)?,
                how: How::Append,
            });
        }
        return Some(Accumulation {
            container,
            value: right,
            how: How::AugmentedAdd,
        });
    }
    if kind == KINDS.assignment {
        let left = checker.field(node, FIELDS.left)?;
        let right = checker.field(node, FIELDS.right)?;
        if left.kind_id() == KINDS.subscript {
            return store_into_slot(checker, left, right);
        }
        // `losses[i], accs[i] = loss, acc.item()`: a store per pair; the first that may be of
        // a tensor (not of a number), else the first.
        if (left.kind_id() == KINDS.pattern_list || left.kind_id() == KINDS.tuple_pattern)
            && (right.kind_id() == KINDS.expression_list || right.kind_id() == KINDS.tuple)
            && left.named_child_count() == right.named_child_count()
        {
            let stores: Vec<Accumulation<'a>> = (0..left.named_child_count() as u32)
                .filter_map(|i| Some((left.named_child(i)?, right.named_child(i)?)))
                .filter(|(target, _)| target.kind_id() == KINDS.subscript)
                .filter_map(|(target, value)| store_into_slot(checker, target, value))
                .collect();
            return stores
                .iter()
                .find(|store| {
                    !matches!(
                        checker.analysis().facts(store.value).kind,
                        Kind::Scalar | Kind::Numpy | Kind::None
                    )
                })
                .or(stores.first())
                .copied();
        }
        if left.kind_id() != KINDS.identifier && left.kind_id() != KINDS.attribute {
            return None;
        }
        if right.kind_id() == KINDS.call
            || right.kind_id() == KINDS.conditional_expression
            || right.kind_id() == KINDS.parenthesized_expression
                && concatenation(checker, left, right).is_some()
        {
            return concatenation(checker, left, right);
        }
        let mut right = right;
        while right.kind_id() == KINDS.parenthesized_expression {
            right = right.named_child(0)?;
        }
        if right.kind_id() != KINDS.binary_operator {
            return None;
        }
        let operator = checker
            .field(right, FIELDS.operator)
            .map(|o| checker.node_text(o))?;
        if operator != "+" && operator != "-" {
            return None;
        }
        let (a, b) = (
            checker.field(right, FIELDS.left)?,
            checker.field(right, FIELDS.right)?,
        );
        let target = checker.node_text(left);
        // `total = total + loss`, and the moving average `ema = a * loss + (1 - a) * ema`:
        // the new value is computed from the old one, so it holds every step's graph.
        let value = if mentions_through_arithmetic(checker, a, target, 0) {
            b
        } else if operator == "+" && mentions_through_arithmetic(checker, b, target, 0) {
            a
        } else {
            return None;
        };
        if mentions_through_arithmetic(checker, value, target, 0) {
            return None;
        }
        return Some(Accumulation {
            container: left,
            value,
            how: How::Rebind,
        });
    }
    if kind == KINDS.call {
        let callee = checker.callee(node)?;
        if callee.kind_id() != KINDS.attribute {
            return None;
        }
        // The attribute's name, recorded by the model for every `obj.m(...)` call.
        let method = checker.call_name(node)?;
        let arguments = checker.arguments(node)?;
        let (value, how) = match method {
            "append" | "extend" => (arguments.named_child(0)?, How::Append),
            "insert" => (arguments.named_child(1)?, How::Append),
            // `stats.device_stat("loss").add_(loss)`: an in-place sum in a tensor.
            "add_" => (arguments.named_child(0)?, How::AugmentedAdd),
            // `features.update({name: out})`: a store of each pair's value.
            "update" => {
                let argument = arguments.named_child(0)?;
                if argument.kind_id() != KINDS.dictionary {
                    return None;
                }
                let pair = argument.named_child(0)?;
                if checker
                    .field(pair, FIELDS.key)
                    .is_none_or(|key| is_constant_key(key.kind_id()))
                {
                    return None;
                }
                (checker.field(pair, FIELDS.value)?, How::Store)
            }
            _ => return None,
        };
        if value.kind_id() == KINDS.keyword_argument {
            return None;
        }
        // `outputs[name].append(v)` and `outputs.setdefault(name, []).append(v)` collect into
        // `outputs`.
        let mut container = checker.field(callee, FIELDS.object)?;
        loop {
            if container.kind_id() == KINDS.subscript {
                container = checker.field(container, FIELDS.value)?;
            } else if container.kind_id() == KINDS.call
                && checker
                    .call_name(container)
                    .is_some_and(|name| name == "setdefault")
                && let Some(function) = checker.callee(container)
                && function.kind_id() == KINDS.attribute
            {
                container = checker.field(function, FIELDS.object)?;
            } else {
                break;
            }
        }
        return Some(Accumulation {
            container,
            value,
            how,
        });
    }
    None
}

/// Whether `node` is `name`, or an arithmetic expression of it (`(1 - a) * name`).
fn mentions_through_arithmetic<'a>(
    checker: &impl Position<'a>,
    node: Node<'a>,
    name: &str,
    depth: usize,
) -> bool {
    if depth > 8 {
        return false;
    }
    let kind = node.kind_id();
    if kind == KINDS.identifier || kind == KINDS.attribute {
        return checker.node_text(node) == name;
    }
    if kind == KINDS.parenthesized_expression || kind == KINDS.unary_operator {
        return node
            .named_child(0)
            .is_some_and(|inner| mentions_through_arithmetic(checker, inner, name, depth + 1));
    }
    if kind == KINDS.binary_operator {
        return [FIELDS.left, FIELDS.right].into_iter().any(|field| {
            checker
                .field(node, field)
                .is_some_and(|side| mentions_through_arithmetic(checker, side, name, depth + 1))
        });
    }
    false
}

/// Whether a container outlives a call of the function holding it: `self.history`, or a
/// tensor reached through a parameter or a global (`stats.device_stat("loss")`).
pub fn outlives_function<'a>(checker: &impl Position<'a>, container: Node<'a>) -> bool {
    if container.kind_id() == KINDS.attribute {
        return true;
    }
    if container.kind_id() != KINDS.call {
        return false;
    }
    let mut root = container;
    loop {
        let next = if root.kind_id() == KINDS.call {
            checker.field(root, FIELDS.function)
        } else if root.kind_id() == KINDS.attribute {
            checker.field(root, FIELDS.object)
        } else {
            break;
        };
        match next {
            Some(next) => root = next,
            None => return false,
        }
    }
    if root.kind_id() != KINDS.identifier || root.id() == container.id() {
        return false;
    }
    let Some(function) = checker.analysis().enclosing_function(container) else {
        return true;
    };
    let scope = checker.analysis().scope_at(container);
    match checker
        .model()
        .scopes
        .lookup(scope, checker.node_text(root), root.start_byte())
    {
        Some((found_in, bindings)) => {
            found_in != scope
                || bindings
                    .iter()
                    .all(|b| matches!(b.site, Site::Parameter { function: f, .. } if f.id() == function.id()))
        }
        None => true,
    }
}

/// A literal key: the same slot on every iteration.
fn is_constant_key(kind: u16) -> bool {
    kind == KINDS.string
        || kind == KINDS.integer
        || kind == KINDS.true_
        || kind == KINDS.false_
        || kind == KINDS.none
        || kind == KINDS.concatenated_string
}

/// Whether a statement can be an accumulation at all, from the recorded call name or the
/// text of its first line (which keeps long literals from being scanned for every statement).
fn accumulation_shaped<'a>(checker: &impl Position<'a>, node: Node<'a>, kind: u16) -> bool {
    // The first line is enough for the shapes below, and keeps long literals from being
    // scanned again for every statement.
    if kind == KINDS.call {
        return matches!(
            checker.call_name(node),
            Some("append" | "extend" | "insert" | "add_" | "update")
        );
    }
    // Over the first line's bytes, with searchers built once: this runs at every assignment
    // of the file.
    let whole = checker.node_text(node);
    let line = first_line(whole);
    // A statement continued in parentheses (`ema = (\n  a * loss + (1 - a) * ema\n)`): its
    // first lines, as far as a long literal would not cost.
    let text = if line.trim_end().ends_with(['(', '\\']) {
        &whole.as_bytes()[..whole.len().min(line.len() + 400)]
    } else {
        line.as_bytes()
    };
    if kind == KINDS.augmented_assignment {
        return PLUS_EQUALS.find(text).is_some() || MINUS_EQUALS.find(text).is_some();
    }
    memchr::memchr3(b'+', b'-', b'[', text).is_some()
        || CAT.find(text).is_some()
        || STACK.find(text).is_some()
}

type Finder = memchr::memmem::Finder<'static>;
pub static PLUS_EQUALS: LazyLock<Finder> = LazyLock::new(|| Finder::new("+="));
pub static DOT_APPEND: LazyLock<Finder> = LazyLock::new(|| Finder::new(".append("));
static MINUS_EQUALS: LazyLock<Finder> = LazyLock::new(|| Finder::new("-="));
static CAT: LazyLock<Finder> = LazyLock::new(|| Finder::new("cat"));
static STACK: LazyLock<Finder> = LazyLock::new(|| Finder::new("stack"));
pub static SELF_DOT: LazyLock<Finder> = LazyLock::new(|| Finder::new("self."));

/// `acc = torch.cat([acc, v])` (or `[v, acc]`, `torch.stack`, `torch.vstack`): the items
/// concatenated onto the container. Also as either branch of a conditional: the first batch
/// starts the accumulator (`acc = v if acc is None else torch.cat([acc, v])`), and a guard may
/// keep the slot (`torch.cat((all[k], v)) if isinstance(v, Tensor) else None`).
fn concatenation<'a>(
    checker: &impl Position<'a>,
    left: Node<'a>,
    right: Node<'a>,
) -> Option<Accumulation<'a>> {
    // `features[i] = (f if features[i] is None else torch.cat([features[i], f]))`.
    let mut right = right;
    while right.kind_id() == KINDS.parenthesized_expression {
        right = right.named_child(0)?;
    }
    if right.kind_id() == KINDS.conditional_expression {
        return [right.named_child(0), right.named_child(2)]
            .into_iter()
            .flatten()
            .find_map(|branch| concatenation(checker, left, branch));
    }
    if right.kind_id() != KINDS.call {
        return None;
    }
    let items = concatenated_items(checker, right)?;
    let target = checker.node_text(left);
    if !items.iter().any(|item| checker.node_text(*item) == target) {
        return None;
    }
    let value = items
        .into_iter()
        .find(|item| checker.node_text(*item) != target)?;
    Some(Accumulation {
        container: left,
        value,
        how: How::Concat,
    })
}

/// The items of `torch.cat([a, b])`, `torch.stack((a, b))`, `torch.vstack([a, b])`.
pub fn concatenated_items<'a>(
    checker: &impl Position<'a>,
    call: Node<'a>,
) -> Option<Vec<Node<'a>>> {
    let callee = checker.callee(call)?;
    let last = checker.node_text(callee).rsplit('.').next()?;
    if !matches!(
        last,
        "cat" | "concat" | "concatenate" | "stack" | "vstack" | "hstack"
    ) {
        return None;
    }
    let name = checker.analysis().qualified_name(callee)?;
    if !name.starts_with("torch.") {
        return None;
    }
    let items = checker
        .arguments(call)?
        .named_child(0)
        .filter(|items| items.kind_id() == KINDS.list || items.kind_id() == KINDS.tuple)?;
    let mut cursor = items.walk();
    let items = items.named_children(&mut cursor).collect();
    Some(items)
}

/// `history[step] = loss`, `outputs[split][name] = out`, `all["q"] = torch.cat((all["q"], e))`:
/// a store into a slot of a container that keeps more than the last value.
fn store_into_slot<'a>(
    checker: &impl Position<'a>,
    left: Node<'a>,
    right: Node<'a>,
) -> Option<Accumulation<'a>> {
    // `all["query"] = torch.cat((all["query"], emb))`: grows the slot every time.
    if let Some(mut found) = concatenation(checker, left, right) {
        let mut base = left;
        while base.kind_id() == KINDS.subscript {
            base = checker.field(base, FIELDS.value)?;
        }
        found.container = base;
        return Some(found);
    }
    // `stats["loss"] = loss` overwrites one slot on every iteration: only a key that
    // changes (`history[step] = loss`) keeps more than the last value.
    if checker
        .field(left, FIELDS.index)
        .is_some_and(|key| is_constant_key(key.kind_id()))
    {
        return None;
    }
    // `outputs[split][name] = out` stores into `outputs`.
    let mut container = checker.field(left, FIELDS.value)?;
    while container.kind_id() == KINDS.subscript {
        container = checker.field(container, FIELDS.value)?;
    }
    Some(Accumulation {
        container,
        value: right,
        how: How::Store,
    })
}
