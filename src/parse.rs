//! Parsing Python with tree-sitter, and the one iterative tree walk everything else uses
//! (recursion would overflow the stack on deeply nested expressions).

mod budget;
pub use budget::for_len as parse_budget;
mod density;
mod line_endings;

use std::cell::RefCell;
use std::fmt;
use std::ops::ControlFlow;
use std::sync::LazyLock;
use std::time::Duration;

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::{Language, ParseOptions, Parser, Tree};

use crate::syntax::Node;

static PYTHON: LazyLock<Language> = LazyLock::new(|| tree_sitter_python::LANGUAGE.into());

pub fn python() -> Language {
    PYTHON.clone()
}

/// Every named node kind's id, by name, read in one pass over the grammar's kinds: tree-sitter
/// answers one name by scanning them all, and a run asks for a hundred names as it starts.
/// A name that several kinds share (an alias and its rule) is left to tree-sitter, which knows
/// which of them nodes report.
static NAMED_KINDS: LazyLock<HashMap<&'static str, u16>> = LazyLock::new(|| {
    let mut first: HashMap<&'static str, (u16, usize)> = HashMap::default();
    for id in 0..PYTHON.node_kind_count() as u16 {
        if let Some(name) = PYTHON.node_kind_for_id(id) {
            first.entry(name).or_insert((id, 0)).1 += 1;
        }
    }
    first
        .into_iter()
        .filter_map(|(name, (id, count))| {
            // What `id_for_node_kind(name, true)` answers with: a supertype, or a named
            // kind that is visible.
            let named = PYTHON.node_kind_is_supertype(id)
                || (PYTHON.node_kind_is_named(id) && PYTHON.node_kind_is_visible(id));
            match count {
                1 if named => Some((name, id)),
                1 => None,
                _ => Some((name, PYTHON.id_for_node_kind(name, true))).filter(|(_, id)| *id != 0),
            }
        })
        .collect()
});

/// The id of the named node kind `name` (0: the grammar has none), as
/// `python().id_for_node_kind(name, true)` says.
pub fn kind_id(name: &str) -> u16 {
    NAMED_KINDS.get(name).copied().unwrap_or(0)
}

/// The name of the node kind `id` (`ERROR` for an error node), as `Node::kind` says.
pub fn kind_name(id: u16) -> &'static str {
    PYTHON.node_kind_for_id(id).unwrap_or("ERROR")
}

/// The id of the field `name`, if the grammar has one.
pub fn field_id(name: &str) -> Option<u16> {
    PYTHON
        .field_id_for_name(name)
        .map(std::num::NonZeroU16::get)
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new({
        let mut parser = Parser::new();
        parser
            .set_language(&PYTHON)
            .expect("the bundled tree-sitter-python grammar matches the tree-sitter version");
        parser
    });
}

/// CPython's limit on nested indentation levels (`MAXINDENT` in its tokenizer).
pub const MAX_INDENT_LEVELS: usize = 100;

/// Text that must not reach tree-sitter, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsable {
    pub offset: usize,
    pub message: String,
}

/// Rejects what tree-sitter-python cannot survive: its scanner aborts the whole process when
/// it has to serialize more than ~500 indentation levels. Python itself refuses more than
/// 100, so such a file cannot run anyway. Indentation inside brackets and strings is counted
/// too (an over-estimate, never an under-estimate).
pub fn check_parsable(text: &str) -> Result<(), Unparsable> {
    let bytes = text.as_bytes();
    // Fast path: fewer than 100 columns of leading whitespace means fewer than 100 levels. A
    // tab is at most 8 columns, so a line indented further starts with at least 13 whitespace
    // bytes: only lines whose 13th byte is whitespace are measured (the editor runs this on
    // every keystroke).
    let min_bytes = MAX_INDENT_LEVELS / 8 + 1;
    let deep = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', bytes).map(|newline| newline + 1))
        .any(|start| {
            bytes
                .get(start + min_bytes - 1)
                .is_some_and(|&byte| matches!(byte, b' ' | b'\t' | b'\x0c'))
                && indent_width(&bytes[start..]) > MAX_INDENT_LEVELS
        });
    if !deep {
        return Ok(());
    }
    let mut widths: Vec<usize> = vec![0];
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let line = &bytes[start..end];
        let blank = line.iter().all(|b| b.is_ascii_whitespace());
        if !blank {
            let width = indent_width(line);
            while widths.last().is_some_and(|&top| top > width) {
                widths.pop();
            }
            if widths.last().is_none_or(|&top| top < width) {
                widths.push(width);
            }
            if widths.len() - 1 > MAX_INDENT_LEVELS {
                return Err(Unparsable {
                    offset: start,
                    message: format!(
                        "too many levels of indentation (Python allows at most {MAX_INDENT_LEVELS}); torchlint did not parse this file"
                    ),
                });
            }
        }
        start = end + 1;
    }
    Ok(())
}

/// Leading whitespace in columns, tabs to the next multiple of 8 (as Python counts them).
fn indent_width(line: &[u8]) -> usize {
    let mut width = 0;
    for &byte in line {
        match byte {
            b' ' => width += 1,
            b'\t' => width = (width / 8 + 1) * 8,
            b'\x0c' => width = 0,
            _ => break,
        }
    }
    width
}

/// Why torchlint did not parse a file (reported like a file it cannot read: the rest of the
/// run goes on).
#[derive(Debug, Clone, PartialEq)]
pub enum Skipped {
    /// Past the parse budget ([`budget::for_len`]).
    TooSlow { budget: Duration },
    /// Past the density limit ([`density::is_too_dense`]).
    TooDense { tokens: usize, bytes: usize },
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skipped::TooSlow { budget } => write!(
                f,
                "too slow to parse: over {:.1} s, the budget for a file of this size; skipped \
                 (exclude it from linting; if it is ordinary Python, please report it)",
                budget.as_secs_f64()
            ),
            Skipped::TooDense { tokens, bytes } => write!(
                f,
                "{tokens} tokens in {bytes} bytes: denser than torchlint lints (more than {} \
                 tokens at over {} a byte); skipped (exclude it from linting)",
                density::MAX_DENSE_TOKENS,
                density::MAX_DENSITY
            ),
        }
    }
}

/// Parses `text`; pass the previous tree (already `edit`ed) to re-parse incrementally.
/// Call [`check_parsable`] first: tree-sitter aborts the process on some inputs it rejects.
/// A file too dense or too slow to parse is skipped, so that it cannot stall or exhaust the
/// run; the parser reads lone `\r` line breaks as `\n` ([`line_endings`]).
pub fn parse(text: &str, old_tree: Option<&Tree>) -> Result<Tree, Skipped> {
    if let Some(tokens) = density::too_dense(text) {
        return Err(Skipped::TooDense {
            tokens,
            bytes: text.len(),
        });
    }
    let text = line_endings::for_parser(text);
    let budget = budget::for_len(text.len());
    PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        let parsed = parse_within(&mut parser, &text, old_tree, budget);
        // None also when the old tree confused it; cancelled is cancelled, fresh or not.
        let parsed = match parsed {
            Some(tree) => Some(tree),
            None if old_tree.is_some() => parse_within(&mut parser, &text, None, budget),
            None => None,
        };
        parsed.ok_or(Skipped::TooSlow { budget })
    })
}

/// One parse, cancelled past `budget` of this thread's CPU time.
fn parse_within(
    parser: &mut Parser,
    text: &str,
    old_tree: Option<&Tree>,
    budget: Duration,
) -> Option<Tree> {
    let bytes = text.as_bytes();
    let clock = budget::CpuClock::start();
    let mut past_budget = |_: &tree_sitter::ParseState| {
        if clock.past(budget) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let options = ParseOptions::new().progress_callback(&mut past_budget);
    let tree = parser.parse_with_options(
        &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
        old_tree,
        Some(options),
    );
    if tree.is_none() {
        // A cancelled parser would resume this parse on the next call.
        parser.reset();
    }
    tree
}

/// Node kind ids, looked up once so that the walks compare integers, not strings.
pub struct Kinds {
    pub module: u16,
    pub function_definition: u16,
    pub decorated_definition: u16,
    pub class_definition: u16,
    pub lambda: u16,
    pub list_comprehension: u16,
    pub set_comprehension: u16,
    pub dictionary_comprehension: u16,
    pub generator_expression: u16,
    pub for_statement: u16,
    pub while_statement: u16,
    pub with_statement: u16,
    pub with_item: u16,
    pub if_statement: u16,
    pub elif_clause: u16,
    pub else_clause: u16,
    pub except_clause: u16,
    pub call: u16,
    pub attribute: u16,
    pub identifier: u16,
    pub keyword_argument: u16,
    pub argument_list: u16,
    pub import_statement: u16,
    pub import_from_statement: u16,
    pub aliased_import: u16,
    pub dotted_name: u16,
    pub wildcard_import: u16,
    pub relative_import: u16,
    pub assignment: u16,
    pub augmented_assignment: u16,
    pub named_expression: u16,
    pub as_pattern: u16,
    pub as_pattern_target: u16,
    pub for_in_clause: u16,
    pub global_statement: u16,
    pub comment: u16,
    pub subscript: u16,
    pub list_splat: u16,
    pub dictionary_splat: u16,
    pub parenthesized_expression: u16,
    pub decorator: u16,
    pub true_: u16,
    pub false_: u16,
    pub string: u16,
    pub parameters: u16,
    pub lambda_parameters: u16,
    pub type_: u16,
    pub block: u16,
    pub integer: u16,
    pub float: u16,
    pub none: u16,
    pub default_parameter: u16,
    pub typed_default_parameter: u16,
    pub concatenated_string: u16,
    pub binary_operator: u16,
    pub boolean_operator: u16,
    pub unary_operator: u16,
    pub not_operator: u16,
    pub comparison_operator: u16,
    pub conditional_expression: u16,
    pub tuple: u16,
    pub list: u16,
    pub expression_list: u16,
    pub dictionary: u16,
    pub set: u16,
    pub expression_statement: u16,
    pub return_statement: u16,
    pub pattern_list: u16,
    pub tuple_pattern: u16,
}

pub static KINDS: LazyLock<Kinds> = LazyLock::new(|| {
    let id = |name: &str| {
        let id = kind_id(name);
        assert_ne!(id, 0, "tree-sitter-python has no node kind `{name}`");
        id
    };
    Kinds {
        module: id("module"),
        function_definition: id("function_definition"),
        decorated_definition: id("decorated_definition"),
        class_definition: id("class_definition"),
        lambda: id("lambda"),
        list_comprehension: id("list_comprehension"),
        set_comprehension: id("set_comprehension"),
        dictionary_comprehension: id("dictionary_comprehension"),
        generator_expression: id("generator_expression"),
        for_statement: id("for_statement"),
        while_statement: id("while_statement"),
        with_statement: id("with_statement"),
        with_item: id("with_item"),
        if_statement: id("if_statement"),
        elif_clause: id("elif_clause"),
        else_clause: id("else_clause"),
        except_clause: id("except_clause"),
        call: id("call"),
        attribute: id("attribute"),
        identifier: id("identifier"),
        keyword_argument: id("keyword_argument"),
        argument_list: id("argument_list"),
        import_statement: id("import_statement"),
        import_from_statement: id("import_from_statement"),
        aliased_import: id("aliased_import"),
        dotted_name: id("dotted_name"),
        wildcard_import: id("wildcard_import"),
        relative_import: id("relative_import"),
        assignment: id("assignment"),
        augmented_assignment: id("augmented_assignment"),
        named_expression: id("named_expression"),
        as_pattern: id("as_pattern"),
        as_pattern_target: id("as_pattern_target"),
        for_in_clause: id("for_in_clause"),
        global_statement: id("global_statement"),
        comment: id("comment"),
        subscript: id("subscript"),
        list_splat: id("list_splat"),
        dictionary_splat: id("dictionary_splat"),
        parenthesized_expression: id("parenthesized_expression"),
        decorator: id("decorator"),
        true_: id("true"),
        false_: id("false"),
        string: id("string"),
        parameters: id("parameters"),
        lambda_parameters: id("lambda_parameters"),
        type_: id("type"),
        block: id("block"),
        integer: id("integer"),
        float: id("float"),
        none: id("none"),
        default_parameter: id("default_parameter"),
        typed_default_parameter: id("typed_default_parameter"),
        concatenated_string: id("concatenated_string"),
        binary_operator: id("binary_operator"),
        boolean_operator: id("boolean_operator"),
        unary_operator: id("unary_operator"),
        not_operator: id("not_operator"),
        comparison_operator: id("comparison_operator"),
        conditional_expression: id("conditional_expression"),
        tuple: id("tuple"),
        list: id("list"),
        expression_list: id("expression_list"),
        dictionary: id("dictionary"),
        set: id("set"),
        expression_statement: id("expression_statement"),
        return_statement: id("return_statement"),
        pattern_list: id("pattern_list"),
        tuple_pattern: id("tuple_pattern"),
    }
});

/// Field ids, looked up once: `child_by_field_name` would search the field names by string
/// compare on every call.
pub struct Fields {
    pub alias: u16,
    pub arguments: u16,
    pub attribute: u16,
    pub body: u16,
    pub condition: u16,
    pub consequence: u16,
    pub definition: u16,
    pub function: u16,
    pub left: u16,
    pub module_name: u16,
    pub name: u16,
    pub object: u16,
    pub parameters: u16,
    pub right: u16,
    pub value: u16,
    pub superclasses: u16,
    pub argument: u16,
    pub operator: u16,
    pub type_: u16,
    /// The index of `value[index]`.
    pub index: u16,
    /// The key of a dictionary's `key: value` pair.
    pub key: u16,
    /// The `elif`/`else` clauses of an `if` statement.
    pub alternative: u16,
}

impl Fields {
    /// The `name` field as the non-zero id `children_by_field_id` takes.
    pub fn name_id(&self) -> std::num::NonZeroU16 {
        std::num::NonZeroU16::new(self.name).expect("field ids are non-zero")
    }
}

pub static FIELDS: LazyLock<Fields> = LazyLock::new(|| {
    let id = |name: &str| {
        PYTHON
            .field_id_for_name(name)
            .unwrap_or_else(|| panic!("tree-sitter-python has no field `{name}`"))
            .get()
    };
    Fields {
        alias: id("alias"),
        arguments: id("arguments"),
        attribute: id("attribute"),
        body: id("body"),
        condition: id("condition"),
        definition: id("definition"),
        consequence: id("consequence"),
        function: id("function"),
        left: id("left"),
        module_name: id("module_name"),
        name: id("name"),
        object: id("object"),
        parameters: id("parameters"),
        right: id("right"),
        value: id("value"),
        superclasses: id("superclasses"),
        argument: id("argument"),
        operator: id("operator"),
        type_: id("type"),
        index: id("subscript"),
        key: id("key"),
        alternative: id("alternative"),
    }
});

/// What a walk visitor wants after entering a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descend {
    Yes,
    No,
}

/// One step of a walk.
#[derive(Debug, Clone, Copy)]
pub enum Visit<'tree> {
    /// Before the node's children; the visitor answers whether to descend.
    Enter(Node<'tree>),
    /// After the node's children (or right after `Enter` when it did not descend).
    Leave(Node<'tree>),
}

/// Visits every node of the subtree at `root` in document order. Iterative, so nesting
/// depth costs heap, not stack. The answer to `Leave` is ignored.
pub fn walk<'tree>(root: Node<'tree>, mut visit: impl FnMut(Visit<'tree>) -> Descend) {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if visit(Visit::Enter(node)) == Descend::Yes && cursor.goto_first_child() {
            continue;
        }
        visit(Visit::Leave(node));
        loop {
            if cursor.node() == root {
                return;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            visit(Visit::Leave(cursor.node()));
        }
    }
}

/// Whether a character can be part of a Python identifier (letters and digits of any script,
/// and `_`).
pub fn is_identifier_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Whether `word` occurs in `text` as a whole identifier (`loss` in `total + loss.item()`,
/// not in `loss_fn`). A `word` that is not an identifier (empty, or `self.x`) occurs in none.
pub fn mentions_word(text: &str, word: &str) -> bool {
    let Some(&first) = word.as_bytes().first() else {
        return false;
    };
    if !word.chars().all(is_identifier_char) {
        return false;
    }
    // By the first byte, then the rest: a searcher built per call costs more than the short
    // texts it searches. The first byte of a UTF-8 character never continues another, so a
    // match starts and ends on character boundaries.
    let bytes = text.as_bytes();
    memchr::memchr_iter(first, bytes).any(|at| {
        bytes[at..].starts_with(word.as_bytes())
            && !text[..at].ends_with(is_identifier_char)
            && !text[at + word.len()..].starts_with(is_identifier_char)
    })
}

/// The source text of a node.
pub fn text<'a>(node: Node<'_>, source: &'a str) -> &'a str {
    source.get(node.byte_range()).unwrap_or("")
}

/// The outcome of looking for an argument of a call.
#[derive(Debug, Clone, Copy)]
pub enum ArgumentLookup<'t> {
    Found(Node<'t>),
    Absent,
    /// `*args` or `**kwargs` may supply it: nobody can tell statically.
    Unknown,
}

impl<'t> ArgumentLookup<'t> {
    pub fn found(self) -> Option<Node<'t>> {
        match self {
            ArgumentLookup::Found(node) => Some(node),
            _ => None,
        }
    }
}

/// The values a call passes, positional and keyword alike (`f(x, y=z)` → `x`, `z`).
pub fn argument_values(call: Node<'_>) -> Vec<Node<'_>> {
    let Some(arguments) = call.child_by_field_id(FIELDS.arguments) else {
        return Vec::new();
    };
    let mut cursor = arguments.walk();
    arguments
        .named_children(&mut cursor)
        .filter_map(|argument| {
            if argument.kind_id() == KINDS.keyword_argument {
                argument.child_by_field_id(FIELDS.value)
            } else {
                Some(argument)
            }
        })
        .collect()
}

/// Finds an argument by keyword or 0-based position in a call or its argument list.
pub fn find_argument<'t>(
    node: Node<'t>,
    source: &str,
    keyword: Option<&str>,
    position: Option<usize>,
) -> ArgumentLookup<'t> {
    let arguments = if node.kind_id() == KINDS.call {
        match node.child_by_field_id(FIELDS.arguments) {
            Some(arguments) => arguments,
            None => return ArgumentLookup::Absent,
        }
    } else {
        node
    };
    if arguments.kind_id() != KINDS.argument_list {
        // `f(x for x in y)`: a single generator argument.
        return if position == Some(0) {
            ArgumentLookup::Found(arguments)
        } else {
            ArgumentLookup::Absent
        };
    }
    let mut positional = Some(0);
    let mut unknown = false;
    let mut cursor = arguments.walk();
    for argument in arguments.named_children(&mut cursor) {
        let kind = argument.kind_id();
        if kind == KINDS.keyword_argument {
            let name = argument
                .child_by_field_id(FIELDS.name)
                .and_then(|name| source.get(name.byte_range()));
            if keyword.is_some()
                && name == keyword
                && let Some(value) = argument.child_by_field_id(FIELDS.value)
            {
                return ArgumentLookup::Found(value);
            }
        } else if kind == KINDS.list_splat {
            // `*args`: positions from here on are unknown.
            unknown = true;
            positional = None;
        } else if kind == KINDS.dictionary_splat {
            unknown = true;
        } else if kind == KINDS.comment {
            continue;
        } else if let Some(index) = positional {
            if position == Some(index) {
                return ArgumentLookup::Found(argument);
            }
            positional = Some(index + 1);
        }
    }
    if unknown {
        ArgumentLookup::Unknown
    } else {
        ArgumentLookup::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_mentioned_only_as_a_whole_identifier() {
        // What splitting the text at every non-identifier character and comparing the words
        // gives, on the texts the rules ask about.
        let split =
            |text: &str, word: &str| text.split(|c| !is_identifier_char(c)).any(|w| w == word);
        let cases = [
            ("total + loss.item()", "loss"),
            ("loss_fn(x)", "loss"),
            ("my_loss", "loss"),
            ("loss", "loss"),
            ("(loss)", "loss"),
            ("lossy + loss", "loss"),
            ("xloss, loss2, loss", "loss"),
            ("éloss + lossé", "loss"),
            ("réseau(x)", "réseau"),
            ("a.réseau", "réseau"),
            ("self.x", "self.x"),
            ("self.x", "x"),
            ("", "x"),
            ("x", ""),
            ("(x)", ""),
        ];
        for (text, word) in cases {
            let expected = split(text, word) && !word.is_empty();
            assert_eq!(mentions_word(text, word), expected, "{word:?} in {text:?}");
        }
    }

    #[test]
    fn kind_ids_agree_with_tree_sitter() {
        let mut names = 0;
        for id in 0..PYTHON.node_kind_count() as u16 {
            let Some(name) = PYTHON.node_kind_for_id(id) else {
                continue;
            };
            assert_eq!(
                kind_id(name),
                PYTHON.id_for_node_kind(name, true),
                "`{name}`"
            );
            names += 1;
        }
        assert!(names > 100, "{names}");
        assert_eq!(kind_id("no_such_kind"), 0);
    }

    #[test]
    fn walk_enters_and_leaves_in_order_without_recursion() {
        let source = format!("x = {}1{}\n", "(".repeat(20_000), ")".repeat(20_000));
        let tree = parse(&source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let (mut entered, mut left) = (0usize, 0usize);
        walk(tree.root_node(), |visit| {
            match visit {
                Visit::Enter(_) => entered += 1,
                Visit::Leave(_) => left += 1,
            }
            Descend::Yes
        });
        assert_eq!(entered, left);
        assert!(entered > 40_000);
    }

    #[test]
    fn too_deep_indentation_is_refused_before_parsing() {
        let mut text = String::new();
        for level in 0..=MAX_INDENT_LEVELS {
            text.push_str(&format!("{}if x:\n", " ".repeat(level)));
        }
        assert!(
            check_parsable(&text).is_ok(),
            "{MAX_INDENT_LEVELS} levels are fine"
        );
        text.push_str(&format!("{}pass\n", " ".repeat(MAX_INDENT_LEVELS + 1)));
        let error = check_parsable(&text).unwrap_err();
        assert_eq!(&text[error.offset..error.offset + 3], &" ".repeat(3));
        assert!(check_parsable(&format!("x = '{}'\n", " ".repeat(500))).is_ok());
        // A tab counts to the next multiple of 8 columns: after 101 levels of one column
        // each (0 to 100), 13 tabs (104 columns) open one more, 12 (96) close some.
        let nested: String = (0..=MAX_INDENT_LEVELS)
            .map(|level| format!("{}if x:\n", " ".repeat(level)))
            .collect();
        let tabs = |n: usize| format!("{nested}{}pass\n", "\t".repeat(n));
        assert!(check_parsable(&tabs(12)).is_ok());
        assert!(check_parsable(&tabs(13)).is_err());
    }

    #[test]
    fn walk_of_a_subtree_stays_inside_it() {
        let source = "a(1)\nb(2)\n";
        let tree = parse(source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let first = tree.root_node().child(0).unwrap();
        let mut seen = Vec::new();
        walk(first, |visit| {
            if let Visit::Enter(node) = visit {
                seen.push(text(node, source).to_owned());
            }
            Descend::Yes
        });
        assert!(seen.iter().all(|text| !text.contains('b')), "{seen:?}");
    }
}
