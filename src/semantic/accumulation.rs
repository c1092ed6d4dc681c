//! What the memory rules ask of a loop and the values it keeps: accumulations (`acc += v`,
//! `acc.append(v)`, `acc[k] = v`, `acc = torch.cat([acc, v])`) and whether what they keep
//! outlives the function, the loops that run once per batch (and why), resets and clears of
//! a container inside a loop, bounded containers, and the graph-carrying arguments a call
//! passes to the project's functions (`GraphCall`s, and the `Assumption` a finding on a kept
//! parameter rests on). Asked from a place in the rule walk ([`Position`]); the rules only
//! read the answers and report.

use std::sync::LazyLock;

use tree_sitter::Node;

use super::position::Position;
use crate::parse::{Descend, FIELDS, KINDS, Visit, text, walk};
use crate::semantic::scope::Site;
use crate::semantic::training;
use crate::semantic::values::Kind;
use crate::source::TextRange;

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
            // `all["query"] = torch.cat((all["query"], emb))`: grows the slot every time (also
            // as the first branch of `... if isinstance(emb, Tensor) else None`).
            let grown = if right.kind_id() == KINDS.conditional_expression {
                right.named_child(0).unwrap_or(right)
            } else {
                right
            };
            if grown.kind_id() == KINDS.call
                && let Some(mut found) = concatenation(checker, left, grown)
            {
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
            return Some(Accumulation {
                container: checker.field(left, FIELDS.value)?,
                value: right,
                how: How::Store,
            });
        }
        if left.kind_id() != KINDS.identifier && left.kind_id() != KINDS.attribute {
            return None;
        }
        if right.kind_id() == KINDS.call {
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
            _ => return None,
        };
        if value.kind_id() == KINDS.keyword_argument {
            return None;
        }
        // `outputs[name].append(v)` collects into `outputs`.
        let mut container = checker.field(callee, FIELDS.object)?;
        while container.kind_id() == KINDS.subscript {
            container = checker.field(container, FIELDS.value)?;
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
            Some("append" | "extend" | "insert" | "add_")
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
/// concatenated onto the container.
fn concatenation<'a>(
    checker: &impl Position<'a>,
    left: Node<'a>,
    call: Node<'a>,
) -> Option<Accumulation<'a>> {
    let items = concatenated_items(checker, call)?;
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

/// Why a loop runs once per batch, for labels; `None` for loops that do not (epochs,
/// setup loops, loops over time steps of one sequence).
pub fn per_batch_reason<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> Option<String> {
    let facts = checker.model().loop_facts(loop_node)?;
    if let Some(call) = facts
        .training_call
        .clone()
        .or_else(|| checker.analysis().loop_trains_through_calls(loop_node))
    {
        return Some(format!(
            "this loop runs once per training step (it calls `{}`)",
            crate::source::snippet(&checker.text()[call], 50)
        ));
    }
    if loop_node.kind_id() == KINDS.for_statement
        && let Some(iterable) = checker.field(loop_node, FIELDS.right)
        && checker.analysis().iterates_batches(iterable)
    {
        return Some(format!(
            "this loop runs once per batch of `{}`",
            short(checker, iterable)
        ));
    }
    let over_modules = checker
        .field(loop_node, FIELDS.right)
        .is_some_and(|iterable| checker.analysis().facts(iterable).kind == Kind::Module);
    if facts.nested_training || over_modules || in_module_method(checker, loop_node) {
        // Loops inside a model's own code run per layer or per chunk of one forward pass.
        return None;
    }
    runs_forward(checker, loop_node).map(|call| {
        format!(
            "this loop runs the model once per iteration (`{}`)",
            crate::source::snippet(call, 50)
        )
    })
}

/// Whether a node is in a method of an `nn.Module` class.
pub fn in_module_method<'a>(checker: &impl Position<'a>, node: Node<'a>) -> bool {
    checker
        .analysis()
        .class_of(node)
        .is_some_and(|class| checker.analysis().modules().is_module_class(class))
}

/// A forward call in the loop's own body (not in nested loops or functions).
fn runs_forward<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> Option<&'a str> {
    runs_forward_in(checker, checker.field(loop_node, FIELDS.body)?)
}

fn runs_forward_in<'a>(checker: &impl Position<'a>, body: Node<'a>) -> Option<&'a str> {
    let mut found = None;
    walk(body, |visit| {
        let Visit::Enter(node) = visit else {
            return Descend::Yes;
        };
        if found.is_some() || !node.is_named() {
            return Descend::No;
        }
        let kind = node.kind_id();
        if kind == KINDS.for_statement {
            // A nested loop's iterable runs once per iteration of this one:
            // `for name, out in model(x).items()`.
            if let Some(iterable) = checker.field(node, FIELDS.right) {
                found = runs_forward_in(checker, iterable);
            }
            return Descend::No;
        }
        if kind == KINDS.while_statement
            || kind == KINDS.function_definition
            || kind == KINDS.lambda
            || kind == KINDS.class_definition
        {
            return Descend::No;
        }
        if kind == KINDS.call
            && (forward_call(checker, node).is_some() || calls_model_helper(checker, node))
        {
            found = Some(checker.node_text(node));
            return Descend::No;
        }
        Descend::Yes
    });
    found.map(first_line)
}

/// `forecast_error(model, x)`: a call of one of the file's functions that runs a model.
fn calls_model_helper<'a>(checker: &impl Position<'a>, call: Node<'a>) -> bool {
    checker.analysis().calls_forward_helper(call, 0)
}

pub fn first_line(text: &str) -> &str {
    match memchr::memchr(b'\n', text.as_bytes()) {
        Some(end) => {
            let line = &text[..end];
            line.strip_suffix('\r').unwrap_or(line)
        }
        None => text,
    }
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
        // `if ema is None: ema = loss` starts the average on the first step, once.
        let first_value = lines[..at]
            .iter()
            .rev()
            .find(|header| {
                !header.trim().is_empty() && header.len() - header.trim_start().len() < indent
            })
            .is_some_and(|header| {
                let header = header.trim();
                header.starts_with("if ")
                    && (header.contains(&format!("{name} is None"))
                        || header.contains(&format!("not {name}")))
            });
        !first_value
    })
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
            Site::Value { value, .. } if !mentions(checker, value, name) => {
                value.parent().filter(|p| p.kind_id() == KINDS.assignment)
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

/// The first of the loops that runs once per batch, with the reason.
pub fn first_per_batch<'a>(
    checker: &impl Position<'a>,
    loops: &[Node<'a>],
) -> Option<(Node<'a>, String)> {
    loops
        .iter()
        .find_map(|loop_node| per_batch_reason(checker, *loop_node).map(|why| (*loop_node, why)))
}

/// The header of a loop (`for x in loader`), for labels.
pub fn loop_header<'a>(checker: &impl Position<'a>, loop_node: Node<'a>) -> TextRange {
    checker
        .model()
        .loop_facts(loop_node)
        .map_or(loop_node.byte_range(), |facts| facts.header.clone())
}

/// Whether the function holding the current node runs once per batch when it is not in a
/// loop: a framework per-batch hook (`training_step`) or a function that is itself a step.
pub fn per_batch_function<'a>(checker: &impl Position<'a>) -> Option<(TextRange, String)> {
    let (function, facts) = checker.current_function()?;
    if training::is_per_batch_hook(&facts.name) {
        return Some((
            facts.header.clone(),
            format!("`{}` runs once per batch", facts.name),
        ));
    }
    // A model's own methods that call `.backward()` (reversible layers recomputing their
    // activations) are part of one backward pass, not a training step.
    if let Some(call) = &facts.training_call_outside_loops
        && !in_module_method(
            checker,
            checker.field(function, FIELDS.body).unwrap_or(function),
        )
    {
        return Some((
            facts.header.clone(),
            format!(
                "`{}` is a training step (it calls `{}`)",
                facts.name,
                crate::source::snippet(&checker.text()[call.clone()], 50)
            ),
        ));
    }
    None
}

/// The text of a node, shortened to its first line.
pub fn short<'a>(checker: &impl Position<'a>, node: Node<'_>) -> String {
    crate::source::snippet(text(node, checker.text()), 50)
}

/// The canonical name of a method of one of this file's classes (see `FactBase::canonical`).
pub fn own_method_name<'a>(checker: &impl Position<'a>, class: usize, method: &str) -> String {
    let module = checker.analysis().module_path().unwrap_or("");
    format!("{module}.{}.{method}", checker.model().classes[class].name)
}

/// An argument of a call: its position (`self` is 0) or keyword, and its value.
type PassedArgument<'a> = (Option<u32>, Option<&'a str>, Node<'a>);

/// What a call passes to a method: a call's argument list, or the value a subscript
/// assignment hands to `__setitem__(self, key, value)`.
enum Passed<'a> {
    Arguments(Node<'a>),
    Value(Node<'a>),
}

impl<'a> Passed<'a> {
    fn arguments(&self, checker: &impl Position<'a>) -> Vec<PassedArgument<'a>> {
        let list = match self {
            Passed::Value(value) => return vec![(Some(2), None, *value)],
            Passed::Arguments(list) => *list,
        };
        let mut cursor = list.walk();
        let mut arguments = Vec::new();
        let mut position = 1;
        for argument in list.named_children(&mut cursor) {
            if argument.kind_id() == KINDS.keyword_argument {
                let (Some(name), Some(value)) = (
                    argument.child_by_field_id(FIELDS.name),
                    argument.child_by_field_id(FIELDS.value),
                ) else {
                    continue;
                };
                arguments.push((None, Some(checker.node_text(name)), value));
            } else if argument.kind_id() != KINDS.list_splat
                && argument.kind_id() != KINDS.dictionary_splat
            {
                arguments.push((Some(position), None, argument));
                position += 1;
            }
        }
        arguments
    }
}

/// Records a call at `node` that passes a graph-carrying tensor to a method of the project
/// that keeps it (`meter.update(loss)`, `stats["loss"] = loss` on a collector's
/// `__setitem__`): the storing line's finding waits for one (`Assumption::GraphArgument`).
pub fn record_graph_arguments<'a>(checker: &impl Position<'a>, node: Node<'a>) {
    let analysis = &checker.analysis();
    // TL102 and TL103 both ask at the same node.
    if analysis.recorded_node.replace(node.id()) == node.id() {
        return;
    }
    // The receiver and the method; then, once the receiver is known to be an instance of a
    // class whose method keeps a parameter, the arguments by parameter index (`self` is 0).
    let (receiver, method, passed): (Node<'a>, &str, Passed<'a>) = if node.kind_id() == KINDS.call {
        let Some(callee) = checker.callee(node) else {
            return;
        };
        if callee.kind_id() != KINDS.attribute {
            return;
        }
        let Some(method) = checker.call_name(node) else {
            return;
        };
        if matches!(
            method,
            "append" | "extend" | "insert" | "add_" | "item" | "backward" | "step"
        ) || !analysis.may_store(method)
        {
            return;
        }
        let Some(receiver) = checker.field(callee, FIELDS.object) else {
            return;
        };
        let Some(list) = checker.arguments(node) else {
            return;
        };
        if list.named_child_count() == 0 {
            return;
        }
        (receiver, method, Passed::Arguments(list))
    } else if node.kind_id() == KINDS.assignment {
        // `collector["loss"] = loss`: `__setitem__(self, key, value)`. The target is the
        // assignment's first child; asked first, as most assignments bind names.
        let Some(left) = node
            .child(0)
            .filter(|left| left.kind_id() == KINDS.subscript)
        else {
            return;
        };
        if !analysis.may_store("__setitem__") {
            return;
        }
        let Some(right) = checker.field(node, FIELDS.right) else {
            return;
        };
        let Some(receiver) = checker.field(left, FIELDS.value) else {
            return;
        };
        (receiver, "__setitem__", Passed::Value(right))
    } else {
        return;
    };
    let (function, stores) = match analysis.instance_class(receiver) {
        Some(crate::semantic::instances::ClassRef::Local(class)) => {
            let Some(method_node) = analysis.local_method(class, method) else {
                return;
            };
            (
                own_method_name(checker, class, method),
                analysis.stored_parameters(method_node),
            )
        }
        Some(crate::semantic::instances::ClassRef::Imported(class)) => {
            let qualified = format!("{class}.{method}");
            let crate::semantic::facts::Answer::Stores(stores) =
                analysis.ask_answer(crate::semantic::facts::Ask::Stores(qualified.clone()))
            else {
                return;
            };
            let Some(function) = analysis.canonical(&qualified) else {
                return;
            };
            (function, stores)
        }
        None => return,
    };
    let arguments = passed.arguments(checker);
    if stores.is_empty() {
        return;
    }
    let per_batch = checker.per_batch().is_some();
    let row = checker.source().location(node.start_byte()).row;
    for stored in &stores {
        let passed = arguments.iter().find(|(position, keyword, _)| {
            *position == Some(stored.index) || *keyword == Some(stored.name.as_str())
        });
        let Some((position, keyword, value)) = passed else {
            continue;
        };
        let mut facts = analysis.facts(*value);
        // `loss = criterion(...)` of an unknown criterion, then `loss.backward()`: whatever
        // made it, it carries a graph.
        if facts.graph != crate::semantic::values::Tri::Yes
            && backpropagated_in_loop(checker, *value)
        {
            facts.graph = crate::semantic::values::Tri::Yes;
            facts.kind = crate::semantic::values::Kind::Tensor;
        }
        let (facts, from) = if facts.graph == crate::semantic::values::Tri::Yes {
            (facts, None)
        } else {
            // The caller's own parameter (or a value made from it): a graph only when the
            // caller is passed one.
            let Some((facts, from)) = passed_parameter(checker, *value) else {
                continue;
            };
            (facts, Some(from))
        };
        analysis.record_graph_call(crate::semantic::cross_file::GraphCall {
            function: function.clone(),
            parameter: *position,
            keyword: keyword.map(str::to_owned),
            per_batch,
            container: facts.kind == crate::semantic::values::Kind::Container,
            site: format!("{}:{row}", crate::escape::path(checker.source().name())),
            from,
        });
    }
}

/// When `value` carries a graph only if a parameter of the function around it does: its facts
/// then, and the function's canonical name with the parameter's index and name.
fn passed_parameter<'a>(
    checker: &impl Position<'a>,
    value: Node<'a>,
) -> Option<(crate::semantic::values::ValueFacts, (String, u32, String))> {
    let analysis = &checker.analysis();
    let (function, facts) = checker.current_function()?;
    let canonical = match facts.class {
        Some(class) => own_method_name(checker, class, &facts.name),
        None => format!("{}.{}", analysis.module_path().unwrap_or(""), facts.name),
    };
    let text = checker.node_text(value);
    let graph_carrying = crate::semantic::values::ValueFacts {
        kind: crate::semantic::values::Kind::Tensor,
        graph: crate::semantic::values::Tri::Yes,
        ..Default::default()
    };
    analysis
        .parameter_names(function)
        .into_iter()
        .filter(|(index, name)| {
            (facts.class.is_none() || *index > 0)
                && text
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|word| word == *name)
                || analysis.reaching_value(value).is_some_and(|bound| {
                    checker
                        .node_text(bound)
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|word| word == *name)
                })
        })
        .find_map(|(index, name)| {
            let given = analysis.facts_given_parameter(value, function, index, graph_carrying);
            (given.graph == crate::semantic::values::Tri::Yes)
                .then(|| (given, (canonical.clone(), index, name.to_owned())))
        })
}

/// The finding for a line of a method that keeps its parameter on `self`, to be kept once a
/// caller in the run passes a graph-carrying tensor (`Assumption::GraphArgument`).
pub fn stored_argument_assumption<'a>(
    checker: &impl Position<'a>,
    store: &crate::semantic::stores::Store<'a>,
) -> Option<crate::semantic::cross_file::Assumption> {
    let (function, facts) = checker.current_function()?;
    let class = facts.class?;
    let name = checker
        .analysis()
        .parameter_names(function)
        .into_iter()
        .find(|(index, _)| *index == store.parameter)?
        .1;
    Some(crate::semantic::cross_file::Assumption::GraphArgument {
        function: own_method_name(checker, class, &facts.name),
        parameter: store.parameter,
        name: name.to_owned(),
        per_batch: store.accumulates,
        expects: store.expects,
    })
}

/// Whether the value is (an expression of) a variable the loop calls `.backward()` on: then it
/// certainly carries a graph, whatever produced it (`loss = self._loss_fn(...)`).
pub fn backpropagated_in_loop<'a>(checker: &impl Position<'a>, value: Node<'a>) -> bool {
    // The loops around it (the backward may be in an outer one: `for name, v in
    // parts.items()` inside the step loop), or outside loops the step function itself.
    let mut regions = checker.enclosing_loops();
    if regions.is_empty() {
        regions.extend(checker.current_function().map(|(function, _)| function));
    }
    // The innermost loop that calls a backward decides.
    regions
        .into_iter()
        .find(|region| checker.analysis().calls_backward_in(*region))
        .is_some_and(|region| backpropagated_in_region(checker, region, value))
}

fn backpropagated_in_region<'a>(
    checker: &impl Position<'a>,
    loop_node: Node<'a>,
    value: Node<'a>,
) -> bool {
    let region = checker.node_text(loop_node);
    let text = checker.node_text(value);
    if [".item()", ".detach()", "float(", ".tolist()", "int("]
        .iter()
        .any(|detaching| text.contains(detaching))
    {
        return false;
    }
    let words = || {
        text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '.')
            .filter(|word| !word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()))
    };
    words().any(|word| region.contains(&format!("{word}.backward(")))
        // What the loop backpropagates through, by any spelling of the backward call
        // (`scaler.scale(loss).backward()`, `accelerator.backward(loss)`) and what the
        // backpropagated loss was computed from (`loss = sum(losses)`).
        || checker
            .analysis()
            .combined_names(value)
            .into_iter()
            .any(|name| checker.analysis().backpropagated_in(loop_node, name))
}
