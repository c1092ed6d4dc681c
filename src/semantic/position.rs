//! A place in the rule walk, as the shared analysis sees it: the file and its model, the
//! enclosing function and loops, and the node lookups the walk caches. The checker is the one
//! implementation; the analysis the memory rules share ([`super::accumulation`],
//! [`super::per_batch`], [`super::resets`], [`super::graph_arguments`]) asks through this
//! trait, so the facts stay below the rule pass that walks to them.

use std::cell::Cell;

use crate::syntax::Node;

use super::FunctionFacts;
use super::SemanticModel;
use super::accumulation::Accumulation;
use super::analysis::Analysis;
use crate::source::{SourceFile, TextRange};

/// Evidence that a node runs once per batch: the loop or step function, and why.
#[derive(Debug, Clone)]
pub struct PerBatchEvidence {
    pub range: TextRange,
    pub reason: String,
}

/// Where the walk stands when a rule asks (`checker::Checker`).
pub trait Position<'a> {
    fn analysis(&self) -> &Analysis<'a>;
    fn model(&self) -> &'a SemanticModel<'a>;
    fn source(&self) -> &'a SourceFile;
    fn text(&self) -> &'a str;
    fn node_text(&self, node: Node<'_>) -> &'a str;
    /// `node.child_by_field_id(field)`, cached.
    fn field(&self, node: Node<'a>, field: u16) -> Option<Node<'a>>;
    fn callee(&self, call: Node<'a>) -> Option<Node<'a>>;
    fn call_name(&self, call: Node<'a>) -> Option<&'a str>;
    fn arguments(&self, call: Node<'a>) -> Option<Node<'a>>;
    /// The function the walk is in, with its facts.
    fn current_function(&self) -> Option<(Node<'a>, &'a FunctionFacts)>;
    /// The loops around the walk's node, inside its function.
    fn enclosing_loops(&self) -> Vec<Node<'a>>;
    /// Whether the walk's node runs once per batch, and why.
    fn per_batch(&self) -> Option<PerBatchEvidence>;
    /// The last statement asked about by [`super::accumulation::accumulation`], with its answer.
    fn accumulation_memo(&self) -> &Cell<Option<(usize, Option<Accumulation<'a>>)>>;
}
