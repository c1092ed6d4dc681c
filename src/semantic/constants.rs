//! Constant evaluation for configuration values: literals, module constants, local variables,
//! parameter defaults, argparse `default=`s, dataclass field defaults, and the CPU count
//! (`os.cpu_count()`, `multiprocessing.cpu_count()`), which is a number only known at run time.

use crate::syntax::Node;

use super::analysis::Analysis;
use super::scope::Site;
use crate::parse::{FIELDS, KINDS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constant {
    Int(i64),
    Bool(bool),
    /// Derived from the machine's CPU count.
    CpuCount,
    None,
    Unknown,
}

/// How deep names and defaults are followed.
const MAX_DEPTH: usize = 12;

impl<'a> Analysis<'a> {
    pub fn constant(&self, node: Node<'a>) -> Constant {
        self.constant_at_depth(node, 0)
    }

    /// Whether a value may be `None` where it is used: `None`, a local name assigned one, or a
    /// conditional with a branch that may be (`None if torch.cuda.is_available() else "cpu"`).
    /// A parameter is the caller's choice, not counted: a library that passes its caller's
    /// `map_location` on decides nothing itself.
    pub fn may_be_none(&self, node: Node<'a>) -> bool {
        self.may_be_none_at_depth(node, 0)
    }

    fn may_be_none_at_depth(&self, node: Node<'a>, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let kind = node.kind_id();
        if kind == KINDS.none {
            return true;
        }
        if kind == KINDS.parenthesized_expression {
            return node
                .named_child(0)
                .is_some_and(|inner| self.may_be_none_at_depth(inner, depth + 1));
        }
        if kind == KINDS.conditional_expression {
            // `a if condition else b`: the branches are the first and the last child.
            return [node.named_child(0), node.named_child(2)]
                .into_iter()
                .flatten()
                .any(|branch| self.may_be_none_at_depth(branch, depth + 1));
        }
        kind == KINDS.identifier
            && self
                .bound_value(node)
                .is_some_and(|value| self.may_be_none_at_depth(value, depth + 1))
    }

    fn constant_at_depth(&self, node: Node<'a>, depth: usize) -> Constant {
        if depth > MAX_DEPTH {
            return Constant::Unknown;
        }
        let next = |child: Node<'a>| self.constant_at_depth(child, depth + 1);
        let kind = node.kind_id();
        let k = &*KINDS;
        if kind == k.integer {
            return self
                .text(node)
                .replace('_', "")
                .parse()
                .map_or(Constant::Unknown, Constant::Int);
        }
        if kind == k.true_ {
            return Constant::Bool(true);
        }
        if kind == k.false_ {
            return Constant::Bool(false);
        }
        if kind == k.none {
            return Constant::None;
        }
        if kind == k.parenthesized_expression {
            return node.named_child(0).map_or(Constant::Unknown, next);
        }
        if kind == k.identifier {
            return self.name_constant(node, depth);
        }
        if kind == k.attribute {
            return self.attribute_constant(node, depth);
        }
        if kind == k.call {
            return self.call_constant(node, depth);
        }
        if kind == k.binary_operator {
            let (Some(left), Some(right)) = (
                node.child_by_field_id(FIELDS.left),
                node.child_by_field_id(FIELDS.right),
            ) else {
                return Constant::Unknown;
            };
            let operator = node
                .child_by_field_id(FIELDS.operator)
                .map(|o| self.text(o))
                .unwrap_or("");
            return match (next(left), next(right)) {
                (Constant::CpuCount, Constant::Int(_) | Constant::CpuCount)
                | (Constant::Int(_), Constant::CpuCount) => Constant::CpuCount,
                (Constant::Int(a), Constant::Int(b)) => match operator {
                    "+" => Constant::Int(a.saturating_add(b)),
                    "-" => Constant::Int(a.saturating_sub(b)),
                    "*" => Constant::Int(a.saturating_mul(b)),
                    "//" if b != 0 => Constant::Int(a.div_euclid(b)),
                    _ => Constant::Unknown,
                },
                _ => Constant::Unknown,
            };
        }
        if kind == k.boolean_operator {
            let (Some(left), Some(right)) = (
                node.child_by_field_id(FIELDS.left),
                node.child_by_field_id(FIELDS.right),
            ) else {
                return Constant::Unknown;
            };
            let is_or = self.text(node)[left.end_byte() - node.start_byte()..]
                .trim_start()
                .starts_with("or");
            return match (is_or, next(left)) {
                // `os.cpu_count() or 4`
                (true, Constant::CpuCount) => Constant::CpuCount,
                (true, Constant::None | Constant::Int(0) | Constant::Bool(false)) => next(right),
                (true, value @ (Constant::Int(_) | Constant::Bool(true))) => value,
                _ => Constant::Unknown,
            };
        }
        if kind == k.comparison_operator {
            return self.environment_comparison(node);
        }
        if kind == k.conditional_expression {
            let first = node.named_child(0).map_or(Constant::Unknown, next);
            let last = node.named_child(2).map_or(Constant::Unknown, next);
            return if first == last {
                first
            } else {
                Constant::Unknown
            };
        }
        Constant::Unknown
    }

    fn name_constant(&self, node: Node<'a>, depth: usize) -> Constant {
        let name = self.text(node);
        let scope = self.scope_at(node);
        let Some((found_in, bindings)) = self.model.scopes.lookup(scope, name, node.start_byte())
        else {
            return Constant::Unknown;
        };
        let binding = if found_in == scope {
            bindings
                .iter()
                .rev()
                .find(|b| b.offset <= node.start_byte())
                .or(bindings.last())
        } else {
            bindings.last()
        };
        match binding.map(|b| b.site) {
            Some(Site::Value { value, index, .. }) => {
                let value = match index {
                    Some(i)
                        if value.kind_id() == KINDS.tuple
                            || value.kind_id() == KINDS.expression_list =>
                    {
                        match value.named_child(i) {
                            Some(element) => element,
                            None => return Constant::Unknown,
                        }
                    }
                    Some(_) => return Constant::Unknown,
                    None => value,
                };
                self.constant_at_depth(value, depth + 1)
            }
            Some(Site::Parameter { function, index }) => self
                .parameter_default(function, index)
                .map_or(Constant::Unknown, |default| {
                    self.constant_at_depth(default, depth + 1)
                }),
            _ => Constant::Unknown,
        }
    }

    pub(super) fn parameter_default(&self, function: Node<'a>, index: u32) -> Option<Node<'a>> {
        let parameters = function.child_by_field_id(FIELDS.parameters)?;
        let parameter = parameters.named_child(index)?;
        if parameter.kind_id() == KINDS.default_parameter
            || parameter.kind_id() == KINDS.typed_default_parameter
        {
            parameter.child_by_field_id(FIELDS.value)
        } else {
            None
        }
    }

    /// `args.num_workers`, `self.args.workers`, `cfg.num_workers`, `self.workers`.
    fn attribute_constant(&self, node: Node<'a>, depth: usize) -> Constant {
        let (Some(object), Some(attribute)) = (
            node.child_by_field_id(FIELDS.object),
            node.child_by_field_id(FIELDS.attribute),
        ) else {
            return Constant::Unknown;
        };
        let attribute = self.text(attribute);
        if self.text(object) == "self" {
            let values: Vec<Node<'a>> = self
                .self_assignments(attribute)
                .filter_map(|a| match a.site {
                    Site::Value {
                        value, index: None, ..
                    } => Some(value),
                    _ => None,
                })
                .collect();
            let constants: Vec<Constant> = values
                .into_iter()
                .map(|value| self.constant_at_depth(value, depth + 1))
                .collect();
            if let Some(first) = constants.first()
                && constants.iter().all(|c| c == first)
                && *first != Constant::Unknown
            {
                return *first;
            }
        }
        // A dataclass instance built in this file, with the field overridden or defaulted.
        if let Some(constant) = self.dataclass_field(object, attribute, depth) {
            return constant;
        }
        // An argparse namespace: `parser.set_defaults(workers=16)`, else the argument's
        // default (`store_true` defaults to False, `store_false` to True).
        if let Some(default) = self.argparse_set_default(attribute) {
            return self.constant_at_depth(default, depth + 1);
        }
        if let Some(default) = self.argparse_default(attribute) {
            return self.constant_at_depth(default, depth + 1);
        }
        if let Some(flag) = self.argparse_flag_default(attribute) {
            return Constant::Bool(flag);
        }
        Constant::Unknown
    }

    /// The value `parser.set_defaults(dest=...)` gives an argument.
    fn argparse_set_default(&self, dest: &str) -> Option<Node<'a>> {
        let calls = self.model.calls_by_name.get("set_defaults")?;
        calls
            .iter()
            .rev()
            .find_map(|call| self.keyword_value(*call, dest))
    }

    /// The default of a `store_true` (False) or `store_false` (True) argument without one.
    fn argparse_flag_default(&self, dest: &str) -> Option<bool> {
        let call = self.argparse_call(dest)?;
        if self.keyword_value(call, "default").is_some() {
            return None;
        }
        match self
            .text(self.keyword_value(call, "action")?)
            .trim_matches(['"', '\''])
        {
            "store_true" => Some(false),
            "store_false" => Some(true),
            _ => None,
        }
    }

    /// The value of a call's `key=` argument.
    fn keyword_value(&self, call: Node<'a>, key: &str) -> Option<Node<'a>> {
        let arguments = call.child_by_field_id(FIELDS.arguments)?;
        let mut cursor = arguments.walk();
        let argument = arguments
            .named_children(&mut cursor)
            .filter(|child| child.kind_id() == KINDS.keyword_argument)
            .find(|child| {
                child
                    .child_by_field_id(FIELDS.name)
                    .is_some_and(|name| self.text(name) == key)
            })?;
        argument.child_by_field_id(FIELDS.value)
    }

    /// `os.getenv("PIN_MEMORY", "true").lower() == "true"`: the comparison with the default.
    fn environment_comparison(&self, node: Node<'a>) -> Constant {
        let mut cursor = node.walk();
        let parts: Vec<Node<'a>> = node.named_children(&mut cursor).collect();
        let [left, right] = parts.as_slice() else {
            return Constant::Unknown;
        };
        let operator = self.text(node)
            [left.end_byte() - node.start_byte()..right.start_byte() - node.start_byte()]
            .trim();
        let literal = |n: Node<'a>| {
            (n.kind_id() == KINDS.string).then(|| self.text(n).trim_matches(['"', '\'']).to_owned())
        };
        let (Some(expected), Some(default)) = (literal(*right), self.environment_default(*left))
        else {
            return Constant::Unknown;
        };
        match operator {
            "==" => Constant::Bool(default == expected),
            "!=" => Constant::Bool(default != expected),
            _ => Constant::Unknown,
        }
    }

    /// The default of `os.getenv(name, default)` / `os.environ.get(name, default)`, through
    /// `.lower()`, `.strip()`, `.upper()`.
    fn environment_default(&self, node: Node<'a>) -> Option<String> {
        let callee = node.child_by_field_id(FIELDS.function)?;
        if callee.kind_id() == KINDS.attribute {
            let method = self.text(callee.child_by_field_id(FIELDS.attribute)?);
            let object = callee.child_by_field_id(FIELDS.object)?;
            match method {
                "lower" => return self.environment_default(object).map(|d| d.to_lowercase()),
                "upper" => return self.environment_default(object).map(|d| d.to_uppercase()),
                "strip" => {
                    return self
                        .environment_default(object)
                        .map(|d| d.trim().to_owned());
                }
                _ => {}
            }
        }
        let name = self.qualified_name(callee)?;
        let arguments = node.child_by_field_id(FIELDS.arguments)?;
        if name == "str" {
            // `str(os.getenv("PIN_MEMORY", True))`
            return self.environment_default(arguments.named_child(0)?);
        }
        if name != "os.getenv" && name != "os.environ.get" {
            return None;
        }
        let default = arguments.named_child(1)?;
        let kind = default.kind_id();
        (kind == KINDS.string
            || kind == KINDS.true_
            || kind == KINDS.false_
            || kind == KINDS.integer)
            .then(|| self.text(default).trim_matches(['"', '\'']).to_owned())
    }

    fn call_constant(&self, node: Node<'a>, depth: usize) -> Constant {
        let Some(callee) = node.child_by_field_id(FIELDS.function) else {
            return Constant::Unknown;
        };
        let name = self.qualified_name(callee).unwrap_or_default();
        let arguments: Vec<Node<'a>> = node
            .child_by_field_id(FIELDS.arguments)
            .map(|a| {
                let mut cursor = a.walk();
                a.named_children(&mut cursor).collect()
            })
            .unwrap_or_default();
        match name.as_str() {
            "os.cpu_count"
            | "multiprocessing.cpu_count"
            | "torch.multiprocessing.cpu_count"
            | "psutil.cpu_count" => Constant::CpuCount,
            "len"
                if arguments
                    .first()
                    .is_some_and(|a| self.text(*a).contains("sched_getaffinity")) =>
            {
                Constant::CpuCount
            }
            "torch.cuda.is_available" => Constant::Bool(true),
            "int" => arguments
                .first()
                .map_or(Constant::Unknown, |a| self.constant_at_depth(*a, depth + 1)),
            "min" | "max" => {
                // `min([a, b, c])` is `min(a, b, c)`.
                let spread: Vec<Node<'a>> = match arguments.as_slice() {
                    [list] if list.kind_id() == KINDS.list || list.kind_id() == KINDS.tuple => {
                        let mut cursor = list.walk();
                        list.named_children(&mut cursor).collect()
                    }
                    _ => arguments.clone(),
                };
                let values: Vec<Constant> = spread
                    .iter()
                    .map(|a| self.constant_at_depth(*a, depth + 1))
                    .collect();
                let ints: Vec<i64> = values
                    .iter()
                    .filter_map(|v| match v {
                        Constant::Int(i) => Some(*i),
                        _ => None,
                    })
                    .collect();
                let cpu = values.contains(&Constant::CpuCount);
                if name == "min" {
                    // Bounded by the smallest literal.
                    ints.iter().min().map_or(
                        if cpu {
                            Constant::CpuCount
                        } else {
                            Constant::Unknown
                        },
                        |&i| Constant::Int(i),
                    )
                } else if cpu {
                    Constant::CpuCount
                } else {
                    ints.iter()
                        .max()
                        .map_or(Constant::Unknown, |&i| Constant::Int(i))
                }
            }
            _ => Constant::Unknown,
        }
    }

    /// The `default=` of `parser.add_argument("--num-workers", ...)` whose destination is
    /// `dest`.
    fn argparse_default(&self, dest: &str) -> Option<Node<'a>> {
        self.keyword_value(self.argparse_call(dest)?, "default")
    }

    /// The `parser.add_argument(...)` call whose destination is `dest`.
    fn argparse_call(&self, dest: &str) -> Option<Node<'a>> {
        let calls = self.model.calls_by_name.get("add_argument")?;
        calls.iter().copied().find(|call| {
            let Some(arguments) = call.child_by_field_id(FIELDS.arguments) else {
                return false;
            };
            let mut cursor = arguments.walk();
            let mut call_dest: Option<String> = None;
            for child in arguments.named_children(&mut cursor) {
                if child.kind_id() == KINDS.keyword_argument {
                    let key = child
                        .child_by_field_id(FIELDS.name)
                        .map(|n| self.text(n))
                        .unwrap_or("");
                    if key == "dest" {
                        call_dest = child
                            .child_by_field_id(FIELDS.value)
                            .map(|v| self.text(v).trim_matches(['"', '\'']).to_owned());
                    }
                } else if child.kind_id() == KINDS.string && call_dest.is_none() {
                    let flag = self.text(child).trim_matches(['"', '\'']);
                    if flag.starts_with("--") || !flag.starts_with('-') {
                        call_dest = Some(flag.trim_start_matches('-').replace('-', "_"));
                    }
                }
            }
            call_dest.as_deref() == Some(dest)
        })
    }

    /// `cfg.num_workers` where `cfg = Config(...)` and `Config` is a dataclass of this file.
    fn dataclass_field(&self, object: Node<'a>, field: &str, depth: usize) -> Option<Constant> {
        // The class the object was built from, and the call that built it.
        let (class_name, construction) = self.constructed_class(object)?;
        let class = self.model.class_named(class_name)?;
        if let Some(construction) = construction
            && let Some(arguments) = construction.child_by_field_id(FIELDS.arguments)
        {
            let mut cursor = arguments.walk();
            for argument in arguments.named_children(&mut cursor) {
                if argument.kind_id() == KINDS.keyword_argument
                    && argument
                        .child_by_field_id(FIELDS.name)
                        .is_some_and(|n| self.text(n) == field)
                {
                    return argument
                        .child_by_field_id(FIELDS.value)
                        .map(|v| self.constant_at_depth(v, depth + 1));
                }
            }
        }
        let body = class.node.child_by_field_id(FIELDS.body)?;
        let mut cursor = body.walk();
        for statement in body.named_children(&mut cursor) {
            let Some(assignment) = statement
                .named_child(0)
                .filter(|s| s.kind_id() == KINDS.assignment)
            else {
                continue;
            };
            let Some(left) = assignment.child_by_field_id(FIELDS.left) else {
                continue;
            };
            if self.text(left) != field {
                continue;
            }
            let value = assignment.child_by_field_id(FIELDS.right)?;
            // `field(default_factory=os.cpu_count)` / `field(default=8)`.
            if value.kind_id() == KINDS.call
                && value
                    .child_by_field_id(FIELDS.function)
                    .and_then(|f| self.qualified_name(f))
                    .is_some_and(|n| n.ends_with("field"))
            {
                let arguments = value.child_by_field_id(FIELDS.arguments)?;
                let mut cursor = arguments.walk();
                for argument in arguments.named_children(&mut cursor) {
                    let key = argument
                        .child_by_field_id(FIELDS.name)
                        .map(|n| self.text(n))
                        .unwrap_or("");
                    let Some(v) = argument.child_by_field_id(FIELDS.value) else {
                        continue;
                    };
                    if key == "default" {
                        return Some(self.constant_at_depth(v, depth + 1));
                    }
                    if key == "default_factory" {
                        let name = self.qualified_name(v).unwrap_or_default();
                        return Some(match name.as_str() {
                            "os.cpu_count" | "multiprocessing.cpu_count" => Constant::CpuCount,
                            _ => Constant::Unknown,
                        });
                    }
                }
                return Some(Constant::Unknown);
            }
            return Some(self.constant_at_depth(value, depth + 1));
        }
        None
    }

    /// `cfg` → (`"RankerConfig"`, the `RankerConfig(...)` call), following assignments.
    fn constructed_class(&self, object: Node<'a>) -> Option<(&'a str, Option<Node<'a>>)> {
        let mut node = object;
        for _ in 0..MAX_DEPTH {
            if node.kind_id() == KINDS.call {
                let callee = node.child_by_field_id(FIELDS.function)?;
                let name = self.text(callee);
                return self
                    .model
                    .class_named(name)
                    .map(|class| (class.name, Some(node)));
            }
            if node.kind_id() == KINDS.identifier {
                let name = self.text(node);
                let scope = self.scope_at(node);
                let (_, bindings) = self.model.scopes.lookup(scope, name, node.start_byte())?;
                let binding = bindings
                    .iter()
                    .rev()
                    .find(|b| b.offset <= node.start_byte())
                    .or(bindings.last())?;
                match binding.site {
                    Site::Value {
                        value, index: None, ..
                    } => node = value,
                    Site::Parameter { function, .. } => {
                        // A parameter annotated with a dataclass: `def train(cfg: Config)`.
                        let parameters = function.child_by_field_id(FIELDS.parameters)?;
                        let mut cursor = parameters.walk();
                        let annotated = parameters.named_children(&mut cursor).find(|p| {
                            self.text(*p).starts_with(name)
                                && p.child_by_field_id(FIELDS.type_).is_some()
                        })?;
                        let annotation = self.text(annotated.child_by_field_id(FIELDS.type_)?);
                        return self.model.class_named(annotation).map(|c| (c.name, None));
                    }
                    _ => return None,
                }
                continue;
            }
            if node.kind_id() == KINDS.attribute && self.text(node).starts_with("self.") {
                let attribute = self.text(node.child_by_field_id(FIELDS.attribute)?);
                let assignment = self.self_assignments(attribute).next()?;
                match assignment.site {
                    Site::Value {
                        value, index: None, ..
                    } => node = value,
                    _ => return None,
                }
                continue;
            }
            return None;
        }
        None
    }
}
