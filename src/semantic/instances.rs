//! Which class a value is an instance of, as far as the file shows: `trainer` after
//! `trainer = FasterRCNNTrainer(model, opt)`, `self.model` after `self.model: TextClassifier =
//! model`, a parameter annotated `model: SeqNet`. A method call on such a value returns what
//! the class's method returns — the file's own class, or another file's through the fact
//! base's summary of it.

use tree_sitter::Node;

use super::analysis::Analysis;
use super::facts::Ask;
use super::scope::Site;
use super::values::{Kind, Tri, ValueFacts};
use crate::parse::{FIELDS, KINDS};

/// A class, of this file or by its qualified name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassRef {
    /// An index into `SemanticModel::classes`.
    Local(usize),
    Imported(String),
}

/// How deep names, attributes and annotations are followed.
const MAX_DEPTH: usize = 6;

impl<'a> Analysis<'a> {
    /// The class `node`'s value is an instance of.
    pub fn instance_class(&self, node: Node<'a>) -> Option<ClassRef> {
        self.instance_class_at_depth(node, 0)
    }

    fn instance_class_at_depth(&self, node: Node<'a>, depth: usize) -> Option<ClassRef> {
        if depth > MAX_DEPTH {
            return None;
        }
        let kind = node.kind_id();
        if kind == KINDS.parenthesized_expression {
            return self.instance_class_at_depth(node.named_child(0)?, depth + 1);
        }
        if kind == KINDS.call {
            let callee = node.child_by_field_id(FIELDS.function)?;
            return self.class_named_by(callee);
        }
        if kind == KINDS.identifier {
            if self.text(node) == "self" {
                return self.class_of(node).map(ClassRef::Local);
            }
            let (_, bindings) = self.model.scopes.lookup(
                self.scope_at(node),
                self.text(node),
                node.start_byte(),
            )?;
            let binding = bindings
                .iter()
                .rev()
                .find(|b| b.offset <= node.start_byte())
                .or(bindings.last())?;
            return match binding.site {
                Site::Value { value, index: None } => {
                    let statement = value.parent();
                    statement
                        .and_then(|s| self.annotated_class(s))
                        .or_else(|| self.instance_class_at_depth(value, depth + 1))
                }
                Site::Parameter { function, index } => self.parameter_class(function, index),
                _ => None,
            };
        }
        if kind == KINDS.attribute {
            let object = node.child_by_field_id(FIELDS.object)?;
            let attribute = self.text(node.child_by_field_id(FIELDS.attribute)?);
            if self.text(object) != "self" {
                return None;
            }
            let class = self.class_of(node)?;
            let class_node = self.model.classes[class].node;
            for assignment in self.self_assignments(attribute) {
                if !class_node
                    .byte_range()
                    .contains(&assignment.node.start_byte())
                {
                    continue;
                }
                if let Some(found) = self.annotated_class(assignment.node) {
                    return Some(found);
                }
                if let Site::Value { value, index: None } = assignment.site
                    && value.id() != node.id()
                    && let Some(found) = self.instance_class_at_depth(value, depth + 1)
                {
                    return Some(found);
                }
            }
        }
        None
    }

    /// `x: Net = ...`, `self.model: TextClassifier = model`: the annotated class.
    fn annotated_class(&self, assignment: Node<'a>) -> Option<ClassRef> {
        if assignment.kind_id() != KINDS.assignment {
            return None;
        }
        let annotation = assignment.child_by_field_id(FIELDS.type_)?;
        self.class_in_annotation(annotation)
    }

    /// The class a parameter is annotated with (`model: SeqNet`, `trainer: "Trainer"`).
    fn parameter_class(&self, function: Node<'a>, index: u32) -> Option<ClassRef> {
        let parameters = function.child_by_field_id(FIELDS.parameters)?;
        let parameter = parameters.named_child(index)?;
        let annotation = parameter.child_by_field_id(FIELDS.type_)?;
        self.class_in_annotation(annotation)
    }

    /// `Net`, `models.Net`, `Optional[Net]`: the class an annotation names.
    fn class_in_annotation(&self, annotation: Node<'a>) -> Option<ClassRef> {
        let mut expression = annotation;
        if expression.kind_id() == KINDS.type_ {
            expression = expression.named_child(0)?;
        }
        // `Optional[Net]`: the class inside.
        if expression.kind() == "generic_type" || expression.kind_id() == KINDS.subscript {
            let text = self.text(expression);
            if !text.starts_with("Optional") {
                return None;
            }
            let inner = expression
                .named_child(1)
                .or_else(|| expression.named_child(0))?;
            let inner = if inner.kind() == "type_parameter" {
                inner.named_child(0)?
            } else {
                inner
            };
            return self.class_in_annotation(inner);
        }
        self.class_named_by(expression)
    }

    /// The class an expression names: one of the file's, or an imported one.
    fn class_named_by(&self, name: Node<'a>) -> Option<ClassRef> {
        let kind = name.kind_id();
        if kind != KINDS.identifier && kind != KINDS.attribute {
            return None;
        }
        let text = self.text(name);
        let last = text.rsplit('.').next().unwrap_or(text);
        if !last.starts_with(|c: char| c.is_ascii_uppercase()) {
            return None;
        }
        if kind == KINDS.identifier
            && let Some(index) = self.model.classes.iter().position(|c| c.name == text)
        {
            return Some(ClassRef::Local(index));
        }
        let qualified = self.qualified_name(name)?;
        qualified
            .contains('.')
            .then_some(ClassRef::Imported(qualified))
    }

    /// `receiver.method(...)` on an instance of a known class: what the method returns, if the
    /// file or the fact base can tell. `forward` and the model's own layers are left to the
    /// forward-pass analysis.
    pub fn instance_method_call(
        &self,
        call: Node<'a>,
        receiver: Node<'a>,
        method: &str,
        depth: usize,
    ) -> Option<ValueFacts> {
        if method == "forward" || method.starts_with("__") {
            return None;
        }
        let class = self.instance_class(receiver)?;
        let facts = match class {
            ClassRef::Local(index) => {
                let function = self.local_method(index, method)?;
                self.method_returns(call, function, depth)?
            }
            ClassRef::Imported(qualified) => {
                let facts = self.ask(Ask::Call(format!("{qualified}.{method}")))?;
                self.at_call_site(call, facts)
            }
        };
        Some(facts)
    }

    /// A method of a class of the file, or of its bases in the file.
    pub(super) fn local_method(&self, class: usize, method: &str) -> Option<Node<'a>> {
        let mut pending = vec![class];
        let mut seen = Vec::new();
        while let Some(class) = pending.pop() {
            if seen.contains(&class) {
                continue;
            }
            seen.push(class);
            let info = &self.model.classes[class];
            if let Some((_, node)) = info.methods.iter().find(|(name, _)| *name == method) {
                return Some(*node);
            }
            for base in &info.bases {
                let text = self.text(*base);
                if let Some(index) = self.model.classes.iter().position(|c| c.name == text) {
                    pending.push(index);
                }
            }
        }
        None
    }

    /// What a summarised function returns, as seen at `call`: no graph under `no_grad`, and a
    /// criterion of graph-carrying arguments carries one.
    pub fn at_call_site(&self, call: Node<'a>, mut facts: ValueFacts) -> ValueFacts {
        if facts.kind == Kind::Tensor
            && facts.graph == Tri::Unknown
            && facts.loss
            && self.any_argument_carries_graph(call)
        {
            facts.graph = Tri::Yes;
        }
        if !self.grad().mode_at(call.start_byte()).may_record() {
            facts.graph = Tri::No;
        }
        facts
    }

    fn any_argument_carries_graph(&self, call: Node<'a>) -> bool {
        let Some(arguments) = call.child_by_field_id(FIELDS.arguments) else {
            return false;
        };
        let mut cursor = arguments.walk();
        let arguments: Vec<Node<'a>> = arguments.named_children(&mut cursor).collect();
        arguments.into_iter().any(|argument| {
            let value = if argument.kind_id() == KINDS.keyword_argument {
                argument.child_by_field_id(FIELDS.value).unwrap_or(argument)
            } else {
                argument
            };
            self.facts(value).graph == Tri::Yes
        })
    }
}
