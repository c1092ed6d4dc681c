//! The rule pass: a replay of the semantic model's skeleton (no second walk of the tree) that
//! keeps the context (scope, loops, grad mode, handlers, guards) and hands each node to the
//! rules registered for its kind.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use tree_sitter::QueryCursor;

use crate::syntax::{Node, SyntaxTree as Tree};

use crate::diagnostic::Diagnostic;
use crate::parse::{Descend, FIELDS, KINDS, Visit, text, walk};
use crate::rule_meta::RuleMeta;
use crate::rule_meta::declarative::Context;
use crate::rules::Dispatch;
use crate::semantic::accumulation::Accumulation;
use crate::semantic::analysis::{Analysis, ProjectView};
use crate::semantic::cross_file::{self, Assumption, FunctionKey};
use crate::semantic::facts::Question;
use crate::semantic::frameworks::Frameworks;
use crate::semantic::gates::{self, Interval};
pub use crate::semantic::grad::GradMode;
use crate::semantic::modules;
pub use crate::semantic::position::{PerBatchEvidence, Position};
use crate::semantic::scope::ScopeId;
use crate::semantic::summary::{self, Demand, FileSummary};
use crate::semantic::{SemanticModel, training};
use crate::settings::Settings;
use crate::source::{SourceFile, TextRange};

#[derive(Debug, Clone, Copy)]
enum FrameKind {
    Function,
    /// Lambdas and classes: code inside runs at another time than the surrounding code.
    OtherScope,
    Loop,
    Except,
    If {
        debug_guard: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct Frame<'t> {
    node: Node<'t>,
    kind: FrameKind,
    /// A function's or loop's facts, looked up once when the frame opens: rules ask for them
    /// at every node inside.
    function: Option<&'t crate::semantic::FunctionFacts>,
    loop_facts: Option<&'t crate::semantic::LoopFacts>,
}

#[derive(Clone, Copy)]
struct FieldLookup<'a> {
    node: usize,
    field: u16,
    child: Option<Node<'a>>,
}

/// Slots of the field-lookup cache: enough for the statements and calls the rules at one
/// node look into.
const FIELD_SLOTS: usize = 16;

#[derive(Clone, Copy)]
struct RecordedCall<'a> {
    id: usize,
    found: Option<(Node<'a>, &'a str)>,
}

/// A rule that failed with a panic, contained to this file.
#[derive(Debug, Clone)]
pub struct InternalError {
    pub rule: Arc<RuleMeta>,
    pub message: String,
}

pub struct Checker<'a> {
    pub source: &'a SourceFile,
    pub tree: &'a Tree,
    pub model: &'a SemanticModel<'a>,
    pub settings: &'a Settings,
    pub analysis: Analysis<'a>,
    frames: Vec<Frame<'a>>,
    scopes: Vec<ScopeId>,
    /// The last node resolved and its qualified name: the rules at one call node all ask
    /// about the same callee.
    resolved: std::cell::RefCell<Option<(usize, Option<String>)>>,
    /// Per-function answers the rules ask at every call inside it, by function node id and
    /// the question's address (hashing the question's text would cost more than most
    /// answers).
    pub(crate) function_memo:
        std::cell::RefCell<rustc_hash::FxHashMap<(usize, usize, usize), bool>>,
    /// Whether the file's text holds the words a declarative clause needs, by the clause's
    /// rule spec (its address) and index: asked at every node of the clause's kind.
    pub(crate) holds_words: std::cell::RefCell<rustc_hash::FxHashMap<(usize, usize), bool>>,
    /// Rule options read so far, by rule and option name: read at every call otherwise.
    options: std::cell::RefCell<Vec<(usize, &'static str, Option<toml::Value>)>>,
    /// The last statement asked whether it accumulates into a container, and the answer
    /// (several memory rules ask at each statement).
    pub(crate) accumulation: std::cell::Cell<Option<(usize, Option<Accumulation<'a>>)>>,
    /// The last answer of [`Checker::per_step_context`], by the frame that decides it (the
    /// innermost loop of the function, else the function) and the question: rules ask it at
    /// most calls, and every node of one loop body gets the same answer.
    per_step: std::cell::RefCell<Option<(usize, bool, Option<PerBatchEvidence>)>>,
    /// Names of this file's methods that add something to `self` (`self.sum += val`).
    pub(crate) storing_methods: std::cell::OnceCell<rustc_hash::FxHashSet<String>>,
    /// The last call asked for its callee and name, and the model's answer (a lookup in a
    /// map as large as the file's calls, which every call rule makes several times).
    recorded_call: std::cell::Cell<Option<RecordedCall<'a>>>,
    /// Recent field lookups (see [`Checker::field`]).
    fields: [std::cell::Cell<Option<FieldLookup<'a>>>; FIELD_SLOTS],
}

/// What the rule pass found, and what it learnt of the file for the rest of the project.
pub struct CheckOutcome {
    pub diagnostics: Vec<Diagnostic>,
    pub internal_errors: Vec<InternalError>,
    /// The file's names that other files import (`summary::Demand`), summarised.
    pub summary: FileSummary,
    /// What the file asked the project's fact base.
    pub questions: Vec<Question>,
    /// Calls that pass a graph-carrying tensor to the project's functions.
    pub graph_calls: Vec<crate::semantic::cross_file::GraphCall>,
}

/// Runs every enabled rule over one parsed file in a single walk; with a project, the file's
/// imports are answered from its fact base and the names other files import are summarised.
pub fn check<'a>(
    source: &'a SourceFile,
    tree: &'a Tree,
    model: &'a SemanticModel<'a>,
    settings: &'a Settings,
    project: Option<(ProjectView<'a>, &Demand)>,
    findings: Findings,
) -> CheckOutcome {
    let dispatch = Dispatch::of(settings);
    let mut analysis = Analysis::new(model, tree.root_node(), source.text());
    analysis.frameworks = Frameworks::of(settings);
    if let Some((view, _)) = project {
        analysis = analysis.with_project(view);
    }
    let mut checker = Checker {
        source,
        tree,
        model,
        settings,
        analysis,
        frames: Vec::new(),
        scopes: vec![0],
        resolved: std::cell::RefCell::new(None),
        function_memo: std::cell::RefCell::new(rustc_hash::FxHashMap::default()),
        holds_words: std::cell::RefCell::new(rustc_hash::FxHashMap::default()),
        options: std::cell::RefCell::new(Vec::new()),
        storing_methods: std::cell::OnceCell::new(),
        accumulation: std::cell::Cell::new(None),
        per_step: std::cell::RefCell::new(None),
        recorded_call: std::cell::Cell::new(None),
        fields: Default::default(),
    };
    let mut diagnostics = Vec::new();
    let mut failed: Vec<InternalError> = Vec::new();
    let mut cursor = QueryCursor::new();
    cursor.set_max_start_depth(Some(0));

    for step in &model.skeleton {
        let (node, kind) = (step.node, step.kind);
        if !step.enter {
            checker.leave(node, step.opens_scope);
            continue;
        }
        checker.enter(node, kind, step.opens_scope);
        for (_, entry) in dispatch.for_kind(kind) {
            // A user's pattern may still look for a literal binding; built-in rules do not.
            if step.binds_literal && matches!(entry, crate::rules::Entry::Rust { .. }) {
                continue;
            }
            if findings == Findings::FactsOnly && !entry.records_facts() {
                continue;
            }
            // A rule that panicked is skipped for the rest of the file, every clause of it.
            if !failed.is_empty()
                && failed
                    .iter()
                    .any(|error| Arc::ptr_eq(&error.rule, entry.rule()))
            {
                continue;
            }
            IN_RULE.with(|flag| flag.set(true));
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let out = (findings == Findings::Made).then_some(&mut diagnostics);
                entry.run(node, &checker, &mut cursor, out)
            }));
            IN_RULE.with(|flag| flag.set(false));
            if let Err(panic) = outcome {
                failed.push(InternalError {
                    rule: Arc::clone(entry.rule()),
                    message: panic_message(&panic),
                });
            }
        }
    }
    let summary = match project {
        Some((view, demand)) => summary::summarize(&checker.analysis, view.module, demand),
        None => FileSummary::default(),
    };
    CheckOutcome {
        diagnostics,
        internal_errors: failed,
        summary,
        questions: checker.analysis.take_questions(),
        graph_calls: checker.analysis.take_graph_calls(),
    }
}

/// Whether a check makes the file's findings, or only records its facts for the project's
/// other files (a context file of a run on some of a project's files: its findings are not
/// the run's, and its rules' checks would be most of what linting it costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Findings {
    Made,
    FactsOnly,
}

/// Whether the last dotted part of `name` is `last` (`torch.load`, `load`).
pub fn last_part_is(name: &str, last: &str) -> bool {
    name.strip_suffix(last)
        .is_some_and(|head| head.is_empty() || head.ends_with('.'))
}

thread_local! {
    /// Set while a rule runs, so the panic hook stays quiet for panics we contain.
    static IN_RULE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps the default panic report for real crashes, and silences the panics of rules, which
/// [`check`] contains and reports as internal errors naming the rule and the file.
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_RULE.with(std::cell::Cell::get) {
                default(info);
            }
        }));
    });
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(message) = panic.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message.clone()
    } else {
        "unknown panic".to_owned()
    }
}

impl<'a> Checker<'a> {
    fn enter(&mut self, node: Node<'a>, kind: u16, opens_scope: bool) {
        let k = &*KINDS;
        if opens_scope && let Some(scope) = self.model.scope_of(node) {
            self.scopes.push(scope);
        }
        let frame = if kind == k.function_definition {
            Some(FrameKind::Function)
        } else if kind == k.lambda || kind == k.class_definition {
            Some(FrameKind::OtherScope)
        } else if kind == k.for_statement || kind == k.while_statement {
            Some(FrameKind::Loop)
        } else if kind == k.except_clause {
            Some(FrameKind::Except)
        } else if kind == k.if_statement {
            let debug_guard = node
                .child_by_field_id(FIELDS.condition)
                .is_some_and(|condition| is_debug_condition(text(condition, self.text())));
            Some(FrameKind::If { debug_guard })
        } else {
            None
        };
        if let Some(kind) = frame {
            let function = matches!(kind, FrameKind::Function)
                .then(|| self.model.function_facts(node))
                .flatten();
            let loop_facts = matches!(kind, FrameKind::Loop)
                .then(|| self.model.loop_facts(node))
                .flatten();
            self.frames.push(Frame {
                node,
                kind,
                function,
                loop_facts,
            });
        }
    }

    fn leave(&mut self, node: Node<'a>, closes_scope: bool) {
        if self.frames.last().is_some_and(|frame| frame.node == node) {
            self.frames.pop();
        }
        if closes_scope {
            self.scopes.pop();
        }
    }

    pub fn text(&self) -> &'a str {
        self.source.text()
    }

    pub fn node_text(&self, node: Node<'_>) -> &'a str {
        text(node, self.source.text())
    }

    /// A fact about the current function, computed once per function and question.
    pub fn function_memo(&self, question: &'static str, compute: impl FnOnce() -> bool) -> bool {
        let function = self.current_function().map(|(function, _)| function);
        self.memo_of(function, question, compute)
    }

    /// A fact about `function` (the module's top level when `None`, not remembered), computed
    /// once per function and question.
    pub fn memo_of(
        &self,
        function: Option<Node<'_>>,
        question: &'static str,
        compute: impl FnOnce() -> bool,
    ) -> bool {
        let Some(function) = function else {
            return compute();
        };
        // The question's address and length: two questions share an address only when one's
        // text starts the other's.
        let key = (function.id(), question.as_ptr() as usize, question.len());
        if let Some(answer) = self.function_memo.borrow().get(&key) {
            return *answer;
        }
        let answer = compute();
        self.function_memo.borrow_mut().insert(key, answer);
        answer
    }

    /// The qualified name an expression refers to at the current point of the walk.
    pub fn qualified_name(&self, node: Node<'_>) -> Option<String> {
        if let Some((id, name)) = &*self.resolved.borrow()
            && *id == node.id()
        {
            return name.clone();
        }
        let scope = *self
            .scopes
            .last()
            .expect("the module scope is never popped");
        let name =
            self.model
                .scopes
                .qualified_name(scope, node, self.tree.root_node(), self.text());
        *self.resolved.borrow_mut() = Some((node.id(), name.clone()));
        name
    }

    /// The callee of a call (`f` of `f(x)`). A tree-sitter field lookup costs a scan of the
    /// node's children; the walk that built the model has found most callees already.
    pub fn callee(&self, call: Node<'a>) -> Option<Node<'a>> {
        self.recorded_call(call)
            .map(|(callee, _)| callee)
            .or_else(|| call.child_by_field_id(FIELDS.function))
    }

    /// `node.child_by_field_id(field)`, remembered: the rules at one node each take the same
    /// statement apart (`left`, `right`, `value`), and a field lookup scans the node's
    /// children every time.
    pub fn field(&self, node: Node<'a>, field: u16) -> Option<Node<'a>> {
        let id = node.id();
        let slot = &self.fields[(id >> 4 ^ usize::from(field)) % FIELD_SLOTS];
        if let Some(lookup) = slot.get()
            && lookup.node == id
            && lookup.field == field
        {
            return lookup.child;
        }
        let child = node.child_by_field_id(field);
        slot.set(Some(FieldLookup {
            node: id,
            field,
            child,
        }));
        child
    }

    /// The name a call calls (`f` of `f(x)`, `m` of `obj.m(x)`), as the model recorded it.
    pub fn call_name(&self, call: Node<'a>) -> Option<&'a str> {
        self.recorded_call(call).map(|(_, name)| name)
    }

    fn recorded_call(&self, call: Node<'a>) -> Option<(Node<'a>, &'a str)> {
        if let Some(RecordedCall { id, found }) = self.recorded_call.get()
            && id == call.id()
        {
            return found;
        }
        let found = self.model.recorded_call(call);
        self.recorded_call.set(Some(RecordedCall {
            id: call.id(),
            found,
        }));
        found
    }

    /// The argument list of a call, looked up once for all the rules at that call.
    pub fn arguments(&self, call: Node<'a>) -> Option<Node<'a>> {
        self.field(call, FIELDS.arguments)
    }

    /// Whether the callee of `call` can resolve to a qualified name whose last part passes
    /// `last`, before resolving it: `a.b.f` resolves to a name ending in `.f` or to nothing,
    /// and so does a bare `f` unless the file binds `f` to an import or an alias
    /// (`from torch import load as L`); a parenthesized callee is unwrapped first.
    pub fn may_resolve_to(&self, call: Node<'a>, last: impl Fn(&str) -> bool) -> bool {
        let Some((callee, name)) = self.recorded_call(call) else {
            // A callee that is no name (`(torch.load)(f)`), or a call the walk passed over.
            return self.callee(call).is_some_and(|callee| {
                let kind = callee.kind_id();
                kind == KINDS.identifier || kind == KINDS.parenthesized_expression
            });
        };
        if callee.kind_id() == KINDS.identifier && self.model.scopes.may_rename(name) {
            return true;
        }
        last(name)
    }

    /// Whether the callee of `call` resolves to one of `names`.
    pub fn calls_one_of(&self, call: Node<'a>, names: &[&str]) -> bool {
        if !self.may_resolve_to(call, |last| {
            names.iter().any(|name| last_part_is(name, last))
        }) {
            return false;
        }
        self.callee(call)
            .and_then(|function| self.qualified_name(function))
            .is_some_and(|name| names.contains(&name.as_str()))
    }

    /// Frames of the current function (innermost first), up to its boundary.
    fn frames_in_function(&self) -> impl Iterator<Item = &Frame<'a>> {
        self.frames
            .iter()
            .rev()
            .take_while(|frame| !matches!(frame.kind, FrameKind::Function | FrameKind::OtherScope))
    }

    fn enclosing_function(&self) -> Option<&Frame<'a>> {
        self.frames
            .iter()
            .rev()
            .find(|frame| matches!(frame.kind, FrameKind::Function | FrameKind::OtherScope))
    }

    /// For a finding that needs grad at `node` where only the callers of its function can
    /// tell: the assumption the project pass checks.
    pub fn caller_assumption(&self, node: Node<'_>) -> Option<Assumption> {
        let id = self.analysis.grad().deciding_function(node.start_byte())?;
        let facts = self.model.function_facts_by_id(id)?;
        // A function that calls `.backward()` or `optimizer.step()` runs with grad.
        if facts.contains_training {
            return None;
        }
        let framework_hook = self.analysis.frameworks.names_no_grad_hook(&facts.name)
            && self
                .analysis
                .class_of(node)
                .is_some_and(|class| !modules::bases_are_plain_modules(&self.analysis, class));
        Some(Assumption::EnteredWithGrad {
            function: FunctionKey {
                module: cross_file::module_path(self.source.name()),
                name: facts.name.clone(),
                method: facts.class.is_some(),
            },
            framework_hook,
        })
    }

    /// Grad mode at a node, with the callers of its function taken into account.
    pub fn grad_mode(&self, node: Node<'_>) -> GradMode {
        self.analysis.grad().mode_at(node.start_byte())
    }

    /// Evidence that the current point runs once per batch: the nearest enclosing loop of the
    /// function that trains or iterates batches — unless an epoch loop (one whose nested loop
    /// trains) comes first — or, outside loops, a function that is itself a training step or a
    /// framework per-batch hook.
    pub fn per_batch(&self) -> Option<PerBatchEvidence> {
        self.per_step_context(true)
    }

    /// Like [`Checker::per_batch`], but only loops (or step functions) that train count.
    pub fn training_loop(&self) -> Option<PerBatchEvidence> {
        self.per_step_context(false)
    }

    fn per_step_context(&self, count_batch_iteration: bool) -> Option<PerBatchEvidence> {
        // The innermost loop settles the loops around it (its ancestors); without one, the
        // function does.
        let deciding = self
            .frames_in_function()
            .find(|frame| matches!(frame.kind, FrameKind::Loop))
            .or_else(|| self.enclosing_function())
            .map_or(usize::MAX, |frame| frame.node.id());
        if let Some((node, counts, answer)) = &*self.per_step.borrow()
            && *node == deciding
            && *counts == count_batch_iteration
        {
            return answer.clone();
        }
        let answer = self.find_per_step_context(count_batch_iteration);
        *self.per_step.borrow_mut() = Some((deciding, count_batch_iteration, answer.clone()));
        answer
    }

    fn find_per_step_context(&self, count_batch_iteration: bool) -> Option<PerBatchEvidence> {
        for frame in self.frames_in_function() {
            if !matches!(frame.kind, FrameKind::Loop) {
                continue;
            }
            let facts = frame.loop_facts?;
            if let Some(call) = facts
                .training_call
                .clone()
                .or_else(|| self.analysis.loop_trains_through_calls(frame.node))
            {
                return Some(PerBatchEvidence {
                    range: facts.header.clone(),
                    reason: format!(
                        "this loop runs once per training step (it calls `{}`)",
                        crate::source::snippet(&self.text()[call], 50)
                    ),
                });
            }
            if count_batch_iteration
                && let Some(reason) =
                    crate::semantic::per_batch::steps_through_batches(self, frame.node)
            {
                return Some(PerBatchEvidence {
                    range: facts.header.clone(),
                    reason,
                });
            }
            if facts.nested_training {
                // An epoch loop: code here runs between passes over the data, unless the
                // nested loop repeats updates on what this loop drew.
                return crate::semantic::per_batch::updates_on_each_iteration(self, frame.node)
                    .map(|reason| PerBatchEvidence {
                        range: facts.header.clone(),
                        reason,
                    });
            }
        }
        let frame = self.enclosing_function()?;
        let facts = frame.function?;
        if let Some(call) = &facts.training_call_outside_loops {
            return Some(PerBatchEvidence {
                range: facts.header.clone(),
                reason: format!(
                    "`{}` is a training step: it calls `{}`, so it runs once per batch",
                    facts.name,
                    crate::source::snippet(&self.text()[call.clone()], 50)
                ),
            });
        }
        if self.analysis.is_per_batch_hook(frame.node) {
            return Some(PerBatchEvidence {
                range: facts.header.clone(),
                reason: format!("`{}` runs once per batch", facts.name),
            });
        }
        None
    }

    /// The loops of the current function around the current node, innermost first.
    pub fn enclosing_loops(&self) -> Vec<Node<'a>> {
        self.frames_in_function()
            .filter(|frame| matches!(frame.kind, FrameKind::Loop))
            .map(|frame| frame.node)
            .collect()
    }

    /// The conditions of the `if` statements of the current function around the node.
    pub fn enclosing_conditions(&self) -> Vec<&'a str> {
        self.frames_in_function()
            .filter(|frame| matches!(frame.kind, FrameKind::If { .. }))
            .filter_map(|frame| frame.node.child_by_field_id(FIELDS.condition))
            .map(|condition| self.node_text(condition))
            .collect()
    }

    /// The function (`def`) around the current node, with its facts.
    pub fn current_function(&self) -> Option<(Node<'a>, &'a crate::semantic::FunctionFacts)> {
        let frame = self.enclosing_function()?;
        if !matches!(frame.kind, FrameKind::Function) {
            return None;
        }
        Some((frame.node, frame.function?))
    }

    /// Whether `node` lies in the body of `statement` (a loop or a `def`), the code that runs
    /// on every iteration or call. Error recovery can attach code to a statement outside its
    /// body (`def p(:` followed by stray code, or `for x in d:` followed by an unclosed
    /// bracket): that code takes no context from the statement.
    pub fn in_body(&self, node: Node<'_>, statement: Node<'a>) -> bool {
        self.field(statement, FIELDS.body).is_some_and(|body| {
            body.start_byte() <= node.start_byte() && node.end_byte() <= body.end_byte()
        })
    }

    /// The innermost loop of the current function, if any.
    pub fn enclosing_loop(&self) -> Option<Node<'a>> {
        self.frames_in_function()
            .find(|frame| matches!(frame.kind, FrameKind::Loop))
            .map(|frame| frame.node)
    }

    pub fn in_function(&self) -> bool {
        self.enclosing_function().is_some()
    }

    /// The step gate around `node` inside its innermost loop (or step function):
    /// `if step % 100 == 0:` makes it run once every 100 batches, not once per batch.
    pub fn interval_gate(&self, node: Node<'a>) -> Option<Interval<'a>> {
        self.frames_in_function()
            .take_while(|frame| !matches!(frame.kind, FrameKind::Loop))
            .filter(|frame| matches!(frame.kind, FrameKind::If { .. }))
            .find_map(|frame| gates::interval_of_branch(frame.node, node, self.text()))
    }

    pub fn in_except_handler(&self) -> bool {
        self.frames_in_function()
            .any(|frame| matches!(frame.kind, FrameKind::Except))
    }

    pub fn in_debug_guard(&self) -> bool {
        self.frames
            .iter()
            .any(|frame| matches!(frame.kind, FrameKind::If { debug_guard: true }))
    }

    /// Whether `node` is the context manager of a `with` statement (`with node:` or
    /// `with node as x:`).
    pub fn is_with_item(&self, node: Node<'_>) -> bool {
        let mut parent = node.parent();
        if parent.is_some_and(|p| p.kind_id() == KINDS.as_pattern) {
            parent = parent.and_then(|p| p.parent());
        }
        parent.is_some_and(|p| p.kind_id() == KINDS.with_item)
    }

    /// Evaluates a context of the declarative vocabulary at the current point. Returns the
    /// label that explains it, when it holds and there is one to show.
    pub fn context_holds(
        &self,
        context: Context,
        node: Node<'_>,
    ) -> (bool, Option<PerBatchEvidence>) {
        match context {
            Context::Loop => (self.enclosing_loop().is_some(), None),
            Context::PerBatchLoop => {
                let evidence = self.per_batch();
                (evidence.is_some(), evidence)
            }
            Context::TrainingLoop => {
                let evidence = self.training_loop();
                (evidence.is_some(), evidence)
            }
            Context::Function => (self.in_function(), None),
            Context::ModuleLevel => (!self.in_function(), None),
            Context::ExceptHandler => (self.in_except_handler(), None),
            Context::WithItem => (self.is_with_item(node), None),
            Context::DebugGuard => (self.in_debug_guard(), None),
        }
    }

    /// Whether the subtree at `node` trains a model: it holds a training loop or step, or
    /// calls a function of this module that does, or a `fit`/`train`-style entry point.
    pub fn contains_training(&self, node: Node<'_>) -> Option<TextRange> {
        let mut found = None;
        walk(node, |visit| {
            let Visit::Enter(inner) = visit else {
                return Descend::Yes;
            };
            {
                if found.is_some() || !inner.is_named() {
                    return Descend::No;
                }
                let kind = inner.kind_id();
                if kind == KINDS.for_statement || kind == KINDS.while_statement {
                    if let Some(facts) = self.model.loop_facts(inner)
                        && (facts.trains() || facts.nested_training)
                    {
                        found = Some(facts.header.clone());
                    }
                } else if kind == KINDS.call {
                    let name = training::callee_name(inner, self.text());
                    let trains = training::is_training_entry_point(name)
                        || self
                            .model
                            .functions_named(name)
                            .any(|facts| facts.contains_training);
                    if trains {
                        found = Some(inner.byte_range());
                    }
                }
                Descend::Yes
            }
        });
        found
    }

    /// The text of the statement holding `node`; for a compound statement (`for`, `with`,
    /// `if`, ...) only its header, up to its body.
    pub fn statement_text(&self, node: Node<'_>) -> &'a str {
        // Descend from the root towards `node` (`Node::parent` costs O(depth) per call, so
        // climbing would be quadratic in nesting depth); the last child of a block or module
        // on the way is the statement.
        let mut cursor = self.tree.root_node().walk();
        let mut statement = node;
        loop {
            let current = cursor.node();
            if current.id() == node.id() {
                break;
            }
            let is_block = current.kind_id() == KINDS.block || current.kind_id() == KINDS.module;
            if cursor
                .goto_first_child_for_byte(node.start_byte())
                .is_none()
            {
                break;
            }
            // Zero-width and adjacent children: move to the one that contains `node`.
            while cursor.node().end_byte() < node.end_byte() && cursor.goto_next_sibling() {}
            if cursor.node().start_byte() > node.start_byte() {
                break;
            }
            if is_block {
                statement = cursor.node();
            }
        }
        let end = statement
            .child_by_field_id(FIELDS.body)
            .or_else(|| statement.child_by_field_id(FIELDS.consequence))
            .map_or(statement.end_byte(), |body| body.start_byte());
        &self.text()[statement.start_byte()..end.max(statement.start_byte())]
    }

    /// The value of a rule option from the file's settings, or its declared default.
    pub fn option(&self, rule: &RuleMeta, name: &'static str) -> Option<toml::Value> {
        let key = std::ptr::from_ref(rule) as usize;
        if let Some((_, _, value)) = self
            .options
            .borrow()
            .iter()
            .find(|(r, n, _)| *r == key && *n == name)
        {
            return value.clone();
        }
        let value = self.settings.rule_option(rule, name);
        self.options.borrow_mut().push((key, name, value.clone()));
        value
    }
}

fn is_debug_condition(condition: &str) -> bool {
    let lower = condition.to_ascii_lowercase();
    lower.contains("debug") || lower.contains("anomal")
}

/// The checker is the place the rules ask from: [`Position`] is what the shared analysis in
/// `semantic::accumulation` needs of it.
impl<'a> Position<'a> for Checker<'a> {
    fn analysis(&self) -> &Analysis<'a> {
        &self.analysis
    }

    fn model(&self) -> &'a SemanticModel<'a> {
        self.model
    }

    fn source(&self) -> &'a SourceFile {
        self.source
    }

    fn text(&self) -> &'a str {
        Checker::text(self)
    }

    fn node_text(&self, node: Node<'_>) -> &'a str {
        Checker::node_text(self, node)
    }

    fn field(&self, node: Node<'a>, field: u16) -> Option<Node<'a>> {
        Checker::field(self, node, field)
    }

    fn callee(&self, call: Node<'a>) -> Option<Node<'a>> {
        Checker::callee(self, call)
    }

    fn call_name(&self, call: Node<'a>) -> Option<&'a str> {
        Checker::call_name(self, call)
    }

    fn arguments(&self, call: Node<'a>) -> Option<Node<'a>> {
        Checker::arguments(self, call)
    }

    fn current_function(&self) -> Option<(Node<'a>, &'a crate::semantic::FunctionFacts)> {
        Checker::current_function(self)
    }

    fn enclosing_loops(&self) -> Vec<Node<'a>> {
        Checker::enclosing_loops(self)
    }

    fn per_batch(&self) -> Option<PerBatchEvidence> {
        Checker::per_batch(self)
    }

    fn accumulation_memo(&self) -> &std::cell::Cell<Option<(usize, Option<Accumulation<'a>>)>> {
        &self.accumulation
    }
}

#[cfg(test)]
mod tests {
    use super::last_part_is;

    #[test]
    fn last_part_is_a_whole_dotted_part() {
        assert!(last_part_is("torch.load", "load"));
        assert!(last_part_is("load", "load"));
        assert!(!last_part_is("torch.safe_load", "load"));
        assert!(!last_part_is("torch.load", "torch"));
    }
}
