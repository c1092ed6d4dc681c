//! Which calls run a model's forward pass: `model(x)`, `self(x)`, `self.encoder(x)`,
//! `model.decode(z)` — and which functions do, directly or through the file's own helpers
//! (a function summary's `runs_forward`).

use crate::syntax::Node;

use super::analysis::Analysis;
use super::facts::Ask;
use super::instances::ClassRef;
use super::values::{Kind, Tri, ValueFacts, is_non_forward_method};
use crate::parse::{Descend, FIELDS, KINDS, Visit, argument_values, walk};

/// A call that runs a model.
pub struct Forward<'a> {
    /// The callee text a mode call (`x.eval()`) must match: `model`, `self.model`, `self`.
    pub receiver: &'a str,
    pub module: ValueFacts,
    /// The model's own `forward` disables grad (`@torch.inference_mode()` on it): the call
    /// records nothing whatever the caller's grad mode.
    pub grad_disabled: bool,
}

impl<'a> Analysis<'a> {
    /// Whether `call` runs, with the grad its caller has, the forward of a model on the
    /// accelerator: a known model there, or a name whose value was moved there (`net =
    /// Net().cuda()`, which the value analysis may take for a tensor) and is called: a tensor
    /// is not callable, so it holds a model.
    pub fn forward_on_device(&self, call: Node<'a>) -> bool {
        let forward = self.forward_call(call);
        if forward
            .as_ref()
            .is_some_and(|forward| forward.grad_disabled)
        {
            return false;
        }
        if forward
            .as_ref()
            .is_some_and(|forward| forward.module.device == Tri::Yes)
        {
            return true;
        }
        self.model.callee(call).is_some_and(|callee| {
            let facts = self.facts(callee);
            callee.kind_id() == KINDS.identifier
                && (forward.is_some() || matches!(facts.kind, Kind::Unknown | Kind::Tensor))
                && facts.device == Tri::Yes
        })
    }

    /// Whether `call` runs a model's forward pass, and on what.
    pub fn forward_call(&self, call: Node<'a>) -> Option<Forward<'a>> {
        let callee = self.model.callee(call)?;
        let kind = callee.kind_id();
        // `model(x)`, `models_bag["g"](z)`.
        if kind == KINDS.identifier || kind == KINDS.subscript {
            let facts = self.facts(callee);
            return (facts.kind == Kind::Module).then(|| self.forward_of(callee, callee, facts));
        }
        if kind != KINDS.attribute {
            return None;
        }
        let object = callee.child_by_field_id(FIELDS.object)?;
        let attribute = self.model.call_name(call)?;
        let callee_facts = self.facts(callee);
        if callee_facts.kind == Kind::Module {
            return Some(self.forward_of(callee, callee, callee_facts));
        }
        let object_facts = self.facts(object);
        if object_facts.kind != Kind::Module
            || !is_forward_method(attribute)
            || (is_non_forward_method(attribute) && !self.getter_given_tensors(call, attribute))
        {
            return None;
        }
        // `model.decode(z)`: a method of the model's class that runs (part of) the model,
        // not one that reads its configuration (`model.can_generate()`); `model.bert(x)`: a
        // submodule of a project class (an attribute that is none of its methods).
        let classes = self.instance_classes(object);
        let runs = if classes.is_empty() {
            // A model of a class the file does not show: a method whose name says it runs
            // the model (`val_step`, `predict`, `encode`, `forward_features`), or one given
            // tensors to compute with (`lambda_model.intensity(batch)`), unless the file's own
            // model classes define the method and it runs nothing.
            let mut own = self.model_class_methods(attribute).peekable();
            if own.peek().is_some() {
                own.any(|method| self.runs_forward(method))
            } else {
                self.is_model_member(attribute)
                    || runs_model_by_name(attribute)
                    || self.given_tensors(call)
            }
        } else {
            runs_model_by_name(attribute)
                || classes.iter().any(|class| match class {
                    ClassRef::Local(class) => match self.local_method(*class, attribute) {
                        Some(method) => self.runs_forward(method),
                        None => self.is_model_member(attribute),
                    },
                    ClassRef::Imported(class) => {
                        let member = format!("{class}.{attribute}");
                        self.ask(Ask::RunsForward(member.clone())).is_some()
                            || (self.ask(Ask::Defines(member)).is_none()
                                && self.ask(Ask::ModuleClass(class.clone())).is_some())
                            || self.is_model_member(attribute)
                    }
                })
        };
        // Given only NumPy arrays it runs elsewhere (an ONNX session behind the same attribute):
        // a torch module computes on tensors.
        if !runs || self.given_only_arrays(call) {
            return None;
        }
        let mut forward = self.forward_of(object, callee, object_facts);
        // `vae.sample(x)` of a method under `@torch.no_grad()`: it runs the model, recording
        // nothing.
        forward.grad_disabled |= self.method_disables_grad(&classes, attribute);
        Some(forward)
    }

    fn forward_of(&self, receiver: Node<'a>, callee: Node<'a>, module: ValueFacts) -> Forward<'a> {
        Forward {
            receiver: self.text(receiver),
            module,
            grad_disabled: self.forward_disables_grad(callee),
        }
    }

    /// Whether calling the model `callee` names runs a `forward` that disables grad itself.
    /// When the value may be an instance of several classes (`model = AutoShape(model)` on one
    /// branch), one whose `forward` disables grad is taken to be the one called: the wrapper
    /// exists to be called that way.
    pub fn forward_disables_grad(&self, callee: Node<'a>) -> bool {
        let classes = self.instance_classes(callee);
        if !classes.is_empty() {
            return self.method_disables_grad(&classes, "forward");
        }
        // `model.predict(x)`: the method called, on the receiver's class, or, when the file
        // cannot tell the class (a parameter), on every model class of the file defining it.
        let Some((receiver, method)) = callee
            .child_by_field_id(FIELDS.object)
            .zip(callee.child_by_field_id(FIELDS.attribute))
            .filter(|_| callee.kind_id() == KINDS.attribute)
        else {
            return false;
        };
        let method = self.text(method);
        let receivers = self.instance_classes(receiver);
        if receivers.is_empty() {
            self.members_disable_grad(method)
        } else {
            self.method_disables_grad(&receivers, method)
        }
    }

    /// Whether `method` of one of these classes runs under a grad-disabling decorator, or runs
    /// its forward passes only inside its own `no_grad` blocks.
    fn method_disables_grad(&self, classes: &[ClassRef], method: &str) -> bool {
        classes.iter().any(|class| match class {
            ClassRef::Local(class) => self.local_method(*class, method).is_some_and(|function| {
                self.grad().disabled_by_decorator(function)
                    || (method != "forward"
                        && self.runs_forward(function)
                        && !self.runs_forward_with_grad(function))
            }),
            ClassRef::Imported(class) => self
                .ask(Ask::GradDisabled(format!("{class}.{method}")))
                .is_some(),
        })
    }

    /// Whether the model classes of the file that define a method of this name all run it
    /// under a grad-disabling decorator (`@torch.no_grad() def predict(...)`), and some do.
    fn members_disable_grad(&self, method: &str) -> bool {
        let mut methods = self.model_class_methods(method).peekable();
        methods.peek().is_some()
            && methods.all(|function| self.grad().disabled_by_decorator(function))
    }

    /// The methods of this name of the file's model classes.
    fn model_class_methods<'s>(&'s self, name: &'s str) -> impl Iterator<Item = Node<'a>> + 's {
        self.model
            .classes
            .iter()
            .enumerate()
            .filter(|(index, _)| self.modules().is_module_class(*index))
            .filter_map(move |(_, class)| {
                class
                    .methods
                    .iter()
                    .find(|(method, _)| *method == name)
                    .map(|(_, node)| *node)
            })
    }

    /// Whether a call passes a tensor, or a list or dict literal holding one, as an argument:
    /// a model's method given tensors computes with its weights.
    fn given_tensors(&self, call: Node<'a>) -> bool {
        argument_values(call)
            .into_iter()
            .any(|value| self.holds_tensor(value))
    }

    /// `model.get_image_features(pixel_values=x)` of a pretrained model: named like a getter,
    /// but given tensors to compute with (a getter takes none: `get_input_embeddings()`,
    /// `get_submodule("fc")`). A project's own model class may name a helper that only reads
    /// its arguments so (`get_images_and_metrics(inp, out, target)`).
    pub(super) fn getter_given_tensors(&self, call: Node<'a>, method: &str) -> bool {
        method.starts_with("get_")
            && self
                .model
                .callee(call)
                .and_then(|callee| callee.child_by_field_id(FIELDS.object))
                .is_some_and(|receiver| self.facts(receiver).pretrained)
            && self.given_tensors(call)
    }

    /// Whether every argument of a call is a NumPy array (and there is one).
    fn given_only_arrays(&self, call: Node<'a>) -> bool {
        let values = argument_values(call);
        !values.is_empty()
            && values
                .into_iter()
                .all(|value| self.facts(value).kind == Kind::Numpy)
    }

    /// A tensor, or a list, tuple or dict literal (or a name bound to one) with a tensor in it.
    fn holds_tensor(&self, value: Node<'a>) -> bool {
        let facts = self.facts(value);
        // A tensor, or data moved to the device (`batch["x"].cuda()`).
        if facts.kind == Kind::Tensor || (facts.kind != Kind::Module && facts.device == Tri::Yes) {
            return true;
        }
        // `batch["pixel_values"]`: an entry of a batch from a loader (a dict of tensors).
        if value.kind_id() == KINDS.subscript
            && value
                .child_by_field_id(FIELDS.value)
                .is_some_and(|batch| self.facts(batch).kind == Kind::Tensor)
        {
            return true;
        }
        let literal = if value.kind_id() == KINDS.identifier {
            match self.bound_value(value) {
                Some(bound) => bound,
                None => return false,
            }
        } else {
            value
        };
        let kind = literal.kind_id();
        if kind == KINDS.dictionary {
            let mut cursor = literal.walk();
            return literal.named_children(&mut cursor).any(|pair| {
                pair.child_by_field_id(FIELDS.value)
                    .is_some_and(|element| self.facts(element).kind == Kind::Tensor)
            });
        }
        if kind == KINDS.list || kind == KINDS.tuple {
            let mut cursor = literal.walk();
            return literal
                .named_children(&mut cursor)
                .any(|element| self.facts(element).kind == Kind::Tensor);
        }
        false
    }

    /// A member of the file's model classes by name: a submodule, or a method that runs a
    /// forward pass.
    pub fn member_runs_forward(&self, name: &str) -> bool {
        if name == "forward" {
            return true;
        }
        let methods: Vec<Node<'a>> = self.model_class_methods(name).collect();
        if methods.is_empty() {
            return self.is_model_member(name);
        }
        methods.into_iter().any(|method| self.runs_forward(method))
    }

    /// Whether a function's body (not its nested functions) runs a forward pass, directly or
    /// through a call of one of the file's plain functions that does.
    pub fn runs_forward(&self, function: Node<'a>) -> bool {
        if let Some(&known) = self.runs_forward_memo.borrow().get(&function.id()) {
            return known;
        }
        // Recursion through `self.forward` and helpers ends here.
        self.runs_forward_memo
            .borrow_mut()
            .insert(function.id(), false);
        let runs = self.runs_forward_at_depth(function, 0);
        self.runs_forward_memo
            .borrow_mut()
            .insert(function.id(), runs);
        runs
    }

    /// Whether a function runs a forward pass that records a graph when its caller has grad
    /// on: one outside the function's own `no_grad` blocks.
    pub fn runs_forward_with_grad(&self, function: Node<'a>) -> bool {
        if let Some(&known) = self.forward_with_grad_memo.borrow().get(&function.id()) {
            return known;
        }
        self.forward_with_grad_memo
            .borrow_mut()
            .insert(function.id(), false);
        let runs = self.find_forward_with_grad(function);
        self.forward_with_grad_memo
            .borrow_mut()
            .insert(function.id(), runs);
        runs
    }

    fn find_forward_with_grad(&self, function: Node<'a>) -> bool {
        if self.grad().disabled_by_decorator(function) {
            return false;
        }
        self.any_call_in_body(function, |call| {
            self.may_be_forward(call)
                && self.grad().mode_at(call.start_byte()).may_record()
                && (self.forward_call(call).is_some_and(|f| !f.grad_disabled)
                    || self.calls_forward_helper(call, 1))
        })
    }

    /// Whether a call in the function's own body (not in nested functions or classes)
    /// satisfies `test`.
    fn any_call_in_body(&self, function: Node<'a>, test: impl Fn(Node<'a>) -> bool) -> bool {
        let Some(body) = function.child_by_field_id(FIELDS.body) else {
            return false;
        };
        let mut found = false;
        walk(body, |visit| {
            let Visit::Enter(node) = visit else {
                return Descend::Yes;
            };
            if found
                || !node.is_named()
                || node.kind_id() == KINDS.function_definition
                || node.kind_id() == KINDS.class_definition
            {
                return Descend::No;
            }
            if node.kind_id() == KINDS.call && test(node) {
                found = true;
                return Descend::No;
            }
            Descend::Yes
        });
        found
    }

    /// [`Analysis::runs_forward_with_grad`] for a summary, from the text alone: a call of
    /// `self(...)`, or of an attribute of `self` that is none of the class's methods
    /// (`self.model(x)`, `self.encoder(h)`), outside the method's own `no_grad` blocks. A
    /// summary is made for every method other files may call, and a value analysis of each
    /// would cost more than the rest of the file's.
    pub fn may_run_forward_with_grad(&self, function: Node<'a>, class: usize) -> bool {
        if self.grad().disabled_by_decorator(function) {
            return false;
        }
        let Some(body) = function.child_by_field_id(FIELDS.body) else {
            return false;
        };
        let text = self.text(body);
        let start = body.start_byte();
        let methods = &self.model.classes[class].methods;
        // `self(...)` is a forward pass only for a module; a class with no bases is not one.
        let callable_self =
            self.modules().is_module_class(class) || !self.model.classes[class].bases.is_empty();
        text.match_indices("self").any(|(at, _)| {
            let rest = &text[at + 4..];
            let called = if let Some(rest) = rest.strip_prefix('.') {
                let end = rest
                    .find(|c: char| !c.is_alphanumeric() && c != '_')
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                rest[end..].starts_with('(')
                    && !methods.iter().any(|(method, _)| *method == name)
                    && !NOT_A_FORWARD.contains(&name)
                    && !is_non_forward_method(name)
            } else {
                callable_self
                    && rest.starts_with('(')
                    && !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
            };
            called && self.grad().mode_at(start + at).may_record()
        })
    }

    /// Whether a call can be a forward pass at all, by its name: not a builtin, a tensor or
    /// container method, or a library function (asked before any value analysis).
    fn may_be_forward(&self, call: Node<'a>) -> bool {
        let Some((callee, name)) = self.model.recorded_call(call) else {
            return true;
        };
        if callee.kind_id() == KINDS.attribute {
            return !NOT_A_FORWARD.contains(&name) && !is_non_forward_method(name);
        }
        // A bare name: the file's own function, an import, or a local (a model argument).
        !BUILTINS.contains(&name) || self.model.scopes.may_import(name)
    }

    /// `self.predict_chunks(x)`: a call of a method of the caller's own class that runs a
    /// model.
    pub fn calls_own_forward_method(&self, call: Node<'a>) -> bool {
        let Some(callee) = self.model.callee(call) else {
            return false;
        };
        if callee.kind_id() == KINDS.attribute
            && callee
                .child_by_field_id(FIELDS.object)
                .is_some_and(|object| self.text(object) == "self")
            && let Some(class) = self.class_of(call)
            && let Some(name) = self.model.call_name(call)
            && let Some(method) = self.local_method(class, name)
        {
            !method.byte_range().contains(&call.start_byte()) && self.runs_forward(method)
        } else {
            false
        }
    }

    fn runs_forward_at_depth(&self, function: Node<'a>, depth: usize) -> bool {
        let key = (function.id(), depth);
        if let Some(&known) = self.helper_forward_memo.borrow().get(&key) {
            return known;
        }
        let runs = self.any_call_in_body(function, |call| {
            self.forward_call(call).is_some()
                || (depth < 2 && self.calls_forward_helper(call, depth))
        });
        self.helper_forward_memo.borrow_mut().insert(key, runs);
        runs
    }

    /// `forecast_error(model, x)`: a call of one of the file's plain functions that runs a
    /// model.
    pub fn calls_forward_helper(&self, call: Node<'a>, depth: usize) -> bool {
        let Some(callee) = self.model.callee(call) else {
            return false;
        };
        if callee.kind_id() != KINDS.identifier {
            return false;
        }
        let name = self.text(callee);
        let Some(function) = self.model.function_nodes_named(name).next() else {
            return false;
        };
        self.runs_forward_at_depth(function, depth + 1)
    }
}

/// Module methods that run (part of) the model, as opposed to `parameters()`, `to()`, ....
pub fn is_forward_method(name: &str) -> bool {
    !matches!(
        name,
        "parameters"
            | "named_parameters"
            | "modules"
            | "named_modules"
            | "children"
            | "named_children"
            | "buffers"
            | "named_buffers"
            | "state_dict"
            | "load_state_dict"
            | "eval"
            | "train"
            | "to"
            | "cuda"
            | "cpu"
            | "float"
            | "double"
            | "half"
            | "bfloat16"
            | "zero_grad"
            | "requires_grad_"
            | "apply"
            | "register_buffer"
            | "register_parameter"
            | "register_module"
            | "add_module"
            | "save_pretrained"
            | "configure_optimizers"
            | "get_submodule"
            | "training_step"
            | "validation_step"
            | "test_step"
            | "predict_step"
            | "fit"
            | "log"
            | "log_dict"
    ) && !name.starts_with("register_")
        && !name.starts_with("on_")
        && !name.starts_with('_')
}

/// Method names that run a model whatever its class: `forward_features`, `val_step`,
/// `predict_proba`, `encode_image`, `extract_feat`. Not `generate` (Hugging Face's runs
/// without grad) nor getters.
fn runs_model_by_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "forward",
        "predict",
        "infer",
        "encode",
        "decode",
        "embed",
        "extract_feat",
    ]
    .iter()
    .any(|word| name.starts_with(word))
        || name.ends_with("_step") && name != "train_step" && name != "training_step"
}

/// Builtins that run no model.
const BUILTINS: &[&str] = &[
    "len",
    "range",
    "print",
    "isinstance",
    "getattr",
    "setattr",
    "hasattr",
    "int",
    "float",
    "str",
    "bool",
    "list",
    "dict",
    "tuple",
    "set",
    "zip",
    "enumerate",
    "sum",
    "min",
    "max",
    "abs",
    "round",
    "sorted",
    "reversed",
    "map",
    "filter",
    "any",
    "all",
    "iter",
    "next",
    "super",
    "type",
    "format",
    "open",
    "repr",
    "id",
    "hash",
    "divmod",
    "pow",
    "vars",
];

/// Methods of tensors, containers and strings that run no model.
const NOT_A_FORWARD: &[&str] = &[
    "view",
    "reshape",
    "permute",
    "transpose",
    "contiguous",
    "size",
    "dim",
    "unsqueeze",
    "squeeze",
    "expand",
    "repeat",
    "flatten",
    "chunk",
    "split",
    "append",
    "extend",
    "items",
    "keys",
    "values",
    "get",
    "update",
    "pop",
    "join",
    "format",
    "replace",
    "startswith",
    "endswith",
    "strip",
    "lower",
    "upper",
    "item",
    "tolist",
    "numpy",
    "detach",
    "clone",
    "sum",
    "mean",
    "max",
    "min",
    "argmax",
    "softmax",
    "log_softmax",
    "masked_fill",
    "float",
    "long",
    "int",
    "bool",
    "half",
    "type",
    "type_as",
    "new_zeros",
    "new_ones",
    "new_full",
    "fill_",
    "zero_",
    "copy_",
    "add",
    "mul",
    "div",
    "sub",
    "matmul",
    "bmm",
    "exp",
    "log",
    "sqrt",
    "pow",
    "abs",
    "clamp",
    "gather",
    "scatter",
    "index_select",
    "masked_select",
    "narrow",
    "select",
    "unbind",
    "stack",
    "cat",
    "where",
    "any",
    "all",
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "info",
    "warning",
    "debug",
    "error",
    "warn",
    "write",
    "read",
    "close",
    "numel",
    "nonzero",
    "cumsum",
    "norm",
    "std",
    "var",
    "float32",
    "bfloat16",
    "t",
];
