//! Facts derived from the semantic model on demand, once per file: grad mode everywhere
//! (`grad`), which values are models (`modules`), value provenance (`values`) and constants
//! (`constants`). Each is computed the first time a rule asks, so files without a finding
//! candidate pay nothing.

use std::cell::{OnceCell, RefCell};

use crate::syntax::Node;
use rustc_hash::FxHashMap as HashMap;

use super::facts::{Answer, Ask, FactBase, Question};
use super::grad::GradInfo;
use super::modules::ModuleInfo;
use super::scope::ScopeId;
use super::values::{CallKey, ValueFacts};
use super::{AttributeAssignment, SemanticModel};
use crate::parse::text;

/// The device and graph of what a class stores into a container's slots.
pub(super) type SlotFacts = (super::values::Tri, super::values::Tri);
/// Parameters assumed to hold some facts: (function node id, parameter index, facts).
pub(super) type GivenParameters = Vec<(usize, u32, ValueFacts)>;

pub struct Analysis<'a> {
    pub model: &'a SemanticModel<'a>,
    pub root: Node<'a>,
    pub source: &'a str,
    grad: OnceCell<GradInfo>,
    modules: OnceCell<ModuleInfo>,
    /// Value facts by node id (`values::facts` fills it).
    pub(super) values: RefCell<HashMap<usize, ValueFacts>>,
    /// Value facts given what some parameters hold (`values::facts_given_parameter`), by
    /// node id: each with the parameters' facts it was computed for. A method's stores are
    /// asked once per parameter, by several rules, and each asks of every node under them.
    pub(super) values_given: RefCell<HashMap<usize, Vec<(GivenParameters, ValueFacts)>>>,
    /// Nodes whose facts are being computed, to cut cycles (`x = x + 1`).
    pub(super) in_progress: RefCell<Vec<usize>>,
    /// What calls of the file's own functions return, by argument facts (`values`).
    pub(super) calls: RefCell<HashMap<CallKey, Option<ValueFacts>>>,
    pub(super) targets_gpu: OnceCell<bool>,
    /// `self.<attribute> = ...` assignments by attribute, as indices into the model's
    /// `attribute_assignments` in document order: every `self.x` in a module asks for them,
    /// and a model file has thousands.
    self_assignments: OnceCell<HashMap<&'a str, Vec<usize>>>,
    /// The rest of the project, when the file is linted as part of one.
    project: Option<ProjectView<'a>>,
    /// What this file asked the fact base, and the answers (see [`Question`]).
    questions: RefCell<Vec<Question>>,
    /// The texts of values the file uses as models (`instances::used_as_module`).
    pub(super) module_evidence: OnceCell<rustc_hash::FxHashSet<&'a str>>,
    /// The texts of the models the file freezes (`frozen`).
    pub(super) frozen: OnceCell<rustc_hash::FxHashSet<&'a str>>,
    /// Whether the file trains anything (see [`Analysis::trains_anything`]).
    trains_anything: OnceCell<bool>,
    loads_weights: OnceCell<bool>,
    /// Functions by node id, and their parameters by index (`stores`).
    pub(super) parameter_memo: RefCell<HashMap<usize, Vec<(u32, &'a str)>>>,
    /// The names of the file's methods (`may_store` asks at every call).
    method_names: OnceCell<rustc_hash::FxHashSet<&'a str>>,
    /// What the run knows of libraries (the built-in table, or the config's extension of it).
    pub frameworks: &'a super::frameworks::Frameworks,
    /// The fact base's answers so far, by question as the file spells it.
    answers: RefCell<HashMap<Ask, Answer>>,
    /// Whether the file's methods of a name keep a parameter, by name.
    own_storing: RefCell<rustc_hash::FxHashMap<String, bool>>,
    /// The last node `record_graph_arguments` looked at (the rules that share it ask twice).
    pub recorded_node: std::cell::Cell<usize>,
    /// The file's `if` statements, by start (`branches`).
    pub(super) if_statements: OnceCell<Vec<Node<'a>>>,
    /// The last statement asked about as a store on `self`, with the answer.
    pub(super) last_store: std::cell::Cell<Option<(usize, Option<super::stores::Store<'a>>)>>,
    /// Per class, its `self.m(...)` calls of its own methods (`stores`).
    pub(super) self_calls: RefCell<HashMap<usize, std::rc::Rc<[super::stores::SelfCall<'a>]>>>,
    /// Methods by node id, and the parameters they keep (`stores`).
    pub(super) stored_memo: RefCell<HashMap<usize, Vec<super::stores::StoredParameter>>>,
    /// What a class's methods store into the slots of a container on `self` (device, graph),
    /// by the class and the container's text; `(No, No)` while being worked out.
    pub(super) slot_memo: RefCell<HashMap<(usize, &'a str), SlotFacts>>,
    /// Calls of the project's functions that pass a graph-carrying tensor.
    graph_calls: RefCell<Vec<crate::semantic::cross_file::GraphCall>>,
    /// Per loop, the names it backpropagates through (`backprop`).
    pub(super) backpropagated: RefCell<super::backprop::Backpropagated<'a>>,
    /// Functions by node id, and whether they run a forward pass with their caller's grad.
    pub(super) forward_with_grad_memo: RefCell<HashMap<usize, bool>>,
    /// Functions by node id, and whether they run a forward pass (`forward`).
    pub(super) runs_forward_memo: RefCell<HashMap<usize, bool>>,
    /// Functions by node id and call depth, and whether they run a forward pass themselves or
    /// through a helper: asked at every call of a helper, and a body can be large.
    pub(super) helper_forward_memo: RefCell<HashMap<(usize, usize), bool>>,
    /// Loops that train through the functions they call (`steps`).
    pub(super) loop_steps: RefCell<super::steps::LoopSteps>,
    /// Loops over evaluation data, by loop node id.
    pub(super) evaluation_loops: RefCell<HashMap<usize, bool>>,
    /// The class each expression asked about is an instance of, by node id: the value
    /// analysis asks it of the same receivers for every attribute and call on them.
    pub(super) instance_memo: RefCell<HashMap<usize, Option<super::instances::ClassRef>>>,
}

/// The fact base and the file's place in it.
#[derive(Clone, Copy)]
pub struct ProjectView<'a> {
    pub facts: &'a FactBase,
    /// The file's index in the fact base (`None` for a buffer or stdin that is not one of
    /// its files).
    pub file: Option<usize>,
    /// The dotted path relative imports start from.
    pub module: &'a str,
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
            values_given: RefCell::new(HashMap::default()),
            in_progress: RefCell::new(Vec::new()),
            calls: RefCell::new(HashMap::default()),
            targets_gpu: OnceCell::new(),
            self_assignments: OnceCell::new(),
            project: None,
            questions: RefCell::new(Vec::new()),
            loop_steps: RefCell::new(HashMap::default()),
            evaluation_loops: RefCell::new(HashMap::default()),
            instance_memo: RefCell::new(HashMap::default()),
            module_evidence: OnceCell::new(),
            frozen: OnceCell::new(),
            runs_forward_memo: RefCell::new(HashMap::default()),
            helper_forward_memo: RefCell::new(HashMap::default()),
            forward_with_grad_memo: RefCell::new(HashMap::default()),
            backpropagated: RefCell::new(HashMap::default()),
            graph_calls: RefCell::new(Vec::new()),
            self_calls: RefCell::new(HashMap::default()),
            stored_memo: RefCell::new(HashMap::default()),
            slot_memo: RefCell::new(HashMap::default()),
            parameter_memo: RefCell::new(HashMap::default()),
            method_names: OnceCell::new(),
            frameworks: super::frameworks::builtin(),
            answers: RefCell::default(),
            own_storing: RefCell::default(),
            recorded_node: std::cell::Cell::new(usize::MAX),
            last_store: std::cell::Cell::new(None),
            if_statements: OnceCell::new(),
            trains_anything: OnceCell::new(),
            loads_weights: OnceCell::new(),
        }
    }

    /// The same analysis, answering what the file imports from the project's fact base.
    pub fn with_project(mut self, project: ProjectView<'a>) -> Self {
        self.frameworks = project.facts.frameworks();
        self.project = Some(project);
        self
    }

    /// Whether the file names no accelerator but is one file of a run of several: a model
    /// here runs wherever the run puts it, which another file decides (`extract_features(model,
    /// loader)` of a package whose training script calls `model.cuda()`). Findings that rest on
    /// it carry `Assumption::RunNamesAccelerator`.
    pub fn device_assumed(&self) -> bool {
        self.project.is_some_and(|project| project.facts.len() > 1) && !self.targets_gpu()
    }

    /// The qualified name a bare name has through one of several `from m import *`: the
    /// module of the run that defines it (a single star import resolves without asking).
    pub fn star_imported(&self, name: &str) -> Option<String> {
        let stars = &self.model.scopes.star_imports;
        if stars.len() < 2 || self.project.is_none() {
            return None;
        }
        stars.iter().find_map(|module| {
            let qualified = format!("{module}.{name}");
            self.ask(Ask::Defines(qualified.clone())).map(|_| qualified)
        })
    }

    /// Records a call that passes a graph-carrying tensor to a function of the project.
    pub fn record_graph_call(&self, call: crate::semantic::cross_file::GraphCall) {
        let mut calls = self.graph_calls.borrow_mut();
        if !calls.contains(&call) {
            calls.push(call);
        }
    }

    pub fn take_graph_calls(&self) -> Vec<crate::semantic::cross_file::GraphCall> {
        std::mem::take(&mut *self.graph_calls.borrow_mut())
    }

    /// The questions asked of the fact base so far, without repeats.
    pub fn take_questions(&self) -> Vec<Question> {
        let questions = std::mem::take(&mut *self.questions.borrow_mut());
        let mut seen = rustc_hash::FxHashSet::default();
        questions
            .into_iter()
            .filter(|question| seen.insert(question.ask.clone()))
            .collect()
    }

    /// Asks the fact base (or, outside a project, the framework table) about an imported
    /// name; `qualified` as the file's imports spell it (relative imports included).
    pub fn ask(&self, ask: Ask) -> Option<ValueFacts> {
        self.ask_answer(ask).facts()
    }

    /// [`Analysis::ask`], with the whole answer.
    pub fn ask_answer(&self, ask: Ask) -> Answer {
        // The value analysis asks the same of many lines (`torch.nn.Linear`, `F.relu`).
        if let Some(known) = self.answers.borrow().get(&ask) {
            return known.clone();
        }
        let answer = self.answer_afresh(ask.clone());
        self.answers.borrow_mut().insert(ask, answer.clone());
        answer
    }

    fn answer_afresh(&self, mut ask: Ask) -> Answer {
        let Some(project) = self.project else {
            let facts = match &ask {
                Ask::Call(name) => self.frameworks.call_result(name),
                Ask::Value(name) => self.frameworks.value_of(name),
                Ask::ModuleClass(name) => self
                    .frameworks
                    .is_module_base(name)
                    .then(|| super::facts::module_facts(super::values::Kind::Module)),
                _ => None,
            };
            return facts.map_or(Answer::Unknown, Answer::Facts);
        };
        let name = ask.name_mut();
        *name = absolute(name, project.module);
        let answer = project.facts.answer(&ask, project.file);
        self.questions.borrow_mut().push(Question {
            ask,
            answer: answer.clone(),
        });
        answer
    }

    /// The name a function of the project has where it is defined (see
    /// [`FactBase::canonical`]); `qualified` as this file spells it.
    pub fn canonical(&self, qualified: &str) -> Option<String> {
        let project = self.project?;
        project
            .facts
            .canonical(&absolute(qualified, project.module), project.file)
    }

    /// Whether the file trains anything: a backward or an optimizer anywhere in it. A file that
    /// does not, running a model loaded with trained weights, is inference code (a serving
    /// handler, a demo).
    pub fn trains_anything(&self) -> bool {
        *self.trains_anything.get_or_init(|| {
            let text = self.source;
            // A backward of the framework table, by the calls the model's walk recorded.
            self.frameworks
                .backward_methods()
                .iter()
                .any(|method| self.model.calls_by_name.contains_key(method.as_str()))
                || file_mentions(text, "optim")
                || file_mentions(text, ".step(")
        })
    }

    /// Whether the file loads trained weights: `torch.jit.load`, `from_pretrained`,
    /// `torch.hub.load` (by text; the call's resolution is the value analysis's).
    pub fn loads_weights(&self) -> bool {
        *self.loads_weights.get_or_init(|| {
            let text = self.source;
            file_mentions(text, "from_pretrained(") || file_mentions(text, ".load(")
        })
    }

    /// Whether a method of this name may keep a parameter: one of the file's own methods
    /// does, or a summarised one of the project.
    pub fn may_store(&self, method: &str) -> bool {
        // The file's own methods of that name, analysed when a call first names them.
        let names = self.method_names.get_or_init(|| {
            self.model
                .classes
                .iter()
                .flat_map(|class| class.methods.iter())
                .map(|(name, _)| *name)
                .collect()
        });
        let own = names.contains(method) && {
            let known = self.own_storing.borrow().get(method).copied();
            known.unwrap_or_else(|| {
                let stores = self
                    .model
                    .classes
                    .iter()
                    .flat_map(|class| class.methods.iter())
                    .any(|(name, function)| {
                        *name == method && !self.stored_parameters(*function).is_empty()
                    });
                self.own_storing
                    .borrow_mut()
                    .insert(method.to_owned(), stores);
                stores
            })
        };
        own || self.project.is_some_and(|p| p.facts.may_store(method))
    }

    /// The dotted path of this file in the project (its functions' canonical names start with
    /// it).
    pub fn module_path(&self) -> Option<&'a str> {
        self.project.map(|project| {
            project
                .module
                .strip_suffix(".__init__")
                .unwrap_or(project.module)
        })
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

fn absolute(name: &str, module: &str) -> String {
    if name.starts_with('.') {
        super::summary::absolute_module(name, module)
    } else {
        name.to_owned()
    }
}

/// Whether a whole file's text contains `needle`: a vectorised search, where `str::contains`
/// would cost as much as a second lexer on every file.
pub fn file_mentions(text: &str, needle: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some()
}
