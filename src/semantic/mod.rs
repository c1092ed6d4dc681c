//! The semantic model of one module, built in the only full walk of the tree, before any rule
//! runs: scopes and bindings (for import resolution), which loops and functions train a model,
//! comments (for suppressions), syntax errors — and the skeleton the rule pass replays: the
//! nodes that open a context (scopes, loops, `with`, `except`, `if`) and the nodes rules start
//! at, in document order. Rules therefore see the complete module (imports written below a
//! function, whether a loop trains) without a second walk.

pub mod accumulation;
pub mod analysis;
pub mod backprop;
mod branches;
pub mod callables;
pub mod constants;
pub mod consumers;
pub mod cross_file;
pub mod datasets;
pub mod facts;
pub mod forward;
pub mod frameworks;
pub mod frozen;
pub mod gates;
pub mod grad;
pub mod graph_arguments;
pub mod hooks;
pub mod instances;
pub mod loaders;
pub mod modules;
pub mod per_batch;
pub mod placement;
pub mod position;
pub mod precision;
pub mod receivers;
pub mod resets;
pub mod scope;
pub mod steps;
pub mod stores;
pub mod summary;
pub mod training;
pub mod values;

use rustc_hash::FxHashMap as HashMap;

use crate::syntax::{Node, SyntaxTree as Tree};

use std::sync::LazyLock;

use crate::node_children::{NamedChildren, Own};
use crate::parse::{FIELDS, KINDS, is_identifier_char, text};
use crate::source::TextRange;
use frameworks::Frameworks;
use scope::{Binding, BindingKind, ScopeId, ScopeKind, Scopes, Site};

#[derive(Debug)]
pub struct SemanticModel<'a> {
    /// Context-opening nodes and rule entry nodes, entered (and, for contexts, left) in
    /// document order.
    pub skeleton: Vec<Step<'a>>,
    pub scopes: Scopes<'a>,
    /// The scope each scope-creating node (function, class, lambda, comprehension) opens.
    scope_of_node: HashMap<usize, ScopeId>,
    loops: HashMap<usize, LoopFacts>,
    /// The calls in each loop's own body (not in a nested loop, function or class), in
    /// document order, by loop node id: which of them trains is asked of the finished model
    /// (a function may be defined below the loop), without walking the loop's tree again.
    loop_calls: HashMap<usize, Vec<Node<'a>>>,
    functions: HashMap<usize, FunctionFacts>,
    functions_by_name: HashMap<&'a str, Vec<Node<'a>>>,
    pub comments: Vec<TextRange>,
    pub syntax_errors: Vec<SyntaxError>,
    /// `obj.attr = value` (and `+=`), in document order.
    pub attribute_assignments: Vec<AttributeAssignment<'a>>,
    /// `x[i] = value` and `x[i] += value` statements, in document order (what writes into a
    /// buffer: `self.running_covar[:, 0] = ...`).
    pub subscript_stores: Vec<Node<'a>>,
    /// `x.eval()` / `x.train()` calls, in document order.
    pub mode_calls: Vec<ModeCall<'a>>,
    /// Every call, by the name it calls: `f(...)` under `f`, `obj.m(...)` under `m`.
    pub calls_by_name: HashMap<&'a str, Vec<Node<'a>>>,
    pub classes: Vec<ClassInfo<'a>>,
    /// Decorated functions and classes: definition node id → the `decorated_definition`
    /// (asking a node for its parent walks down from the root).
    pub decorated: HashMap<usize, Node<'a>>,
    /// The expressions each function returns, by function node id.
    returns: HashMap<usize, Vec<Node<'a>>>,
    /// The callee of each call whose callee is a name or an attribute, and the name it calls,
    /// by call node id: `f` of `f(x)`, `m` of `obj.m(x)`. Rules ask it first at every call,
    /// before any tree lookup.
    call_names: HashMap<usize, (Node<'a>, &'a str)>,
}

/// One step of the skeleton: a node entered, or a context node left. The walk that records it
/// has read the kind and knows whether the node opened a scope, so the replay asks the tree
/// and the scope map nothing.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub node: Node<'a>,
    pub kind: u16,
    /// Entered (before the nodes inside it) or left (after them).
    pub enter: bool,
    /// Whether the node opens a scope: a function, class, lambda or comprehension.
    pub opens_scope: bool,
    /// A name bound to a literal (`LIMIT = 10`, `name = "x"`, `cache = None`): it holds no
    /// tensor, model or loader, so no built-in rule has anything to find at it. Generated
    /// modules are millions of these.
    pub binds_literal: bool,
}

/// `obj.attr = value` or `obj.attr += value` (or `obj.attr` as the `index`th target of a tuple
/// assignment).
#[derive(Debug, Clone, Copy)]
pub struct AttributeAssignment<'a> {
    pub object: &'a str,
    pub attribute: &'a str,
    pub site: scope::Site<'a>,
    /// The assignment statement.
    pub node: Node<'a>,
}

/// `model.eval()` (`eval: true`) or `model.train()` / `model.train(False)`.
#[derive(Debug, Clone, Copy)]
pub struct ModeCall<'a> {
    pub receiver: &'a str,
    pub eval: bool,
    pub node: Node<'a>,
}

#[derive(Debug, Clone)]
pub struct ClassInfo<'a> {
    pub name: &'a str,
    pub node: Node<'a>,
    /// The base-class expressions (`nn.Module`, `LitBase`).
    pub bases: Vec<Node<'a>>,
    /// Method name → function node.
    pub methods: Vec<(&'a str, Node<'a>)>,
}

/// What the walk learned about one `for`/`while` loop.
#[derive(Debug, Clone, Default)]
pub struct LoopFacts {
    /// A training-step call (`loss.backward()`, `opt.step()`) in this loop's own body, not
    /// only in a nested loop: the loop runs once per step.
    pub training_call: Option<TextRange>,
    /// Some nested loop trains (so this one is typically the epoch loop).
    pub nested_training: bool,
    /// `for x in loader` / `while cond`, without the body: where labels point.
    pub header: TextRange,
}

impl LoopFacts {
    pub fn trains(&self) -> bool {
        self.training_call.is_some()
    }
}

#[derive(Debug, Clone, Default)]
pub struct FunctionFacts {
    pub name: String,
    /// A training-step call directly in the body, outside any loop: the function is a step.
    pub training_call_outside_loops: Option<TextRange>,
    /// Any training-step call anywhere in the body.
    pub contains_training: bool,
    /// `def name(...)`, without the body.
    pub header: TextRange,
    /// The class it is a method of (an index into `SemanticModel::classes`).
    pub class: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub range: TextRange,
    /// The token tree-sitter had to insert (`)`), or `None` for unexpected text.
    pub missing: Option<String>,
}

impl<'a> SemanticModel<'a> {
    /// Builds the model; `rule_kinds[kind_id]` says which node kinds rules start at, so that
    /// they go into the skeleton.
    /// The model of a parsed file. `rule_kinds`: the node kinds rules start at (the walk's
    /// skeleton keeps them); `frameworks`: the table that says which calls are a backward.
    pub fn build(
        tree: &'a Tree,
        source: &'a str,
        rule_kinds: &[bool],
        frameworks: &'a Frameworks,
    ) -> Self {
        Builder::new(source, tree.root_node().has_error(), rule_kinds, frameworks).run(tree)
    }

    pub fn scope_of(&self, node: Node<'_>) -> Option<ScopeId> {
        self.scope_of_node.get(&node.id()).copied()
    }

    /// The subscript stores (`x[k] = v`, `x[k] += v`) that start in `range`, in document
    /// order.
    pub fn subscript_stores_in(&self, range: std::ops::Range<usize>) -> &[Node<'a>] {
        in_range(&self.subscript_stores, range, |node| node.start_byte())
    }

    /// The `obj.attr = ...` (or `+=`) statements that start in `range`, in document order.
    pub fn attribute_assignments_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> &[AttributeAssignment<'a>] {
        in_range(&self.attribute_assignments, range, |a| a.node.start_byte())
    }

    pub fn loop_facts(&self, node: Node<'_>) -> Option<&LoopFacts> {
        self.loops.get(&node.id())
    }

    /// Whether some loop of the file trains, or holds one that does.
    pub fn has_training_loop(&self) -> bool {
        self.loops
            .values()
            .any(|facts| facts.trains() || facts.nested_training)
    }

    pub fn function_facts(&self, node: Node<'_>) -> Option<&FunctionFacts> {
        self.functions.get(&node.id())
    }

    /// The class `function` is a method of, if it is one.
    pub fn method_class(&self, function: Node<'_>) -> Option<&ClassInfo<'a>> {
        self.classes.get(self.function_facts(function)?.class?)
    }

    /// Functions defined in this module with this name (any scope).
    pub fn functions_named(&self, name: &str) -> impl Iterator<Item = &FunctionFacts> {
        self.functions_by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|node| self.functions.get(&node.id()))
    }

    /// Function nodes defined in this module with this name.
    pub fn function_nodes_named(&self, name: &str) -> impl Iterator<Item = Node<'a>> + '_ {
        self.functions_by_name
            .get(name)
            .into_iter()
            .flatten()
            .copied()
    }

    /// The name a call calls (`f` of `f(x)`, `m` of `obj.m(x)`); `None` for other callees
    /// (`f(x)(y)`, `fs[0](x)`) and for nodes that are not calls.
    pub fn call_name(&self, call: Node<'_>) -> Option<&'a str> {
        self.call_names.get(&call.id()).map(|&(_, name)| name)
    }

    /// The callee of a call (`f` of `f(x)`): found during the walk for most calls, which a
    /// field lookup on the tree would repeat.
    pub fn callee(&self, call: Node<'a>) -> Option<Node<'a>> {
        self.recorded_call(call)
            .map(|(callee, _)| callee)
            .or_else(|| call.child_by_field_id(FIELDS.function))
    }

    /// The callee and the name of a call recorded in [`call_name`](Self::call_name).
    pub fn recorded_call(&self, call: Node<'_>) -> Option<(Node<'a>, &'a str)> {
        self.call_names.get(&call.id()).copied()
    }

    /// The calls in a loop's own body, in document order (see `loop_calls`).
    pub fn loop_calls(&self, loop_node: Node<'_>) -> &[Node<'a>] {
        self.loop_calls
            .get(&loop_node.id())
            .map_or(&[], Vec::as_slice)
    }

    /// The expressions a function returns (not those of functions nested in it).
    pub fn returns_of(&self, function: Node<'_>) -> &[Node<'a>] {
        self.returns.get(&function.id()).map_or(&[], Vec::as_slice)
    }

    pub fn function_facts_by_id(&self, id: usize) -> Option<&FunctionFacts> {
        self.functions.get(&id)
    }

    pub fn class_named(&self, name: &str) -> Option<&ClassInfo<'a>> {
        self.classes.iter().find(|class| class.name == name)
    }
}

/// A node whose named children the walk is going through: they sit in the walk's child
/// stack at `next..end`, fetched all at once when the walk entered the node.
struct Frame<'a> {
    node: Node<'a>,
    needs_leave: bool,
    /// Where this node's children start in the child stack: cut back to here when it is left.
    start: u32,
    next: u32,
    end: u32,
}

/// A scope, loop or function the walk is inside of, closed when the walk leaves its node.
enum Open {
    Scope { node: usize },
    Loop { node: usize },
    Function { node: usize },
    OpaqueScope { node: usize },
    Class { node: usize },
}

impl Open {
    fn node(&self) -> usize {
        match self {
            Open::Scope { node }
            | Open::Loop { node }
            | Open::Function { node }
            | Open::OpaqueScope { node }
            | Open::Class { node } => *node,
        }
    }
}

struct Builder<'a> {
    source: &'a str,
    has_errors: bool,
    frameworks: &'a Frameworks,
    /// A rule starts at an anonymous node kind (a user pattern on a token): walk everything.
    anonymous_rule_kinds: bool,
    /// What to do at each node kind, by kind id.
    kinds: Vec<KindInfo>,
    skeleton: Vec<Step<'a>>,
    scopes: Scopes<'a>,
    scope_stack: Vec<ScopeId>,
    scope_of_node: HashMap<usize, ScopeId>,
    open: Vec<Open>,
    loops: HashMap<usize, LoopFacts>,
    loop_calls: HashMap<usize, Vec<Node<'a>>>,
    functions: HashMap<usize, FunctionFacts>,
    functions_by_name: HashMap<&'a str, Vec<Node<'a>>>,
    comments: Vec<TextRange>,
    syntax_errors: Vec<SyntaxError>,
    error_depth: usize,
    attribute_assignments: Vec<AttributeAssignment<'a>>,
    subscript_stores: Vec<Node<'a>>,
    mode_calls: Vec<ModeCall<'a>>,
    calls_by_name: HashMap<&'a str, Vec<Node<'a>>>,
    classes: Vec<ClassInfo<'a>>,
    decorated: HashMap<usize, Node<'a>>,
    returns: HashMap<usize, Vec<Node<'a>>>,
    call_names: HashMap<usize, (Node<'a>, &'a str)>,
    /// Indices into `classes` of the classes the walk is inside.
    class_stack: Vec<usize>,
    /// The parameters of the function being entered: a buffer kept between functions.
    parameter_list: NamedChildren<'a>,
    /// Set by an action that has read the node's first named child and found nothing to walk
    /// in it (see [`Builder::passable`]); the walk then starts at the second.
    skip_first: bool,
    /// The value of an `a = b = value` chain, by the ids of its inner assignments: found once
    /// from the outermost, so that a chain of n assignments (a file of backslash-continued
    /// `x = 1 \` lines parses as one) costs n steps, not n².
    chained_values: HashMap<usize, (Option<Node<'a>>, Node<'a>)>,
}

/// What the builder does at a node kind, looked up once per node in a table indexed by kind id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Nothing,
    Comment,
    Call,
    Import,
    ImportFrom,
    Assignment,
    AugmentedAssignment,
    Loop,
    ForIn,
    Function,
    Class,
    Lambda,
    Comprehension,
    AsPattern,
    Except,
    NamedExpression,
    Global,
    String,
    Decorated,
    Return,
}

#[derive(Debug, Clone, Copy)]
struct KindInfo {
    action: Action,
    /// Whether the walk fetches the named children before entering the node, for its action
    /// to read (calls, assignments). Only for kinds the walk always goes into, or the fetch
    /// would be wasted.
    children_first: bool,
    /// Whether anything below such a node matters. Imports, parameter lists, annotations and
    /// plain strings are read where needed (or not at all), not walked.
    descend: bool,
    /// Whether the rule pass replays this node (it opens a context or a rule starts at it).
    skeleton: bool,
    /// Whether leaving this node needs work: it opens a scope or loop the walk closes, or a
    /// context the checker keeps (function, class, lambda, loop, `except`, `if`,
    /// comprehension). The rule pass replays these leaves only; rules run on entry.
    leave: bool,
    /// Whether to skip the children when they are all leaves (`a.b`, `f(x, 1)`, `x[0]`):
    /// leaves bind nothing and start no rule, and skipping them saves a third of the walk.
    prune_leaves: bool,
    /// Whether to skip an expression whose text cannot hold a call, a comment, a lambda, a
    /// walrus or a comprehension (`a.b[c].d + e * 2`): nothing below it binds a name or is
    /// recorded, so walking it only costs. Turned off when a rule starts at an expression kind.
    prune_call_free: bool,
}

/// The per-kind table without the rule kinds (those are added per configuration).
static KIND_TABLE: LazyLock<Vec<KindInfo>> = LazyLock::new(|| {
    let language = crate::parse::python();
    let count = language.node_kind_count();
    let mut table: Vec<KindInfo> = (0..count)
        .map(|id| KindInfo {
            action: Action::Nothing,
            // Anonymous tokens have no children worth visiting.
            descend: language.node_kind_is_named(id as u16),
            skeleton: false,
            leave: false,
            prune_leaves: false,
            prune_call_free: false,
            children_first: false,
        })
        .collect();
    let k = &*KINDS;
    let mut set = |kind: u16, action: Action, descend: bool, skeleton: bool| {
        table[kind as usize] = KindInfo {
            action,
            descend,
            skeleton,
            leave: false,
            prune_leaves: false,
            prune_call_free: false,
            children_first: false,
        };
    };
    set(k.comment, Action::Comment, false, false);
    set(k.call, Action::Call, true, false);
    set(k.import_statement, Action::Import, false, false);
    set(k.import_from_statement, Action::ImportFrom, false, false);
    set(k.assignment, Action::Assignment, true, false);
    set(
        k.augmented_assignment,
        Action::AugmentedAssignment,
        true,
        false,
    );
    set(k.for_statement, Action::Loop, true, true);
    set(k.while_statement, Action::Loop, true, true);
    set(k.for_in_clause, Action::ForIn, true, false);
    set(k.function_definition, Action::Function, true, true);
    set(k.class_definition, Action::Class, true, true);
    set(k.lambda, Action::Lambda, true, true);
    for comprehension in [
        k.list_comprehension,
        k.set_comprehension,
        k.dictionary_comprehension,
        k.generator_expression,
    ] {
        set(comprehension, Action::Comprehension, true, true);
    }
    set(k.as_pattern, Action::AsPattern, true, false);
    set(k.except_clause, Action::Except, true, true);
    set(k.named_expression, Action::NamedExpression, true, false);
    set(k.global_statement, Action::Global, false, false);
    set(k.decorated_definition, Action::Decorated, true, false);
    set(
        crate::parse::kind_id("return_statement"),
        Action::Return,
        true,
        false,
    );
    set(k.with_statement, Action::Nothing, true, true);
    set(k.if_statement, Action::Nothing, true, true);
    set(k.string, Action::String, false, false);
    for skipped in [k.parameters, k.lambda_parameters, k.type_, k.dotted_name] {
        set(skipped, Action::Nothing, false, false);
    }
    // Leaves: no point asking the cursor for children.
    for leaf in [k.identifier, k.integer, k.float, k.true_, k.false_, k.none] {
        set(leaf, Action::Nothing, false, false);
    }
    for name in [
        "attribute",
        "argument_list",
        "keyword_argument",
        "binary_operator",
        "comparison_operator",
        "boolean_operator",
        "unary_operator",
        "not_operator",
        "subscript",
        "slice",
        "tuple",
        "list",
        "set",
        "dictionary",
        "pair",
        "expression_list",
        "return_statement",
        "parenthesized_expression",
        "conditional_expression",
        "decorator",
        "raise_statement",
        "assert_statement",
    ] {
        let id = crate::parse::kind_id(name);
        assert_ne!(id, 0, "tree-sitter-python has no node kind `{name}`");
        table[id as usize].prune_leaves = true;
        table[id as usize].prune_call_free = !name.ends_with("_statement") && name != "decorator";
    }
    for reads_children in [k.call, k.assignment, k.augmented_assignment] {
        // Never pruned: neither has `prune_leaves` or `prune_call_free`.
        table[reads_children as usize].children_first = true;
    }
    for context in [
        k.function_definition,
        k.class_definition,
        k.lambda,
        k.for_statement,
        k.while_statement,
        k.except_clause,
        k.if_statement,
        k.list_comprehension,
        k.set_comprehension,
        k.dictionary_comprehension,
        k.generator_expression,
    ] {
        debug_assert!(table[context as usize].skeleton);
        table[context as usize].leave = true;
    }
    table
});

// Bytes of source per call, per distinct called name and per skeleton entry in typical
// training and model code: the maps and the skeleton start near their final size instead of
// rehashing as they grow.
const CALL_BYTES: usize = 320;
const NAME_BYTES: usize = 1500;
const SKELETON_BYTES: usize = 64;

/// The first child of a call or assignment and its kind id: the first of its named children
/// where the walk fetched them (the first child is named in both), else a lookup.
fn first_child<'a>(node: Node<'a>, own: Option<Own<'_, 'a>>) -> Option<(Node<'a>, u16)> {
    let first = match own {
        Some(own) => own.nodes.first().copied().zip(own.kinds.first().copied()),
        None => node.child(0).map(|child| (child, child.kind_id())),
    };
    debug_assert_eq!(first.map(|(child, _)| child), node.child(0));
    first
}

/// An assignment's `right` field, from its named children: `target = value` and
/// `target: type = value` end with the value, `target: type` has none. Comments never end
/// an assignment (tree-sitter hands trailing extras to the parent).
fn assigned_value<'a>(node: Node<'a>, own: Own<'_, 'a>) -> Option<Node<'a>> {
    let value = match (own.nodes.len(), own.kinds.last()) {
        (2.., Some(&kind)) if kind != KINDS.type_ && kind != KINDS.comment => {
            own.nodes.last().copied()
        }
        _ => None,
    };
    debug_assert_eq!(value, node.child_by_field_id(FIELDS.right), "{node:?}");
    value
}

/// `name = <literal>`, from an assignment's named children: a plain name, then a number,
/// string, `True`, `False` or `None` (no annotation between them).
fn binds_literal(own: Own<'_, '_>) -> bool {
    let k = &*KINDS;
    match own.kinds {
        [target, value] => {
            *target == k.identifier
                && [k.integer, k.float, k.string, k.true_, k.false_, k.none].contains(value)
        }
        _ => false,
    }
}

/// Whether an expression's text may hold a call, comment, lambda, walrus or comprehension.
fn may_hold_code(text: &[u8]) -> bool {
    // Built once: `memmem::find` would build a searcher at each of the walk's calls.
    static FOR: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"for"));
    memchr::memchr3(b'(', b'#', b':', text).is_some() || FOR.find(text).is_some()
}

/// Whether a rule starting at this node kind could start inside a call-free expression.
fn starts_inside_expressions(name: &str) -> bool {
    !(matches!(
        name,
        "call"
            | "assignment"
            | "augmented_assignment"
            | "lambda"
            | "named_expression"
            | "block"
            | "module"
    ) || name.ends_with("_statement")
        || name.ends_with("_definition")
        || name.ends_with("_clause")
        || name.ends_with("_comprehension")
        || name == "generator_expression")
}

impl<'a> Builder<'a> {
    fn new(
        source: &'a str,
        has_errors: bool,
        rule_kinds: &[bool],
        frameworks: &'a Frameworks,
    ) -> Self {
        let mut scopes = Scopes::default();
        let module = scopes.push(ScopeKind::Module, None, 0..source.len() + 1, None);
        let mut kinds = KIND_TABLE.clone();
        let language = crate::parse::python();
        let mut prune_call_free = true;
        let mut anonymous_rule_kinds = false;
        for (id, (info, &rule_starts_here)) in kinds.iter_mut().zip(rule_kinds).enumerate() {
            info.skeleton |= rule_starts_here;
            anonymous_rule_kinds |= rule_starts_here && !language.node_kind_is_named(id as u16);
            if rule_starts_here
                && language
                    .node_kind_for_id(id as u16)
                    .is_some_and(starts_inside_expressions)
            {
                prune_call_free = false;
            }
        }
        if !prune_call_free {
            for info in &mut kinds {
                info.prune_call_free = false;
            }
        }
        Builder {
            source,
            has_errors,
            frameworks,
            anonymous_rule_kinds,
            kinds,
            skeleton: Vec::with_capacity(source.len() / SKELETON_BYTES),
            scopes,
            scope_stack: vec![module],
            scope_of_node: HashMap::default(),
            open: Vec::new(),
            loops: HashMap::default(),
            loop_calls: HashMap::default(),
            functions: HashMap::default(),
            functions_by_name: HashMap::default(),
            comments: Vec::new(),
            syntax_errors: Vec::new(),
            error_depth: 0,
            chained_values: HashMap::default(),
            attribute_assignments: Vec::new(),
            subscript_stores: Vec::new(),
            mode_calls: Vec::new(),
            calls_by_name: HashMap::with_capacity_and_hasher(
                source.len() / NAME_BYTES,
                Default::default(),
            ),
            classes: Vec::new(),
            decorated: HashMap::default(),
            returns: HashMap::default(),
            call_names: HashMap::with_capacity_and_hasher(
                source.len() / CALL_BYTES,
                Default::default(),
            ),
            class_stack: Vec::new(),
            parameter_list: NamedChildren::default(),
            skip_first: false,
        }
    }

    /// The one walk. Hand-rolled rather than `parse::walk` because it runs on every node of
    /// every file: one kind lookup per node, and leave work only for nodes that asked for it.
    fn run(mut self, tree: &'a Tree) -> SemanticModel<'a> {
        // Most top-level statements bind a name: a generated module of a million constants
        // would otherwise rehash its module scope twenty times.
        self.scopes.reserve(0, tree.root_node().named_child_count());
        // Only named nodes bind names, open scopes or start built-in rules, and visiting just
        // them halves the walk. The full walk stays for files with syntax errors (a missing
        // `)` is an anonymous node) and for user rules that start at an anonymous token.
        if self.has_errors || self.anonymous_rule_kinds {
            self.run_all(tree)
        } else {
            self.run_named(tree.root_node())
        }
    }

    fn run_named(mut self, root: Node<'a>) -> SemanticModel<'a> {
        let mut stack: Vec<Frame<'a>> = Vec::with_capacity(64);
        // The named children of every node on `stack`, each frame's after its parent's.
        let mut children = NamedChildren::with_capacity(256);
        if let Some(frame) = self.visit(root, root.kind_id(), &mut children) {
            stack.push(frame);
        }
        while let Some(frame) = stack.last_mut() {
            if frame.next < frame.end {
                let (child, kind) = children.get(frame.next as usize);
                frame.next += 1;
                if let Some(frame) = self.visit(child, kind, &mut children) {
                    stack.push(frame);
                }
            } else {
                let frame = stack.pop().expect("the frame just looked at");
                children.truncate(frame.start as usize);
                if frame.needs_leave {
                    self.leave(frame.node);
                }
            }
        }
        self.finish()
    }

    /// Enters a node; a frame to walk its named children in (pushed onto `children`), or None
    /// when it is done with (left already if it asked to be).
    fn visit(
        &mut self,
        node: Node<'a>,
        kind: u16,
        children: &mut NamedChildren<'a>,
    ) -> Option<Frame<'a>> {
        let start = children.len();
        // Calls and assignments read their children, and the walk always goes into them:
        // fetching the children first spares the lookups (`child(0)`, a field) they would make.
        let children_first = self
            .kinds
            .get(kind as usize)
            .is_some_and(|info| info.children_first);
        if children_first {
            children.push(node);
        }
        let own = children_first.then(|| children.since(start));
        let (descend, needs_leave) = self.enter(node, kind, own);
        let skip = u32::from(std::mem::take(&mut self.skip_first));
        if descend && !children_first {
            children.push(node);
        } else if !descend {
            children.truncate(start);
        }
        let (start, end) = (start as u32, children.len() as u32);
        if end <= start + skip {
            children.truncate(start as usize);
            if needs_leave {
                self.leave(node);
            }
            return None;
        }
        Some(Frame {
            node,
            needs_leave,
            start,
            next: start + skip,
            end,
        })
    }

    /// The walk over every node, anonymous tokens included.
    fn run_all(mut self, tree: &'a Tree) -> SemanticModel<'a> {
        let mut cursor = tree.root_node().walk();
        // For each ancestor on the cursor's path: whether leaving it needs work.
        let mut leave_pending: Vec<bool> = Vec::with_capacity(64);
        loop {
            let node = cursor.node();
            let (descend, needs_leave) = self.enter(node, node.kind_id(), None);
            // This walk visits every child; nothing to pass over.
            self.skip_first = false;
            if descend && cursor.goto_first_child() {
                leave_pending.push(needs_leave);
                continue;
            }
            if needs_leave {
                self.leave(node);
            }
            loop {
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return self.finish();
                }
                if leave_pending.pop() == Some(true) {
                    self.leave(cursor.node());
                }
            }
        }
    }

    fn finish(self) -> SemanticModel<'a> {
        SemanticModel {
            skeleton: self.skeleton,
            scopes: self.scopes,
            scope_of_node: self.scope_of_node,
            loops: self.loops,
            loop_calls: self.loop_calls,
            functions: self.functions,
            functions_by_name: self.functions_by_name,
            comments: self.comments,
            syntax_errors: self.syntax_errors,
            attribute_assignments: self.attribute_assignments,
            subscript_stores: self.subscript_stores,
            mode_calls: self.mode_calls,
            calls_by_name: self.calls_by_name,
            classes: self.classes,
            decorated: self.decorated,
            returns: self.returns,
            call_names: self.call_names,
        }
    }

    fn scope(&self) -> ScopeId {
        *self
            .scope_stack
            .last()
            .expect("the module scope is never popped")
    }

    /// Handles a node on the way down; returns whether to descend and whether its leave
    /// needs work.
    /// `kind` is the node's kind id, which the walk has at hand; `own` its named children
    /// where the walk fetched them first (see [`KindInfo::children_first`]).
    fn enter(&mut self, node: Node<'a>, kind: u16, own: Option<Own<'_, 'a>>) -> (bool, bool) {
        let Some(&info) = self.kinds.get(kind as usize) else {
            // ERROR nodes: their kind id is past the table.
            if self.has_errors {
                self.record_syntax_error(node);
            }
            return (true, node.is_error());
        };
        if self.has_errors && node.is_missing() {
            self.record_syntax_error(node);
        }
        let mut descend = info.descend;
        let needs_leave = info.leave;
        let scopes_before = self.scope_stack.len();
        match info.action {
            Action::Nothing => {}
            Action::Comment => self.comments.push(node.byte_range()),
            Action::Call => {
                if let Some(loop_node) = self.innermost_loop() {
                    self.loop_calls.entry(loop_node).or_default().push(node);
                }
                if let Some((function, kind, name)) = self.record_call(node, own) {
                    // The callee is the first named child.
                    self.skip_first = self.passable(function, kind);
                    if let Some(call) =
                        training::training_step_method(function, name, self.source, self.frameworks)
                    {
                        self.mark_training(call);
                    }
                }
            }
            Action::Import => self.bind_import(node),
            Action::ImportFrom => self.bind_import_from(node),
            Action::Assignment => self.bind_assignment(node, own),
            Action::AugmentedAssignment => {
                if let Some((left, kind)) = first_child(node, own) {
                    if kind == KINDS.attribute {
                        self.record_attribute_assignment(left, Site::Augmented(node), node);
                    } else if kind == KINDS.subscript {
                        self.subscript_stores.push(node);
                    } else {
                        self.bind_targets(left, node.end_byte(), Site::Augmented(node));
                    }
                }
            }
            Action::Loop => {
                let is_for = kind == KINDS.for_statement;
                if is_for
                    && let (Some(left), Some(iterable)) = (
                        node.child_by_field_id(FIELDS.left),
                        node.child_by_field_id(FIELDS.right),
                    )
                {
                    self.bind_tuple(left, node.start_byte(), |index| Site::Loop {
                        iterable,
                        index,
                    });
                }
                let header_end = node
                    .child_by_field_id(if is_for {
                        FIELDS.right
                    } else {
                        FIELDS.condition
                    })
                    .map_or(node.start_byte(), |n| n.end_byte());
                self.loops.insert(
                    node.id(),
                    LoopFacts {
                        header: node.start_byte()..header_end,
                        ..LoopFacts::default()
                    },
                );
                self.open.push(Open::Loop { node: node.id() });
            }
            Action::ForIn => {
                if let (Some(left), Some(iterable)) = (
                    node.child_by_field_id(FIELDS.left),
                    node.child_by_field_id(FIELDS.right),
                ) {
                    self.bind_tuple(left, node.start_byte(), |index| Site::Loop {
                        iterable,
                        index,
                    });
                }
            }
            Action::Function => {
                self.enter_function(node);
            }
            Action::Class => {
                let name_node = node.child_by_field_id(FIELDS.name);
                let name = name_node.map_or("", |name| text(name, self.source));
                if let Some(name_node) = name_node {
                    self.bind(
                        name,
                        BindingKind::Definition,
                        name_node.start_byte(),
                        Site::Opaque,
                    );
                }
                let bases = node
                    .child_by_field_id(FIELDS.superclasses)
                    .map(|list| {
                        let mut cursor = list.walk();
                        list.named_children(&mut cursor).collect()
                    })
                    .unwrap_or_default();
                self.classes.push(ClassInfo {
                    name,
                    node,
                    bases,
                    methods: Vec::new(),
                });
                self.class_stack.push(self.classes.len() - 1);
                self.open_scope(node, ScopeKind::Class);
                self.open.push(Open::Class { node: node.id() });
            }
            Action::Lambda => {
                self.open_scope(node, ScopeKind::Lambda);
                if let Some(parameters) = node.child_by_field_id(FIELDS.parameters) {
                    self.bind_parameters(node, parameters);
                }
                self.open.push(Open::OpaqueScope { node: node.id() });
            }
            Action::Comprehension => {
                self.open_scope(node, ScopeKind::Comprehension);
                self.open.push(Open::Scope { node: node.id() });
            }
            Action::AsPattern => {
                if let Some(alias) = node.child_by_field_id(FIELDS.alias) {
                    let site = match node.named_child(0) {
                        Some(value) => Site::Value {
                            value,
                            index: None,
                            parent: node,
                        },
                        None => Site::Opaque,
                    };
                    self.bind_targets(alias, node.end_byte(), site);
                }
            }
            Action::Except => {
                if let Some(alias) = node.child_by_field_id(FIELDS.alias) {
                    self.bind_targets(alias, node.start_byte(), Site::Opaque);
                }
            }
            Action::NamedExpression => {
                if let (Some(name), Some(value)) = (
                    node.child_by_field_id(FIELDS.name),
                    node.child_by_field_id(FIELDS.value),
                ) {
                    self.bind_targets(
                        name,
                        node.end_byte(),
                        Site::Value {
                            value,
                            index: None,
                            parent: node,
                        },
                    );
                }
            }
            Action::Return => {
                let scope = self.scopes.get(self.scope());
                if let (Some(function), Some(value)) = (scope.node, node.named_child(0)) {
                    self.returns.entry(function.id()).or_default().push(value);
                }
            }
            Action::Decorated => {
                if let Some(definition) = node.child_by_field_id(FIELDS.definition) {
                    self.decorated.insert(definition.id(), node);
                }
            }
            Action::Global => {
                let scope = self.scope();
                let mut cursor = node.walk();
                for name in node.named_children(&mut cursor) {
                    if name.kind_id() == KINDS.identifier {
                        self.scopes.declare_global(scope, text(name, self.source));
                    }
                }
            }
            Action::String => {
                // Only f-strings hold code (their interpolations).
                let prefix = &self.source.as_bytes()[node.start_byte()..];
                descend = prefix
                    .iter()
                    .take_while(|b| b.is_ascii_alphabetic())
                    .any(|b| b.eq_ignore_ascii_case(&b'f'));
            }
        }
        if info.prune_leaves
            && node.descendant_count() == node.child_count() as usize + 1
            && memchr::memchr(b'#', &self.source.as_bytes()[node.byte_range()]).is_none()
        {
            // All children are leaves and none is a comment.
            descend = false;
        } else if info.prune_call_free
            && descend
            && !may_hold_code(&self.source.as_bytes()[node.byte_range()])
        {
            descend = false;
        }
        if info.skeleton {
            self.skeleton.push(Step {
                node,
                kind,
                enter: true,
                opens_scope: self.scope_stack.len() > scopes_before,
                binds_literal: kind == KINDS.assignment && own.is_some_and(binds_literal),
            });
        }
        // Syntax errors hide anywhere, also in the subtrees skipped above.
        if self.has_errors && !descend && node.has_error() {
            descend = true;
        }
        (descend, needs_leave)
    }

    /// Whether the walk can pass over a child an action has read already: a name or a plain
    /// dotted name binds nothing, holds no code and starts no rule, so visiting it would only
    /// cost a child lookup (the most expensive step of the walk).
    fn passable(&self, child: Node<'a>, kind: u16) -> bool {
        let Some(info) = self.kinds.get(kind as usize) else {
            return false;
        };
        if info.skeleton {
            return false;
        }
        kind == KINDS.identifier
            || (kind == KINDS.attribute
                && info.prune_call_free
                && !may_hold_code(&self.source.as_bytes()[child.byte_range()]))
    }

    fn leave(&mut self, node: Node<'a>) {
        if node.is_error() {
            self.error_depth -= 1;
            return;
        }
        let mut closes_scope = false;
        if self
            .open
            .last()
            .is_some_and(|open| open.node() == node.id())
        {
            match self.open.pop() {
                Some(Open::Scope { .. } | Open::OpaqueScope { .. } | Open::Function { .. }) => {
                    self.scope_stack.pop();
                    closes_scope = true;
                }
                Some(Open::Class { .. }) => {
                    self.scope_stack.pop();
                    self.class_stack.pop();
                    closes_scope = true;
                }
                Some(Open::Loop { .. }) | None => {}
            }
        }
        let kind = node.kind_id();
        if self.kinds[kind as usize].leave {
            self.skeleton.push(Step {
                node,
                kind,
                enter: false,
                opens_scope: closes_scope,
                binds_literal: false,
            });
        }
    }

    fn record_syntax_error(&mut self, node: Node<'_>) {
        if node.is_error() {
            if self.error_depth == 0 {
                self.syntax_errors.push(SyntaxError {
                    range: node.byte_range(),
                    missing: None,
                });
            }
            self.error_depth += 1;
        } else if node.is_missing() && self.error_depth == 0 {
            self.syntax_errors.push(SyntaxError {
                range: node.start_byte()..node.start_byte(),
                missing: Some(node.kind().to_owned()),
            });
        }
    }

    fn enter_function(&mut self, node: Node<'a>) {
        let name_node = node.child_by_field_id(FIELDS.name);
        let name: &'a str = name_node.map_or("", |name| text(name, self.source));
        if let Some(name_node) = name_node {
            self.bind(
                name,
                BindingKind::Definition,
                name_node.start_byte(),
                Site::Opaque,
            );
        }
        let parameters = node.child_by_field_id(FIELDS.parameters);
        let header_end = parameters.map_or(node.start_byte(), |p| p.end_byte());
        // A method: defined directly in a class body.
        let class = match (self.scopes.get(self.scope()).kind, self.class_stack.last()) {
            (ScopeKind::Class, Some(&class)) => {
                self.classes[class].methods.push((name, node));
                Some(class)
            }
            _ => None,
        };
        self.functions.insert(
            node.id(),
            FunctionFacts {
                name: name.to_owned(),
                header: node.start_byte()..header_end,
                class,
                ..FunctionFacts::default()
            },
        );
        self.functions_by_name.entry(name).or_default().push(node);
        self.open_scope(node, ScopeKind::Function);
        if let Some(parameters) = parameters {
            self.bind_parameters(node, parameters);
        }
        self.open.push(Open::Function { node: node.id() });
    }

    fn open_scope(&mut self, node: Node<'a>, kind: ScopeKind) {
        let id = self
            .scopes
            .push(kind, Some(self.scope()), node.byte_range(), Some(node));
        self.scope_of_node.insert(node.id(), id);
        self.scope_stack.push(id);
    }

    /// The loop whose own body the walk is in: the innermost open loop, unless a function,
    /// lambda or class opened inside it (a comprehension runs in the loop's body).
    fn innermost_loop(&self) -> Option<usize> {
        for open in self.open.iter().rev() {
            match open {
                Open::Loop { node } => return Some(*node),
                Open::Scope { .. } => {}
                Open::Function { .. } | Open::OpaqueScope { .. } | Open::Class { .. } => {
                    return None;
                }
            }
        }
        None
    }

    /// A training-step call marks the innermost loop (or, outside loops, the function) as
    /// training, and every enclosing loop of the same function as an epoch-style loop.
    fn mark_training(&mut self, call: TextRange) {
        let mut innermost_loop = true;
        for open in self.open.iter().rev() {
            match open {
                Open::Loop { node } => {
                    let facts = self.loops.get_mut(node).expect("open loops have facts");
                    if innermost_loop {
                        facts.training_call.get_or_insert(call.clone());
                        innermost_loop = false;
                    } else {
                        facts.nested_training = true;
                    }
                }
                Open::Function { node } => {
                    let facts = self
                        .functions
                        .get_mut(node)
                        .expect("open functions have facts");
                    facts.contains_training = true;
                    if innermost_loop {
                        facts
                            .training_call_outside_loops
                            .get_or_insert(call.clone());
                    }
                    return;
                }
                Open::OpaqueScope { .. } | Open::Class { .. } => return,
                Open::Scope { .. } => {}
            }
        }
    }

    fn bind(&mut self, name: &'a str, kind: BindingKind, offset: usize, site: Site<'a>) {
        let scope = self.scope();
        self.scopes
            .bind(scope, name, Binding { kind, offset, site });
    }

    /// Records what a call calls (for call-site analysis) and `x.eval()` / `x.train()`;
    /// returns the callee and the name it calls.
    fn record_call(
        &mut self,
        call: Node<'a>,
        own: Option<Own<'_, 'a>>,
    ) -> Option<(Node<'a>, u16, &'a str)> {
        // The callee is the first child of every call (a field lookup scans the field map
        // too).
        let (function, kind) = first_child(call, own)?;
        let name = if kind == KINDS.identifier {
            text(function, self.source)
        } else if kind == KINDS.attribute {
            // The `attribute` field is the last token of the node: read it off the text.
            let name = trailing_name(text(function, self.source))?;
            if name == "eval" || name == "train" {
                let eval = name == "eval"
                    || call
                        .child_by_field_id(FIELDS.arguments)
                        .and_then(|arguments| arguments.named_child(0))
                        .is_some_and(|first| text(first, self.source) == "False");
                if let Some(object) = function.child_by_field_id(FIELDS.object) {
                    self.mode_calls.push(ModeCall {
                        receiver: text(object, self.source),
                        eval,
                        node: call,
                    });
                }
            }
            name
        } else {
            return None;
        };
        self.call_names.insert(call.id(), (function, name));
        self.calls_by_name.entry(name).or_default().push(call);
        Some((function, kind, name))
    }

    fn record_attribute_assignment(
        &mut self,
        target: Node<'a>,
        site: Site<'a>,
        statement: Node<'a>,
    ) {
        let (Some(object), Some(attribute)) = (
            target.child_by_field_id(FIELDS.object),
            target.child_by_field_id(FIELDS.attribute),
        ) else {
            return;
        };
        self.attribute_assignments.push(AttributeAssignment {
            object: text(object, self.source),
            attribute: text(attribute, self.source),
            site,
            node: statement,
        });
    }

    fn bind_import(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        for name in node.children_by_field_id(FIELDS.name_id(), &mut cursor) {
            if name.kind_id() == KINDS.aliased_import {
                let (Some(module), Some(alias)) = (
                    name.child_by_field_id(FIELDS.name),
                    name.child_by_field_id(FIELDS.alias),
                ) else {
                    continue;
                };
                let qualified = dotted(module, self.source);
                self.bind(
                    text(alias, self.source),
                    BindingKind::Import(qualified.into()),
                    node.end_byte(),
                    Site::Opaque,
                );
            } else {
                // `import a.b.c` binds `a`.
                let head = name.named_child(0).unwrap_or(name);
                let head = text(head, self.source);
                self.bind(
                    head,
                    BindingKind::Import(head.into()),
                    node.end_byte(),
                    Site::Opaque,
                );
            }
        }
    }

    fn bind_import_from(&mut self, node: Node<'_>) {
        // One pass over the children: the module comes first, then the names (or `*`).
        let mut cursor = node.walk();
        if !cursor.goto_first_child() {
            return;
        }
        let mut module: Option<std::borrow::Cow<'_, str>> = None;
        loop {
            let child = cursor.node();
            let field = cursor.field_id().map_or(0, std::num::NonZeroU16::get);
            if field == FIELDS.module_name {
                let name = dotted(child, self.source);
                if name == "__future__" {
                    return;
                }
                module = Some(name);
            } else if let Some(module) = &module {
                if field == FIELDS.name {
                    self.bind_imported_name(node, module, child);
                } else if child.kind_id() == KINDS.wildcard_import {
                    self.scopes.star_imports.push(module.as_ref().into());
                }
            }
            if !cursor.goto_next_sibling() {
                return;
            }
        }
    }

    /// `name` or `name as alias` of `from module import ...`.
    fn bind_imported_name(&mut self, statement: Node<'_>, module: &str, name: Node<'_>) {
        let (imported, bound) = if name.kind_id() == KINDS.aliased_import {
            let (Some(imported), Some(alias)) = (
                name.child_by_field_id(FIELDS.name),
                name.child_by_field_id(FIELDS.alias),
            ) else {
                return;
            };
            (dotted(imported, self.source), text(alias, self.source))
        } else {
            (dotted(name, self.source), text(name, self.source))
        };
        // One allocation of the exact size: a model file imports hundreds of names.
        let mut qualified = String::with_capacity(module.len() + 1 + imported.len());
        qualified.push_str(module);
        // `from . import utils` is `.utils` (a sibling), not `..utils` (a package up).
        if !module.bytes().all(|b| b == b'.') {
            qualified.push('.');
        }
        qualified.push_str(&imported);
        self.bind(
            bound,
            BindingKind::Import(qualified.into_boxed_str()),
            statement.end_byte(),
            Site::Opaque,
        );
    }

    fn bind_assignment(&mut self, node: Node<'a>, own: Option<Own<'_, 'a>>) {
        // The target is the first child of every assignment (and so its first named child).
        let Some((left, kind)) = first_child(node, own) else {
            return;
        };
        self.skip_first = self.passable(left, kind);
        // `a = b = value`: every target gets the innermost value.
        let (mut right, mut assignment) = match self.chained_values.remove(&node.id()) {
            Some(chained) => chained,
            None => (
                match own {
                    Some(own) => assigned_value(node, own),
                    None => node.child_by_field_id(FIELDS.right),
                },
                node,
            ),
        };
        let mut chain = Vec::new();
        while let Some(inner) = right.filter(|r| r.kind_id() == KINDS.assignment) {
            chain.push(inner.id());
            right = inner.child_by_field_id(FIELDS.right);
            assignment = inner;
        }
        // Recorded also when the chain ends without a value (`a = b: int`, or what a syntax
        // error leaves): each inner assignment walking the chain again would be quadratic.
        self.chained_values
            .extend(chain.into_iter().map(|inner| (inner, (right, assignment))));
        let Some(value) = right else {
            // An annotation without a value (`x: int`).
            return;
        };
        if kind == KINDS.identifier {
            let binding =
                if value.kind_id() == KINDS.identifier || value.kind_id() == KINDS.attribute {
                    BindingKind::Alias(value.byte_range())
                } else {
                    BindingKind::Other
                };
            self.bind(
                text(left, self.source),
                binding,
                node.end_byte(),
                Site::Value {
                    value,
                    index: None,
                    parent: assignment,
                },
            );
        } else if kind == KINDS.attribute {
            self.record_attribute_assignment(
                left,
                Site::Value {
                    value,
                    index: None,
                    parent: assignment,
                },
                node,
            );
        } else if kind == KINDS.subscript {
            // `x[i] = value` changes `x`, it does not rebind it.
            self.subscript_stores.push(node);
        } else {
            self.bind_tuple(left, node.end_byte(), |index| Site::Value {
                value,
                index,
                parent: assignment,
            });
            // `pred, self.state = model(x, self.state)`: attribute targets of the tuple.
            let mut cursor = left.walk();
            let targets: Vec<Node<'a>> = left.named_children(&mut cursor).collect();
            for (index, target) in targets.into_iter().enumerate() {
                if target.kind_id() == KINDS.attribute {
                    let site = Site::Value {
                        value,
                        index: Some(index as u32),
                        parent: assignment,
                    };
                    self.record_attribute_assignment(target, site, node);
                }
            }
        }
    }

    /// Binds the names of a target that may be a tuple (`a`, `a, b`, `(a, (b, c))`): the
    /// `index`th top-level name gets `site(Some(index))`, nested ones `site(None)`.
    fn bind_tuple(
        &mut self,
        target: Node<'a>,
        offset: usize,
        site: impl Fn(Option<u32>) -> Site<'a>,
    ) {
        if target.kind_id() == KINDS.identifier {
            self.bind(
                text(target, self.source),
                BindingKind::Other,
                offset,
                site(None),
            );
            return;
        }
        let mut cursor = target.walk();
        let elements: Vec<Node<'a>> = target.named_children(&mut cursor).collect();
        for (index, element) in elements.into_iter().enumerate() {
            if element.kind_id() == KINDS.attribute || element.kind_id() == KINDS.subscript {
                continue;
            }
            if element.kind_id() == KINDS.identifier {
                self.bind(
                    text(element, self.source),
                    BindingKind::Other,
                    offset,
                    site(Some(index as u32)),
                );
            } else {
                self.bind_targets(element, offset, site(None));
            }
        }
    }

    /// Binds every name in an assignment target (`a`, `a, (b, *c)`), not attributes or
    /// subscripts, all to the same site.
    fn bind_targets(&mut self, target: Node<'a>, offset: usize, site: Site<'a>) {
        let mut stack = vec![target];
        while let Some(node) = stack.pop() {
            let kind = node.kind_id();
            if kind == KINDS.identifier {
                self.bind(text(node, self.source), BindingKind::Other, offset, site);
            } else if kind != KINDS.attribute && kind != KINDS.subscript {
                let mut cursor = node.walk();
                stack.extend(node.named_children(&mut cursor));
            }
        }
    }

    fn bind_parameters(&mut self, function: Node<'a>, parameters: Node<'a>) {
        let offset = parameters.start_byte();
        // All at once: by index, a list of twenty parameters costs two hundred child steps.
        let mut list = std::mem::take(&mut self.parameter_list);
        list.clear();
        list.push(parameters);
        for (index, (parameter, kind)) in list.iter().enumerate() {
            let index = index as u32;
            let name = if kind == KINDS.identifier {
                Some(parameter)
            } else if kind == KINDS.default_parameter || kind == KINDS.typed_default_parameter {
                parameter.child_by_field_id(FIELDS.name)
            } else {
                // `x: int`, `*args`, `**kwargs`, `*args: int`: the first name inside.
                parameter.named_child(0).and_then(|first| {
                    if first.kind_id() == KINDS.identifier {
                        Some(first)
                    } else {
                        first.named_child(0)
                    }
                })
            };
            if let Some(name) = name.filter(|n| n.kind_id() == KINDS.identifier) {
                self.bind(
                    text(name, self.source),
                    BindingKind::Other,
                    offset,
                    Site::Parameter { function, index },
                );
            }
        }
        self.parameter_list = list;
    }
}

/// The identifier a text ends with (`m` of `obj.f(x).m`); `None` when it ends otherwise.
fn trailing_name(text: &str) -> Option<&str> {
    let start = text
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_identifier_char(c))
        .last()
        .map(|(at, _)| at)?;
    Some(&text[start..])
}

/// `torch . nn` → `torch.nn`; relative imports keep their dots.
fn dotted<'s>(node: Node<'_>, source: &'s str) -> std::borrow::Cow<'s, str> {
    let written = text(node, source);
    if !written.contains(|c: char| c.is_whitespace() || c == '\\') {
        return written.into();
    }
    written
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '\\')
        .collect::<String>()
        .into()
}

/// The run of `items` (sorted by start) whose starts lie in `range`.
fn in_range<T>(items: &[T], range: std::ops::Range<usize>, start: impl Fn(&T) -> usize) -> &[T] {
    let first = items.partition_point(|item| start(item) < range.start);
    let end = first + items[first..].partition_point(|item| start(item) < range.end);
    &items[first..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Descend, Visit, parse, walk};

    #[test]
    fn trailing_name_is_the_last_identifier_of_the_text() {
        assert_eq!(trailing_name("self.conv"), Some("conv"));
        assert_eq!(trailing_name("f(x).m"), Some("m"));
        assert_eq!(trailing_name("(a  # c\n ).eval"), Some("eval"));
        assert_eq!(trailing_name("a.ü1"), Some("ü1"));
        assert_eq!(trailing_name("f(x)"), None);
    }

    fn resolve_all(source: &str, needle: &str) -> Vec<Option<String>> {
        let tree = parse(source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let model = SemanticModel::build(&tree, source, &[], frameworks::builtin());
        let mut results = Vec::new();
        // Track the innermost scope by hand, as the checker does.
        let mut scopes = vec![0];
        walk(tree.root_node(), |visit| {
            let Visit::Enter(node) = visit else {
                if let Visit::Leave(node) = visit
                    && model.scope_of(node).is_some()
                {
                    scopes.pop();
                }
                return Descend::Yes;
            };
            {
                if let Some(scope) = model.scope_of(node) {
                    scopes.push(scope);
                }
                if (node.kind_id() == KINDS.attribute || node.kind_id() == KINDS.identifier)
                    && text(node, source) == needle
                    && node.parent().is_some_and(|p| p.kind_id() == KINDS.call)
                {
                    results.push(model.scopes.qualified_name(
                        *scopes.last().unwrap(),
                        node,
                        tree.root_node(),
                        source,
                    ));
                }
            }
            Descend::Yes
        });
        results
    }

    #[test]
    fn resolves_aliases_and_from_imports() {
        let source = "import torch as th\nfrom torch import load as L\nimport torch.cuda\nth.load(p)\nL(p)\n";
        assert_eq!(
            resolve_all(source, "th.load"),
            vec![Some("torch.load".into())]
        );
        assert_eq!(resolve_all(source, "L"), vec![Some("torch.load".into())]);
        let source = "import torch.cuda\ntorch.cuda.empty_cache()\n";
        assert_eq!(
            resolve_all(source, "torch.cuda.empty_cache"),
            vec![Some("torch.cuda.empty_cache".into())]
        );
    }

    #[test]
    fn own_definitions_and_parameters_shadow_imports() {
        let source = "from torch import load\ndef load(p):\n    return p\nload(1)\ndef f(load):\n    load(2)\n";
        assert_eq!(resolve_all(source, "load"), vec![None, None]);
        let source = "from torch import load\nload(1)\ndef load(p):\n    pass\n";
        assert_eq!(resolve_all(source, "load"), vec![Some("torch.load".into())]);
    }

    #[test]
    fn fallback_assignments_do_not_hide_imports() {
        let source = "try:\n    import torch\nexcept ImportError:\n    torch = None\ndef f():\n    torch.load(p)\n";
        assert_eq!(
            resolve_all(source, "torch.load"),
            vec![Some("torch.load".into())]
        );
    }

    #[test]
    fn module_aliases_resolve_through_assignment() {
        let source = "import torch\nL = torch.load\ndef f():\n    L(p)\n";
        assert_eq!(resolve_all(source, "L"), vec![Some("torch.load".into())]);
    }

    #[test]
    fn every_shape_of_assignment_binds_its_value() {
        // The walk reads an assignment's value off its named children; in test builds it also
        // checks each one against tree-sitter's `right` field.
        let source = "import torch\n\
                      A: torch.Tensor\n\
                      B = C = torch.load\n\
                      D: type = torch.load  # a comment\n\
                      E = (  # a comment\n    torch.load)\n\
                      F, *G = H = torch.load, 1\n\
                      A(p)\nB(p)\nC(p)\nD(p)\nE(p)\nH(p)\n";
        let expected = |name| match name {
            // Annotated only: no value, so the name stays unbound (and resolves to itself).
            "A" => vec![Some("A".to_owned())],
            // The value is a tuple, or in parentheses: not followed as an alias.
            "E" | "H" => vec![None],
            _ => vec![Some("torch.load".to_owned())],
        };
        for name in ["A", "B", "C", "D", "E", "H"] {
            assert_eq!(resolve_all(source, name), expected(name), "{name}");
        }
    }

    #[test]
    fn class_scope_is_invisible_to_methods() {
        let source =
            "import torch\nclass A:\n    torch = None\n    def f(self):\n        torch.load(p)\n";
        assert_eq!(
            resolve_all(source, "torch.load"),
            vec![Some("torch.load".into())]
        );
    }

    #[test]
    fn loops_that_call_backward_train_and_their_outer_loops_do_not() {
        let source = "for epoch in range(3):\n    for x in loader:\n        loss.backward()\n        opt.step()\n";
        let tree = parse(source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let model = SemanticModel::build(&tree, source, &[], frameworks::builtin());
        let outer = tree.root_node().child(0).unwrap();
        let facts = model.loop_facts(outer).unwrap();
        assert!(!facts.trains());
        assert!(facts.nested_training);
        assert_eq!(&source[facts.header.clone()], "for epoch in range(3)");
    }

    #[test]
    fn only_renaming_imports_and_aliases_may_end_in_another_name() {
        let source = "import torch\nimport numpy as np\nfrom torch import load\nfrom torch import save as keep\nL = torch.load\ndef f(x):\n    y = x + 1\n";
        let tree = parse(source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let model = SemanticModel::build(&tree, source, &[], frameworks::builtin());
        let scopes = &model.scopes;
        // What a rule's name filter may pass over: a call of `load` ends in `load`.
        assert!(!scopes.may_rename("torch"));
        assert!(!scopes.may_rename("load"));
        assert!(!scopes.may_rename("y"));
        assert!(scopes.may_rename("np"));
        assert!(scopes.may_rename("keep"));
        assert!(scopes.may_rename("L"));
        // Each import is still another module's name.
        for name in ["torch", "np", "load", "keep", "L"] {
            assert!(scopes.may_import(name), "{name}");
        }
        assert!(!scopes.may_import("y"));
        assert!(!scopes.may_import("f"));
    }

    #[test]
    fn syntax_errors_are_recorded_once_per_region() {
        let source = "def f(:\n    pass\nx = (1,\n";
        let tree = parse(source, None).unwrap();
        let tree = crate::syntax::SyntaxTree::new(tree);
        let model = SemanticModel::build(&tree, source, &[], frameworks::builtin());
        assert!(!model.syntax_errors.is_empty());
    }
}
