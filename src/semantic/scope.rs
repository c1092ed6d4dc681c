//! Scopes and the names bound in them, and resolving an expression to the qualified name of
//! what it refers to (`L` → `torch.load` after `from torch import load as L`).

use std::cell::{OnceCell, RefCell};

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

use crate::syntax::Node;

use crate::parse::{FIELDS, KINDS, is_identifier_char, text};
use crate::source::TextRange;

pub type ScopeId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    Lambda,
    Comprehension,
}

/// Names borrow from the source text: binding a name allocates nothing.
#[derive(Debug)]
pub struct Scope<'s> {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// The scope's bindings in the order the walk met them, until the first lookup groups
    /// them by name into `by_name`. A generated module binds a million names that nothing
    /// looks up: hashing each as it is bound would cost a fifth of what parsing it does.
    met: RefCell<Vec<(&'s str, Binding<'s>)>>,
    by_name: OnceCell<IndexMap<&'s str, Bindings<'s>, FxBuildHasher>>,
    /// Names declared `global` here: their bindings go to the module scope.
    pub globals: Vec<&'s str>,
    /// The source range of the node that opens the scope (the whole file for the module).
    pub range: TextRange,
    /// The node that opens the scope (`None` for the module).
    pub node: Option<Node<'s>>,
}

/// The bindings of one name in one scope, in order. Most names are bound once in a scope, and
/// a list per name would be an allocation per name per function. (`smallvec` would make
/// the model invariant in its lifetime.)
#[derive(Debug)]
pub enum Bindings<'s> {
    One(Binding<'s>),
    Many(Vec<Binding<'s>>),
}

impl<'s> Bindings<'s> {
    fn push(&mut self, binding: Binding<'s>) {
        match std::mem::replace(self, Bindings::Many(Vec::new())) {
            Bindings::One(first) => *self = Bindings::Many(vec![first, binding]),
            Bindings::Many(mut list) => {
                list.push(binding);
                *self = Bindings::Many(list);
            }
        }
    }

    pub fn as_slice(&self) -> &[Binding<'s>] {
        match self {
            Bindings::One(binding) => std::slice::from_ref(binding),
            Bindings::Many(list) => list,
        }
    }
}

impl<'s> Scope<'s> {
    /// The scope's bindings by name, each name's in order, the names in the order each was
    /// first bound.
    pub fn bindings(&self) -> &IndexMap<&'s str, Bindings<'s>, FxBuildHasher> {
        self.by_name.get_or_init(|| {
            let met = std::mem::take(&mut *self.met.borrow_mut());
            let mut by_name = IndexMap::with_capacity_and_hasher(met.len(), FxBuildHasher);
            for (name, binding) in met {
                insert(&mut by_name, name, binding);
            }
            by_name
        })
    }
}

fn insert<'s>(
    by_name: &mut IndexMap<&'s str, Bindings<'s>, FxBuildHasher>,
    name: &'s str,
    binding: Binding<'s>,
) {
    match by_name.entry(name) {
        indexmap::map::Entry::Occupied(mut bound) => bound.get_mut().push(binding),
        indexmap::map::Entry::Vacant(unbound) => {
            unbound.insert(Bindings::One(binding));
        }
    }
}

#[derive(Debug, Clone)]
pub struct Binding<'s> {
    pub kind: BindingKind,
    /// Where the binding happens; a use sees the bindings before it in its own scope.
    pub offset: usize,
    /// What the name is bound to, for value analysis.
    pub site: Site<'s>,
}

/// Where a binding's value comes from.
#[derive(Debug, Clone, Copy)]
pub enum Site<'s> {
    /// `name = value`, or the `index`th name of `a, b = value`.
    Value {
        value: Node<'s>,
        index: Option<u32>,
        /// The node `value` is the value of: the assignment (the innermost of
        /// `a = b = value`), the `as` pattern or the `:=` expression. Kept, because
        /// `value.parent()` walks down from the root, through every sibling on the way.
        parent: Node<'s>,
    },
    /// `name += value`: the augmented assignment.
    Augmented(Node<'s>),
    /// `for name in iterable` (the `index`th name of the target tuple).
    Loop {
        iterable: Node<'s>,
        index: Option<u32>,
    },
    /// The `index`th parameter of a function or lambda.
    Parameter { function: Node<'s>, index: u32 },
    /// Imports, definitions, `except ... as`, `global`: no value to analyse.
    Opaque,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingKind {
    /// `import a.b as c`, `from a import b`: the qualified name it stands for.
    Import(Box<str>),
    /// `name = other.dotted.name`: resolved through the value, in the binding's scope.
    Alias(TextRange),
    /// `def name` / `class name`: the user's own code.
    Definition,
    /// Anything else: parameters, loop targets, assignments of computed values.
    Other,
}

/// The scope tree of one module.
#[derive(Debug, Default)]
pub struct Scopes<'s> {
    scopes: Vec<Scope<'s>>,
    /// Modules of `from m import *`, which may bind any name.
    pub star_imports: Vec<Box<str>>,
    /// Names some scope binds to an import under another name or to an alias: only these can
    /// resolve to a name that ends otherwise than they do (`from torch import load as L`).
    renamed: rustc_hash::FxHashSet<&'s str>,
    /// Names some scope binds to an import or an alias, renamed or not: only these can
    /// resolve to another module's name.
    imported: rustc_hash::FxHashSet<&'s str>,
}

/// Qualified names resolved through more than this many aliases are given up on.
const MAX_ALIAS_DEPTH: usize = 8;

impl<'s> Scopes<'s> {
    pub fn push(
        &mut self,
        kind: ScopeKind,
        parent: Option<ScopeId>,
        range: TextRange,
        node: Option<Node<'s>>,
    ) -> ScopeId {
        // Sized for a typical function's parameters and locals, so that binding them does
        // not grow the table three times; lambdas and comprehensions bind a name or two.
        let names = match kind {
            ScopeKind::Module => 64,
            ScopeKind::Function | ScopeKind::Class => 8,
            ScopeKind::Lambda | ScopeKind::Comprehension => 0,
        };
        self.scopes.push(Scope {
            kind,
            parent,
            met: RefCell::new(Vec::with_capacity(names)),
            by_name: OnceCell::new(),
            globals: Vec::new(),
            range,
            node,
        });
        self.scopes.len() - 1
    }

    /// The innermost scope containing `offset`. Scopes are pushed in document order and
    /// nest, so the last one starting at or before the offset is it or a descendant of a
    /// sibling; its parent chain leads to the answer.
    pub fn at(&self, offset: usize) -> ScopeId {
        let candidate = self
            .scopes
            .partition_point(|scope| scope.range.start <= offset)
            .saturating_sub(1);
        let mut id = candidate;
        loop {
            let scope = &self.scopes[id];
            if scope.range.start <= offset && offset < scope.range.end.max(scope.range.start + 1) {
                return id;
            }
            match scope.parent {
                Some(parent) => id = parent,
                None => return 0,
            }
        }
    }

    /// The bindings of `name` visible from `scope` at `offset`, with the scope they are in:
    /// the same lookup as name resolution, for value analysis.
    pub fn lookup(
        &self,
        scope: ScopeId,
        name: &str,
        offset: usize,
    ) -> Option<(ScopeId, &[Binding<'s>])> {
        let mut current = Some(scope);
        let mut first = true;
        while let Some(id) = current {
            let scope = &self.scopes[id];
            if (first || scope.kind != ScopeKind::Class)
                && let Some(bindings) = scope.bindings().get(name)
            {
                let _ = offset;
                return Some((id, bindings.as_slice()));
            }
            first = false;
            current = scope.parent;
        }
        None
    }

    pub fn get(&self, id: ScopeId) -> &Scope<'s> {
        &self.scopes[id]
    }

    /// Makes room for `names` more bindings in `scope` at once (a module's top-level
    /// statements), rather than growing the table step by step.
    pub fn reserve(&mut self, scope: ScopeId, names: usize) {
        self.scopes[scope].met.get_mut().reserve(names);
    }

    pub fn bind(&mut self, scope: ScopeId, name: &'s str, binding: Binding<'s>) {
        // `from torch import load` still ends in `load`; `import numpy as np` and
        // `L = torch.load` do not.
        let renames = match &binding.kind {
            BindingKind::Import(qualified) => Some(qualified.rsplit('.').next() != Some(name)),
            BindingKind::Alias(_) => Some(true),
            BindingKind::Definition | BindingKind::Other => None,
        };
        if let Some(renames) = renames {
            self.imported.insert(name);
            if renames {
                self.renamed.insert(name);
            }
        }
        let target = if self.scopes[scope].globals.contains(&name) {
            0
        } else {
            scope
        };
        let scope = &mut self.scopes[target];
        match scope.by_name.get_mut() {
            // Looked up already: the name goes where lookups find it.
            Some(by_name) => insert(by_name, name, binding),
            None => scope.met.get_mut().push((name, binding)),
        }
    }

    /// Whether a name may resolve to a qualified name whose last part is not the name itself:
    /// some scope binds it to an import under another name or to an alias. Any other name
    /// resolves to nothing, to itself, or to itself in the module of a star import.
    pub fn may_rename(&self, name: &str) -> bool {
        self.renamed.contains(name)
    }

    /// Whether a name may resolve to another module's name (`from utils import train`): some
    /// scope binds it to an import or an alias.
    pub fn may_import(&self, name: &str) -> bool {
        self.imported.contains(name)
    }

    pub fn declare_global(&mut self, scope: ScopeId, name: &'s str) {
        self.scopes[scope].globals.push(name);
    }

    /// The name the module binds to an import of exactly `qualified` (`th` for `import torch as
    /// th`, `no_grad` for `from torch import no_grad`), where a fix writes code that needs it;
    /// the earliest such import, when several do.
    pub fn module_name_for(&self, qualified: &str) -> Option<&'s str> {
        let module = self.scopes.first()?;
        module
            .bindings()
            .iter()
            .filter_map(|(name, bindings)| {
                bindings
                    .as_slice()
                    .iter()
                    .find(|binding| {
                        matches!(&binding.kind, BindingKind::Import(q) if &**q == qualified)
                    })
                    .map(|binding| (binding.offset, *name))
            })
            .min()
            .map(|(_, name)| name)
    }

    /// The qualified name `node` (an identifier or attribute chain) refers to, seen from
    /// `scope` at the node's position; `None` when it is the user's own code or unknown.
    /// Unbound names resolve to themselves (builtins such as `print`).
    /// `root` is the tree's root node, where alias values are looked up.
    pub fn qualified_name(
        &self,
        scope: ScopeId,
        node: Node<'_>,
        root: Node<'_>,
        source: &str,
    ) -> Option<String> {
        self.qualified_name_at_depth(scope, node, root, source, 0)
    }

    fn qualified_name_at_depth(
        &self,
        scope: ScopeId,
        node: Node<'_>,
        root: Node<'_>,
        source: &str,
        depth: usize,
    ) -> Option<String> {
        if depth > MAX_ALIAS_DEPTH {
            return None;
        }
        // `((torch.load))`: unwrap parentheses in a loop, not by recursion (any depth).
        let mut node = node;
        while node.kind_id() == KINDS.parenthesized_expression && node.named_child_count() == 1 {
            node = node.named_child(0)?;
        }
        let kind = node.kind_id();
        if kind == KINDS.identifier {
            return self.resolve_name(scope, text(node, source), node, root, source, depth);
        }
        if kind == KINDS.attribute {
            let node_text = text(node, source);
            // `torch.cuda.empty_cache` as written: read the chain off the text, without a
            // field lookup per link (the rules ask this at every call).
            if let Some((head, attributes)) = plain_dotted(node_text) {
                let mut name = self.resolve_name(scope, head, node, root, source, depth)?;
                name.push('.');
                name.push_str(attributes);
                return Some(name);
            }
            // Resolve the head of the chain, then append the attribute names iteratively.
            let mut attributes = Vec::new();
            let mut head = node;
            while head.kind_id() == KINDS.attribute {
                attributes.push(text(head.child_by_field_id(FIELDS.attribute)?, source));
                head = head.child_by_field_id(FIELDS.object)?;
            }
            if head.kind_id() != KINDS.identifier {
                return None;
            }
            let mut name =
                self.resolve_name(scope, text(head, source), head, root, source, depth)?;
            for attribute in attributes.iter().rev() {
                name.push('.');
                name.push_str(attribute);
            }
            return Some(name);
        }
        None
    }

    fn resolve_name(
        &self,
        scope: ScopeId,
        name: &str,
        node: Node<'_>,
        root: Node<'_>,
        source: &str,
        depth: usize,
    ) -> Option<String> {
        let offset = node.start_byte();
        let mut current = Some(scope);
        let mut first = true;
        while let Some(id) = current {
            let scope = &self.scopes[id];
            // Class bodies are not visible from the functions nested in them.
            let visible = first || scope.kind != ScopeKind::Class;
            if visible && let Some(bindings) = scope.bindings().get(name) {
                let binding = choose_binding(bindings.as_slice(), first.then_some(offset))?;
                return match &binding.kind {
                    BindingKind::Import(qualified) => Some(qualified.to_string()),
                    BindingKind::Alias(range) => {
                        let value = root.descendant_for_byte_range(range.start, range.end)?;
                        self.qualified_name_at_depth(id, value, root, source, depth + 1)
                    }
                    BindingKind::Definition | BindingKind::Other => None,
                };
            }
            first = false;
            current = scope.parent;
        }
        match self.star_imports.as_slice() {
            [module] => Some(format!("{module}.{name}")),
            _ => Some(name.to_owned()),
        }
    }
}

/// Picks the binding a use sees. In the use's own scope (`use_offset` given) only bindings
/// before the use count; from an enclosing scope, all of them (functions run after the module
/// body). A fallback assignment (`except ImportError: torch = None`) does not hide an import;
/// a later `def`/`class` of the same name does.
fn choose_binding<'b, 's>(
    bindings: &'b [Binding<'s>],
    use_offset: Option<usize>,
) -> Option<&'b Binding<'s>> {
    // Two passes over the (short) list rather than collecting the visible ones.
    let any_before = use_offset.is_some_and(|offset| bindings.iter().any(|b| b.offset <= offset));
    let visible = |b: &&Binding| match use_offset {
        Some(offset) if any_before => b.offset <= offset,
        _ => true,
    };
    let last_import = bindings
        .iter()
        .filter(visible)
        .rev()
        .find(|b| matches!(b.kind, BindingKind::Import(_) | BindingKind::Alias(_)));
    let last_definition = bindings
        .iter()
        .filter(visible)
        .rev()
        .find(|b| b.kind == BindingKind::Definition);
    match (last_import, last_definition) {
        (Some(import), Some(definition)) if definition.offset > import.offset => Some(definition),
        (Some(import), _) => Some(import),
        (None, Some(definition)) => Some(definition),
        (None, None) => bindings.iter().rfind(visible),
    }
}

/// `a.b.c` written plainly (identifiers and dots, nothing else): the head name and the rest.
/// Anything else (`f().x`, `a[0].b`, `a . b`, a comment inside) is left to the tree.
fn plain_dotted(text: &str) -> Option<(&str, &str)> {
    let (head, rest) = text.split_once('.')?;
    let is_name = |part: &str| {
        !part.is_empty()
            && !part.starts_with(|c: char| c.is_ascii_digit())
            && part.chars().all(is_identifier_char)
    };
    (is_name(head) && rest.split('.').all(is_name)).then_some((head, rest))
}

#[cfg(test)]
mod tests {
    use super::{Binding, BindingKind, ScopeKind, Scopes, Site, plain_dotted};

    fn binding(offset: usize) -> Binding<'static> {
        Binding {
            kind: BindingKind::Other,
            offset,
            site: Site::Opaque,
        }
    }

    fn offsets(scopes: &Scopes<'_>, name: &str) -> Vec<usize> {
        let (_, bindings) = scopes.lookup(0, name, usize::MAX).expect("bound");
        bindings.iter().map(|binding| binding.offset).collect()
    }

    #[test]
    fn a_scope_groups_its_bindings_by_name_in_the_order_they_were_met() {
        let mut scopes = Scopes::default();
        scopes.push(ScopeKind::Module, None, 0..100, None);
        for (name, offset) in [("b", 1), ("a", 2), ("b", 3), ("c", 4)] {
            scopes.bind(0, name, binding(offset));
        }
        let names: Vec<&str> = scopes.get(0).bindings().keys().copied().collect();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(offsets(&scopes, "b"), [1, 3]);
        // Bound after a lookup grouped them: found all the same, after the others.
        scopes.bind(0, "a", binding(5));
        scopes.bind(0, "d", binding(6));
        assert_eq!(offsets(&scopes, "a"), [2, 5]);
        assert_eq!(offsets(&scopes, "d"), [6]);
    }

    #[test]
    fn plain_dotted_names_are_read_off_the_text() {
        assert_eq!(
            plain_dotted("torch.cuda.empty_cache"),
            Some(("torch", "cuda.empty_cache"))
        );
        assert_eq!(plain_dotted("self.layer_1"), Some(("self", "layer_1")));
        assert_eq!(plain_dotted("modèle.forward"), Some(("modèle", "forward")));
    }

    #[test]
    fn anything_but_names_and_dots_is_left_to_the_tree() {
        for text in [
            "torch",
            "f().x",
            "a[0].b",
            "a . b",
            "a.\n    b",
            "(a).b",
            "a.b  # why",
            "a..b",
            "a.",
            "1.5",
        ] {
            assert_eq!(plain_dotted(text), None, "{text:?}");
        }
    }
}
