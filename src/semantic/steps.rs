//! Which calls run a training step somewhere else: `train_util.train_step(x)` where the
//! method calls `loss.backward()` and `optimizer.step()`, `train_one_batch(model, batch)` from
//! `utils.py`. A loop around such a call runs once per training step, as if the backward were
//! written in it.

use crate::syntax::Node;
use rustc_hash::FxHashMap as HashMap;

use super::analysis::Analysis;
use super::facts::Ask;
use super::instances::ClassRef;
use crate::parse::{self, FIELDS, KINDS};
use crate::source::TextRange;

impl<'a> Analysis<'a> {
    /// Whether the function a call calls runs a training step: one of the file's functions or
    /// methods that does, or another file's whose summary says so.
    pub fn call_trains(&self, call: Node<'a>) -> bool {
        let Some(callee) = self.model.callee(call) else {
            return false;
        };
        let kind = callee.kind_id();
        if kind == KINDS.identifier {
            let name = self.text(callee);
            if self
                .model
                .functions_named(name)
                .any(|facts| facts.class.is_none() && facts.contains_training)
            {
                return true;
            }
            return self.model.scopes.may_import(name)
                && self
                    .qualified_name(callee)
                    .is_some_and(|q| q.contains('.') && self.ask(Ask::Trains(q)).is_some());
        }
        if kind != KINDS.attribute {
            return false;
        }
        let Some(method) = self.model.call_name(call) else {
            return false;
        };
        // Library methods that are steps themselves are the walk's (`opt.step()`); these are
        // the user's own.
        if matches!(
            method,
            "backward" | "step" | "zero_grad" | "item" | "append"
        ) {
            return false;
        }
        let Some(receiver) = callee.child_by_field_id(FIELDS.object) else {
            return false;
        };
        match self.instance_class(receiver) {
            Some(ClassRef::Local(class)) => self.local_method(class, method).is_some_and(|f| {
                self.model
                    .function_facts(f)
                    .is_some_and(|facts| facts.contains_training)
            }),
            Some(ClassRef::Imported(class)) => {
                self.ask(Ask::Trains(format!("{class}.{method}"))).is_some()
            }
            // `utils.train_step(...)` through `import utils`.
            None => self
                .qualified_name(callee)
                .is_some_and(|q| q.contains('.') && self.ask(Ask::Trains(q)).is_some()),
        }
    }

    /// Whether a loop runs a training step: it calls a backward or an optimizer step itself,
    /// or a function that does.
    pub fn loop_trains(&self, loop_node: Node<'a>) -> bool {
        self.model
            .loop_facts(loop_node)
            .is_some_and(|facts| facts.trains())
            || self.loop_trains_through_calls(loop_node).is_some()
    }

    /// Whether a loop iterates evaluation data and trains nothing: `for x, y in val_loader:`,
    /// `for batch in tqdm(self.eval_dataloader)`, `for i, b in enumerate(test_ds)`. Asked for
    /// every call in the loop, so answered once per loop.
    pub fn evaluation_loop(&self, loop_node: Node<'a>) -> bool {
        if let Some(known) = self.evaluation_loops.borrow().get(&loop_node.id()) {
            return *known;
        }
        let found = loop_node.kind_id() == KINDS.for_statement
            && loop_node
                .child_by_field_id(FIELDS.right)
                .is_some_and(|iterable| {
                    parse::text(iterable, self.source)
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(super::training::names_evaluation_data)
                })
            && !self.loop_trains(loop_node);
        self.evaluation_loops
            .borrow_mut()
            .insert(loop_node.id(), found);
        found
    }

    /// A call in the loop's own body (not in a nested loop or function) that runs a training
    /// step elsewhere: the range of its callee, for labels.
    pub fn loop_trains_through_calls(&self, loop_node: Node<'a>) -> Option<TextRange> {
        if let Some(known) = self.loop_steps.borrow().get(&loop_node.id()) {
            return known.clone();
        }
        let found = self.find_training_call(loop_node);
        self.loop_steps
            .borrow_mut()
            .insert(loop_node.id(), found.clone());
        found
    }

    fn find_training_call(&self, loop_node: Node<'a>) -> Option<TextRange> {
        self.model
            .loop_calls(loop_node)
            .iter()
            .find(|call| self.call_trains(**call))
            .and_then(|call| self.model.callee(*call))
            .map(|callee| callee.byte_range())
    }
}

/// Loops by node id, and the training call found in each.
pub(super) type LoopSteps = HashMap<usize, Option<TextRange>>;
