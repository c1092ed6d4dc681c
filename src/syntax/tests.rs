//! The compact tree answers as tree-sitter does, at every node of tricky code and of every
//! bundled example.

use std::path::Path;

use super::*;

fn field_ids() -> Vec<u16> {
    let language = crate::parse::python();
    (1..=language.field_count() as u16).collect()
}

fn same(ours: Option<Node>, theirs: Option<tree_sitter::Node>, what: &str) {
    match (ours, theirs) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            assert_eq!(a.kind_id(), b.kind_id(), "{what}: kind of {a:?} / {b:?}");
            assert_eq!(
                a.byte_range(),
                b.byte_range(),
                "{what}: range of {a:?} / {b:?}"
            );
        }
        (a, b) => panic!("{what}: {a:?} against tree-sitter's {b:?}"),
    }
}

/// Compares every node of `source`; returns how many.
fn compare_everywhere(source: &str) -> usize {
    let tree = crate::parse::parse(source, None).unwrap();
    let syntax = SyntaxTree::new(tree.clone());
    let fields = field_ids();
    let mut theirs_stack = vec![tree.root_node()];
    let mut ours_stack = vec![syntax.root_node()];
    let mut visited = 0;
    while let (Some(theirs), Some(ours)) = (theirs_stack.pop(), ours_stack.pop()) {
        same(Some(ours), Some(theirs), "node");
        assert_eq!(ours.is_named(), theirs.is_named(), "named {ours:?}");
        assert_eq!(ours.is_extra(), theirs.is_extra(), "extra {ours:?}");
        assert_eq!(ours.is_missing(), theirs.is_missing(), "missing {ours:?}");
        assert_eq!(ours.is_error(), theirs.is_error(), "error {ours:?}");
        assert_eq!(ours.has_error(), theirs.has_error(), "has error {ours:?}");
        same(ours.parent(), theirs.parent(), "parent");
        // tree-sitter's sibling steps pass over empty nodes (an empty `block` after a syntax
        // error) in ways that depend on their neighbours; the compact tree's siblings are its
        // children in order. Elsewhere both agree.
        let empty =
            |node: Option<Node>| node.is_some_and(|node| node.start_byte() == node.end_byte());
        if ours.start_byte() != ours.end_byte()
            && !empty(ours.next_named_sibling())
            && !empty(ours.prev_named_sibling())
            && !empty(ours.next_sibling())
        {
            same(
                ours.next_named_sibling(),
                theirs.next_named_sibling(),
                "next named sibling",
            );
            same(
                ours.prev_named_sibling(),
                theirs.prev_named_sibling(),
                "prev named sibling",
            );
            same(ours.next_sibling(), theirs.next_sibling(), "next sibling");
        }
        assert_eq!(
            ours.child_count(),
            theirs.child_count(),
            "children of {ours:?}"
        );
        assert_eq!(
            ours.named_child_count(),
            theirs.named_child_count(),
            "named children of {ours:?}"
        );
        for i in 0..theirs.named_child_count() {
            same(
                ours.named_child(i as u32),
                theirs.named_child(i as u32),
                "named child",
            );
        }
        for &field in &fields {
            same(
                ours.child_by_field_id(field),
                theirs.child_by_field_id(field),
                &format!(
                    "field {:?} of {ours:?}",
                    crate::parse::python().field_name_for_id(field)
                ),
            );
        }
        for (start, end) in [
            (ours.start_byte(), ours.start_byte()),
            (ours.start_byte(), ours.end_byte()),
            (ours.end_byte(), ours.end_byte()),
        ] {
            same(
                syntax.root_node().descendant_for_byte_range(start, end),
                tree.root_node().descendant_for_byte_range(start, end),
                "descendant for a range",
            );
        }
        same(syntax.node_for(theirs), Some(theirs), "node_for");
        visited += 1;
        let mut cursor = theirs.walk();
        theirs_stack.extend(theirs.children(&mut cursor));
        ours_stack.extend(ours.children_iter());
        assert_eq!(theirs_stack.len(), ours_stack.len(), "children of {ours:?}");
    }
    assert_eq!(
        visited,
        syntax.len(),
        "every node of the compact tree is one of tree-sitter's"
    );
    visited
}

#[test]
fn the_same_nodes_as_tree_sitter_on_tricky_code() {
    let visited = compare_everywhere(
        "import torch.nn as nn  # é\n\
         from a import (b, c,)\n\
         from . import d\n\
         x = 1; y: int = 2  # two statements\n\
         a = b = c\n\
         a += 1\n\
         @torch.no_grad()\n\
         def f(a, /, b: int = 2, *c, d, **e) -> None:\n\
         \x20   # a comment first\n\
         \x20   print(f\"{a!r:>{b}} ünï\", *c, **e)\n\
         \x20   for (i, j) in (  # a comment inside\n\
         \x20           pairs): del i\n\
         \x20   match a:\n\
         \x20       case [1, *rest] if rest: pass\n\
         \x20       case {\"k\": v, **kw}: pass\n\
         \x20       case Point(x=0) | None: pass\n\
         \x20   return [i for i in range(3) if i]\n\
         class M(nn.Module, metaclass=Meta):\n\
         \x20   def forward(self, x): return self.l(x) if x else (lambda q: q)(x)\n\
         with a as b, c: x[1:2, ::3] = yield from g()\n\
         try: pass\n\
         except* (A, B) as e: raise X from e\n\
         finally: pass\n\
         while not a and b or c is not d: break\n\
         if a: pass\n\
         elif b: pass\n\
         else: pass\n\
         exec \"old\"\n\
         print >> f, x\n\
         global g; nonlocal h\n\
         assert a, b\n\
         y = (a  # a comment before an aliased `not in`\n\
         \x20    not in b)\n\
         z = {**a, 'k': [*b], 's': {1, 2}, 'g': (i for i in b)}\n\
         w = a[1] @ b ** -c // d\n\
         async def g():\n\
         \x20   async with a as b: await c\n\
         \x20   async for i in b: yield i\n\
         type T = list[int]\n\
         def h[T](x: T) -> T: ...\n\
         with (open(p) as  # a comment before an aliased target\n\
         \x20     f):\n\
         \x20   pass\n\
         def broken(:\n",
    );
    assert!(visited > 600, "visited only {visited} nodes");
}

#[test]
fn the_same_nodes_as_tree_sitter_on_every_bundled_example() {
    // The Python of the examples and of every rule document's code blocks.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![include_str!("../../examples/train.py").to_owned()];
    let mut pending = vec![root.join("rules"), root.join("tests/fixtures")];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "py") {
                sources.push(std::fs::read_to_string(&path).unwrap_or_default());
            } else if path.extension().is_some_and(|ext| ext == "md") {
                let text = std::fs::read_to_string(&path).unwrap();
                sources.extend(text.split("```python").skip(1).map(|block| {
                    let body = block.split_once('\n').map_or("", |(_, body)| body);
                    body.split("```").next().unwrap_or_default().to_owned()
                }));
            }
        }
    }
    assert!(sources.len() > 50, "only {} sources", sources.len());
    let visited: usize = sources
        .iter()
        .map(|source| compare_everywhere(source))
        .sum();
    assert!(visited > 10_000, "visited only {visited} nodes");
}

#[test]
fn deep_nesting_costs_heap_not_stack() {
    let source = format!("x = {}1{}\n", "(".repeat(50_000), ")".repeat(50_000));
    let tree = crate::parse::parse(&source, None).unwrap();
    let syntax = SyntaxTree::new(tree);
    assert!(syntax.len() > 100_000);
}
