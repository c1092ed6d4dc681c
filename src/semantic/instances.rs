//! Which class a value is an instance of, as far as the file shows: `trainer` after
//! `trainer = FasterRCNNTrainer(model, opt)`, `self.model` after `self.model: TextClassifier =
//! model`, a parameter annotated `model: SeqNet`. A method call on such a value returns what
//! the class's method returns — the file's own class, or another file's through the fact
//! base's summary of it.

use crate::syntax::Node;

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
        if let Some(known) = self.instance_memo.borrow().get(&node.id()) {
            return known.clone();
        }
        let class = self.instance_class_at_depth(node, 0);
        self.instance_memo
            .borrow_mut()
            .insert(node.id(), class.clone());
        class
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
            // `nn.GRU(...).cuda()`: a module's own methods that return the module.
            if callee.kind_id() == KINDS.attribute
                && let Some(method) = callee.child_by_field_id(FIELDS.attribute)
                && super::summary::SAME_VALUE_METHODS.contains(&self.text(method))
            {
                return self
                    .instance_class_at_depth(callee.child_by_field_id(FIELDS.object)?, depth + 1);
            }
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
                Site::Value {
                    value,
                    index: None,
                    parent,
                } => self
                    .annotated_class(parent)
                    .or_else(|| self.instance_class_at_depth(value, depth + 1)),
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
                if let Site::Value {
                    value, index: None, ..
                } = assignment.site
                    && value.id() != node.id()
                    && let Some(found) = self.instance_class_at_depth(value, depth + 1)
                {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Every class the value may be an instance of, through all assignments of a name or an
    /// attribute and the returns of the file's own functions (`model = DetectMultiBackend(p)`
    /// then `model = AutoShape(model)`; `self.model = load_model(p)`).
    pub fn instance_classes(&self, node: Node<'a>) -> Vec<ClassRef> {
        let mut found = Vec::new();
        self.collect_instance_classes(node, 0, &mut found);
        found
    }

    fn collect_instance_classes(&self, node: Node<'a>, depth: usize, found: &mut Vec<ClassRef>) {
        if depth > MAX_DEPTH || found.len() > 8 {
            return;
        }
        let push = |class: ClassRef, found: &mut Vec<ClassRef>| {
            if !found.contains(&class) {
                found.push(class);
            }
        };
        let kind = node.kind_id();
        if kind == KINDS.parenthesized_expression {
            if let Some(inner) = node.named_child(0) {
                self.collect_instance_classes(inner, depth + 1, found);
            }
            return;
        }
        // `nn.DataParallel(net) if multi_gpu else net`: either.
        if kind == KINDS.conditional_expression {
            for index in [0, 2] {
                if let Some(branch) = node.named_child(index) {
                    self.collect_instance_classes(branch, depth + 1, found);
                }
            }
            return;
        }
        if kind == KINDS.call {
            let Some(callee) = node.child_by_field_id(FIELDS.function) else {
                return;
            };
            if let Some(class) = self.class_named_by(callee) {
                push(class, found);
                return;
            }
            // `model.to(device)`, `model.eval()`: the same instance.
            if callee.kind_id() == KINDS.attribute
                && let Some(method) = callee.child_by_field_id(FIELDS.attribute)
                && matches!(
                    self.text(method),
                    "to" | "cuda" | "cpu" | "eval" | "train" | "half" | "float"
                )
                && let Some(object) = callee.child_by_field_id(FIELDS.object)
            {
                self.collect_instance_classes(object, depth + 1, found);
                return;
            }
            // One of the file's functions: what it returns.
            if callee.kind_id() == KINDS.identifier {
                let name = self.text(callee);
                let functions: Vec<Node<'a>> = self.model.function_nodes_named(name).collect();
                for function in functions {
                    for &returned in self.model.returns_of(function) {
                        self.collect_instance_classes(returned, depth + 1, found);
                    }
                }
            }
            return;
        }
        if kind == KINDS.identifier && self.text(node) != "self" {
            let Some((_, bindings)) =
                self.model
                    .scopes
                    .lookup(self.scope_at(node), self.text(node), node.start_byte())
            else {
                return;
            };
            for binding in bindings {
                match binding.site {
                    Site::Value {
                        value,
                        index: None,
                        parent,
                    } if value.id() != node.id() => {
                        if let Some(class) = self.annotated_class(parent) {
                            push(class, found);
                        }
                        self.collect_instance_classes(value, depth + 1, found);
                    }
                    Site::Parameter { function, index } => {
                        if let Some(class) = self.parameter_class(function, index) {
                            push(class, found);
                        }
                    }
                    _ => {}
                }
            }
            return;
        }
        if kind == KINDS.attribute
            && let Some(object) = node.child_by_field_id(FIELDS.object)
            && self.text(object) == "self"
            && let Some(attribute) = node.child_by_field_id(FIELDS.attribute)
            && let Some(class) = self.class_of(node)
        {
            let class_node = self.model.classes[class].node;
            let assignments: Vec<_> = self
                .self_assignments(self.text(attribute))
                .filter(|a| class_node.byte_range().contains(&a.node.start_byte()))
                .copied()
                .collect();
            for assignment in assignments {
                if let Some(class) = self.annotated_class(assignment.node) {
                    push(class, found);
                }
                if let Site::Value {
                    value, index: None, ..
                } = assignment.site
                    && value.id() != node.id()
                {
                    self.collect_instance_classes(value, depth + 1, found);
                }
            }
            return;
        }
        // `models["renderer"]` of `models = {"renderer": renderer, ...}`: that entry.
        if kind == KINDS.subscript
            && let Some(entry) = self.dict_literal_entry(node)
        {
            self.collect_instance_classes(entry, depth + 1, found);
            return;
        }
        if let Some(class) = self.instance_class_at_depth(node, depth) {
            push(class, found);
        }
    }

    /// The value a string-keyed subscript of a dict literal names: `bag["g"]` where
    /// `bag = {"g": generator, ...}` is the name's reaching binding.
    pub fn dict_literal_entry(&self, subscript: Node<'a>) -> Option<Node<'a>> {
        let object = subscript.child_by_field_id(FIELDS.value)?;
        let key = super::values::string_key(self, subscript)?;
        if object.kind_id() != KINDS.identifier {
            return None;
        }
        let literal = self.bound_value(object)?;
        if literal.kind_id() != KINDS.dictionary {
            return None;
        }
        let mut cursor = literal.walk();
        let found = literal.named_children(&mut cursor).find(|pair| {
            pair.child_by_field_id(FIELDS.key).is_some_and(|k| {
                k.kind_id() == KINDS.string && self.text(k).trim_matches(['"', '\'']) == key
            })
        })?;
        found.child_by_field_id(FIELDS.value)
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
    pub(super) fn class_named_by(&self, name: Node<'a>) -> Option<ClassRef> {
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
        if qualified.contains('.') {
            return Some(ClassRef::Imported(qualified));
        }
        self.star_imported(&qualified).map(ClassRef::Imported)
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
        let (mut facts, model) = match class {
            ClassRef::Local(index) => {
                let function = self.local_method(index, method)?;
                (
                    self.method_returns(call, function, depth)?,
                    self.modules().is_module_class(index),
                )
            }
            ClassRef::Imported(qualified) => {
                let facts = self.ask(Ask::Call(format!("{qualified}.{method}")))?;
                (
                    self.at_call_site(call, facts),
                    self.ask(Ask::ModuleClass(qualified)).is_some(),
                )
            }
        };
        // A model's method computes on the model's device, which the caller decides: the
        // class's own file need not name one.
        if model
            && facts.kind == Kind::Tensor
            && facts.device == Tri::Unknown
            && self.device_by_default()
        {
            facts.device = Tri::Yes;
        }
        Some(facts)
    }

    /// A method of a class of the file, or of its bases in the file.
    pub fn local_method(&self, class: usize, method: &str) -> Option<Node<'a>> {
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
        // `mel_filter_bank(..., dtype=np.float32)`: the caller picks the precision.
        if facts.float64
            && let Some(dtype) =
                crate::parse::find_argument(call, self.source, Some("dtype"), None).found()
            && !matches!(
                self.text(dtype).trim(),
                "np.float64" | "numpy.float64" | "torch.float64" | "torch.double" | "float"
            )
        {
            facts.float64 = false;
        }
        facts
    }

    fn any_argument_carries_graph(&self, call: Node<'a>) -> bool {
        crate::parse::argument_values(call)
            .into_iter()
            .any(|value| self.facts(value).graph == Tri::Yes)
    }
}

/// Methods only models have: a value they are called on is an `nn.Module`, whatever the file
/// shows of where it comes from (`self.model = build(cfg)`, a parameter, `models_bag["g"]`).
const MODULE_ONLY_METHODS: &[&str] = &[
    "eval",
    "parameters",
    "named_parameters",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "buffers",
    "named_buffers",
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_full_backward_pre_hook",
];

/// Wrappers whose first argument is a model.
const MODULE_WRAPPERS: &[&str] = &[
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.compile",
];

impl<'a> Analysis<'a> {
    /// Whether a call has an argument, and its first is not text: a string literal, or a
    /// name last assigned one (`prompt = f"..."`).
    fn first_input_is_no_string(&self, call: Node<'a>) -> bool {
        let Some(first) = call
            .child_by_field_id(FIELDS.arguments)
            .and_then(|arguments| arguments.named_child(0))
        else {
            return false;
        };
        let value = if first.kind_id() == KINDS.keyword_argument {
            first.child_by_field_id(FIELDS.value)
        } else {
            Some(first)
        };
        let Some(mut value) = value.map(|v| self.bound_value(v).unwrap_or(v)) else {
            return false;
        };
        while value.kind_id() == KINDS.parenthesized_expression
            && let Some(inner) = value.named_child(0)
        {
            value = inner;
        }
        value.kind_id() != KINDS.string && value.kind_id() != KINDS.concatenated_string
    }

    /// Whether the file uses the value an expression's text names as a model: calls a
    /// method only models have on it (`model.eval()`, `model.parameters()`), wraps it in
    /// `DistributedDataParallel` or `torch.compile`, or calls it by a model's name
    /// (`model(x)`).
    pub fn used_as_module(&self, text: &str) -> bool {
        self.module_evidence
            .get_or_init(|| {
                let mut used = rustc_hash::FxHashSet::default();
                for method in MODULE_ONLY_METHODS {
                    for call in self.model.calls_by_name.get(method).into_iter().flatten() {
                        if let Some(callee) = self.model.callee(*call)
                            && callee.kind_id() == KINDS.attribute
                            && let Some(object) = callee.child_by_field_id(FIELDS.object)
                        {
                            used.insert(self.text(object));
                        }
                    }
                }
                for wrapper in MODULE_WRAPPERS {
                    let last = wrapper.rsplit('.').next().unwrap_or(wrapper);
                    let mut calls: Vec<Node<'a>> = self
                        .model
                        .calls_by_name
                        .get(last)
                        .into_iter()
                        .flatten()
                        .copied()
                        .collect();
                    // `DDP(model)` under an alias.
                    if last == "DistributedDataParallel" {
                        calls.extend(self.model.calls_by_name.get("DDP").into_iter().flatten());
                    }
                    for call in calls {
                        let wraps = self
                            .model
                            .callee(call)
                            .and_then(|callee| self.qualified_name(callee))
                            .is_some_and(|name| name == *wrapper);
                        if wraps
                            && let Some(first) = call
                                .child_by_field_id(FIELDS.arguments)
                                .and_then(|arguments| arguments.named_child(0))
                            && matches!(first.kind_id(), k if k == KINDS.identifier || k == KINDS.attribute)
                        {
                            used.insert(self.text(first));
                        }
                    }
                }
                // `model(x)`, `self.net(batch)`: a value named like a model that the file
                // calls on inputs is one (a scikit-learn estimator is not callable). Not a
                // class (`Generator()`), a getter (`program.module()`), or a language model
                // of another library given a prompt string (`self.backbone(prompt)`).
                for (name, calls) in &self.model.calls_by_name {
                    if !super::values::looks_like_model(name)
                        || name.starts_with(|c: char| c.is_ascii_uppercase())
                    {
                        continue;
                    }
                    for call in calls {
                        if let Some(callee) = self.model.callee(*call)
                            && matches!(callee.kind_id(), k if k == KINDS.identifier || k == KINDS.attribute)
                            && self.first_input_is_no_string(*call)
                        {
                            used.insert(self.text(callee));
                        }
                    }
                }
                used
            })
            .contains(text)
    }
}
