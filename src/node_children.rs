//! All named children of a node in one pass, for the semantic walk that runs on every file.
//!
//! tree-sitter's `Node::named_child(i)` starts from the first child at every call and steps
//! through the children, hidden ones too, through several library calls per step: about 500
//! instructions a call on typical code, and quadratic when a walk visits every index. Its
//! tree cursor is linear but costs as much per step and stops at every punctuation token too.
//! Fetching children was the largest single cost of the semantic walk. `node_children.c` does
//! the same steps once per node, with tree-sitter's own private helpers inlined, and hands
//! back exactly the nodes (same ids, same positions) `named_child` would, with their kind
//! ids, read while the child is in cache.

use tree_sitter::Node;
use tree_sitter::ffi::TSNode;

unsafe extern "C" {
    /// Writes up to `capacity` named children of `node` to `out` and their kind ids to
    /// `kinds`; returns how many it wrote.
    fn torchlint_named_children(
        node: TSNode,
        out: *mut TSNode,
        kinds: *mut u16,
        capacity: u32,
    ) -> u32;

    /// Prefetches the node's data and the array of its children.
    fn torchlint_prefetch(node: TSNode);
}

/// Named children with their kind ids, kept as a stack: a walk pushes a node's children when
/// it enters the node and cuts back to where they started when it leaves.
#[derive(Default)]
pub struct NamedChildren<'t> {
    nodes: Vec<Node<'t>>,
    kinds: Vec<u16>,
}

impl<'t> NamedChildren<'t> {
    pub fn with_capacity(capacity: usize) -> Self {
        NamedChildren {
            nodes: Vec::with_capacity(capacity),
            kinds: Vec::with_capacity(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The `index`th child on the stack and its kind id (`node.kind_id()`).
    pub fn get(&self, index: usize) -> (Node<'t>, u16) {
        (self.nodes[index], self.kinds[index])
    }

    /// The children from `start` on, with their kind ids.
    pub fn since(&self, start: usize) -> Own<'_, 't> {
        Own {
            nodes: &self.nodes[start..],
            kinds: &self.kinds[start..],
        }
    }

    pub fn truncate(&mut self, len: usize) {
        self.nodes.truncate(len);
        self.kinds.truncate(len);
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Appends the named children of `node`, in order: `node.named_child(i)` for each `i`.
    pub fn push(&mut self, node: Node<'t>) {
        let count = node.named_child_count();
        if count == 0 {
            return;
        }
        self.nodes.reserve(count);
        self.kinds.reserve(count);
        let len = self.nodes.len();
        // SAFETY: `Node` is `#[repr(transparent)]` over `TSNode`, so the spare capacity is
        // room for `count` `TSNode`s, and `kinds` has room for `count` ids; the C side writes
        // at most `count` of each and says how many, and only those are then taken as
        // initialised. The nodes borrow the same tree as `node`.
        unsafe {
            let written = torchlint_named_children(
                node.into_raw(),
                self.nodes.as_mut_ptr().add(len).cast::<TSNode>(),
                self.kinds.as_mut_ptr().add(len),
                count as u32,
            ) as usize;
            self.nodes.set_len(len + written);
            self.kinds.set_len(len + written);
        }
    }

    /// Asks for the `index`th child's data ahead of the walk reaching it (a hint: no effect
    /// on what the walk sees).
    pub fn prefetch(&self, index: usize) {
        if let Some(node) = self.nodes.get(index) {
            // SAFETY: the node is one of the tree's (pushed from it); the call only reads the
            // word its id points to and hints at the address it holds.
            unsafe { torchlint_prefetch(node.into_raw()) }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (Node<'t>, u16)> + '_ {
        self.nodes.iter().copied().zip(self.kinds.iter().copied())
    }
}

/// One node's named children, with their kind ids.
#[derive(Clone, Copy)]
pub struct Own<'c, 't> {
    pub nodes: &'c [Node<'t>],
    pub kinds: &'c [u16],
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn same(a: Option<Node>, b: Option<Node>, what: &str) {
        match (a, b) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                assert_eq!(a.id(), b.id(), "{what}");
                assert_eq!(a.kind_id(), b.kind_id(), "{what}");
                assert_eq!(a.start_position(), b.start_position(), "{what}");
                assert_eq!(a.byte_range(), b.byte_range(), "{what}");
            }
            (a, b) => panic!("{what}: {a:?} against tree-sitter's {b:?}"),
        }
    }

    /// At every node of `source`: its named children, all at once and by index.
    fn compare_everywhere(source: &str) -> usize {
        let tree = crate::parse::parse(source, None).unwrap();
        let mut stack = vec![tree.root_node()];
        let mut children = NamedChildren::default();
        let mut visited = 0;
        while let Some(node) = stack.pop() {
            children.clear();
            children.push(node);
            let by_index: Vec<Option<Node>> = (0..node.named_child_count() as u32)
                .map(|i| node.named_child(i))
                .collect();
            assert_eq!(children.len(), by_index.len(), "named children of {node:?}");
            for ((ours, kind), theirs) in children.iter().zip(by_index) {
                same(Some(ours), theirs, "a named child");
                assert_eq!(kind, ours.kind_id(), "the kind of {ours:?}");
            }
            visited += 1;
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        visited
    }

    #[test]
    fn the_same_nodes_as_tree_sitter_on_tricky_code() {
        // Hidden rules walked in place (`a; b`), aliases (keyword names, `with` targets,
        // `not in`), comments before aliased children (extras take no alias slot), strings
        // with interpolations, decorators, patterns, a syntax error and multi-byte text.
        let visited = compare_everywhere(
            "import torch.nn as nn  # é\n\
             from a import (b, c,)\n\
             x = 1; y: int = 2  # two statements\n\
             a = b = c\n\
             @torch.no_grad()\n\
             def f(a, /, b: int = 2, *c, d, **e) -> None:\n\
             \x20   # a comment first\n\
             \x20   print(f\"{a!r:>{b}} ünï\", *c, **e)\n\
             \x20   for (i, j) in (  # a comment inside\n\
             \x20           pairs): del i\n\
             \x20   match a:\n\
             \x20       case [1, *rest] if rest: pass\n\
             \x20       case {\"k\": v, **kw}: pass\n\
             \x20   return [i for i in range(3) if i]\n\
             class M(nn.Module, metaclass=Meta):\n\
             \x20   def forward(self, x): return self.l(x) if x else (lambda q: q)(x)\n\
             with a as b, c: x[1:2, ::3] = yield from g()\n\
             try: pass\n\
             except* (A, B) as e: raise X from e\n\
             exec \"old\"\n\
             y = (a  # a comment before an aliased `not in`\n\
             \x20    not in b)\n\
             with (open(p) as  # a comment before an aliased target\n\
             \x20     f):\n\
             \x20   pass\n\
             def broken(:\n",
        );
        assert!(visited > 300, "visited only {visited} nodes");
    }

    #[test]
    fn the_same_nodes_as_tree_sitter_on_every_bundled_example() {
        // The Python of the examples and of every rule document's code blocks.
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut sources = vec![include_str!("../examples/train.py").to_owned()];
        let mut pending = vec![root.join("rules")];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "md") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    // Blocks open with "```python flagged" and the like.
                    sources.extend(text.split("```python").skip(1).map(|block| {
                        let body = block.split_once('\n').map_or("", |(_, body)| body);
                        body.split("```").next().unwrap_or_default().to_owned()
                    }));
                }
            }
        }
        assert!(sources.len() > 50, "only {} code blocks", sources.len());
        let visited: usize = sources
            .iter()
            .map(|source| compare_everywhere(source))
            .sum();
        assert!(visited > 10_000, "visited only {visited} nodes");
    }
}
