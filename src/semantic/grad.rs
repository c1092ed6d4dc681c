//! Grad mode at every point of a file: `with torch.no_grad()` / `inference_mode()` /
//! `set_grad_enabled(...)` / `enable_grad()` blocks, the same as decorators, and for a
//! function without either, its callers: a function whose every call site in the file runs
//! with grad disabled runs with grad disabled (a fixed point over the call graph).

use crate::syntax::Node;
use rustc_hash::FxHashMap as HashMap;

use super::analysis::Analysis;
use super::facts::{Answer, Ask};
use crate::parse::find_argument;
use crate::parse::{FIELDS, KINDS};
use crate::source::TextRange;

/// Whether autograd records operations at a point of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradMode {
    Enabled,
    Disabled,
    /// `torch.set_grad_enabled(flag)` with a flag only known at run time.
    Conditional,
    /// Inside a function with no grad context of its own, called from a grad-enabled site
    /// (or from nowhere this file shows).
    FromCaller,
}

impl GradMode {
    /// Whether autograd may be recording here.
    pub fn may_record(self) -> bool {
        matches!(self, GradMode::Enabled | GradMode::FromCaller)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradEffect {
    Disable,
    Enable,
    Conditional,
}

#[derive(Debug, Clone, Copy)]
enum RegionKind {
    With(GradEffect),
    Function {
        id: usize,
        decorator: Option<GradEffect>,
    },
}

#[derive(Debug, Clone)]
struct Region {
    range: TextRange,
    kind: RegionKind,
    parent: Option<usize>,
}

#[derive(Debug, Default)]
pub struct GradInfo {
    /// In document order; nested regions follow their parent.
    regions: Vec<Region>,
    /// Functions whose every call site runs with grad disabled.
    disabled_by_callers: HashMap<usize, bool>,
}

impl GradInfo {
    pub fn build(analysis: &Analysis<'_>) -> Self {
        let mut info = GradInfo::default();
        let mut open: Vec<usize> = Vec::new();
        let mut functions: Vec<(usize, Node<'_>)> = Vec::new();
        for step in &analysis.model.skeleton {
            if !step.enter {
                continue;
            }
            let (node, kind) = (step.node, step.kind);
            let (range, region) = if kind == KINDS.with_statement {
                let Some(effect) = with_effect(analysis, node) else {
                    continue;
                };
                let Some(body) = node.child_by_field_id(FIELDS.body) else {
                    continue;
                };
                (body.byte_range(), RegionKind::With(effect))
            } else if kind == KINDS.function_definition || kind == KINDS.lambda {
                let decorator = decorator_effect(analysis, node);
                if kind == KINDS.function_definition {
                    functions.push((node.id(), node));
                }
                let body = node.child_by_field_id(FIELDS.body).unwrap_or(node);
                (
                    body.byte_range(),
                    RegionKind::Function {
                        id: node.id(),
                        decorator,
                    },
                )
            } else if kind == KINDS.call {
                let Some((range, effect)) = statement_switch(analysis, node) else {
                    continue;
                };
                (range, RegionKind::With(effect))
            } else {
                continue;
            };
            while open
                .last()
                .is_some_and(|&top| info.regions[top].range.end <= range.start)
            {
                open.pop();
            }
            info.regions.push(Region {
                range,
                kind: region,
                parent: open.last().copied(),
            });
            open.push(info.regions.len() - 1);
        }

        // Optimistic start: every function with callers is disabled until a caller says not.
        // Call sites are walked lazily: the first grad-enabled one settles a function, and a
        // model file has as many `super().__init__(...)` calls as `__init__` methods.
        let hooks: Vec<bool> = functions
            .iter()
            .map(|(_, node)| framework_no_grad_hook(analysis, *node))
            .collect();
        let has_sites: Vec<bool> = functions
            .iter()
            .map(|(_, node)| call_sites(analysis, *node).next().is_some())
            .collect();
        for (((id, _), hook), sites) in functions.iter().zip(&hooks).zip(&has_sites) {
            info.disabled_by_callers.insert(*id, *hook || *sites);
        }
        loop {
            let mut changed = false;
            for (((id, node), &hook), &sites) in functions.iter().zip(&hooks).zip(&has_sites) {
                if !info.disabled_by_callers[id] || !sites {
                    continue;
                }
                let all_disabled = call_sites(analysis, *node)
                    .all(|call| info.mode_at(call.start_byte()) == GradMode::Disabled);
                if !all_disabled && !hook {
                    info.disabled_by_callers.insert(*id, false);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // The optimistic start also keeps functions that only call each other (`train()`
        // calling `train_epoch()`, which calls `model.train()`: a call of `train` by name)
        // disabled with no call site that shows it. A mark stays only where some call site
        // is under a `no_grad` of its own, or in a function whose mark stays; then every site
        // is checked again with the marks that are left. Only marked functions are revisited.
        let mut marked: Vec<(usize, Node<'_>)> = functions
            .iter()
            .zip(&hooks)
            .filter(|((id, _), hook)| !**hook && info.disabled_by_callers[id])
            .map(|(function, _)| *function)
            .collect();
        loop {
            let mut grounded: Vec<usize> = Vec::new();
            loop {
                let before = grounded.len();
                for (id, node) in &marked {
                    if !grounded.contains(id)
                        && call_sites(analysis, *node)
                            .any(|call| info.shows_disabled(call.start_byte(), &grounded, &marked))
                    {
                        grounded.push(*id);
                    }
                }
                if grounded.len() == before {
                    break;
                }
            }
            let mut changed = false;
            marked.retain(|(id, _)| {
                let keep = grounded.contains(id);
                if !keep {
                    info.disabled_by_callers.insert(*id, false);
                    changed = true;
                }
                keep
            });
            marked.retain(|(id, node)| {
                let keep = call_sites(analysis, *node)
                    .all(|call| info.mode_at(call.start_byte()) == GradMode::Disabled);
                if !keep {
                    info.disabled_by_callers.insert(*id, false);
                    changed = true;
                }
                keep
            });
            if !changed {
                break;
            }
        }
        info
    }

    /// Whether grad is disabled at `offset` by a context of its own (a `no_grad` block or
    /// decorator, a framework's no-grad hook), or inside a function disabled by its callers
    /// that is not being revisited (`marked`) or is `grounded` already.
    fn shows_disabled(
        &self,
        offset: usize,
        grounded: &[usize],
        marked: &[(usize, Node<'_>)],
    ) -> bool {
        let Some(index) = self.innermost(offset) else {
            return false;
        };
        match self.regions[index].kind {
            RegionKind::With(effect)
            | RegionKind::Function {
                decorator: Some(effect),
                ..
            } => effect == GradEffect::Disable,
            RegionKind::Function {
                id,
                decorator: None,
            } => {
                grounded.contains(&id)
                    || (self.disabled_by_callers.get(&id).copied().unwrap_or(false)
                        && !marked.iter().any(|(revisited, _)| *revisited == id))
            }
        }
    }

    /// Grad mode at a byte offset: the innermost region decides.
    pub fn mode_at(&self, offset: usize) -> GradMode {
        let Some(index) = self.innermost(offset) else {
            return GradMode::Enabled;
        };
        let effect = match self.regions[index].kind {
            RegionKind::With(effect)
            | RegionKind::Function {
                decorator: Some(effect),
                ..
            } => effect,
            RegionKind::Function {
                id,
                decorator: None,
            } => {
                return if self.disabled_by_callers.get(&id).copied().unwrap_or(false) {
                    GradMode::Disabled
                } else {
                    GradMode::FromCaller
                };
            }
        };
        match effect {
            GradEffect::Disable => GradMode::Disabled,
            GradEffect::Enable => GradMode::Enabled,
            GradEffect::Conditional => GradMode::Conditional,
        }
    }

    /// The function whose callers decide the grad mode at `offset`, when this file cannot
    /// ([`GradMode::FromCaller`]): a node id, for the project index to look further.
    pub fn deciding_function(&self, offset: usize) -> Option<usize> {
        let index = self.innermost(offset)?;
        match self.regions[index].kind {
            RegionKind::Function {
                id,
                decorator: None,
            } if !self.disabled_by_callers.get(&id).copied().unwrap_or(false) => Some(id),
            _ => None,
        }
    }

    /// Whether the function's own decorator disables grad (`@torch.no_grad()`).
    pub fn disabled_by_decorator(&self, function: Node<'_>) -> bool {
        self.regions.iter().any(|region| {
            matches!(region.kind, RegionKind::Function { id, decorator: Some(GradEffect::Disable) } if id == function.id())
        })
    }

    /// Whether every call site of this function (by node id) runs with grad disabled.
    pub fn disabled_by_callers(&self, function: Node<'_>) -> bool {
        self.disabled_by_callers
            .get(&function.id())
            .copied()
            .unwrap_or(false)
    }

    fn innermost(&self, offset: usize) -> Option<usize> {
        let last = self
            .regions
            .partition_point(|region| region.range.start <= offset)
            .checked_sub(1)?;
        let mut index = Some(last);
        while let Some(i) = index {
            let region = &self.regions[i];
            if region.range.start <= offset && offset < region.range.end {
                return Some(i);
            }
            index = region.parent;
        }
        None
    }
}

/// The call sites of a function in this file: `f(...)` for plain functions, `x.f(...)` for
/// methods (by name: which object a method is called on is not tracked), and for a plain
/// function the calls of its aliases (`fast = torch.compile(f)`, `step = partial(f, model)`).
pub(super) fn call_sites<'a, 'b>(
    analysis: &'b Analysis<'a>,
    function: Node<'b>,
) -> impl Iterator<Item = Node<'a>> + 'b {
    let facts = analysis.model.function_facts(function);
    let is_method = facts.is_some_and(|facts| facts.class.is_some());
    let aliases = facts
        .filter(|_| !is_method)
        .map(|facts| aliases(analysis, &facts.name))
        .unwrap_or_default();
    let alias_calls = aliases
        .into_iter()
        .filter_map(|alias| analysis.model.calls_by_name.get(alias))
        .flatten()
        .filter(|call| {
            analysis
                .model
                .callee(**call)
                .is_some_and(|callee| callee.kind_id() == KINDS.identifier)
        });
    facts
        .and_then(|facts| analysis.model.calls_by_name.get(facts.name.as_str()))
        .into_iter()
        .flatten()
        .filter(move |call| {
            let callee = analysis.model.callee(**call);
            let attribute_call = callee.is_some_and(|c| c.kind_id() == KINDS.attribute);
            attribute_call == is_method
        })
        .chain(alias_calls)
        // A recursive call does not tell how the function is entered.
        .filter(move |call| !function.byte_range().contains(&call.start_byte()))
        .copied()
}

/// Functions that return their argument wrapped, called the same way and in the caller's
/// grad mode.
const FUNCTION_WRAPPERS: &[&str] = &["torch.compile", "torch.jit.script", "functools.partial"];

/// The names a plain function is also called by: `fast = torch.compile(f)`,
/// `step = functools.partial(f, model)`.
fn aliases<'a>(analysis: &Analysis<'a>, name: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    for wrapper in FUNCTION_WRAPPERS {
        let last = wrapper.rsplit('.').next().unwrap_or(wrapper);
        for call in analysis.model.calls_by_name.get(last).into_iter().flatten() {
            let wraps_it = call
                .child_by_field_id(FIELDS.arguments)
                .and_then(|arguments| arguments.named_child(0))
                .is_some_and(|first| {
                    first.kind_id() == KINDS.identifier && analysis.text(first) == name
                });
            if !wraps_it
                || analysis
                    .model
                    .callee(*call)
                    .and_then(|callee| analysis.qualified_name(callee))
                    .is_none_or(|qualified| qualified != *wrapper)
            {
                continue;
            }
            if let Some(assignment) = call.parent().filter(|p| p.kind_id() == KINDS.assignment)
                && let Some(target) = assignment.child_by_field_id(FIELDS.left)
                && target.kind_id() == KINDS.identifier
            {
                found.push(analysis.text(target));
            }
        }
    }
    found
}

fn framework_no_grad_hook(analysis: &Analysis<'_>, function: Node<'_>) -> bool {
    let Some(facts) = analysis.model.function_facts(function) else {
        return false;
    };
    let Some(class) = facts.class else {
        return false;
    };
    // The name first: resolving the class's bases costs more.
    let frameworks = analysis.frameworks;
    if !frameworks.names_no_grad_hook(&facts.name) {
        return false;
    }
    let class = &analysis.model.classes[class];
    class.bases.iter().any(|base| {
        analysis.qualified_name(*base).is_some_and(|name| {
            frameworks.is_no_grad_hook(&name, &facts.name)
                // `class Net(LitBase)` with `LitBase(LightningModule)` in another file.
                || analysis
                    .ask_answer(Ask::NoGradHook {
                        class: name,
                        method: facts.name.to_owned(),
                    })
                    == Answer::Yes
        })
    })
}

fn with_effect(analysis: &Analysis<'_>, with: Node<'_>) -> Option<GradEffect> {
    let clause = with
        .named_children(&mut with.walk())
        .find(|child| child.kind() == "with_clause")?;
    let mut cursor = clause.walk();
    let items: Vec<Node<'_>> = clause.named_children(&mut cursor).collect();
    items.into_iter().find_map(|item| {
        let mut value = item.child_by_field_id(FIELDS.value)?;
        if value.kind_id() == KINDS.as_pattern {
            value = value.named_child(0)?;
        }
        grad_effect_of(analysis, value)
    })
}

/// A bare `torch.set_grad_enabled(False)` statement switches grad mode for the statements
/// after it in the same block, up to the next such switch.
fn statement_switch(analysis: &Analysis<'_>, call: Node<'_>) -> Option<(TextRange, GradEffect)> {
    let statement = grad_switch_statement(analysis, call)?;
    let effect = grad_effect_of(analysis, call)?;
    let block = statement.parent()?;
    let mut end = block.end_byte();
    let mut next = statement.next_named_sibling();
    while let Some(sibling) = next {
        let switches = sibling.named_child(0).is_some_and(|child| {
            child.kind_id() == KINDS.call && grad_switch_statement(analysis, child).is_some()
        });
        if switches {
            end = sibling.start_byte();
            break;
        }
        next = sibling.next_named_sibling();
    }
    Some((statement.end_byte()..end, effect))
}

/// The statement holding `call` when it is a bare `set_grad_enabled(...)` statement.
fn grad_switch_statement<'a>(analysis: &Analysis<'_>, call: Node<'a>) -> Option<Node<'a>> {
    // The recorded call name first: field lookups and `parent()` cost more.
    if analysis.model.call_name(call) != Some("set_grad_enabled") {
        return None;
    }
    let statement = call.parent()?;
    (statement.kind() == "expression_statement").then_some(statement)
}

fn decorator_effect(analysis: &Analysis<'_>, function: Node<'_>) -> Option<GradEffect> {
    let parent = *analysis.model.decorated.get(&function.id())?;
    let mut cursor = parent.walk();
    let decorators: Vec<Node<'_>> = parent
        .named_children(&mut cursor)
        .filter(|child| child.kind_id() == KINDS.decorator)
        .collect();
    decorators.into_iter().find_map(|decorator| {
        let expression = decorator.named_child(0)?;
        grad_effect_of(analysis, expression)
    })
}

/// Whether `callee` may resolve to a name `grad_effect_of` knows, read off its text: most
/// decorators and `with` items (`@property`, `with open(...)`) cannot, and resolving their
/// names is most of the cost of finding the file's grad regions. The last dotted part of a
/// qualified name is the last part of the text unless the name is an alias (`ng` for
/// `torch.no_grad`), and aliases are known to the scopes.
fn may_name_a_grad_switch(analysis: &Analysis<'_>, callee: Node<'_>) -> bool {
    let kind = callee.kind_id();
    if kind != KINDS.identifier && kind != KINDS.attribute {
        return true;
    }
    let Some(last) = super::trailing_name(analysis.text(callee)) else {
        return true;
    };
    [
        "no_grad",
        "inference_mode",
        "enable_grad",
        "set_grad_enabled",
    ]
    .iter()
    .any(|name| last.contains(name))
        || (kind == KINDS.identifier && analysis.model.scopes.may_rename(last))
}

/// `torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`,
/// `torch.enable_grad()`, and the bare decorator forms.
pub fn grad_effect_of(analysis: &Analysis<'_>, expression: Node<'_>) -> Option<GradEffect> {
    let (callee, arguments) = if expression.kind_id() == KINDS.call {
        (
            expression.child_by_field_id(FIELDS.function)?,
            expression.child_by_field_id(FIELDS.arguments),
        )
    } else {
        (expression, None)
    };
    if !may_name_a_grad_switch(analysis, callee) {
        return None;
    }
    let name = analysis.qualified_name(callee)?;
    let first_argument = arguments.and_then(|arguments| {
        find_argument(arguments, analysis.source, Some("mode"), Some(0))
            .found()
            .map(|value| analysis.text(value).trim().to_owned())
    });
    match name.as_str() {
        "torch.no_grad" | "torch.autograd.no_grad" | "torch.autograd.grad_mode.no_grad" => {
            Some(GradEffect::Disable)
        }
        "torch.inference_mode" | "torch.autograd.grad_mode.inference_mode" => {
            match first_argument.as_deref() {
                None | Some("True") => Some(GradEffect::Disable),
                Some("False") => None,
                Some(_) => Some(GradEffect::Conditional),
            }
        }
        "torch.enable_grad"
        | "torch.autograd.enable_grad"
        | "torch.autograd.grad_mode.enable_grad" => Some(GradEffect::Enable),
        "torch.set_grad_enabled"
        | "torch.autograd.set_grad_enabled"
        | "torch.autograd.grad_mode.set_grad_enabled" => match first_argument.as_deref() {
            Some("False") => Some(GradEffect::Disable),
            Some("True") => Some(GradEffect::Enable),
            _ => Some(GradEffect::Conditional),
        },
        // Projects wrap these (`smart_inference_mode()`, `torch_no_grad`): trust the name.
        other => {
            let last = other.rsplit('.').next().unwrap_or(other);
            (last.contains("no_grad") || last.contains("inference_mode"))
                .then_some(GradEffect::Disable)
        }
    }
}
