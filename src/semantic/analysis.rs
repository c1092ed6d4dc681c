//! Facts derived from the semantic model on demand, once per file: grad mode everywhere
//! (`grad`), which values are models (`modules`), value provenance (`values`) and constants
//! (`constants`). Each is computed the first time a rule asks, so files without a finding
//! candidate pay nothing.

use std::cell::{OnceCell, RefCell};

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use super::grad::GradInfo;
use super::modules::ModuleInfo;
use super::scope::ScopeId;
use super::values::{CallKey, ValueFacts};
use super::{AttributeAssignment, SemanticModel};
use crate::parse::text;

pub struct Analysis<'a> {
    pub model: &'a SemanticModel<'a>,
    pub root: Node<'a>,
    pub source: &'a str,
    grad: OnceCell<GradInfo>,
    modules: OnceCell<ModuleInfo>,
    /// Value facts by node id (`values::facts` fills it).
    pub(super) values: RefCell<HashMap<usize, ValueFacts>>,
    /// Nodes whose facts are being computed, to cut cycles (`x = x + 1`).
    pub(super) in_progress: RefCell<Vec<usize>>,
    /// What calls of the file's own functions return, by argument facts (`values`).
    pub(super) calls: RefCell<HashMap<CallKey, Option<ValueFacts>>>,
    pub(super) targets_gpu: OnceCell<bool>,
    /// `self.<attribute> = ...` assignments by attribute, as indices into the model's
    /// `attribute_assignments` in document order: every `self.x` in a module asks for them,
    /// and a model file has thousands.
    self_assignments: OnceCell<HashMap<&'a str, Vec<usize>>>,
}

impl<'a> Analysis<'a> {
    pub fn new(model: &'a SemanticModel<'a>, root: Node<'a>, source: &'a str) -> Self {
        Analysis {
            model,
            root,
            source,
            grad: OnceCell::new(),
            modules: OnceCell::new(),
            values: RefCell::new(HashMap::default()),
            in_progress: RefCell::new(Vec::new()),
            calls: RefCell::new(HashMap::default()),
            targets_gpu: OnceCell::new(),
            self_assignments: OnceCell::new(),
        }
    }

    /// The `self.<attribute> = ...` assignments of the file, in document order.
    pub fn self_assignments(
        &self,
        attribute: &str,
    ) -> impl Iterator<Item = &AttributeAssignment<'a>> {
        let index = self.self_assignments.get_or_init(|| {
            let mut index: HashMap<&'a str, Vec<usize>> = HashMap::default();
            for (at, assignment) in self.model.attribute_assignments.iter().enumerate() {
                if assignment.object == "self" {
                    index.entry(assignment.attribute).or_default().push(at);
                }
            }
            index
        });
        index
            .get(attribute)
            .into_iter()
            .flatten()
            .map(|&at| &self.model.attribute_assignments[at])
    }

    pub fn text(&self, node: Node<'_>) -> &'a str {
        text(node, self.source)
    }

    /// The innermost scope holding `node`.
    pub fn scope_at(&self, node: Node<'_>) -> ScopeId {
        self.model.scopes.at(node.start_byte())
    }

    /// The qualified name an expression refers to, resolved in the scope that holds it.
    pub fn qualified_name(&self, node: Node<'_>) -> Option<String> {
        self.model
            .scopes
            .qualified_name(self.scope_at(node), node, self.root, self.source)
    }

    pub fn grad(&self) -> &GradInfo {
        self.grad.get_or_init(|| GradInfo::build(self))
    }

    pub fn modules(&self) -> &ModuleInfo {
        self.modules.get_or_init(|| ModuleInfo::build(self))
    }

    /// The function (or lambda) whose body holds `node`, if any.
    pub fn enclosing_function(&self, node: Node<'_>) -> Option<Node<'a>> {
        let mut scope = self.scope_at(node);
        loop {
            let info = self.model.scopes.get(scope);
            match info.kind {
                super::scope::ScopeKind::Function | super::scope::ScopeKind::Lambda => {
                    return info.node;
                }
                super::scope::ScopeKind::Module | super::scope::ScopeKind::Class => return None,
                super::scope::ScopeKind::Comprehension => match info.parent {
                    Some(parent) => scope = parent,
                    None => return None,
                },
            }
        }
    }
}
