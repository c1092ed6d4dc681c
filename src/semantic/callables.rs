//! Callables that code makes anew each time it runs: a `lambda`, a `functools.partial(...)`, a
//! nested `def`. Each run of such code makes another function object, and what is keyed on the
//! object (`torch.compile`'s wrapper, its CUDA graphs) starts over; a function defined once keeps
//! its identity, whatever calls it.

use crate::syntax::Node;

use super::analysis::Analysis;
use super::scope::{BindingKind, Site};
use crate::parse::{FIELDS, KINDS};

/// What kind of callable a value is, when it is made where it is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    Lambda,
    Partial,
    Def,
}

impl Made {
    /// How a message names it.
    pub fn describe(self) -> &'static str {
        match self {
            Made::Lambda => "a lambda",
            Made::Partial => "a `functools.partial`",
            Made::Def => "a nested function",
        }
    }
}

impl<'a> Analysis<'a> {
    /// `value` if it is a callable made inside `region` (a loop, or a function's body): a
    /// lambda or `functools.partial(...)` written there, or a name bound inside `region`, in
    /// `value`'s own scope and before it, to one of those or by a `def`. `None` for anything
    /// made outside `region` (it is the same object on every run) and for what is not made
    /// here at all (a model, a bound method, a parameter).
    pub fn callable_made_in(&self, value: Node<'a>, region: Node<'a>) -> Option<Made> {
        let inside = |offset: usize| region.start_byte() <= offset && offset < region.end_byte();
        if let Some(made) = self.made_callable(value) {
            return inside(value.start_byte()).then_some(made);
        }
        if value.kind_id() != KINDS.identifier {
            return None;
        }
        let scope = self.scope_at(value);
        let (bound_in, bindings) =
            self.model
                .scopes
                .lookup(scope, self.text(value), value.start_byte())?;
        // Bound in an enclosing scope, the name is the same object whatever runs here.
        if bound_in != scope {
            return None;
        }
        let binding = bindings
            .iter()
            .rev()
            .find(|binding| binding.offset < value.start_byte())?;
        if !inside(binding.offset) {
            return None;
        }
        match (&binding.kind, binding.site) {
            (BindingKind::Definition, _) => {
                let name = self
                    .root
                    .descendant_for_byte_range(binding.offset, binding.offset)?;
                name.parent()
                    .filter(|parent| parent.kind_id() == KINDS.function_definition)
                    .map(|_| Made::Def)
            }
            (
                _,
                Site::Value {
                    value, index: None, ..
                },
            ) => self.made_callable(value),
            _ => None,
        }
    }

    /// A lambda, or a call of `functools.partial`.
    fn made_callable(&self, value: Node<'a>) -> Option<Made> {
        if value.kind_id() == KINDS.lambda {
            return Some(Made::Lambda);
        }
        if value.kind_id() != KINDS.call {
            return None;
        }
        let callee = value.child_by_field_id(FIELDS.function)?;
        (self.qualified_name(callee).as_deref() == Some("functools.partial"))
            .then_some(Made::Partial)
    }
}
