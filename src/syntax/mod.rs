//! A compact copy of a parsed file's tree, read by the semantic model and the rules.
//!
//! tree-sitter's nodes are views into its parse stack's subtrees, spread over the heap: every
//! step (`kind_id`, `child_by_field_id`, `named_child`, `parent`, which starts again from the
//! root) follows pointers to cold memory, and the analysis takes such steps at every
//! expression it asks about. Here the same nodes lie in pre-order in one array, each with its
//! kind, byte range, parent, the end of its subtree and the field its parent gives it, built
//! in one pass after the parse (`build.c`). [`Node`] answers tree-sitter's questions with the
//! same method names and the same answers (the tests compare both at every node), so the
//! analysis reads either the same way.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU16;
use std::ops::Range;

use tree_sitter::ffi::TSNode;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Entry {
    start: u32,
    end: u32,
    /// `u32::MAX` for the root.
    parent: u32,
    /// The index after this node's subtree: its next sibling's, if it has one.
    next: u32,
    kind: u16,
    /// The field this node is under in its parent (0: none).
    field: u16,
    flags: u8,
}

const NAMED: u8 = 1;
const EXTRA: u8 = 2;
const MISSING: u8 = 4;
const HAS_ERROR: u8 = 8;
/// The parent's fields include this node's own (see `build.c`).
const INHERITED: u8 = 16;
/// tree-sitter's kind id of an `ERROR` node.
const ERROR_KIND: u16 = u16::MAX;

unsafe extern "C" {
    fn torchlint_build_syntax(root: TSNode, out: *mut Entry, capacity: u32) -> u32;
}

/// A parsed file's nodes, in pre-order, and the tree-sitter tree they were copied from (which
/// declarative rules query and the editor re-parses from).
pub struct SyntaxTree {
    entries: Vec<Entry>,
    tree: tree_sitter::Tree,
}

impl SyntaxTree {
    pub fn new(tree: tree_sitter::Tree) -> Self {
        // Every visible node below the root, and the root.
        let capacity = tree.root_node().descendant_count();
        let mut entries: Vec<Entry> = Vec::with_capacity(capacity);
        // SAFETY: the C side writes at most `capacity` entries into the spare capacity and says
        // how many (more than `capacity` only when they did not fit, then none are taken); the
        // tree (the root node's) is alive for the call.
        let written = unsafe {
            torchlint_build_syntax(
                tree.root_node().into_raw(),
                entries.as_mut_ptr(),
                u32::try_from(capacity).unwrap_or(u32::MAX),
            ) as usize
        };
        assert!(
            written <= capacity,
            "tree-sitter reported {capacity} nodes, the walk found more"
        );
        unsafe { entries.set_len(written) };
        SyntaxTree { entries, tree }
    }

    pub fn root_node(&self) -> Node<'_> {
        Node {
            tree: self,
            index: 0,
        }
    }

    /// The tree-sitter tree, for queries and incremental parsing.
    pub fn tree(&self) -> &tree_sitter::Tree {
        &self.tree
    }

    /// The node tree-sitter calls `node`: the outermost one with its kind and byte range.
    pub fn node_for(&self, node: tree_sitter::Node<'_>) -> Option<Node<'_>> {
        let (start, end, kind) = (
            node.start_byte() as u32,
            node.end_byte() as u32,
            node.kind_id(),
        );
        // Pre-order is sorted by start byte, parents before children.
        let first = self.entries.partition_point(|entry| entry.start < start);
        (first..self.entries.len())
            .take_while(|&index| self.entries[index].start == start)
            .find(|&index| self.entries[index].end == end && self.entries[index].kind == kind)
            .map(|index| Node {
                tree: self,
                index: index as u32,
            })
    }

    /// tree-sitter's node for `node` (to run a query at): the one with its kind and range.
    pub fn ts_node(&self, node: Node<'_>) -> Option<tree_sitter::Node<'_>> {
        let (start, end, kind) = (node.start_byte(), node.end_byte(), node.kind_id());
        // The smallest node over the range, then up through those with the same range.
        let mut found = self
            .tree
            .root_node()
            .descendant_for_byte_range(start, end)?;
        loop {
            if found.kind_id() == kind && found.byte_range() == (start..end) {
                return Some(found);
            }
            found = found
                .parent()
                .filter(|parent| parent.byte_range() == (start..end))?;
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A node of a [`SyntaxTree`]: tree-sitter's `Node` API, read from the array.
#[derive(Clone, Copy)]
pub struct Node<'t> {
    tree: &'t SyntaxTree,
    index: u32,
}

impl PartialEq for Node<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && std::ptr::eq(self.tree, other.tree)
    }
}

impl Eq for Node<'_> {}

impl Hash for Node<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
    }
}

impl fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{Node {} ({}..{})}}",
            self.kind(),
            self.start_byte(),
            self.end_byte()
        )
    }
}

impl<'t> Node<'t> {
    #[inline]
    fn entry(&self) -> &'t Entry {
        &self.tree.entries[self.index as usize]
    }

    #[inline]
    fn at(&self, index: u32) -> Node<'t> {
        Node {
            tree: self.tree,
            index,
        }
    }

    /// Unique among the nodes of its tree.
    #[inline]
    pub fn id(&self) -> usize {
        self.index as usize
    }

    #[inline]
    pub fn kind_id(&self) -> u16 {
        self.entry().kind
    }

    pub fn kind(&self) -> &'static str {
        crate::parse::kind_name(self.kind_id())
    }

    #[inline]
    pub fn is_named(&self) -> bool {
        self.entry().flags & NAMED != 0
    }

    pub fn is_extra(&self) -> bool {
        self.entry().flags & EXTRA != 0
    }

    pub fn is_missing(&self) -> bool {
        self.entry().flags & MISSING != 0
    }

    pub fn is_error(&self) -> bool {
        self.kind_id() == ERROR_KIND
    }

    pub fn has_error(&self) -> bool {
        self.entry().flags & HAS_ERROR != 0
    }

    #[inline]
    pub fn start_byte(&self) -> usize {
        self.entry().start as usize
    }

    #[inline]
    pub fn end_byte(&self) -> usize {
        self.entry().end as usize
    }

    #[inline]
    pub fn byte_range(&self) -> Range<usize> {
        self.start_byte()..self.end_byte()
    }

    pub fn utf8_text<'s>(&self, source: &'s [u8]) -> Result<&'s str, std::str::Utf8Error> {
        std::str::from_utf8(&source[self.start_byte()..self.end_byte()])
    }

    #[inline]
    pub fn parent(&self) -> Option<Node<'t>> {
        let parent = self.entry().parent;
        (parent != u32::MAX).then(|| self.at(parent))
    }

    /// All children, named and anonymous.
    #[inline]
    pub fn children_iter(&self) -> Children<'t> {
        Children {
            tree: self.tree,
            next: self.index + 1,
            end: self.entry().next,
        }
    }

    pub fn children<'c>(&self, _cursor: &'c mut TreeCursor<'t>) -> Children<'t> {
        self.children_iter()
    }

    pub fn named_children<'c>(
        &self,
        _cursor: &'c mut TreeCursor<'t>,
    ) -> impl Iterator<Item = Node<'t>> + use<'t> {
        self.named_children_iter()
    }

    #[inline]
    pub fn named_children_iter(&self) -> impl Iterator<Item = Node<'t>> + use<'t> {
        self.children_iter().filter(Node::is_named)
    }

    pub fn child_count(&self) -> u32 {
        self.children_iter().count() as u32
    }

    pub fn child(&self, index: u32) -> Option<Node<'t>> {
        self.children_iter().nth(index as usize)
    }

    pub fn named_child_count(&self) -> usize {
        self.named_children_iter().count()
    }

    #[inline]
    pub fn named_child(&self, index: u32) -> Option<Node<'t>> {
        self.named_children_iter().nth(index as usize)
    }

    #[inline]
    pub fn child_by_field_id(&self, field: u16) -> Option<Node<'t>> {
        self.children_iter()
            .find(|child| child.entry().field == field)
            .or_else(|| {
                self.children_iter()
                    .filter(|child| child.entry().flags & INHERITED != 0)
                    .find_map(|child| child.child_by_field_id(field))
            })
    }

    pub fn child_by_field_name(&self, name: &str) -> Option<Node<'t>> {
        let field = crate::parse::field_id(name)?;
        self.child_by_field_id(field)
    }

    pub fn children_by_field_id<'c>(
        &self,
        field: NonZeroU16,
        _cursor: &'c mut TreeCursor<'t>,
    ) -> impl Iterator<Item = Node<'t>> + use<'t> {
        self.children_iter()
            .filter(move |child| child.entry().field == field.get())
    }

    /// The field this node is under in its parent.
    pub fn field_id(&self) -> Option<NonZeroU16> {
        NonZeroU16::new(self.entry().field)
    }

    pub fn next_sibling(&self) -> Option<Node<'t>> {
        let parent = self.parent()?;
        let next = self.entry().next;
        (next < parent.entry().next).then(|| self.at(next))
    }

    pub fn next_named_sibling(&self) -> Option<Node<'t>> {
        let mut node = self.next_sibling()?;
        while !node.is_named() {
            node = node.next_sibling()?;
        }
        Some(node)
    }

    pub fn prev_sibling(&self) -> Option<Node<'t>> {
        let parent = self.parent()?;
        parent
            .children_iter()
            .take_while(|child| child.index != self.index)
            .last()
    }

    pub fn prev_named_sibling(&self) -> Option<Node<'t>> {
        let parent = self.parent()?;
        parent
            .children_iter()
            .take_while(|child| child.index != self.index)
            .filter(Node::is_named)
            .last()
    }

    /// This node and all below it.
    pub fn descendant_count(&self) -> usize {
        (self.entry().next - self.index) as usize
    }

    /// The smallest node that spans `start..end` (tree-sitter's rule: a node must reach the
    /// range's end and pass its start, or touch it when the node is empty).
    pub fn descendant_for_byte_range(&self, start: usize, end: usize) -> Option<Node<'t>> {
        if start > end {
            return None;
        }
        let (start, end) = (start as u32, end as u32);
        let mut node = *self;
        'down: loop {
            for child in node.children_iter() {
                let entry = child.entry();
                if entry.end < end {
                    continue;
                }
                let empty = entry.start == entry.end;
                if if empty {
                    entry.end < start
                } else {
                    entry.end <= start
                } {
                    continue;
                }
                if start < entry.start {
                    break;
                }
                node = child;
                continue 'down;
            }
            return Some(node);
        }
    }

    pub fn walk(&self) -> TreeCursor<'t> {
        TreeCursor {
            tree: self.tree,
            root: self.index,
            index: self.index,
        }
    }
}

/// The children of a node, in order.
#[derive(Clone)]
pub struct Children<'t> {
    tree: &'t SyntaxTree,
    next: u32,
    end: u32,
}

impl<'t> Iterator for Children<'t> {
    type Item = Node<'t>;

    #[inline]
    fn next(&mut self) -> Option<Node<'t>> {
        if self.next >= self.end {
            return None;
        }
        let node = Node {
            tree: self.tree,
            index: self.next,
        };
        self.next = self.tree.entries[self.next as usize].next;
        Some(node)
    }
}

/// tree-sitter's `TreeCursor`: a position that moves within the subtree it started at.
#[derive(Clone)]
pub struct TreeCursor<'t> {
    tree: &'t SyntaxTree,
    root: u32,
    index: u32,
}

impl<'t> TreeCursor<'t> {
    pub fn node(&self) -> Node<'t> {
        Node {
            tree: self.tree,
            index: self.index,
        }
    }

    pub fn field_id(&self) -> Option<NonZeroU16> {
        if self.index == self.root {
            return None;
        }
        self.node().field_id()
    }

    pub fn goto_first_child(&mut self) -> bool {
        let entry = &self.tree.entries[self.index as usize];
        if entry.next > self.index + 1 {
            self.index += 1;
            true
        } else {
            false
        }
    }

    pub fn goto_next_sibling(&mut self) -> bool {
        self.step(Node::next_sibling)
    }

    pub fn goto_parent(&mut self) -> bool {
        self.step(Node::parent)
    }

    /// Moves to `to` of the current node, never out of the subtree the cursor started at.
    fn step(&mut self, to: impl FnOnce(&Node<'t>) -> Option<Node<'t>>) -> bool {
        if self.index == self.root {
            return false;
        }
        match to(&self.node()) {
            Some(node) => {
                self.index = node.index;
                true
            }
            None => false,
        }
    }

    /// Moves to the first child that ends after `byte`; returns its index among the children.
    pub fn goto_first_child_for_byte(&mut self, byte: usize) -> Option<usize> {
        let found = self
            .node()
            .children_iter()
            .enumerate()
            .find(|(_, child)| child.end_byte() > byte)?;
        self.index = found.1.index;
        Some(found.0)
    }
}

#[cfg(test)]
mod tests;
