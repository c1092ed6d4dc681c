//! The named children of the nodes a walk is inside, kept as one stack with their kind ids:
//! the semantic walk pushes a node's children when it enters the node and cuts back to where
//! they started when it leaves, and hands each node its own children (`Own`) without asking
//! the tree again.

use crate::syntax::Node;

/// Named children with their kind ids, kept as a stack.
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
        for child in node.named_children_iter() {
            self.nodes.push(child);
            self.kinds.push(child.kind_id());
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
