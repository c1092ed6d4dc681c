//! Value provenance: a light abstract interpretation of expressions. For any expression it
//! answers what the value is (tensor, numpy array, Python scalar, model, ...), whether it
//! carries an autograd graph, whether it lives on an accelerator, and whether it is float64.
//! Names are followed to the binding that reaches the use; calls to the file's own functions
//! are followed into their `return`s with the arguments' facts.

use crate::syntax::Node;
use serde::{Deserialize, Serialize};

use super::analysis::Analysis;
use super::facts::{Ask, module_facts};
use super::instances::ClassRef;
use super::scope::{BindingKind, ScopeKind, Site};
use crate::parse::{FIELDS, KINDS};

/// Yes, no, or can't tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub enum Tri {
    #[default]
    Unknown,
    No,
    Yes,
}

impl Tri {
    /// Yes if either is, no if both are, else unknown.
    pub fn or(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::Yes, _) | (_, Tri::Yes) => Tri::Yes,
            (Tri::No, Tri::No) => Tri::No,
            _ => Tri::Unknown,
        }
    }

    pub fn is_yes(self) -> bool {
        self == Tri::Yes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub enum Kind {
    #[default]
    Unknown,
    Tensor,
    Numpy,
    /// A NumPy random generator (`np.random.default_rng()`).
    Rng,
    /// A Python number, string or bool.
    Scalar,
    Module,
    /// A class whose instances are models (`Net`, `getattr(models, name)`): calling it
    /// makes a model.
    ModuleClass,
    /// An instance of an `nn.*Loss` class.
    LossModule,
    Optimizer,
    /// A list, tuple, dict or iterator.
    Container,
    /// A data loader.
    Loader,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub struct ValueFacts {
    pub kind: Kind,
    /// Carries an autograd graph (the output of recorded operations).
    pub graph: Tri,
    /// Lives on an accelerator (moved with `.to(device)`, `.cuda()`, made with `device=`).
    pub device: Tri,
    /// A float64 NumPy array or tensor.
    pub float64: bool,
    /// Computed by a loss function or criterion.
    pub loss: bool,
    /// A model put in eval mode in the same expression (`model.eval()`).
    pub eval_mode: bool,
    /// A model with weights loaded for use (`torch.jit.load(p)`, `from_pretrained(name)`).
    pub pretrained: bool,
    /// A NumPy array of a dtype the code does not set: pandas data (`df.x.values`), integers
    /// or float64 (pandas never makes float32 unasked), so float arithmetic makes float64.
    pub untyped: bool,
}

impl ValueFacts {
    pub(super) fn of(kind: Kind) -> Self {
        ValueFacts {
            kind,
            graph: if matches!(kind, Kind::Tensor | Kind::Unknown) {
                Tri::Unknown
            } else {
                Tri::No
            },
            device: Tri::Unknown,
            ..ValueFacts::default()
        }
    }

    fn scalar() -> Self {
        ValueFacts {
            kind: Kind::Scalar,
            graph: Tri::No,
            device: Tri::No,
            ..ValueFacts::default()
        }
    }

    fn tensor(graph: Tri, device: Tri, float64: bool) -> Self {
        ValueFacts {
            kind: Kind::Tensor,
            graph,
            device,
            float64,
            ..ValueFacts::default()
        }
    }

    /// The facts of a value combining both (arithmetic, concatenation).
    pub fn combine(self, other: ValueFacts) -> ValueFacts {
        let kind = match (self.kind, other.kind) {
            (Kind::Tensor, _) | (_, Kind::Tensor) => Kind::Tensor,
            (Kind::Numpy, _) | (_, Kind::Numpy) => Kind::Numpy,
            (Kind::Scalar, Kind::Scalar) => Kind::Scalar,
            (Kind::None, other) | (other, Kind::None) => other,
            (a, b) if a == b => a,
            _ => Kind::Unknown,
        };
        ValueFacts {
            kind,
            graph: combine_tri(self, other, |f| f.graph),
            device: combine_tri(self, other, |f| f.device),
            float64: self.float64 || other.float64,
            loss: self.loss || other.loss,
            eval_mode: false,
            pretrained: false,
            untyped: false,
        }
    }

    pub fn is_tensor(&self) -> bool {
        self.kind == Kind::Tensor
    }
}

/// Scalars and `None` carry no graph and live on no device; they do not make the combination
/// unknown.
fn combine_tri(a: ValueFacts, b: ValueFacts, field: impl Fn(ValueFacts) -> Tri) -> Tri {
    let neutral = |f: ValueFacts| matches!(f.kind, Kind::Scalar | Kind::None);
    match (neutral(a), neutral(b)) {
        (true, true) => Tri::No,
        (true, false) => field(b),
        (false, true) => field(a),
        (false, false) => field(a).or(field(b)),
    }
}

/// How deep calls into the file's own functions are followed.
const MAX_CALL_DEPTH: usize = 3;

/// Methods that return Python values or NumPy arrays: the graph is gone.
const TO_PYTHON: &[&str] = &["item", "tolist"];
/// Methods whose result carries no graph (integers, booleans, indices).
const NO_GRAPH_METHODS: &[&str] = &[
    "long",
    "int",
    "bool",
    "short",
    "byte",
    "argmax",
    "argmin",
    "argsort",
    "eq",
    "ne",
    "lt",
    "gt",
    "le",
    "ge",
    "isnan",
    "isinf",
    "isfinite",
    "nonzero",
    "sign",
    "floor_divide",
    "logical_and",
    "logical_or",
    "logical_not",
    "all",
    "any",
    "unique",
    "bincount",
];
/// Tensor methods whose result depends differentiably on their tensor arguments.
const ARITHMETIC_METHODS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "true_divide",
    "matmul",
    "mm",
    "bmm",
    "mv",
    "dot",
    "pow",
    "where",
    "masked_fill",
    "masked_scatter",
    "scatter",
    "scatter_add",
    "index_add",
    "index_put",
    "addmm",
    "addbmm",
    "baddbmm",
    "addcmul",
    "addcdiv",
    "lerp",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "atan2",
    "hypot",
    "cross",
    "outer",
    "kron",
    "copy_",
    "add_",
    "sub_",
    "mul_",
    "div_",
    "masked_fill_",
    "index_add_",
    "scatter_",
    "scatter_add_",
    "index_put_",
    "clamp",
    "clip",
];

/// Module methods that are not a forward pass.
const NON_FORWARD: &[&str] = &[
    "parameters",
    "named_parameters",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "buffers",
    "named_buffers",
    "state_dict",
    "load_state_dict",
    "eval",
    "train",
    "to",
    "cuda",
    "cpu",
    "float",
    "double",
    "half",
    "bfloat16",
    "zero_grad",
    "requires_grad_",
    "apply",
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_full_backward_pre_hook",
    "register_backward_hook",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "get_submodule",
    "get_parameter",
    "extra_repr",
    "share_memory",
    "save_pretrained",
    "from_pretrained",
    "configure_optimizers",
    "gradient_checkpointing_enable",
    "tie_weights",
    "resize_token_embeddings",
    // `nn.ModuleList` and `nn.ModuleDict` as containers.
    "append",
    "extend",
    "insert",
    "pop",
    "update",
    "keys",
    "values",
    "items",
    // A dict's, of a value only used like a module elsewhere (`ckpt.get("ema")` of a loaded
    // checkpoint whose model is later `ckpt.eval()`).
    "get",
];
/// Whether a module method is not a forward pass: the list above, and getters, setters and
/// the like by name.
pub fn is_non_forward_method(name: &str) -> bool {
    // `init_hidden` and its camelCase spelling `initHidden` alike.
    let camel_case = |prefix: &str| {
        let stem = prefix.trim_end_matches('_');
        !stem.is_empty()
            && name
                .strip_prefix(stem)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|first| first.is_ascii_uppercase())
    };
    NON_FORWARD.contains(&name)
        || [
            "get_",
            "set_",
            "named_",
            "register_",
            "to_",
            "init_",
            "reset_",
            "load_",
            "save_",
            "from_",
            "prepare_",
            "tie_",
            "resize_",
            "enable_",
            "disable_",
            "print_",
            "num_",
            "_",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix) || camel_case(prefix))
}

/// `torch.*` functions that only create tensors (no graph from their arguments).
const CREATION: &[&str] = &[
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "randperm",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "tensor",
    "as_tensor",
    "from_numpy",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "normal",
    "bernoulli",
    "multinomial",
    "meshgrid",
    "tril_indices",
    "triu_indices",
];
const NO_GRAPH_FUNCTIONS: &[&str] = &[
    "argmax",
    "argmin",
    "argsort",
    "eq",
    "ne",
    "lt",
    "gt",
    "le",
    "ge",
    "isnan",
    "isinf",
    "nonzero",
    "bucketize",
    "searchsorted",
    "bincount",
    "unique",
    "topk_indices",
];
const NUMPY_FLOAT_SOURCES: &[&str] = &[
    "zeros",
    "ones",
    "empty",
    "full",
    "linspace",
    "logspace",
    "random.rand",
    "random.randn",
    "random.random",
    "random.random_sample",
    "random.uniform",
    "random.normal",
    "random.standard_normal",
    "random.exponential",
    "random.gamma",
    "random.beta",
    "float64",
    "double",
    "loadtxt",
    "genfromtxt",
];
/// Methods of a NumPy `Generator` that draw floats.
const RNG_FLOATS: &[&str] = &[
    "random",
    "uniform",
    "normal",
    "standard_normal",
    "exponential",
    "gamma",
    "beta",
    "lognormal",
    "laplace",
    "logistic",
    "rand",
    "randn",
    "standard_exponential",
    "standard_gamma",
    "chisquare",
    "triangular",
];

impl<'a> Analysis<'a> {
    /// What is known about the value of an expression.
    pub fn facts(&self, node: Node<'a>) -> ValueFacts {
        self.facts_at_depth(node, 0, &[])
    }

    /// The facts of an expression if the `index`th parameter of `function` held a value with
    /// these facts (what a helper keeps when a caller passes it a graph-carrying tensor).
    pub fn facts_given_parameter(
        &self,
        node: Node<'a>,
        function: Node<'a>,
        index: u32,
        parameter: ValueFacts,
    ) -> ValueFacts {
        self.facts_at_depth(node, 0, &[(function.id(), index, parameter)])
    }

    fn facts_at_depth(
        &self,
        node: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        let memoize = arguments.is_empty();
        if memoize && let Some(facts) = self.values.borrow().get(&node.id()) {
            return *facts;
        }
        if !memoize
            && let Some(facts) = self
                .values_given
                .borrow()
                .get(&node.id())
                .and_then(|given| {
                    given
                        .iter()
                        .find(|(assumed, _)| assumed.as_slice() == arguments)
                        .map(|(_, facts)| *facts)
                })
        {
            return facts;
        }
        if self.in_progress.borrow().contains(&node.id()) || self.in_progress.borrow().len() > 64 {
            return ValueFacts::default();
        }
        self.in_progress.borrow_mut().push(node.id());
        let facts = self.compute(node, depth, arguments);
        self.in_progress.borrow_mut().pop();
        if memoize {
            self.values.borrow_mut().insert(node.id(), facts);
        } else {
            self.values_given
                .borrow_mut()
                .entry(node.id())
                .or_default()
                .push((arguments.to_vec(), facts));
        }
        facts
    }

    fn compute(
        &self,
        node: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        let sub = |child: Node<'a>| self.facts_at_depth(child, depth, arguments);
        let kind = node.kind_id();
        let k = &*KINDS;
        // A value the file uses as a model (`self.module.eval()`) is one, whatever the rest of
        // the analysis could not tell of where it comes from.
        let used_as_module = |facts: ValueFacts| {
            if facts.kind == Kind::Unknown && self.used_as_module(self.text(node)) {
                // Where it was moved (`Net().cuda()`) still holds.
                ValueFacts {
                    pretrained: self.assigned_from_pretrained(node),
                    device: facts.device,
                    ..ValueFacts::of(Kind::Module)
                }
            } else {
                facts
            }
        };
        if kind == k.identifier {
            return as_criterion(
                self.text(node),
                used_as_module(self.name_facts(node, depth, arguments)),
            );
        }
        if kind == k.call {
            return self.call_facts(node, depth, arguments);
        }
        if kind == k.attribute {
            let name = node
                .child_by_field_id(FIELDS.attribute)
                .map_or("", |attribute| self.text(attribute));
            return as_criterion(
                name,
                used_as_module(self.attribute_facts(node, depth, arguments)),
            );
        }
        if kind == k.subscript {
            if self.used_as_module(self.text(node)) {
                return ValueFacts::of(Kind::Module);
            }
            return node
                .child_by_field_id(FIELDS.value)
                .map(|value| {
                    let mut facts = sub(value);
                    if facts.kind == Kind::Container {
                        // An element of a container: what the container's elements are.
                        facts.kind = Kind::Unknown;
                        // Or what the class stores into it elsewhere: `self._features[k] =
                        // output` in a forward hook replaces the placeholders `__init__` made.
                        // (Stored by other methods: whatever this call passes.)
                        if let Some((device, graph)) = self.slot_facts(value, depth) {
                            facts.device = facts.device.or(device);
                            facts.graph = facts.graph.or(graph);
                        }
                    }
                    // `out["n_exs"]` of a model's output dict: a tensor only if the key names
                    // one (`out["loss"]`, `out["logits"]`); counts and flags are numbers. A
                    // batch a framework hands a hook holds the data's tensors by any name
                    // (`batch["segment"]`) beside its metadata (`batch["file_name"]`).
                    if facts.kind == Kind::Tensor
                        && let Some(key) = string_key(self, node)
                        && !names_a_tensor(key)
                        && (names_metadata(key) || !self.is_hook_batch(value))
                    {
                        facts = ValueFacts::default();
                    }
                    facts.eval_mode = false;
                    facts
                })
                .unwrap_or_default();
        }
        if kind == k.parenthesized_expression {
            return node.named_child(0).map(sub).unwrap_or_default();
        }
        if kind == k.integer || kind == k.float || kind == k.true_ || kind == k.false_ {
            return ValueFacts::scalar();
        }
        if kind == k.string || kind == k.concatenated_string {
            return ValueFacts::scalar();
        }
        if kind == k.none {
            return ValueFacts {
                kind: Kind::None,
                graph: Tri::No,
                device: Tri::No,
                ..ValueFacts::default()
            };
        }
        if kind == k.binary_operator || kind == k.boolean_operator {
            let left = node
                .child_by_field_id(FIELDS.left)
                .map(sub)
                .unwrap_or_default();
            let right = node
                .child_by_field_id(FIELDS.right)
                .map(sub)
                .unwrap_or_default();
            let mut combined = left.combine(right);
            // `(vx ** 2 + vy ** 2) ** 0.5`, `dx / n` of pandas data: integers or float64 in,
            // float64 out.
            if combined.kind == Kind::Numpy && (left.untyped || right.untyped) {
                let operator = node
                    .child_by_field_id(FIELDS.operator)
                    .map_or("", |o| self.text(o));
                // A float literal (`0.5`, `(1./2)`), not a float variable of unknown dtype.
                let float_operand = [FIELDS.left, FIELDS.right].into_iter().any(|field| {
                    node.child_by_field_id(field).is_some_and(|side| {
                        let text = self.text(side);
                        side.kind_id() == KINDS.float
                            || (text.contains('.') && !text.contains(|c: char| c.is_alphabetic()))
                    })
                });
                if operator == "/" || float_operand {
                    combined.float64 = true;
                }
                combined.untyped = !combined.float64;
            }
            return combined;
        }
        if kind == k.unary_operator {
            return node
                .child_by_field_id(FIELDS.argument)
                .map(sub)
                .unwrap_or_default();
        }
        if kind == k.not_operator {
            return ValueFacts::scalar();
        }
        if kind == k.comparison_operator {
            let mut combined = ValueFacts::scalar();
            let mut cursor = node.walk();
            for operand in node.named_children(&mut cursor) {
                combined = combined.combine(sub(operand));
            }
            combined.graph = Tri::No;
            combined.float64 = false;
            combined.loss = false;
            return combined;
        }
        if kind == k.conditional_expression {
            // `a if cond else b`: named children are a, cond, b.
            let first = node.named_child(0).map(sub).unwrap_or_default();
            let last = node.named_child(2).map(sub).unwrap_or_default();
            return match (first.kind, last.kind) {
                (Kind::None, _) => last,
                (_, Kind::None) => first,
                _ => first.combine(last),
            };
        }
        if kind == k.tuple || kind == k.list || kind == k.expression_list {
            let mut facts = ValueFacts {
                kind: Kind::Container,
                graph: Tri::No,
                device: Tri::No,
                ..ValueFacts::default()
            };
            let mut cursor = node.walk();
            for element in node.named_children(&mut cursor) {
                let element = sub(element);
                facts.graph = facts.graph.or(element.graph);
                facts.device = facts.device.or(element.device);
                facts.float64 |= element.float64;
            }
            return facts;
        }
        if kind == k.dictionary_comprehension || kind == k.list_comprehension {
            // The facts of the produced values.
            let body = node.child_by_field_id(FIELDS.body);
            let value = body.and_then(|body| {
                if body.kind() == "pair" {
                    body.child_by_field_id(FIELDS.value)
                } else {
                    Some(body)
                }
            });
            let element = value.map(sub).unwrap_or_default();
            return ValueFacts {
                kind: Kind::Container,
                ..element
            };
        }
        if kind == k.dictionary || kind == k.set {
            return ValueFacts::of(Kind::Container);
        }
        ValueFacts::default()
    }

    fn name_facts(
        &self,
        node: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        let name = self.text(node);
        let scope = self.scope_at(node);
        if name == "self" {
            return self.self_facts(node);
        }
        let Some((found_in, bindings)) = self.model.scopes.lookup(scope, name, node.start_byte())
        else {
            return ValueFacts::default();
        };
        // The binding that reaches the use: the last one before it in the same scope; from an
        // enclosing scope, the last one.
        let binding = if found_in == scope {
            bindings
                .iter()
                .rev()
                .find(|b| b.offset <= node.start_byte())
                .or(bindings.last())
        } else {
            // A global the same function assigns (`global model; model = load(p);
            // model = model.to(device)`): what it held before this use, in this function.
            let function = self.model.scopes.get(scope).range.clone();
            bindings
                .iter()
                .rev()
                .find(|b| function.contains(&b.offset) && b.offset <= node.start_byte())
                .or(bindings.last())
        };
        let Some(mut binding) = binding else {
            return ValueFacts::default();
        };
        // `else: crr = self.running_covar[:, 0]` under `if not self.training`, then a use
        // under `if self.training`: the value comes from an earlier binding that can run with
        // the use.
        if found_in == scope && bindings.len() > 1 {
            let function_start = self.model.scopes.get(scope).range.start;
            binding = self.feasible_binding(node, binding, bindings, name, function_start);
        }
        // `if output_file: outputs = outputs.cpu()`: moved to the host on one path only; on the
        // other the use sees what the name held before, on the device.
        if found_in == scope
            && let Some(before) = self.device_before_conditional_move(node, binding, bindings)
        {
            return before;
        }
        if let BindingKind::Import(qualified) = &binding.kind {
            // An imported class (`from models import Net`, then `cls = Net`): a model class
            // if the fact base says so. Modules and functions are not values rules ask about.
            let class = qualified
                .rsplit('.')
                .next()
                .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_uppercase()));
            if class && let Some(facts) = self.ask(Ask::Value(qualified.to_string())) {
                return facts;
            }
            return ValueFacts::default();
        }
        match binding.site {
            Site::Value { value, index, .. } => {
                let value_facts = match index.and_then(|i| element_of(value, i)) {
                    Some(element) => self.facts_at_depth(element, depth, arguments),
                    None => match (index, own_callee(self, value)) {
                        // `a, b = helper(...)`: the matching element of what it returns.
                        (Some(i), Some(callee)) => self
                            .own_function_call_element(value, callee, depth, Some(i))
                            .unwrap_or_else(|| {
                                element_facts(self.facts_at_depth(value, depth, arguments))
                            }),
                        (Some(i), None) => self.unpacked_element(value, i, depth, arguments),
                        (None, _) => self.facts_at_depth(value, depth, arguments),
                    },
                };
                // `outputs = []`, filled in a loop, then `torch.cat(outputs)`: a list of what
                // was appended, on the device when an item is.
                if index.is_none()
                    && value.kind_id() == KINDS.list
                    && value.named_child_count() == 0
                    && let Some(item) = self.appended_device_item(node, depth)
                {
                    return ValueFacts {
                        device: Tri::Yes,
                        float64: item.float64,
                        ..value_facts
                    };
                }
                if index.is_some() && names_indices(name) && value_facts.kind == Kind::Tensor {
                    // `x, indices = pool(x)` (`return_indices=True`), `vals, idx = out.topk(k)`:
                    // integer tensors never require grad, so they carry no graph.
                    return ValueFacts {
                        graph: Tri::No,
                        eval_mode: false,
                        ..value_facts
                    };
                }
                ValueFacts {
                    eval_mode: value_facts.eval_mode,
                    ..value_facts
                }
            }
            Site::Augmented(statement) => {
                let right = statement
                    .child_by_field_id(FIELDS.right)
                    .map(|right| self.facts_at_depth(right, depth, arguments))
                    .unwrap_or_default();
                // What the name held before the `+=`.
                let before = bindings
                    .iter()
                    .rev()
                    .find(|b| b.offset < statement.start_byte())
                    .and_then(|b| match b.site {
                        Site::Value {
                            value, index: None, ..
                        } => Some(self.facts_at_depth(value, depth, arguments)),
                        // `correct, total = torch.zeros(()), 0`
                        Site::Value {
                            value,
                            index: Some(i),
                            ..
                        } => element_of(value, i)
                            .map(|element| self.facts_at_depth(element, depth, arguments)),
                        _ => None,
                    })
                    .unwrap_or_default();
                before.combine(right)
            }
            Site::Loop { iterable, index } => self
                .row_facts(iterable, index, depth, arguments)
                .unwrap_or_else(|| self.loop_item_facts_given(iterable, depth, arguments)),
            Site::Parameter { function, index } => {
                if let Some((_, _, facts)) = arguments
                    .iter()
                    .find(|(id, i, _)| *id == function.id() && *i == index)
                {
                    return *facts;
                }
                self.parameter_facts(function, name, index)
            }
            Site::Opaque => {
                // `Net` itself, as a value (`cls = Net`, `Model = Net if a else Other`).
                if binding.kind == BindingKind::Definition
                    && let Some(index) = self.model.classes.iter().position(|c| c.name == name)
                    && self.modules().is_module_class(index)
                {
                    return ValueFacts::of(Kind::ModuleClass);
                }
                ValueFacts::default()
            }
        }
    }

    /// `model = model_class.from_pretrained(name)`, `self.model = cls.from_pretrained(name)
    /// .to(device)`: a value made by a `from_pretrained` of a class the file cannot resolve
    /// (taken from a table of model types) holds trained weights, once it is used as a model.
    fn assigned_from_pretrained(&self, node: Node<'a>) -> bool {
        let made_by_from_pretrained = |value: Node<'a>| {
            let mut value = value;
            for _ in 0..4 {
                if value.kind_id() != KINDS.call {
                    return false;
                }
                let name = super::training::callee_name(value, self.source);
                if name == "from_pretrained" {
                    return true;
                }
                // Through `.to(device)`, `.eval()`, `.cuda()`.
                match value
                    .child_by_field_id(FIELDS.function)
                    .filter(|callee| callee.kind_id() == KINDS.attribute)
                    .and_then(|callee| callee.child_by_field_id(FIELDS.object))
                {
                    Some(object) if matches!(name, "to" | "eval" | "cuda" | "half" | "float") => {
                        value = object;
                    }
                    _ => return false,
                }
            }
            false
        };
        if node.kind_id() == KINDS.identifier {
            return self.bound_value(node).is_some_and(made_by_from_pretrained);
        }
        if node.kind_id() == KINDS.attribute
            && node
                .child_by_field_id(FIELDS.object)
                .is_some_and(|object| self.text(object) == "self")
            && let Some(attribute) = node.child_by_field_id(FIELDS.attribute)
        {
            return self
                .self_assignments(self.text(attribute))
                .any(|assignment| match assignment.site {
                    Site::Value {
                        value, index: None, ..
                    } => made_by_from_pretrained(value),
                    _ => false,
                });
        }
        false
    }

    /// `self` inside a method: a model when the class is an `nn.Module`.
    fn self_facts(&self, node: Node<'a>) -> ValueFacts {
        let Some(class) = self.class_of(node) else {
            return ValueFacts::default();
        };
        if self.modules().is_module_class(class) {
            ValueFacts::of(Kind::Module)
        } else {
            ValueFacts::default()
        }
    }

    /// The binding of a plain name that reaches `node`: the last one before it, else the last
    /// one (a name assigned later in a loop, or in an enclosing scope).
    fn reaching_binding(&self, node: Node<'a>) -> Option<&super::scope::Binding<'a>> {
        if node.kind_id() != KINDS.identifier {
            return None;
        }
        let (_, bindings) =
            self.model
                .scopes
                .lookup(self.scope_at(node), self.text(node), node.start_byte())?;
        bindings
            .iter()
            .rev()
            .find(|b| b.offset <= node.start_byte())
            .or(bindings.last())
    }

    /// The last binding before `use_node` that is not in a branch excluding the use's.
    fn feasible_binding<'b>(
        &self,
        use_node: Node<'a>,
        last: &'b super::scope::Binding<'a>,
        bindings: &'b [super::scope::Binding<'a>],
        name: &str,
        function_start: usize,
    ) -> &'b super::scope::Binding<'a> {
        let statement = |binding: &super::scope::Binding<'a>| match binding.site {
            Site::Value { value, .. } => Some(value),
            Site::Augmented(statement) => Some(statement),
            _ => None,
        };
        let excluded = |binding: &super::scope::Binding<'a>| {
            statement(binding)
                .is_some_and(|node| self.exclusive_branches(node, use_node, name, function_start))
        };
        if !excluded(last) {
            return last;
        }
        bindings
            .iter()
            .rev()
            .filter(|binding| binding.offset < last.offset)
            .find(|binding| !excluded(binding))
            .unwrap_or(last)
    }

    /// The facts of the binding before `binding` when `binding` moves the name's value to the
    /// host inside an `if` (without `else`) that does not hold the use, and that earlier value
    /// is on the device: the path that skips the branch keeps it there.
    fn device_before_conditional_move(
        &self,
        use_node: Node<'a>,
        binding: &super::scope::Binding<'a>,
        bindings: &[super::scope::Binding<'a>],
    ) -> Option<ValueFacts> {
        let Site::Value {
            value,
            index: None,
            parent,
        } = binding.site
        else {
            return None;
        };
        if binding.offset > use_node.start_byte() {
            return None;
        }
        // Cheap test first: only a move to the host hides the earlier value's device.
        let moved = self.text(value);
        if ![".cpu()", ".numpy()", ".tolist()", ".item()"]
            .iter()
            .any(|host| moved.contains(host))
        {
            return None;
        }
        // The `if` around the assignment, below the innermost statement holding both.
        let mut branch = parent;
        loop {
            let kind = branch.kind_id();
            if branch.byte_range().contains(&use_node.start_byte())
                || kind == KINDS.function_definition
                || kind == KINDS.class_definition
            {
                return None;
            }
            if kind == KINDS.if_statement {
                break;
            }
            branch = branch.parent()?;
        }
        if branch.child_by_field_id(FIELDS.alternative).is_some() {
            return None;
        }
        let earlier = bindings
            .iter()
            .rev()
            .find(|b| b.offset < branch.start_byte())?;
        let Site::Value {
            value: before,
            index,
            ..
        } = earlier.site
        else {
            return None;
        };
        let facts = match index.and_then(|i| element_of(before, i)) {
            Some(element) => self.facts(element),
            None if index.is_none() => self.facts(before),
            None => return None,
        };
        (facts.device == Tri::Yes && self.facts(value).device == Tri::No).then_some(facts)
    }

    /// Whether a plain name's reaching binding is a parameter of its function.
    pub fn is_parameter(&self, node: Node<'a>) -> bool {
        self.reaching_binding(node)
            .is_some_and(|binding| matches!(binding.site, Site::Parameter { .. }))
    }

    /// The value last assigned to a plain name before `node` (`weights = [0.5, 1.5]`).
    pub fn bound_value(&self, node: Node<'a>) -> Option<Node<'a>> {
        match self.reaching_binding(node)?.site {
            Site::Value {
                value, index: None, ..
            } => Some(value),
            _ => None,
        }
    }

    /// The expression a name's reaching assignment gives it, for `a, b = x, y` the matching
    /// element (or the whole right-hand side when it is not a literal tuple).
    pub fn reaching_value(&self, node: Node<'a>) -> Option<Node<'a>> {
        match self.reaching_binding(node)?.site {
            Site::Value {
                value, index: None, ..
            } => Some(value),
            Site::Value {
                value,
                index: Some(i),
                ..
            } => Some(element_of(value, i).unwrap_or(value)),
            _ => None,
        }
    }

    /// The class whose method holds `node`.
    pub fn class_of(&self, node: Node<'_>) -> Option<usize> {
        let function = self.enclosing_function(node)?;
        let mut facts = self.model.function_facts(function)?;
        // Nested functions and lambdas inside a method see the method's class.
        let mut scope = self.scope_at(function);
        while facts.class.is_none() {
            let parent = self.model.scopes.get(scope).parent?;
            scope = parent;
            let outer = self.model.scopes.get(scope);
            if outer.kind != ScopeKind::Function {
                return None;
            }
            facts = self.model.function_facts(outer.node?)?;
        }
        facts.class
    }

    fn parameter_facts(&self, function: Node<'a>, name: &str, index: u32) -> ValueFacts {
        let facts = self.model.function_facts(function);
        let in_module_forward = facts.is_some_and(|f| {
            f.name == "forward" && f.class.is_some_and(|c| self.modules().is_module_class(c))
        });
        if in_module_forward && index > 0 && is_activation_parameter(function, index, name) {
            // Inputs of a forward pass are activations: they carry the graph in training.
            return ValueFacts::tensor(Tri::Yes, Tri::Unknown, false);
        }
        if looks_like_model(name) {
            return ValueFacts::of(Kind::Module);
        }
        if let Some(facts) = facts
            && facts.class.is_some()
            && let Some(of_framework_class) = self.receives_batch(function, name, index)
        {
            // A framework moved the batch to the model's device before calling the hook; a
            // class of the framework's runs where the framework puts it.
            let device = if of_framework_class || self.device_by_default() {
                Tri::Yes
            } else {
                Tri::Unknown
            };
            return ValueFacts::tensor(Tri::No, device, false);
        }
        ValueFacts::default()
    }

    /// Whether `receiver.method(...)` is called on `self` or an instance of one of the file's
    /// classes: what its members are, the file shows.
    /// A member the class only ever sets from a parameter (`self.loss = loss`), or never, is a
    /// callable passed in, like a submodule: not one the file shows.
    fn is_own_instance(&self, call: Node<'a>) -> bool {
        let Some(callee) = call.child_by_field_id(FIELDS.function) else {
            return false;
        };
        let Some(receiver) = callee.child_by_field_id(FIELDS.object) else {
            return false;
        };
        if self.text(receiver) != "self" {
            return matches!(
                self.instance_class(receiver),
                Some(super::instances::ClassRef::Local(_))
            );
        }
        let member = callee
            .child_by_field_id(FIELDS.attribute)
            .map_or("", |attribute| self.text(attribute));
        // Set nowhere in the file: by a base class elsewhere, which this file does not show.
        let passed_in = self
            .self_assignments(member)
            .all(|assignment| match assignment.site {
                Site::Value {
                    value, index: None, ..
                } => value.kind_id() == KINDS.identifier && self.is_parameter(value),
                _ => false,
            });
        !passed_in
    }

    /// Whether a name is the batch parameter of a framework's per-batch hook.
    fn is_hook_batch(&self, node: Node<'a>) -> bool {
        if node.kind_id() != KINDS.identifier {
            return false;
        }
        let name = self.text(node);
        let Some((_, bindings)) =
            self.model
                .scopes
                .lookup(self.scope_at(node), name, node.start_byte())
        else {
            return false;
        };
        bindings.iter().any(|binding| match binding.site {
            Site::Parameter { function, index } => {
                self.model.function_facts(function).is_some_and(|facts| {
                    facts.class.is_some() && self.receives_batch(function, name, index).is_some()
                })
            }
            _ => false,
        })
    }

    /// Whether the `index`th parameter (`name`) of a method a framework calls once per batch
    /// receives the batch or its outputs: named as in the framework's signature (any, for `*`),
    /// or the first after `self` of a hook with one such parameter, renamed
    /// (`training_step(self, b, i)`). `Some(true)`: the hook is known by its class's base.
    fn receives_batch(&self, function: Node<'a>, name: &str, index: u32) -> Option<bool> {
        let (listed, of_framework_class) = self.batch_hook_parameters(function)?;
        let receives = if listed.iter().any(|p| p == name || (p == "*" && index > 0)) {
            true
        } else if let [only] = listed {
            index == 1
                && !self
                    .parameter_names(function)
                    .iter()
                    .any(|(_, parameter)| parameter == only)
        } else {
            false
        };
        receives.then_some(of_framework_class)
    }

    /// A row of a tensor a loop iterates (`for row in out`, `for name, row in zip(names, out)`,
    /// `for i, row in enumerate(out)`): a view, which keeps the whole tensor's storage on its
    /// device. Through `zip` and `enumerate`, also an item of a list of device tensors.
    /// The device and graph of what the class's methods store into slots of `container`
    /// (`self.x[k] = v`), when it is an attribute of `self` that some method stores into.
    fn slot_facts(&self, container: Node<'a>, depth: usize) -> Option<(Tri, Tri)> {
        let text = self.text(container);

        if container.kind_id() != KINDS.attribute || !text.starts_with("self.") {
            return None;
        }
        let class = self.class_of(container)?;
        if let Some(known) = self.slot_memo.borrow().get(&(class, text)) {
            return Some(*known);
        }
        // Stores that read the container (`self.cores[i] = f(self.cores[i])`) see the
        // neutral answer while this one is worked out.
        self.slot_memo
            .borrow_mut()
            .insert((class, text), (Tri::No, Tri::No));
        let range = self.model.classes[class].node.byte_range();
        let mut found = None;
        for node in self
            .model
            .subscript_stores_in(range)
            .iter()
            .filter(|node| node.kind_id() == KINDS.assignment)
        {
            let Some(left) = node.child_by_field_id(FIELDS.left) else {
                continue;
            };
            let (Some(target), Some(right)) = (
                left.child_by_field_id(FIELDS.value),
                node.child_by_field_id(FIELDS.right),
            ) else {
                continue;
            };
            if self.text(target) != text {
                continue;
            }
            let stored = self.facts_at_depth(right, depth, &[]);
            let (device, graph) = found.unwrap_or((Tri::No, Tri::No));
            found = Some((device.or(stored.device), graph.or(stored.graph)));
        }
        match found {
            Some(facts) => {
                self.slot_memo.borrow_mut().insert((class, text), facts);
                Some(facts)
            }
            None => {
                self.slot_memo.borrow_mut().remove(&(class, text));
                None
            }
        }
    }

    fn row_facts(
        &self,
        iterable: Node<'a>,
        index: Option<u32>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> Option<ValueFacts> {
        let mut inner = iterable;
        if iterable.kind_id() == KINDS.call
            && let Some(callee) = iterable.child_by_field_id(FIELDS.function)
            && callee.kind_id() == KINDS.identifier
        {
            let list = iterable.child_by_field_id(FIELDS.arguments)?;
            inner = match (self.text(callee), index) {
                ("zip", Some(i)) => list.named_child(i)?,
                ("enumerate", Some(1)) => list.named_child(0)?,
                _ => return None,
            };
            if inner.kind_id() == KINDS.keyword_argument {
                return None;
            }
        } else if index.is_some() {
            // `for a, b in out`: rows unpacked, not rows.
            return None;
        }
        let facts = self.facts_at_depth(inner, depth, arguments);
        // `for i, f in enumerate(features)` over a list of device (or host) tensors: an item
        // of it, as `for f in features` gives.
        if facts.kind == Kind::Container && facts.device != Tri::Unknown && inner != iterable {
            return Some(element_facts(facts));
        }
        (facts.kind == Kind::Tensor).then_some(ValueFacts {
            eval_mode: false,
            ..facts
        })
    }

    /// An item of `for x in iterable`.
    /// An item of a list the function started empty and filled with `outputs.append(y)` before
    /// the loop over it: what was appended, when that is a device tensor.
    fn appended_item_facts(&self, iterable: Node<'a>, depth: usize) -> Option<ValueFacts> {
        let list = self.unwrapped_iterable(iterable, false);
        if list.kind_id() != KINDS.identifier {
            return None;
        }
        let (_, bindings) =
            self.model
                .scopes
                .lookup(self.scope_at(list), self.text(list), list.start_byte())?;
        // Started empty: a list built some other way holds something else.
        let [binding] = bindings else {
            return None;
        };
        let Site::Value {
            value, index: None, ..
        } = binding.site
        else {
            return None;
        };
        if value.kind_id() != KINDS.list || value.named_child_count() != 0 {
            return None;
        }
        self.appended_device_item(list, depth)
    }

    /// The facts of the first device tensor appended to a list before this use of its name.
    fn appended_device_item(&self, list: Node<'a>, depth: usize) -> Option<ValueFacts> {
        self.earlier_appends(list).find_map(|append| {
            let item = append.child_by_field_id(FIELDS.arguments)?.named_child(0)?;
            let facts = self.facts_at_depth(item, depth, &[]);
            (facts.kind == Kind::Tensor && facts.device == Tri::Yes).then_some(ValueFacts {
                eval_mode: false,
                ..facts
            })
        })
    }

    /// The `name.append(...)` calls on the variable a name (`list`) refers to, before it.
    pub fn earlier_appends(&self, list: Node<'a>) -> impl Iterator<Item = Node<'a>> + '_ {
        let name = self.text(list);
        let scope = self
            .model
            .scopes
            .lookup(self.scope_at(list), name, list.start_byte())
            .map(|(scope, _)| scope);
        self.model
            .calls_by_name
            .get("append")
            .into_iter()
            .flatten()
            .copied()
            .filter(move |append| {
                scope.is_some()
                    && append.end_byte() <= list.start_byte()
                    && append
                        .child_by_field_id(FIELDS.function)
                        .and_then(|callee| callee.child_by_field_id(FIELDS.object))
                        .is_some_and(|receiver| {
                            receiver.kind_id() == KINDS.identifier
                                && self.text(receiver) == name
                                && self
                                    .model
                                    .scopes
                                    .lookup(self.scope_at(receiver), name, receiver.start_byte())
                                    .map(|(same, _)| same)
                                    == scope
                        })
            })
    }

    fn loop_item_facts_given(
        &self,
        iterable: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        // `for v in losses`, `for i, v in enumerate(losses)` over graph-carrying tensors (a
        // helper's parameter bound to what its caller passes).
        if !arguments.is_empty() {
            let mut inner = iterable;
            if inner.kind_id() == KINDS.call
                && let Some(callee) = inner.child_by_field_id(FIELDS.function)
                && matches!(self.text(callee), "enumerate" | "zip" | "reversed")
                && let Some(first) = inner
                    .child_by_field_id(FIELDS.arguments)
                    .and_then(|a| a.named_child(0))
            {
                inner = first;
            }
            let facts = self.facts_at_depth(inner, depth, arguments);
            if facts.graph == Tri::Yes && matches!(facts.kind, Kind::Tensor | Kind::Container) {
                return ValueFacts::tensor(Tri::Yes, facts.device, facts.float64);
            }
        }
        let iterable_facts = self.facts(iterable);
        if iterable_facts.kind == Kind::Module {
            // `for layer in self.layers` over an `nn.ModuleList`.
            return ValueFacts::of(Kind::Module);
        }
        if iterable_facts.kind == Kind::Container && iterable_facts.device == Tri::Yes {
            // `for b in batches` of a list that holds device tensors (`batch = [batch]`): an
            // item of unknown shape on that device.
            return element_facts(iterable_facts);
        }
        if let Some(item) = self.appended_item_facts(iterable, depth) {
            return item;
        }
        let text = self.text(iterable);
        let loader = self.loader_facts(iterable);
        if loader.kind == Kind::Loader || super::training::iterates_batches(text) {
            // Batches from a data loader: CPU tensors (or structures of them), unless the
            // loader puts them on the accelerator (`accelerator.prepare(loader)`, fastai's).
            let device = if loader.kind == Kind::Loader && loader.device == Tri::Yes {
                Tri::Yes
            } else {
                Tri::No
            };
            return ValueFacts::tensor(Tri::No, device, false);
        }
        // `for name, out in model(x).items()`: the outputs of a model returning a dict.
        if iterable.kind_id() == KINDS.call
            && let Some(callee) = iterable.child_by_field_id(FIELDS.function)
            && callee.kind_id() == KINDS.attribute
            && let Some(object) = callee.child_by_field_id(FIELDS.object)
            && matches!(
                callee
                    .child_by_field_id(FIELDS.attribute)
                    .map(|a| self.text(a)),
                Some("items" | "values")
            )
        {
            let object = self.facts(object);
            if object.kind == Kind::Tensor
                || (object.kind == Kind::Container && object.device == Tri::Yes)
            {
                return ValueFacts {
                    kind: Kind::Tensor,
                    ..object
                };
            }
        }
        if text.starts_with("range(") || text.starts_with("enumerate(range") {
            return ValueFacts::scalar();
        }
        ValueFacts::default()
    }

    /// Whether a `for` loop's iterable gives batches: named like a loader (`train_loader`,
    /// `tqdm(val_dl)`), known to be one (`dls.valid` of fastai's `DataLoaders`), or the start
    /// of each batch (`range(0, len(sentences), batch_size)`).
    pub fn iterates_batches(&self, iterable: Node<'a>) -> bool {
        super::training::iterates_batches(self.text(iterable))
            || (super::training::steps_by_batch(
                self.bound_value(iterable).unwrap_or(iterable),
                self.source,
            ) && self.slices_at_loop_variable(iterable))
            || self.loader_facts(iterable).kind == Kind::Loader
    }

    /// Whether the loop over `iterable` slices data from its variable on (`xs[i : i + bs]`):
    /// a loop of batch starts that makes the batches, not one that only sets up a slot per
    /// batch (`self.state[i] = torch.zeros(...)`).
    fn slices_at_loop_variable(&self, iterable: Node<'a>) -> bool {
        let Some(parent) = iterable.parent() else {
            return false;
        };
        let (Some(variable), Some(body)) = (
            parent.child_by_field_id(FIELDS.left),
            parent
                .child_by_field_id(FIELDS.body)
                .or_else(|| parent.parent()),
        ) else {
            return false;
        };
        let variable = self.text(variable);
        let body = self.text(body);
        let mut rest = body;
        while let Some(at) = rest.find('[') {
            rest = &rest[at + 1..];
            if let Some(start) = rest.trim_start().strip_prefix(variable)
                && start.trim_start().starts_with(':')
            {
                return true;
            }
        }
        false
    }

    /// What a `for` loop iterates, under the wrappers that pass its items on:
    /// `enumerate(loader)`, `tqdm(loader, desc=...)`, `iter(loader)`.
    fn loader_facts(&self, iterable: Node<'a>) -> ValueFacts {
        self.facts(self.unwrapped_iterable(iterable, true))
    }

    /// The iterable under the wrappers that pass its items on: `tqdm(loader, desc=...)`,
    /// `iter(loader)`, and `enumerate(loader)` when `enumerate` counts (its items are pairs).
    pub fn unwrapped_iterable(&self, iterable: Node<'a>, enumerate: bool) -> Node<'a> {
        let mut node = iterable;
        for _ in 0..4 {
            let Some(callee) = node
                .child_by_field_id(FIELDS.function)
                .filter(|_| node.kind_id() == KINDS.call)
            else {
                break;
            };
            let last = callee.child_by_field_id(FIELDS.attribute).unwrap_or(callee);
            match self.text(last) {
                "tqdm" | "iter" | "trange" | "track" => {}
                "enumerate" if enumerate => {}
                _ => break,
            }
            match node
                .child_by_field_id(FIELDS.arguments)
                .and_then(|a| a.named_child(0))
            {
                Some(first) if first.kind_id() != KINDS.keyword_argument => node = first,
                _ => break,
            }
        }
        node
    }

    /// The `index`th element of what a call returns, unpacked (`a, b = f(x)`): the matching
    /// argument of a call that places its arguments on the accelerator, the matching element
    /// of what a method of the class returns (`pred, y = self.shared_step(batch)`), else an
    /// element of the call's value.
    fn unpacked_element(
        &self,
        call: Node<'a>,
        index: u32,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        self.placed_argument(call, index, depth, arguments)
            .or_else(|| self.own_method_call_element(call, index, depth))
            .unwrap_or_else(|| element_facts(self.facts_at_depth(call, depth, arguments)))
    }

    /// `self.method(...)`, a method of the file's classes: the `index`th element of what it
    /// returns, given the call's arguments.
    fn own_method_call_element(
        &self,
        call: Node<'a>,
        index: u32,
        depth: usize,
    ) -> Option<ValueFacts> {
        if call.kind_id() != KINDS.call {
            return None;
        }
        let callee = call.child_by_field_id(FIELDS.function)?;
        if callee.kind_id() != KINDS.attribute
            || self.text(callee.child_by_field_id(FIELDS.object)?) != "self"
        {
            return None;
        }
        let method = self.text(callee.child_by_field_id(FIELDS.attribute)?);
        self.own_method_call(call, method, depth, Some(index))
    }

    /// The `index`th argument of a call that returns its arguments placed on the accelerator
    /// (`model, opt, loader = accelerator.prepare(model, opt, loader)`), as placed there.
    fn placed_argument(
        &self,
        call: Node<'a>,
        index: u32,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> Option<ValueFacts> {
        if call.kind_id() != KINDS.call {
            return None;
        }
        let callee = call.child_by_field_id(FIELDS.function)?;
        let method = self.text(callee.child_by_field_id(FIELDS.attribute)?);
        // The name first: resolving the receiver's class costs more.
        if !self.frameworks.may_place_on_device(method) {
            return None;
        }
        let receiver = callee.child_by_field_id(FIELDS.object)?;
        let super::instances::ClassRef::Imported(class) = self.instance_class(receiver)? else {
            return None;
        };
        if !self
            .frameworks
            .places_on_device(&format!("{class}.{method}"))
        {
            return None;
        }
        let call_arguments = call.child_by_field_id(FIELDS.arguments)?;
        let mut cursor = call_arguments.walk();
        let argument = call_arguments
            .named_children(&mut cursor)
            .filter(|a| a.kind_id() != KINDS.keyword_argument)
            .nth(index as usize)?;
        let facts = self.facts_at_depth(argument, depth, arguments);
        let kind = if facts.kind == Kind::Unknown
            && super::training::iterates_batches(self.text(argument))
        {
            Kind::Loader
        } else {
            facts.kind
        };
        Some(ValueFacts {
            kind,
            device: Tri::Yes,
            ..facts
        })
    }

    fn attribute_facts(
        &self,
        node: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        let (Some(object), Some(attribute)) = (
            node.child_by_field_id(FIELDS.object),
            node.child_by_field_id(FIELDS.attribute),
        ) else {
            return ValueFacts::default();
        };
        let attribute = self.text(attribute);
        match attribute {
            // `df.x.values`: a pandas column as NumPy, of the data's dtype.
            "values" => {
                let object = self.facts_at_depth(object, depth, arguments);
                if matches!(object.kind, Kind::Unknown | Kind::Container) {
                    return ValueFacts {
                        kind: Kind::Numpy,
                        graph: Tri::No,
                        device: Tri::No,
                        untyped: true,
                        ..ValueFacts::default()
                    };
                }
            }
            "data" | "grad" => {
                let object = self.facts_at_depth(object, depth, arguments);
                return ValueFacts {
                    graph: Tri::No,
                    eval_mode: false,
                    ..object
                };
            }
            "shape" | "dtype" | "ndim" | "is_cuda" | "requires_grad" | "training" => {
                return ValueFacts::scalar();
            }
            "device" => return ValueFacts::scalar(),
            "T" | "mT" | "real" | "imag" => return self.facts_at_depth(object, depth, arguments),
            "weight" | "bias" => {
                return ValueFacts::tensor(Tri::Unknown, Tri::Unknown, false);
            }
            _ => {}
        }
        if self.text(object) == "self" {
            // A method's name (`self.get_batch`), unless the class assigns it a value
            // (`self._model = model`: private by name, a model all the same).
            if is_non_forward_method(attribute) && self.self_assignments(attribute).next().is_none()
            {
                return ValueFacts::default();
            }
            return self.self_attribute_facts(node, attribute, depth);
        }
        let object_facts = self.facts_at_depth(object, depth, arguments);
        if object_facts.kind == Kind::Tensor
            && !is_tensor_property(attribute)
            && self.reaching_value(object).unwrap_or(object).kind_id() == KINDS.call
        {
            // `outputs.logits`, `model(x).last_hidden_state`: a field of what a call returned,
            // a model's output structure (a tensor has no other attributes), holding what the
            // output holds. Not a parameter's (`input.sparity` of a sparse tensor type).
            return ValueFacts {
                eval_mode: false,
                ..object_facts
            };
        }
        if object_facts.kind == Kind::Loader && is_split_loader(attribute) {
            // `dls.valid`, `data.train_dl`: one loader of a collection of them (fastai's).
            return object_facts;
        }
        if object_facts.kind == Kind::Module
            && !is_non_forward_method(attribute)
            && self.member_runs_forward(attribute)
        {
            // A submodule (`model.encoder`) or a method that runs the model (`model.decode`).
            return ValueFacts {
                eval_mode: false,
                ..object_facts
            };
        }
        // `wrapper.model` of a class that keeps a model (`class CLIPModel: ... self.model =
        // from_pretrained(...)`), in this file or another of the run.
        if depth < MAX_CALL_DEPTH
            && let Some(class) = self.instance_class(object)
            && let Some(kept) = self.kept_by(class, node, attribute, depth)
            && kept.kind == Kind::Module
        {
            return kept;
        }
        ValueFacts::default()
    }

    /// What instances of a class keep in `attribute`: the file's own class's assignments, or
    /// another file's class's summary.
    fn kept_by(
        &self,
        class: ClassRef,
        node: Node<'a>,
        attribute: &str,
        depth: usize,
    ) -> Option<ValueFacts> {
        match class {
            ClassRef::Local(class) => {
                let facts = self.class_attribute_facts(class, node, attribute, depth + 1);
                (facts.kind != Kind::Unknown).then_some(facts)
            }
            ClassRef::Imported(class) => self.ask(Ask::Attribute(format!("{class}.{attribute}"))),
        }
    }

    /// The models a class keeps on `self`, by attribute (for its summary).
    pub(super) fn kept_models(&self, class: usize) -> Vec<(String, ValueFacts)> {
        let class_node = self.model.classes[class].node;
        let mut kept: Vec<(String, ValueFacts)> = Vec::new();
        for assignment in &self.model.attribute_assignments {
            if assignment.object != "self"
                || !class_node
                    .byte_range()
                    .contains(&assignment.node.start_byte())
                || kept.iter().any(|(name, _)| name == assignment.attribute)
            {
                continue;
            }
            let facts = self.self_attribute_facts(assignment.node, assignment.attribute, 0);
            if facts.kind == Kind::Module {
                kept.push((assignment.attribute.to_owned(), facts));
            }
        }
        kept.sort_by(|a, b| a.0.cmp(&b.0));
        kept
    }

    /// `self.attr`: what the class assigns to it (in `__init__` or any method).
    fn self_attribute_facts(&self, node: Node<'a>, attribute: &str, depth: usize) -> ValueFacts {
        let Some(class) = self.class_of(node) else {
            return ValueFacts::default();
        };
        self.class_attribute_facts(class, node, attribute, depth)
    }

    /// What a class (or a base it inherits from) keeps in `self.attribute`, not counting the
    /// value at `node` itself.
    fn class_attribute_facts(
        &self,
        class: usize,
        node: Node<'a>,
        attribute: &str,
        depth: usize,
    ) -> ValueFacts {
        let class_node = self.model.classes[class].node;
        let mut facts: Option<ValueFacts> = None;
        // Every assignment so far gave a parameter the file cannot tell.
        let mut only_unknown_given = true;
        for assignment in self.self_assignments(attribute) {
            if !class_node
                .byte_range()
                .contains(&assignment.node.start_byte())
            {
                continue;
            }
            let given;
            let value_facts = match assignment.site {
                Site::Value { value, index, .. } => {
                    let element = index.and_then(|i| element_of(value, i));
                    let target = element.unwrap_or(value);
                    if target.id() == node.id() {
                        continue;
                    }
                    given = index.is_none() && self.is_parameter(target);
                    // `self.net, other = build(cfg)`: an element of what the call returns.
                    match (index, element) {
                        (Some(i), None) => self.unpacked_element(target, i, depth, &[]),
                        _ => self.facts_at_depth(target, depth, &[]),
                    }
                }
                _ => continue,
            };
            // `self.net = net` (a parameter the file cannot tell), then `self.net =
            // self.net.to(device).eval()`: what the class shows it holds.
            let unknown_given = given && value_facts.kind == Kind::Unknown;
            facts = Some(match facts {
                None => value_facts,
                Some(previous) if previous.kind == Kind::None || only_unknown_given => value_facts,
                Some(previous) if value_facts.kind == Kind::None || unknown_given => previous,
                Some(previous) => ValueFacts {
                    eval_mode: previous.eval_mode || value_facts.eval_mode,
                    ..previous.combine(value_facts)
                },
            });
            only_unknown_given &= unknown_given;
        }
        if let Some(facts) = facts
            && facts.kind != Kind::Unknown
        {
            return facts;
        }
        // Kept by a base class, of this file or another of the run (`self.denoiser` of a
        // `Sampler`).
        if facts.is_none()
            && depth < MAX_CALL_DEPTH
            && let Some(kept) = self.model.classes[class].bases.iter().find_map(|base| {
                match self.class_named_by(*base)? {
                    ClassRef::Local(local) if local == class => None,
                    base => self.kept_by(base, node, attribute, depth),
                }
            })
        {
            return kept;
        }
        // Submodules registered without a visible assignment, by name; or handed to the
        // constructor (`self.rnn = rnn_layer`) and run by the class's `forward`.
        if self.modules().is_module_class(class)
            && (looks_like_model(attribute)
                || (self.assigned_from_parameter(class_node, attribute)
                    && self.forward_calls(class, attribute)))
        {
            return ValueFacts::of(Kind::Module);
        }
        facts.unwrap_or_default()
    }

    /// Whether the class assigns `self.<attribute>` a parameter of the method it is in
    /// (`self.rnn = rnn_layer` in `__init__`).
    fn assigned_from_parameter(&self, class_node: Node<'a>, attribute: &str) -> bool {
        self.self_assignments(attribute).any(|assignment| {
            let Site::Value {
                value, index: None, ..
            } = assignment.site
            else {
                return false;
            };
            class_node.byte_range().contains(&value.start_byte())
                && value.kind_id() == KINDS.identifier
                && self
                    .model
                    .scopes
                    .lookup(self.scope_at(value), self.text(value), value.start_byte())
                    .is_some_and(|(_, bindings)| {
                        bindings
                            .iter()
                            .any(|b| matches!(b.site, Site::Parameter { .. }))
                    })
        })
    }

    /// Whether the `forward` of the file's class `class` calls `self.<attribute>(...)`.
    fn forward_calls(&self, class: usize, attribute: &str) -> bool {
        let Some(forward) = self.local_method(class, "forward") else {
            return false;
        };
        let range = forward.byte_range();
        self.model
            .calls_by_name
            .get(attribute)
            .is_some_and(|calls| {
                calls.iter().any(|call| {
                    range.contains(&call.start_byte())
                        && call
                            .child_by_field_id(FIELDS.function)
                            .and_then(|callee| callee.child_by_field_id(FIELDS.object))
                            .is_some_and(|object| self.text(object) == "self")
                })
            })
    }

    fn call_facts(
        &self,
        node: Node<'a>,
        depth: usize,
        arguments: &[(usize, u32, ValueFacts)],
    ) -> ValueFacts {
        let Some(callee) = node.child_by_field_id(FIELDS.function) else {
            return ValueFacts::default();
        };
        let args = node.child_by_field_id(FIELDS.arguments);
        let argument_facts = || -> Vec<ValueFacts> {
            let Some(args) = args else {
                return Vec::new();
            };
            let mut cursor = args.walk();
            let children: Vec<Node<'a>> = args
                .named_children(&mut cursor)
                .map(|argument| {
                    let kind = argument.kind_id();
                    if kind == KINDS.keyword_argument {
                        argument.child_by_field_id(FIELDS.value).unwrap_or(argument)
                    } else if kind == KINDS.list_splat || kind == KINDS.dictionary_splat {
                        argument.named_child(0).unwrap_or(argument)
                    } else {
                        argument
                    }
                })
                .collect();
            children
                .into_iter()
                .map(|argument| self.facts_at_depth(argument, depth, arguments))
                .collect()
        };
        let combine_arguments = || {
            argument_facts()
                .into_iter()
                .fold(ValueFacts::scalar(), ValueFacts::combine)
        };

        if callee.kind_id() == KINDS.attribute {
            let (Some(receiver), Some(method)) = (
                callee.child_by_field_id(FIELDS.object),
                callee.child_by_field_id(FIELDS.attribute),
            ) else {
                return ValueFacts::default();
            };
            let method = self.text(method);
            // `accelerator.gather_for_metrics(loss)`: the argument's tensors from every
            // process, on the device they were on (no graph: collectives record none).
            if self.frameworks.gathers(method)
                && let Some(first) = args.and_then(|a| a.named_child(0))
                && first.kind_id() != KINDS.keyword_argument
            {
                let facts = self.facts_at_depth(first, depth, arguments);
                if matches!(facts.kind, Kind::Tensor | Kind::Container) {
                    return ValueFacts {
                        graph: Tri::No,
                        ..facts
                    };
                }
            }
            // Library functions first (`torch.zeros`, `np.random.rand`, `F.mse_loss`).
            if let Some(name) = self.qualified_name(callee) {
                if let Some(facts) = self.library_call(node, &name, &combine_arguments) {
                    return facts;
                }
                // `models.resnet50()`, `utils.build_model(cfg)`: a library's or another
                // file's function.
                if let Some(facts) = self.ask(Ask::Call(name.clone())) {
                    return self.at_call_site(node, facts);
                }
                if let Some(facts) = self.holder_facts(&name, &argument_facts) {
                    return facts;
                }
            }
            // `self.model(x)`, `self.criterion(out, y)`: the attribute is itself a model.
            let callee_facts = self.facts_at_depth(callee, depth, arguments);
            if matches!(callee_facts.kind, Kind::Module | Kind::LossModule) {
                return self.forward_facts(node, callee_facts, &combine_arguments);
            }
            if callee_facts.kind == Kind::ModuleClass {
                return module_facts(Kind::Module);
            }
            // `loader = accelerator.prepare(loader)`: the argument, now on the accelerator.
            if args.is_some_and(|a| a.named_child_count() == 1)
                && let Some(facts) = self.placed_argument(node, 0, depth, arguments)
            {
                return facts;
            }
            let receiver_facts = self.facts_at_depth(receiver, depth, arguments);
            // A method of a class the file or the project defines (`trainer.train_step(x)`),
            // unless it runs the model itself (`model.encoder(x)`, left to the forward pass).
            if matches!(receiver_facts.kind, Kind::Unknown | Kind::Module)
                && depth < MAX_CALL_DEPTH
                && let Some(facts) = self.instance_method_call(node, receiver, method, depth)
            {
                return facts;
            }
            return self.method_facts(node, receiver_facts, method, &combine_arguments, depth);
        }

        // A plain name: a library function, one of the file's functions or classes, or a
        // model instance.
        if let Some(name) = self.qualified_name(callee) {
            if let Some(facts) = self.library_call(node, &name, &combine_arguments) {
                return facts;
            }
            // `SeqNet(cfg)` with `SeqNet` imported: another file's class or function. Names
            // without a dot are builtins (or this file's own), which the fact base never holds.
            // A bare name through one of several star imports.
            let name = if name.contains('.') {
                Some(name)
            } else {
                self.star_imported(&name)
            };
            if let Some(name) = name {
                if let Some(facts) = self.ask(Ask::Call(name.clone())) {
                    return self.at_call_site(node, facts);
                }
                if let Some(facts) = self.holder_facts(&name, &argument_facts) {
                    return facts;
                }
            }
        }
        let callee_name = self.text(callee);
        if callee_name == "self" {
            return self.forward_facts(node, ValueFacts::of(Kind::Module), &combine_arguments);
        }
        if callee.kind_id() == KINDS.identifier {
            if let Some(class) = self.model.class_named(callee_name) {
                let index = self
                    .model
                    .classes
                    .iter()
                    .position(|c| c.node.id() == class.node.id())
                    .unwrap_or(0);
                return if self.modules().is_module_class(index) {
                    // `class FocalLoss(nn.Module)`: a criterion, not a model.
                    let kind = if callee_name.ends_with("Loss") {
                        Kind::LossModule
                    } else {
                        Kind::Module
                    };
                    ValueFacts {
                        device: Tri::No,
                        ..ValueFacts::of(kind)
                    }
                } else {
                    held_by_instance(&argument_facts()).unwrap_or_default()
                };
            }
            let callee_facts = self.facts_at_depth(callee, depth, arguments);
            if matches!(callee_facts.kind, Kind::Module | Kind::LossModule) {
                return self.forward_facts(node, callee_facts, &combine_arguments);
            }
            if callee_facts.kind == Kind::ModuleClass {
                return module_facts(Kind::Module);
            }
            if let Some(facts) = self.own_function_call(node, callee_name, depth) {
                return facts;
            }
            return ValueFacts::default();
        }
        let callee_facts = self.facts_at_depth(callee, depth, arguments);
        if matches!(callee_facts.kind, Kind::Module | Kind::LossModule) {
            return self.forward_facts(node, callee_facts, &combine_arguments);
        }
        ValueFacts::default()
    }

    /// `NamedTensor.new_like(prediction, other)` of another file: when the name makes an
    /// instance of one of the run's classes that is no model, what it is given.
    fn holder_facts(
        &self,
        name: &str,
        argument_facts: &dyn Fn() -> Vec<ValueFacts>,
    ) -> Option<ValueFacts> {
        // A class, or a function of one, by its CapWords segment (`NamedTensor(...)`,
        // `NamedTensor.new_like(...)`): asked only of those, as every library call comes here.
        // Then the name: the arguments' facts cost more.
        if !name
            .split('.')
            .any(|segment| segment.starts_with(|c: char| c.is_ascii_uppercase()))
        {
            return None;
        }
        self.ask(Ask::Instance(name.to_owned()))?;
        held_by_instance(&argument_facts())
    }

    /// Calling a model (`model(x)`) or a loss module (`criterion(out, y)`).
    fn forward_facts(
        &self,
        call: Node<'a>,
        module: ValueFacts,
        combine_arguments: &dyn Fn() -> ValueFacts,
    ) -> ValueFacts {
        let inputs = combine_arguments();
        if module.kind == Kind::LossModule {
            return ValueFacts {
                kind: Kind::Tensor,
                loss: true,
                float64: inputs.float64,
                graph: inputs.graph,
                device: inputs.device,
                eval_mode: false,
                pretrained: false,
                untyped: false,
            };
        }
        let recording = self.grad().mode_at(call.start_byte()).may_record()
            && !self
                .model
                .callee(call)
                .is_some_and(|callee| self.forward_disables_grad(callee));
        let mut device = module.device.or(inputs.device);
        if device == Tri::Unknown && self.device_by_default() {
            // A script that picks a GPU runs its models there.
            device = Tri::Yes;
        }
        // A frozen model's own weights record nothing: a graph comes only from its inputs.
        let graph = if !recording {
            Tri::No
        } else if self.runs_frozen_model(call) {
            inputs.graph
        } else {
            Tri::Yes
        };
        ValueFacts {
            kind: Kind::Tensor,
            graph,
            device,
            float64: module.float64,
            loss: false,
            eval_mode: false,
            pretrained: false,
            untyped: false,
        }
    }

    /// Whether a call runs a model the file freezes: `encoder(x)`, `self.model.forward(x)`.
    fn runs_frozen_model(&self, call: Node<'a>) -> bool {
        let Some(callee) = call.child_by_field_id(FIELDS.function) else {
            return false;
        };
        self.frozen(self.text(callee))
            || (callee.kind_id() == KINDS.attribute
                && callee
                    .child_by_field_id(FIELDS.object)
                    .is_some_and(|object| self.frozen(self.text(object))))
    }

    fn method_facts(
        &self,
        call: Node<'a>,
        receiver: ValueFacts,
        method: &str,
        combine_arguments: &dyn Fn() -> ValueFacts,
        depth: usize,
    ) -> ValueFacts {
        if TO_PYTHON.contains(&method) {
            return ValueFacts::scalar();
        }
        match method {
            "numpy" => {
                return ValueFacts {
                    kind: Kind::Numpy,
                    graph: Tri::No,
                    device: Tri::No,
                    float64: receiver.float64,
                    ..ValueFacts::default()
                };
            }
            // Only a tensor has `.detach()`: whatever the receiver is, the result is one.
            "detach" | "detach_" => {
                return ValueFacts {
                    kind: if receiver.kind == Kind::Unknown {
                        Kind::Tensor
                    } else {
                        receiver.kind
                    },
                    graph: Tri::No,
                    eval_mode: false,
                    ..receiver
                };
            }
            "cpu" => {
                return ValueFacts {
                    device: Tri::No,
                    eval_mode: false,
                    ..receiver
                };
            }
            "cuda" => {
                return ValueFacts {
                    device: Tri::Yes,
                    eval_mode: false,
                    ..receiver
                };
            }
            "to" => return self.to_facts(call, receiver),
            "float" | "half" | "bfloat16" => {
                return ValueFacts {
                    float64: false,
                    eval_mode: false,
                    ..receiver
                };
            }
            "double" => {
                return ValueFacts {
                    float64: true,
                    eval_mode: false,
                    ..receiver
                };
            }
            "eval" if receiver.kind == Kind::Module => {
                return ValueFacts {
                    eval_mode: true,
                    ..receiver
                };
            }
            // `torch.load(path).eval()`: only a module has an `eval()` without arguments
            // (pandas' takes an expression).
            "eval"
                if receiver.kind == Kind::Unknown
                    && call
                        .child_by_field_id(FIELDS.arguments)
                        .is_some_and(|arguments| arguments.named_child_count() == 0) =>
            {
                return ValueFacts {
                    eval_mode: true,
                    ..ValueFacts::of(Kind::Module)
                };
            }
            "astype" => {
                let target = call
                    .child_by_field_id(FIELDS.arguments)
                    .and_then(|a| a.named_child(0))
                    .map(|a| self.text(a))
                    .unwrap_or("");
                return ValueFacts {
                    kind: Kind::Numpy,
                    graph: Tri::No,
                    device: Tri::No,
                    float64: is_float64_dtype(target),
                    ..ValueFacts::default()
                };
            }
            _ => {}
        }
        match receiver.kind {
            Kind::Module if !is_non_forward_method(method) && self.is_model_member(method) => {
                // A helper method of the model's class: what it returns; else a forward pass.
                if let Some(facts) = self.own_method_call(call, method, depth, None) {
                    return facts;
                }
                return self.forward_facts(call, receiver, combine_arguments);
            }
            Kind::Module => {
                return match method {
                    "train" | "requires_grad_" | "apply" | "share_memory" => ValueFacts {
                        eval_mode: false,
                        ..receiver
                    },
                    // A submodule or a method of a model defined elsewhere, given inputs
                    // (`model.backbone(x)`, `vae.encode(x)`): computed by the model, so on its
                    // device, like a forward's outputs.
                    _ if (!is_non_forward_method(method)
                        || self.getter_given_tensors(call, method))
                        && has_arguments(call)
                        && !self.is_own_instance(call) =>
                    {
                        self.forward_facts(call, receiver, combine_arguments)
                    }
                    _ => ValueFacts::of(Kind::Container),
                };
            }
            Kind::Rng => {
                let dtype = crate::parse::find_argument(call, self.source, Some("dtype"), None)
                    .found()
                    .map(|dtype| self.text(dtype));
                return if RNG_FLOATS.contains(&method) && dtype.is_none_or(is_float64_dtype) {
                    ValueFacts {
                        kind: Kind::Numpy,
                        graph: Tri::No,
                        device: Tri::No,
                        float64: true,
                        ..ValueFacts::default()
                    }
                } else {
                    ValueFacts {
                        kind: Kind::Numpy,
                        graph: Tri::No,
                        device: Tri::No,
                        ..ValueFacts::default()
                    }
                };
            }
            Kind::Numpy => {
                return ValueFacts {
                    kind: Kind::Numpy,
                    graph: Tri::No,
                    device: Tri::No,
                    float64: receiver.float64,
                    ..ValueFacts::default()
                };
            }
            Kind::Tensor => {
                if NO_GRAPH_METHODS.contains(&method) {
                    return ValueFacts {
                        graph: Tri::No,
                        float64: false,
                        loss: false,
                        eval_mode: false,
                        ..receiver
                    };
                }
                if method.ends_with('_') {
                    // In-place: the receiver, now also depending on the arguments.
                    return receiver.combine(combine_arguments());
                }
                let mut facts = ValueFacts {
                    loss: receiver.loss,
                    eval_mode: false,
                    ..receiver
                };
                // Only arithmetic takes gradients from its arguments; `type_as(x)`,
                // `view_as(x)`, `to(x)` take just a dtype or shape.
                if ARITHMETIC_METHODS.contains(&method) {
                    let arguments = combine_arguments();
                    facts.graph = facts.graph.or(if arguments.kind == Kind::Tensor {
                        arguments.graph
                    } else {
                        Tri::No
                    });
                }
                if matches!(
                    method,
                    "size" | "dim" | "numel" | "element_size" | "nelement"
                ) {
                    return ValueFacts::scalar();
                }
                return facts;
            }
            _ => {}
        }
        let _ = depth;
        ValueFacts::default()
    }

    /// Whether `name` is a submodule or a method of one of the file's model classes (so that
    /// `model.name(...)` runs the model), or `forward` itself.
    pub fn is_model_member(&self, name: &str) -> bool {
        if name == "forward" {
            return true;
        }
        self.model.classes.iter().enumerate().any(|(index, class)| {
            self.modules().is_module_class(index)
                && (class.methods.iter().any(|(method, _)| *method == name)
                    || self.self_assignments(name).any(|assignment| {
                        class
                            .node
                            .byte_range()
                            .contains(&assignment.node.start_byte())
                            && match assignment.site {
                                // A submodule, not a function or a tensor kept on the model.
                                Site::Value {
                                    value, index: None, ..
                                } => self.facts(value).kind == Kind::Module,
                                _ => false,
                            }
                    }))
        })
    }

    /// Whether the file may put work on an accelerator at all: it names CUDA, a device (a
    /// `device` parameter, `self.device`, `.to(device)`, `device=`) or an accelerator. Code that
    /// names none is host code.
    pub(super) fn targets_gpu(&self) -> bool {
        *self.targets_gpu.get_or_init(|| {
            // Lightning's Trainer moves a `LightningModule` to the accelerator.
            let mentions = |needle| super::analysis::file_mentions(self.source, needle);
            mentions("cuda")
                || mentions("device")
                || mentions("accelerator")
                || mentions("lightning")
                || self.derives_from_accelerator_class()
        })
    }

    /// Whether a model of unknown placement runs on the accelerator: the file names one, or
    /// another file of the run may (see [`Analysis::device_assumed`]).
    pub(super) fn device_by_default(&self) -> bool {
        self.targets_gpu() || self.device_assumed()
    }

    /// `class Net(Base)` with `Base` from a file that names the accelerator (a
    /// `LightningModule` of the project's): the subclass's work goes there too.
    fn derives_from_accelerator_class(&self) -> bool {
        self.model.classes.iter().any(|class| {
            class.bases.iter().any(|base| {
                self.qualified_name(*base)
                    .is_some_and(|name| self.ask(Ask::AcceleratorClass(name)).is_some())
            })
        })
    }

    /// `x.to(device)`, `x.to(torch.float32)`, `x.to("cpu", non_blocking=True)`.
    fn to_facts(&self, call: Node<'a>, receiver: ValueFacts) -> ValueFacts {
        let mut facts = ValueFacts {
            eval_mode: false,
            ..receiver
        };
        let Some(arguments) = call.child_by_field_id(FIELDS.arguments) else {
            return facts;
        };
        let mut cursor = arguments.walk();
        for argument in arguments.named_children(&mut cursor) {
            let value = if argument.kind_id() == KINDS.keyword_argument {
                let name = argument
                    .child_by_field_id(FIELDS.name)
                    .map(|n| self.text(n))
                    .unwrap_or("");
                if name != "device" && name != "dtype" {
                    continue;
                }
                match argument.child_by_field_id(FIELDS.value) {
                    Some(value) => value,
                    None => continue,
                }
            } else {
                argument
            };
            let text = self.text(value);
            if is_float64_dtype(text) {
                facts.float64 = true;
            } else if is_float_dtype(text) {
                facts.float64 = false;
            } else if is_device_expression(text) {
                facts.device =
                    if text.trim_matches(['"', '\'']) == "cpu" || self.host_by_default(value) {
                        Tri::No
                    } else {
                        Tri::Yes
                    };
            }
        }
        facts
    }

    /// `output_device` of `def score(..., output_device="cpu")`: a device parameter whose
    /// default is the host; the code shows the host unless a caller asks otherwise.
    fn host_by_default(&self, value: Node<'a>) -> bool {
        self.reaching_binding(value)
            .and_then(|binding| match binding.site {
                Site::Parameter { function, index } => self.parameter_default(function, index),
                _ => None,
            })
            .is_some_and(|default| self.text(default).trim_matches(['"', '\'']) == "cpu")
    }

    /// Calls of library functions whose results torchlint knows.
    fn library_call(
        &self,
        call: Node<'a>,
        name: &str,
        combine_arguments: &dyn Fn() -> ValueFacts,
    ) -> Option<ValueFacts> {
        let keyword = |key: &str| -> Option<&'a str> {
            let arguments = call.child_by_field_id(FIELDS.arguments)?;
            let mut cursor = arguments.walk();
            let found = arguments.named_children(&mut cursor).find(|argument| {
                argument.kind_id() == KINDS.keyword_argument
                    && argument
                        .child_by_field_id(FIELDS.name)
                        .is_some_and(|n| self.text(n) == key)
            })?;
            found.child_by_field_id(FIELDS.value).map(|v| self.text(v))
        };
        let first_argument = || {
            call.child_by_field_id(FIELDS.arguments)
                .and_then(|a| a.named_child(0))
                .filter(|a| a.kind_id() != KINDS.keyword_argument)
        };
        if let Some(function) = name.strip_prefix("torch.") {
            if let Some(functional) = function
                .strip_prefix("nn.functional.")
                .or_else(|| function.strip_prefix("nn.F."))
            {
                let inputs = combine_arguments();
                return Some(ValueFacts {
                    kind: Kind::Tensor,
                    graph: if functional == "one_hot" {
                        Tri::No
                    } else {
                        inputs.graph
                    },
                    device: inputs.device,
                    float64: inputs.float64,
                    loss: is_loss_function(functional),
                    eval_mode: false,
                    pretrained: false,
                    untyped: false,
                });
            }
            if let Some(class) = function.strip_prefix("nn.") {
                let last = class.rsplit('.').next().unwrap_or(class);
                if last.starts_with(|c: char| c.is_ascii_uppercase()) {
                    return Some(ValueFacts {
                        device: Tri::No,
                        ..ValueFacts::of(if last.ends_with("Loss") {
                            Kind::LossModule
                        } else {
                            Kind::Module
                        })
                    });
                }
                if class.starts_with("utils.clip_grad") {
                    return Some(ValueFacts::tensor(Tri::No, Tri::Yes, false));
                }
                return None;
            }
            if function.starts_with("optim.") && !function.starts_with("optim.lr_scheduler") {
                return Some(ValueFacts::of(Kind::Optimizer));
            }
            if function == "utils.data.DataLoader" || function == "utils.data.dataloader.DataLoader"
            {
                return Some(ValueFacts::of(Kind::Loader));
            }
            if function == "device" || function == "get_default_dtype" {
                return Some(ValueFacts::scalar());
            }
            // Whatever was saved: a state dict, a whole model, a tensor. What the code does
            // with it says which (`self.model = torch.load(p)` then `self.model.eval()`).
            if function == "load" {
                return Some(ValueFacts::default());
            }
            let last = function.rsplit('.').next().unwrap_or(function);
            if function.contains('.')
                && !function.starts_with("linalg.")
                && !function.starts_with("fft.")
                && !function.starts_with("special.")
            {
                // Submodules like `torch.cuda.*`, `torch.autograd.*`: not tensor math.
                return None;
            }
            let dtype = keyword("dtype");
            let explicit_float64 = dtype.is_some_and(is_float64_dtype);
            let device = keyword("device").map(|d| {
                if d.trim_matches(['"', '\'']) == "cpu" {
                    Tri::No
                } else {
                    Tri::Yes
                }
            });
            if CREATION.contains(&last) {
                let inputs = if matches!(last, "tensor" | "as_tensor" | "from_numpy")
                    || last.ends_with("_like")
                {
                    first_argument().map(|a| self.facts(a)).unwrap_or_default()
                } else {
                    ValueFacts::default()
                };
                let float64 = match dtype {
                    Some(dtype) => explicit_float64 || (dtype.is_empty()),
                    None => inputs.float64 && inputs.kind != Kind::Scalar,
                };
                return Some(ValueFacts::tensor(
                    Tri::No,
                    device.unwrap_or(if last.ends_with("_like") {
                        inputs.device
                    } else {
                        Tri::No
                    }),
                    float64,
                ));
            }
            let inputs = combine_arguments();
            let graph = if NO_GRAPH_FUNCTIONS.contains(&last) {
                Tri::No
            } else {
                inputs.graph
            };
            return Some(ValueFacts {
                kind: Kind::Tensor,
                graph,
                device: device.unwrap_or(inputs.device),
                float64: explicit_float64 || (dtype.is_none() && inputs.float64),
                loss: false,
                eval_mode: false,
                pretrained: false,
                untyped: false,
            });
        }
        if self.frameworks.keeps_graph(name) {
            let inputs = combine_arguments();
            return Some(ValueFacts {
                kind: Kind::Tensor,
                graph: inputs.graph,
                device: inputs.device,
                float64: inputs.float64,
                ..ValueFacts::default()
            });
        }
        if let Some(function) = name.strip_prefix("numpy.") {
            if function == "random.default_rng" || function == "random.RandomState" {
                return Some(ValueFacts::of(Kind::Rng));
            }
            let dtype = keyword("dtype");
            let numpy = |float64: bool| ValueFacts {
                kind: Kind::Numpy,
                graph: Tri::No,
                device: Tri::No,
                float64,
                ..ValueFacts::default()
            };
            if NUMPY_FLOAT_SOURCES.contains(&function) {
                return Some(numpy(match dtype {
                    Some(dtype) => is_float64_dtype(dtype),
                    None => true,
                }));
            }
            if matches!(function, "array" | "asarray" | "ascontiguousarray") {
                if let Some(dtype) = dtype {
                    return Some(numpy(is_float64_dtype(dtype)));
                }
                let float64 = first_argument().is_some_and(|a| {
                    self.facts(a).float64
                        || is_list_of_float_literals(self, a)
                        || self
                            .bound_value(a)
                            .is_some_and(|value| is_list_of_float_literals(self, value))
                });
                return Some(numpy(float64));
            }
            if function == "arange" {
                let float64 = call
                    .child_by_field_id(FIELDS.arguments)
                    .is_some_and(|a| self.text(a).contains('.'));
                return Some(numpy(float64));
            }
            let inputs = combine_arguments();
            return Some(numpy(
                inputs.float64 && !matches!(function, "argmax" | "argmin" | "argsort" | "round"),
            ));
        }
        match name {
            "float" | "int" | "bool" | "len" | "str" | "round" | "abs" | "isinstance" => {
                Some(ValueFacts::scalar())
            }
            "min" | "max" => Some(combine_arguments()),
            // A copy is what it copies: a model's copy runs on the model's device.
            "copy.deepcopy" | "copy.copy" => first_argument().map(|a| self.facts(a)),
            // `map(lambda t: rearrange(t, ...), (data, embed))`: what it maps, as a sequence.
            "map" | "filter" => Some(ValueFacts {
                kind: Kind::Container,
                ..combine_arguments()
            }),
            "list" | "tuple" | "dict" | "set" | "sorted" | "zip" | "enumerate" | "range" => {
                Some(ValueFacts::of(Kind::Container))
            }
            _ => None,
        }
    }

    /// A call of one of the file's own functions: the facts of what it returns, with its
    /// parameters bound to the arguments' facts.
    fn own_function_call(&self, call: Node<'a>, name: &str, depth: usize) -> Option<ValueFacts> {
        self.own_function_call_element(call, name, depth, None)
    }

    /// Like `own_function_call`, for the `element`th value of a returned tuple.
    fn own_function_call_element(
        &self,
        call: Node<'a>,
        name: &str,
        depth: usize,
        element: Option<u32>,
    ) -> Option<ValueFacts> {
        if depth >= MAX_CALL_DEPTH {
            return None;
        }
        let function = self.model.function_nodes_named(name).find(|f| {
            self.model
                .function_facts(*f)
                .is_some_and(|facts| facts.class.is_none())
        })?;
        self.call_function(call, function, 0, depth, element)
    }

    /// `self.helper(...)` where `helper` is a method of the file's classes (not `forward`):
    /// what it returns, or its `element`th element.
    fn own_method_call(
        &self,
        call: Node<'a>,
        method: &str,
        depth: usize,
        element: Option<u32>,
    ) -> Option<ValueFacts> {
        if depth >= MAX_CALL_DEPTH || method == "forward" {
            return None;
        }
        let class = self.class_of(call);
        let function = self
            .model
            .classes
            .iter()
            .enumerate()
            .filter(|(index, _)| Some(*index) == class || class.is_none())
            .chain(self.model.classes.iter().enumerate())
            .find_map(|(_, c)| {
                c.methods
                    .iter()
                    .find(|(name, _)| *name == method)
                    .map(|(_, node)| *node)
            })?;
        self.call_function(call, function, 1, depth, element)
    }

    /// What a method of one of the file's classes returns when `call` calls it.
    pub(super) fn method_returns(
        &self,
        call: Node<'a>,
        function: Node<'a>,
        depth: usize,
    ) -> Option<ValueFacts> {
        if depth >= MAX_CALL_DEPTH {
            return None;
        }
        self.call_function(call, function, 1, depth, None)
    }

    /// The facts of what `function` returns when `call` calls it; positional arguments bind
    /// to parameters from `first_parameter` on (1 skips `self`).
    fn call_function(
        &self,
        call: Node<'a>,
        function: Node<'a>,
        first_parameter: u32,
        depth: usize,
        element: Option<u32>,
    ) -> Option<ValueFacts> {
        // Bind positional arguments to parameters by index.
        let mut bound = Vec::new();
        let mut any_argument_graph = false;
        if let Some(arguments) = call.child_by_field_id(FIELDS.arguments) {
            let mut cursor = arguments.walk();
            for argument in arguments.named_children(&mut cursor) {
                let inner = if argument.kind_id() == KINDS.keyword_argument
                    || argument.kind_id() == KINDS.list_splat
                    || argument.kind_id() == KINDS.dictionary_splat
                {
                    argument
                        .child_by_field_id(FIELDS.value)
                        .or_else(|| argument.named_child(0))
                        .unwrap_or(argument)
                } else {
                    argument
                };
                any_argument_graph |= self.facts_at_depth(inner, depth, &[]).graph == Tri::Yes;
            }
            let mut cursor = arguments.walk();
            let positional: Vec<Node<'a>> = arguments
                .named_children(&mut cursor)
                .filter(|a| {
                    a.kind_id() != KINDS.keyword_argument
                        && a.kind_id() != KINDS.list_splat
                        && a.kind_id() != KINDS.dictionary_splat
                })
                .collect();
            for (index, argument) in positional.into_iter().enumerate() {
                let facts = self.facts_at_depth(argument, depth, &[]);
                bound.push((function.id(), index as u32 + first_parameter, facts));
            }
        }
        // The same function called with arguments of the same facts returns the same facts:
        // evaluate its returns once per signature, not once per call site.
        let key = CallKey {
            function: function.id(),
            element,
            depth,
            first_parameter,
            any_argument_graph,
            arguments: bound
                .iter()
                .map(|(_, index, facts)| (*index, *facts))
                .collect(),
        };
        if let Some(cached) = self.calls.borrow().get(&key) {
            return *cached;
        }
        let result = self.evaluate_returns(
            function,
            first_parameter,
            depth,
            element,
            &bound,
            any_argument_graph,
        );
        self.calls.borrow_mut().insert(key, result);
        result
    }

    fn evaluate_returns(
        &self,
        function: Node<'a>,
        first_parameter: u32,
        depth: usize,
        element: Option<u32>,
        bound: &[(usize, u32, ValueFacts)],
        any_argument_graph: bool,
    ) -> Option<ValueFacts> {
        let returns = self.model.returns_of(function);
        if returns.is_empty() {
            return None;
        }
        let mut result: Option<ValueFacts> = None;
        for &value in returns {
            let value = match element {
                Some(index) => element_of(value, index).unwrap_or(value),
                None => value,
            };
            let mut facts = self.facts_at_depth(value, depth + 1, bound);
            // A plain function of graph-carrying tensors returns one, unless it detaches
            // (a method may only read sizes and devices from its arguments).
            if facts.graph == Tri::Unknown
                && first_parameter == 0
                && any_argument_graph
                && matches!(facts.kind, Kind::Tensor | Kind::Unknown)
            {
                facts.graph = Tri::Yes;
            }
            result = Some(match result {
                None => facts,
                Some(previous) => ValueFacts {
                    eval_mode: false,
                    ..previous.combine(facts)
                },
            });
        }
        result
    }
}

/// What the facts of a call of one of the file's functions depend on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CallKey {
    function: usize,
    element: Option<u32>,
    depth: usize,
    first_parameter: u32,
    any_argument_graph: bool,
    arguments: Vec<(u32, ValueFacts)>,
}

/// The name of the file's own function a call calls (`helper(...)`), if it is one.
fn own_callee<'a>(analysis: &Analysis<'a>, call: Node<'a>) -> Option<&'a str> {
    if call.kind_id() != KINDS.call {
        return None;
    }
    let callee = call.child_by_field_id(FIELDS.function)?;
    if callee.kind_id() != KINDS.identifier {
        return None;
    }
    let name = analysis.text(callee);
    analysis
        .model
        .function_nodes_named(name)
        .next()
        .map(|_| name)
}

/// What an element of a value is, when only the whole is known: a container's element is of
/// unknown kind (with the container's graph and device).
/// An object built from device tensors (`NamedTensor(t, names)`, a batch or result dataclass)
/// holds them where they are: a container on the device, with their graphs.
fn held_by_instance(arguments: &[ValueFacts]) -> Option<ValueFacts> {
    let held: Vec<&ValueFacts> = arguments
        .iter()
        .filter(|facts| {
            matches!(facts.kind, Kind::Tensor | Kind::Container) && facts.device == Tri::Yes
        })
        .collect();
    if held.is_empty() {
        return None;
    }
    Some(ValueFacts {
        kind: Kind::Container,
        device: Tri::Yes,
        graph: held
            .iter()
            .fold(Tri::No, |graph, facts| graph.or(facts.graph)),
        ..ValueFacts::default()
    })
}

fn element_facts(facts: ValueFacts) -> ValueFacts {
    if facts.kind == Kind::Container {
        ValueFacts {
            kind: Kind::Unknown,
            ..facts
        }
    } else {
        facts
    }
}

/// Attributes of a tensor itself, not of what a model's output holds.
fn is_tensor_property(attribute: &str) -> bool {
    matches!(
        attribute,
        "grad_fn"
            | "layout"
            | "names"
            | "itemsize"
            | "nbytes"
            | "output_nr"
            | "_version"
            | "H"
            | "mH"
    ) || attribute.starts_with("is_")
        || attribute.starts_with("__")
}

/// The loaders a collection of them names by split (fastai's `dls.train`, `data.valid_dl`).
fn is_split_loader(attribute: &str) -> bool {
    matches!(
        attribute,
        "train" | "valid" | "test" | "train_dl" | "valid_dl" | "test_dl" | "fix_dl"
    )
}

/// The `index`th element of a tuple or list expression (`a, b = x, y`).
fn element_of(value: Node<'_>, index: u32) -> Option<Node<'_>> {
    let kind = value.kind_id();
    if kind == KINDS.tuple || kind == KINDS.list || kind == KINDS.expression_list {
        value.named_child(index)
    } else {
        None
    }
}

/// A `forward` parameter that carries activations: required (no default), and not named
/// like indices, masks, labels or options (`input_ids`, `attention_mask`, `use_cache`).
fn is_activation_parameter(function: Node<'_>, index: u32, name: &str) -> bool {
    let has_default = function
        .child_by_field_id(FIELDS.parameters)
        .and_then(|parameters| parameters.named_child(index))
        .is_some_and(|parameter| {
            parameter.kind_id() == KINDS.default_parameter
                || parameter.kind_id() == KINDS.typed_default_parameter
        });
    let lower = name.to_ascii_lowercase();
    !has_default
        && ![
            "resolution",
            "dimension",
            "ids",
            "mask",
            "label",
            "position",
            "index",
            "indices",
            "length",
            "lens",
            "token",
            "cache",
            "past",
            "use_",
            "return_",
            "output_",
            "kwargs",
            "config",
            "size",
            "shape",
            "step",
            "idx",
            "num_",
            "target",
            "bit",
            "scale",
            "specified",
        ]
        .iter()
        .any(|word| lower.contains(word))
}

/// Names people give models: `model`, `net`, `teacher`, `self.encoder`, `gen`, `disc`.
pub fn looks_like_model(name: &str) -> bool {
    const MODEL_NAMES: &[&str] = &[
        "model",
        "net",
        "network",
        "module",
        "encoder",
        "decoder",
        "teacher",
        "student",
        "teacher_model",
        "student_model",
        "backbone",
        "classifier",
        "generator",
        "discriminator",
        "critic",
        "actor",
        "policy",
        "gen",
        "disc",
        "ema_model",
        "base_model",
        "target_model",
    ];
    // Asked of every call name of a file: compared in place, not lowercased into a copy.
    MODEL_NAMES
        .iter()
        .any(|model| model.eq_ignore_ascii_case(name))
}

fn is_float64_dtype(text: &str) -> bool {
    matches!(
        text.trim(),
        "torch.float64"
            | "torch.double"
            | "np.float64"
            | "numpy.float64"
            | "np.double"
            | "float"
            | "\"float64\""
            | "'float64'"
            | "\"double\""
            | "'double'"
            | "\"float\""
            | "'float'"
            | "float64"
    )
}

fn is_float_dtype(text: &str) -> bool {
    let text = text.trim();
    text.contains("float32")
        || text.contains("float16")
        || text.contains("bfloat16")
        || text == "torch.float"
        || text == "torch.half"
        || text.contains("int")
        || text.contains("long")
        || text.contains("bool")
}

/// `device`, `self.device`, `args.device`, `"cuda"`, `f"cuda:{rank}"`, `torch.device(...)`.
fn is_device_expression(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("device")
        || lower.contains("cuda")
        || lower.contains("cpu")
        || lower.contains("rank")
}

fn is_loss_function(name: &str) -> bool {
    name.contains("loss")
        || matches!(
            name,
            "cross_entropy"
                | "binary_cross_entropy"
                | "binary_cross_entropy_with_logits"
                | "kl_div"
        )
}

fn is_list_of_float_literals(analysis: &Analysis<'_>, node: Node<'_>) -> bool {
    if node.kind_id() != KINDS.list {
        return false;
    }
    let text = analysis.text(node);
    text.contains('.') && !text.contains('"') && !text.contains('\'')
}

/// The string key of `value["key"]`.
pub(super) fn string_key<'a>(analysis: &Analysis<'a>, subscript: Node<'a>) -> Option<&'a str> {
    let key = subscript.child_by_field_id(FIELDS.index)?;
    (key.kind_id() == KINDS.string).then(|| analysis.text(key).trim_matches(['"', '\'']))
}

/// Keys of model outputs that hold tensors.
/// Whether a batch's key names metadata kept beside its tensors: file names, dates, text,
/// a sample's id (`participant_id`; `input_ids` are tensors).
/// A module kept under a name that says it is a loss (`self.loss_function = MaxLogLike()`,
/// `criterion = build_criterion(cfg)`) is a criterion: it scores a model's outputs, it runs no
/// model of its own.
fn as_criterion(name: &str, facts: ValueFacts) -> ValueFacts {
    let name = name.to_ascii_lowercase();
    if facts.kind == Kind::Module && (name.contains("loss") || name.contains("criterion")) {
        ValueFacts {
            kind: Kind::LossModule,
            ..facts
        }
    } else {
        facts
    }
}

/// `indices`, `max_indices`, `idx`, `topk_idx`: the index half of what `max(dim)`, `topk`,
/// `sort` or a pooling layer with `return_indices=True` returns.
fn names_indices(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "idx"
        || name == "indices"
        || name.ends_with("_idx")
        || name.ends_with("_indices")
        || name.starts_with("idx_")
        || name.starts_with("indices_")
}

fn names_metadata(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "str", "date", "name", "path", "file", "text", "meta", "url", "caption", "info",
    ]
    .iter()
    .any(|word| key.contains(word))
        || key == "id"
        || key.ends_with("_id")
}

fn names_a_tensor(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "loss",
        "logit",
        "pred",
        "out",
        "score",
        "prob",
        "emb",
        "feat",
        "hidden",
        "state",
        "attn",
        "attention",
        "mask",
        "label",
        "target",
        "image",
        "latent",
        "recon",
        "mu",
        "var",
        "z",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// Whether a call passes anything (`f(x)`, not `f()`).
fn has_arguments(call: Node<'_>) -> bool {
    call.child_by_field_id(FIELDS.arguments)
        .is_some_and(|arguments| arguments.named_child_count() > 0)
}
