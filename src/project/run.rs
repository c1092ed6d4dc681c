//! Linting a run's files as one project, for `torchlint check` and the server alike.
//!
//! The first pass lints every file once, in parallel, each after the files it imports, so
//! that what it asks of the project's fact base (is `SeqNet` a model? what does `build_model`
//! return?) is answered from their summaries. Answers given without a summary (a cycle of
//! imports, an import the scan missed, a cached file whose imports changed) are checked once
//! every file is in, and the files whose answers changed are linted again. The second pass
//! ([`super::no_grad_functions`], [`linter::keep_graph_argument_findings`]) decides what one
//! file's findings owe to the others: callers that disable grad, calls that pass a graph.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use rustc_hash::FxHashSet as HashSet;
use tree_sitter::Tree;

use crate::cache::{self, Cache, ContentHash, Fresh, Stamp};
use crate::checker::{Findings, InternalError};
use crate::diagnostic::{Diagnostic, FileDiagnostics};
use crate::discovery::{self, FileError, LintTarget, describe_io_error, display_path};
use crate::linter::{self, ProjectContext, SourceKind};
use crate::notebook;
use crate::parse;
use crate::project::imports::{self, Import};
use crate::project::notes::{Again, Note};
use crate::project::{
    self as project, Assumption, CalledNames, FunctionKey, GraphCall, ProjectFile, schedule,
    schedule::Needed,
};
use crate::rules::Dispatch;
use crate::semantic::facts::{self, FactBase, Question, Reads};
use crate::semantic::frameworks::Frameworks;
use crate::semantic::summary::{Demand, FileSummary};
use crate::settings::Settings;
use crate::settings::resolver::Resolver;
use crate::source::{self, SourceFile};

/// What linting one file came to.
#[derive(Clone)]
pub enum Outcome {
    Linted {
        file: FileDiagnostics,
        internal_errors: Vec<InternalError>,
    },
    Clean,
    Parsed,
    Failed(FileError),
}

/// Texts that stand in for files on disk (the editor's unsaved buffers), by target path, each
/// with its tree when the editor has parsed it already (incrementally, from the last one).
#[derive(Default)]
pub struct Overrides<'t> {
    texts: HashMap<PathBuf, (Vec<u8>, Option<&'t Tree>)>,
}

impl<'t> Overrides<'t> {
    pub fn new() -> Self {
        Overrides::default()
    }

    /// `tree` must be the parse of exactly `bytes`.
    pub fn insert(&mut self, path: PathBuf, bytes: Vec<u8>, tree: Option<&'t Tree>) {
        self.texts.insert(path, (bytes, tree));
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.texts.contains_key(path)
    }

    fn bytes(&self, path: &Path) -> Option<&[u8]> {
        self.texts.get(path).map(|(bytes, _)| bytes.as_slice())
    }

    fn tree(&self, path: &Path) -> Option<&'t Tree> {
        self.texts.get(path).and_then(|(_, tree)| *tree)
    }
}

/// What a project run came to: each reported file's outcome, and what the run did to get
/// there (`check -v`).
pub struct ProjectRun {
    pub checked: Vec<Checked>,
    pub notes: Vec<Note>,
}

/// One file that a run reports on: what linting it came to, and what to warn about it.
pub struct Checked {
    pub outcome: Outcome,
    /// Something to tell the user that did not stop the file being linted.
    pub warning: Option<String>,
}

/// Lints `targets` as one project and returns what the first `reported` of them came to;
/// the rest are context (what they import, pass and call decides findings in the reported
/// ones, but their own findings are not this run's). `overrides` replace files' bytes.
pub fn lint_project(
    targets: &[LintTarget],
    reported: usize,
    overrides: &Overrides,
    cache: Option<&Cache>,
) -> ProjectRun {
    let mut session = Session::scanned(
        related(targets, reported, overrides, cache),
        overrides,
        cache,
    );
    let reported: Vec<usize> = (0..reported).collect();
    let checked = session.report(&reported, overrides, cache);
    let notes = std::mem::take(&mut session.notes);
    // Freeing every file's facts takes longer than the report itself on a large run, and
    // nothing needs to wait for it: the CLI prints and exits meanwhile. (One file's are freed
    // sooner than a thread starts.)
    if targets.len() > 1 {
        std::thread::spawn(move || drop(session));
    }
    ProjectRun { checked, notes }
}

/// The reported targets (the first `reported`) and the context files related to them by
/// imports: those they import and those that import them, directly or through others. A
/// context file that is neither holds no fact their findings rest on, so it is not linted;
/// one over its settings' `context-size-limit` (a generated module) is not even read. The
/// imports found here are the session's: no file is scanned twice.
fn related(
    targets: &[LintTarget],
    reported: usize,
    overrides: &Overrides,
    cache: Option<&Cache>,
) -> Scanned {
    if reported >= targets.len() {
        return Scanned::of(targets.to_vec(), overrides, cache);
    }
    // Each file's size (or the note that it is too large to read) and imports.
    let (sizes, imports): (Vec<Result<usize, Note>>, Vec<Vec<Import>>) = targets
        .par_iter()
        .enumerate()
        .map(|(index, target)| {
            if overrides.contains(&target.path) {
                let input = read(target, overrides);
                return (Ok(input.as_ref().map_or(0, Vec::len)), scan(&input));
            }
            let metadata = std::fs::metadata(&target.path).ok();
            if index >= reported
                && let Some(note) = too_large(target, metadata.as_ref())
            {
                return (Err(note), Vec::new());
            }
            // Unchanged since a run read it: its imports without reading it.
            let stamp = metadata.as_ref().and_then(Stamp::of);
            let imports = cached_imports(target, stamp, cache, || scan(&read(target, overrides)));
            let size = metadata.map_or(0, |metadata| metadata.len());
            (Ok(usize::try_from(size).unwrap_or(usize::MAX)), imports)
        })
        .unzip();
    let facts = FactBase::new(targets.iter().map(|target| target.path.as_path()));
    let (needed, _) = link(&facts, &imports);
    let imported: Vec<Vec<usize>> = needed
        .iter()
        .map(|needs| needs.iter().map(|needed| needed.file).collect())
        .collect();
    let mut importers: Vec<Vec<usize>> = vec![Vec::new(); targets.len()];
    for (file, needs) in imported.iter().enumerate() {
        for &needed in needs {
            importers[needed].push(file);
        }
    }
    let mut keep = vec![false; targets.len()];
    keep[..reported].fill(true);
    // Each direction on its own: what a named file imports, and what imports it; not what an
    // importer's other imports bring.
    for edges in [&imported, &importers] {
        let mut seen = vec![false; targets.len()];
        let mut stack: Vec<usize> = (0..reported).collect();
        while let Some(file) = stack.pop() {
            for &next in &edges[file] {
                if !seen[next] {
                    seen[next] = true;
                    keep[next] = true;
                    stack.push(next);
                }
            }
        }
    }
    let mut scanned = Scanned::default();
    let (mut read_for_facts, mut unrelated) = (0, 0);
    for (index, (((target, keep), size), imports)) in
        targets.iter().zip(keep).zip(sizes).zip(imports).enumerate()
    {
        match (keep, size) {
            (true, Ok(size)) => {
                if index < reported {
                    scanned.reported += 1;
                } else {
                    read_for_facts += 1;
                }
                scanned.targets.push(target.clone());
                scanned.costs.push(size);
                scanned.imports.push(imports);
            }
            (_, Err(too_large)) => scanned.notes.push(too_large),
            (false, Ok(_)) => unrelated += 1,
        }
    }
    scanned.notes.insert(
        0,
        Note::Context {
            read: read_for_facts,
            unrelated,
        },
    );
    scanned
}

/// A note that a context file is over its `context-size-limit`, if it is.
fn too_large(target: &LintTarget, metadata: Option<&std::fs::Metadata>) -> Option<Note> {
    let size = metadata?.len();
    let limit = target.settings.context_size_limit;
    (size > limit).then(|| Note::TooLarge {
        path: target.path.clone(),
        size,
        limit,
    })
}

/// A run's files, each with what the schedule needs before the file is linted: its imports
/// and what linting it costs (its size).
#[derive(Default)]
struct Scanned {
    targets: Vec<LintTarget>,
    /// How many of the targets (the first) the run reports on: the rest are context.
    reported: usize,
    imports: Vec<Vec<Import>>,
    costs: Vec<usize>,
    /// What choosing the files did (`check -v`).
    notes: Vec<Note>,
}

impl Scanned {
    /// Reads and scans the targets (a file the cache says is unchanged gives its recorded
    /// imports). Its bytes are read again when it is linted: held from here to there, every
    /// file's would be most of a large run's memory.
    fn of(targets: Vec<LintTarget>, overrides: &Overrides, cache: Option<&Cache>) -> Scanned {
        let (costs, imports) = if targets.len() == 1 {
            // A file linted alone imports nothing of the run's: it is read once.
            (vec![0], vec![Vec::new()])
        } else {
            targets
                .par_iter()
                .map(|target| {
                    let input = read(target, overrides);
                    let imports = imports_of(target, &input, overrides, cache);
                    (input.as_ref().map_or(0, Vec::len), imports)
                })
                .unzip()
        };
        Scanned {
            reported: targets.len(),
            targets,
            imports,
            costs,
            notes: Vec::new(),
        }
    }
}

/// Lints one file by itself, as stdin is (`parse_only`: only reads and parses it).
pub fn lint_alone(name: &Path, bytes: &[u8], settings: &Settings, parse_only: bool) -> Outcome {
    lint_bytes(name, bytes, settings, parse_only, None).0
}

/// Only reads and parses the targets (`--parse-only`).
pub fn parse_targets(targets: &[LintTarget]) -> Vec<Outcome> {
    let overrides = Overrides::new();
    targets
        .par_iter()
        .map(|target| match read(target, &overrides) {
            Ok(bytes) => lint_bytes(&target.path, &bytes, &target.settings, true, None).0,
            Err(linted) => linted.outcome.into_outcome(),
        })
        .collect()
}

/// The folder a file's project is: the folder of the config that applies to it, or without
/// one the git repository it is in.
pub fn project_root(target: &LintTarget) -> Option<PathBuf> {
    match &target.settings.config_path {
        Some(_) => Some(target.settings.project_root.clone()),
        None => std::path::absolute(&target.path)
            .ok()
            .and_then(|path| repository_root(&path)),
    }
}

/// The other files of the projects of `files` (pre-commit's staged files, `torchlint
/// metrics.py`, the editor's open buffers), found in their [`project_root`]s: the context
/// a run on some files of a project lints them with, and what its walk depended on.
pub fn project_context(
    files: &[&LintTarget],
    targets: &[LintTarget],
    resolver: &Arc<Resolver>,
) -> discovery::Discovered {
    let mut roots: Vec<PathBuf> = Vec::new();
    for root in files.iter().filter_map(|target| project_root(target)) {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    if roots.is_empty() {
        return discovery::Discovered::default();
    }
    let named: HashSet<PathBuf> = targets
        .iter()
        .filter_map(|target| std::path::absolute(&target.path).ok())
        .collect();
    let mut context = discovery::discover(&roots, resolver);
    context.targets.retain(|target| {
        std::path::absolute(&target.path).is_ok_and(|path| !named.contains(&path))
    });
    context
}

/// The closest folder above `path` that holds a `.git`.
fn repository_root(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|folder| folder.join(".git").exists())
        .map(Path::to_owned)
}

/// One file of the first pass: its outcome, a hash of the bytes it was linted from (`None`: it
/// could not be read), and the names it calls when it was linted (not read from the cache).
struct Linted {
    outcome: Held,
    hash: Option<ContentHash>,
    called: Option<CalledNames>,
    /// Something to tell the user that does not stop the file being linted.
    warning: Option<String>,
    /// Calls that pass a graph-carrying tensor to the project's functions.
    graph_calls: Vec<GraphCall>,
}

/// What linting a file came to, as a run holds it until its report: findings without the
/// text they point into, which is read again for the files that still have findings once the
/// project pass has dropped those resting on other files. Most findings of a large run wait
/// for that pass, and their files' texts would be a quarter of the run's source in memory.
#[derive(Clone)]
enum Held {
    Findings {
        diagnostics: Vec<Diagnostic>,
        internal_errors: Vec<InternalError>,
    },
    Done(Outcome),
}

impl Held {
    fn of(outcome: Outcome) -> Held {
        match outcome {
            Outcome::Linted {
                file,
                internal_errors,
            } => Held::Findings {
                diagnostics: file.diagnostics,
                internal_errors,
            },
            outcome => Held::Done(outcome),
        }
    }

    fn diagnostics_mut(&mut self) -> Option<&mut Vec<Diagnostic>> {
        match self {
            Held::Findings { diagnostics, .. } => Some(diagnostics),
            Held::Done(_) => None,
        }
    }

    fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Held::Findings { diagnostics, .. } => diagnostics,
            Held::Done(_) => &[],
        }
    }

    /// The outcome to report: the findings with the text of `target` as read now, if it is
    /// still the text they were found in (its hash `hash`).
    fn outcome(
        self,
        target: &LintTarget,
        hash: Option<ContentHash>,
        overrides: &Overrides,
    ) -> Outcome {
        let (diagnostics, internal_errors) = match self {
            Held::Done(outcome) => return outcome,
            Held::Findings {
                diagnostics,
                internal_errors,
            } if diagnostics.is_empty() && internal_errors.is_empty() => return Outcome::Clean,
            Held::Findings {
                diagnostics,
                internal_errors,
            } => (diagnostics, internal_errors),
        };
        let bytes = match read(target, overrides) {
            Ok(bytes) => bytes,
            Err(linted) => return linted.outcome.into_outcome(),
        };
        if hash != Some(cache::content_hash(&bytes)) {
            let message = "changed while it was being linted; lint it again";
            return Outcome::Failed(FileError::new(&target.path, message.to_owned()));
        }
        match read_source(&target.path, &bytes) {
            Ok(Some(source)) => Outcome::Linted {
                file: FileDiagnostics {
                    source: Arc::new(source),
                    diagnostics,
                },
                internal_errors,
            },
            Ok(None) => Outcome::Clean,
            Err(error) => Outcome::Failed(error),
        }
    }

    /// An outcome held whole (what reading a file that could not be read came to).
    fn into_outcome(self) -> Outcome {
        match self {
            Held::Done(outcome) => outcome,
            Held::Findings { .. } => unreachable!("findings are reported through Held::outcome"),
        }
    }
}

/// A project's first pass, kept: a change to some of its files lints only them again, and the
/// files whose answers from the fact base they change (the server keeps one per project).
pub struct Session {
    targets: Vec<LintTarget>,
    /// How many of the targets (the first) the session reports on; the rest are context,
    /// linted only for their facts ([`Findings::FactsOnly`]).
    reported: usize,
    index: HashMap<PathBuf, usize>,
    facts: FactBase,
    imports: Vec<Vec<Import>>,
    demand: Vec<Demand>,
    linted: Vec<Linted>,
    /// The questions each file's findings rest on.
    asked: Vec<Asked>,
    /// How many times files were linted again, and the last of those times each file was (0:
    /// only in the first pass).
    rounds: u32,
    relinted_in: Vec<u32>,
    /// The last round each file's summary changed in (0: never since the first pass). A file
    /// whose answers read a summary changed since it was linted is asked its questions again;
    /// a file linted again to the summary it had (most edits in the editor) changes none.
    resummarised_in: Vec<u32>,
    /// Some file's summary is not the one the cache held: the cached answers of the others
    /// are asked again. (With every file from the cache, or linted again to the summary it
    /// had, nothing they rest on changed.)
    resummarised: bool,
    /// What the first pass did, for a run to tell (`check -v`); an editor's later updates add
    /// none.
    notes: Vec<Note>,
    /// Files linted without their summary ([`Summaries::Later`]): the fact base holds the one
    /// they had before, until [`Session::summarise`].
    unsummarised: Vec<usize>,
}

/// When [`Session::update`] summarises the files it lints again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summaries {
    /// With their findings: the files that read their summaries are brought up to date too.
    Now,
    /// Later, in [`Session::summarise`]: an editor publishes a keystroke's findings first.
    /// What other files import of the edited one is a fraction of its lint, and most
    /// keystrokes change none of it; until then the fact base answers with the summary from
    /// before the edit.
    Later,
}

/// What linting one file of a session yields: its index, result, summary and questions.
type Relinted = (usize, Linted, FileSummary, Asked);

/// The questions a file asked the fact base, and the summaries their answers rest on.
#[derive(Default)]
struct Asked {
    questions: Questions,
    reads: Reads,
    /// The answers come from the cache: given by an earlier run once every summary was in,
    /// so comparing them with answers given before that (during the first pass) says nothing.
    cached: bool,
    /// The file was linted to a summary other than the one the cache held for it (or there
    /// was none): answers the cache holds for other files may differ now.
    resummarised: bool,
}

impl Session {
    /// Lints the targets as one project: each file once, after the files it imports (a file
    /// of an import cycle that could not wait is checked again as soon as the rest of the
    /// cycle is done), then again the files whose answers still changed once every summary
    /// was in.
    pub fn new(targets: Vec<LintTarget>, overrides: &Overrides, cache: Option<&Cache>) -> Session {
        Session::scanned(Scanned::of(targets, overrides, cache), overrides, cache)
    }

    /// [`Session::new`], for files scanned already.
    fn scanned(scanned: Scanned, overrides: &Overrides, cache: Option<&Cache>) -> Session {
        let Scanned {
            targets,
            reported,
            imports,
            costs,
            mut notes,
        } = scanned;
        // The run's framework table: the config's at the root of the run (the first target's).
        let facts = FactBase::new(targets.iter().map(|target| target.path.as_path()))
            .with_frameworks(
                targets
                    .first()
                    .and_then(|target| Frameworks::extension_of(&target.settings).cloned()),
            );
        let (dependencies, demand) = link(&facts, &imports);

        let results: Vec<OnceLock<(Linted, Asked)>> =
            targets.iter().map(|_| OnceLock::new()).collect();
        let rechecked: Vec<OnceLock<Relinted>> = targets.iter().map(|_| OnceLock::new()).collect();
        let lint = |index: usize, input: Read, reuse: Reuse| {
            let place = Place {
                facts: &facts,
                index,
                demand: &demand[index],
                findings: findings_of(index, reported),
            };
            let tree = overrides.tree(&targets[index].path);
            lint_read(&targets[index], input, tree, place, cache, reuse)
        };
        schedule::in_dependency_order(
            &dependencies,
            &costs,
            |index| {
                let input = read(&targets[index], overrides);
                let (_, linted, summary, asked) = lint(index, input, Reuse::Cached);
                facts.set_summary(index, Arc::new(summary));
                let _ = results[index].set((linted, asked));
            },
            |index| {
                // A file that did not wait for some of its imports (they import it back), once
                // they are done: linted again if their summaries answer its questions otherwise.
                // Only answers given without some summary can be given otherwise now.
                if let Some((_, asked)) = results[index].get()
                    && asked.reads.pending
                    && !asked.cached
                    && answers_changed(&facts, &asked.questions, index)
                {
                    let relinted = lint(index, read(&targets[index], overrides), Reuse::Afresh);
                    let _ = rechecked[index].set(relinted);
                }
            },
        );
        let (linted, asked): (Vec<Linted>, Vec<Asked>) = results
            .into_iter()
            .map(|result| result.into_inner().expect("every file was linted"))
            .unzip();
        let index = targets
            .iter()
            .enumerate()
            .map(|(index, target)| (target.path.clone(), index))
            .collect();
        let rechecked: Vec<Relinted> = rechecked
            .into_iter()
            .filter_map(OnceLock::into_inner)
            .collect();
        notes.extend(rechecked.iter().map(|(index, ..)| Note::LintedAgain {
            path: targets[*index].path.clone(),
            cause: Again::ImportCycle,
        }));
        let relinted_in = vec![0; targets.len()];
        let resummarised_in = vec![0; targets.len()];
        let resummarised = asked.iter().any(|asked| asked.resummarised);
        let mut session = Session {
            targets,
            reported,
            index,
            facts,
            imports,
            demand,
            linted,
            asked,
            rounds: 0,
            relinted_in,
            resummarised_in,
            resummarised,
            notes,
            unsummarised: Vec::new(),
        };
        session.keep(rechecked, Summaries::Now);
        // Answers that changed now that every summary is in: lint those files again (their
        // cached results, if they came from the cache, rest on the old answers).
        let settled = session.settle(&[], overrides, cache);
        let again = settled.into_iter().map(|index| Note::LintedAgain {
            path: session.targets[index].path.clone(),
            cause: Again::AnswersChanged,
        });
        session.notes.extend(again.collect::<Vec<_>>());
        session
    }

    /// How many files the session holds (indices `0..files()`).
    pub fn files(&self) -> usize {
        self.targets.len()
    }

    /// The index of a file of the session.
    pub fn file(&self, path: &Path) -> Option<usize> {
        self.index.get(path).copied()
    }

    /// Brings the session up to date with `paths` (files that may have changed: an edited
    /// buffer in `overrides`, a file changed on disk): those whose bytes differ are linted
    /// again, with the files whose summary they now need more of and the files whose answers
    /// they change.
    pub fn update(&mut self, paths: &[PathBuf], overrides: &Overrides, summaries: Summaries) {
        let mut changed: Vec<(usize, Read)> = Vec::new();
        for path in paths {
            let Some(index) = self.file(path) else {
                continue;
            };
            if changed.iter().any(|(known, _)| *known == index) {
                continue;
            }
            let input = read(&self.targets[index], overrides);
            let content = input.as_ref().ok().map(|bytes| cache::content_hash(bytes));
            if content.is_none() || content != self.linted[index].hash {
                changed.push((index, input));
            }
        }
        if changed.is_empty() {
            return;
        }
        let mut relink = false;
        for (index, input) in &changed {
            let imports = scan(input);
            if imports != self.imports[*index] {
                self.imports[*index] = imports;
                relink = true;
            }
        }
        if relink {
            // What the others import of each file may have changed: a file asked for names its
            // summary does not cover is linted again too.
            let (_, demand) = link(&self.facts, &self.imports);
            for (index, wanted) in demand.iter().enumerate() {
                if *wanted != self.demand[index]
                    && !changed.iter().any(|(known, _)| *known == index)
                {
                    changed.push((index, read(&self.targets[index], overrides)));
                }
            }
            self.demand = demand;
        }
        let relinted: Vec<Relinted> = {
            let this = &*self;
            map_files(changed, |(index, input)| {
                let mut place = this.place(index);
                if summaries == Summaries::Later {
                    place.demand = &Demand::Nothing;
                }
                lint_read(
                    &this.targets[index],
                    input,
                    overrides.tree(&this.targets[index].path),
                    place,
                    None,
                    Reuse::Afresh,
                )
            })
        };
        let done: Vec<usize> = relinted.iter().map(|relinted| relinted.0).collect();
        self.keep(relinted, summaries);
        if summaries == Summaries::Later {
            // Their summaries from before stay in the fact base: no file's answers change.
            for index in &done {
                if !self.unsummarised.contains(index) {
                    self.unsummarised.push(*index);
                }
            }
        }
        self.settle(&done, overrides, None);
    }

    /// Summarises the files [`Session::update`] linted without their summaries and, where a
    /// summary changed, lints again the files whose answers it changes. Returns whether some
    /// summary changed (the open documents' findings may have changed with it).
    pub fn summarise(&mut self, overrides: &Overrides) -> bool {
        let pending = std::mem::take(&mut self.unsummarised);
        if pending.is_empty() {
            return false;
        }
        // A lint for the facts only: its summary, computed with the other files' as the
        // findings were.
        let summarised: Vec<(usize, FileSummary)> = {
            let this = &*self;
            map_files(pending, |index| {
                let mut place = this.place(index);
                place.findings = Findings::FactsOnly;
                let (_, _, summary, _) = lint_read(
                    &this.targets[index],
                    read(&this.targets[index], overrides),
                    overrides.tree(&this.targets[index].path),
                    place,
                    None,
                    Reuse::Afresh,
                );
                (index, summary)
            })
        };
        self.rounds += 1;
        let mut changed = false;
        for (index, summary) in summarised {
            changed |= self.resummarise(index, summary);
        }
        if changed {
            self.settle(&[], overrides, None);
        }
        changed
    }

    /// What the `files` came to, once the second pass has decided what their findings owe to
    /// the rest of the project.
    pub fn report(
        &self,
        files: &[usize],
        overrides: &Overrides,
        cache: Option<&Cache>,
    ) -> Vec<Checked> {
        let mut outcomes: Vec<Held> = files
            .iter()
            .map(|&file| self.linted[file].outcome.clone())
            .collect();
        let graph_calls: Vec<GraphCall> = self
            .linted
            .iter()
            .flat_map(|linted| linted.graph_calls.iter().cloned())
            .collect();
        keep_findings_with_graph_arguments(&mut outcomes, &graph_calls);
        let run_names_accelerator = (0..self.facts.len()).any(|file| {
            self.facts
                .summary(file)
                .is_some_and(|summary| summary.accelerator)
        });
        if !run_names_accelerator {
            drop_findings_on_the_runs_device(&mut outcomes);
        }
        let called: Vec<Option<CalledNames>> = self
            .linted
            .iter()
            .map(|linted| linted.called.clone())
            .collect();
        let hashes: Vec<Option<ContentHash>> =
            self.linted.iter().map(|linted| linted.hash).collect();
        let facts = ProjectFacts {
            targets: &self.targets,
            hashes: &hashes,
            called: &called,
            overrides,
        };
        apply_project_facts(&mut outcomes, &facts, cache);
        outcomes
            .into_iter()
            .zip(files)
            .map(|(outcome, &file)| Checked {
                outcome: outcome.outcome(&self.targets[file], self.linted[file].hash, overrides),
                warning: self.linted[file].warning.clone(),
            })
            .collect()
    }

    /// Lints again the files whose answers changed until none does, for at most
    /// `MAX_SETTLING_ROUNDS` rounds: files linted again in one round read each other's summaries
    /// from before it (a module and the files importing what it re-exports), so one round
    /// leaves answers that the next run, reading the new summaries, would find stale again
    /// (and with a cache, every warm run would lint them again).
    /// Returns the files it linted again.
    fn settle(
        &mut self,
        done: &[usize],
        overrides: &Overrides,
        cache: Option<&Cache>,
    ) -> Vec<usize> {
        let mut done = done;
        let mut relinted = Vec::new();
        for _ in 0..MAX_SETTLING_ROUNDS {
            let before = self.rounds;
            relinted.extend(self.relint_stale(done, overrides, cache));
            if self.rounds == before {
                break;
            }
            done = &[];
        }
        relinted.sort_unstable();
        relinted.dedup();
        relinted
    }

    /// Lints again the files (but those in `done`) whose questions the fact base now answers
    /// otherwise; returns them.
    fn relint_stale(
        &mut self,
        done: &[usize],
        overrides: &Overrides,
        cache: Option<&Cache>,
    ) -> Vec<usize> {
        let (relinted_in, resummarised_in) = (&self.relinted_in, &self.resummarised_in);
        // Which files read a summary that changed: a look at each file's reads, on this
        // thread (a keystroke changes no summary, and waking the pool would cost more).
        let candidates: Vec<usize> = (0..self.targets.len())
            .filter(|&index| {
                let asked = &self.asked[index];
                let linted = relinted_in[index];
                // Replaced in the round the file was linted in counts: it may have read the
                // summary before.
                let since =
                    |file: usize| resummarised_in[file] > 0 && resummarised_in[file] >= linted;
                !done.contains(&index)
                    && (!asked.cached || self.resummarised)
                    && asked.reads.may_change(since)
            })
            .collect();
        // Of those, the ones whose answers changed: asking again is the costly part.
        let stale: Vec<usize> = map_files(candidates, |index| {
            answers_changed(&self.facts, &self.asked[index].questions, index).then_some(index)
        })
        .into_iter()
        .flatten()
        .collect();
        let relinted: Vec<Relinted> = map_files(stale, |index| {
            lint_read(
                &self.targets[index],
                read(&self.targets[index], overrides),
                overrides.tree(&self.targets[index].path),
                self.place(index),
                cache,
                Reuse::Afresh,
            )
        });
        let indices = relinted.iter().map(|relinted| relinted.0).collect();
        self.keep(relinted, Summaries::Now);
        indices
    }

    fn place(&self, index: usize) -> Place<'_> {
        Place {
            facts: &self.facts,
            index,
            demand: &self.demand[index],
            findings: findings_of(index, self.reported),
        }
    }

    /// Keeps what the files were linted to, in a new round; their summaries too with
    /// [`Summaries::Now`] (with `Later`, they were linted without).
    fn keep(&mut self, relinted: Vec<Relinted>, summaries: Summaries) {
        if relinted.is_empty() {
            return;
        }
        self.rounds += 1;
        for (index, linted, summary, asked) in relinted {
            if summaries == Summaries::Now {
                self.resummarise(index, summary);
            }
            self.linted[index] = linted;
            self.asked[index] = asked;
            self.relinted_in[index] = self.rounds;
        }
    }

    /// Puts a file's summary in the fact base, in this round, if it differs from the one there;
    /// whether it did.
    fn resummarise(&mut self, index: usize, summary: FileSummary) -> bool {
        if self.facts.summary(index) == Some(&summary) {
            return false;
        }
        self.resummarised = true;
        self.resummarised_in[index] = self.rounds;
        self.facts.replace_summary(index, Arc::new(summary));
        true
    }
}

/// A file's questions with their answers, kept encoded (postcard, as the cache keeps them):
/// every file's are held to the end of a run, a tenth of a large run's memory as structs, and
/// read again only for the files whose imports' summaries changed.
struct Questions(Box<[u8]>);

impl Default for Questions {
    fn default() -> Questions {
        Questions::new(&[])
    }
}

impl Questions {
    fn new(questions: &[Question]) -> Questions {
        Questions(
            postcard::to_allocvec(questions)
                .unwrap_or_default()
                .into_boxed_slice(),
        )
    }

    /// The questions, or None if they cannot be read back (then every answer may have
    /// changed).
    fn decoded(&self) -> Option<Vec<Question>> {
        postcard::from_bytes(&self.0).ok()
    }
}

/// Whether the fact base now answers some of a file's questions otherwise than when it asked.
fn answers_changed(facts: &FactBase, questions: &Questions, file: usize) -> bool {
    questions.decoded().is_none_or(|questions| {
        questions
            .iter()
            .any(|question| facts.answer(&question.ask, Some(file)) != question.answer)
    })
}

/// `f` of each item, in parallel when there are several. One item (the buffer an editor's
/// keystroke changed) is done on this thread: handing it to the pool would make this thread
/// wait for another to wake, which then walks, on another core, the tree this one just parsed.
fn map_files<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    if items.len() < 2 {
        items.into_iter().map(f).collect()
    } else {
        items.into_par_iter().map(f).collect()
    }
}

/// How many rounds of linting stale files again a session runs at most before it reports.
const MAX_SETTLING_ROUNDS: usize = 4;

/// Whether the file at `index` of a run that reports on its first `reported` files is linted
/// for its findings, or only for its facts.
fn findings_of(index: usize, reported: usize) -> Findings {
    if index < reported {
        Findings::Made
    } else {
        Findings::FactsOnly
    }
}

/// Lints one file of a session from what reading it gave.
fn lint_read(
    target: &LintTarget,
    input: Read,
    tree: Option<&Tree>,
    place: Place<'_>,
    cache: Option<&Cache>,
    reuse: Reuse,
) -> Relinted {
    let index = place.index;
    match input {
        Ok(bytes) => {
            let (linted, summary, asked) =
                lint_in_project(target, &bytes, tree, place, cache, reuse);
            (index, linted, summary, asked)
        }
        Err(linted) => (index, *linted, FileSummary::default(), Asked::default()),
    }
}

/// A file's place in the project: the fact base, its index there, and what the others import
/// of it.
#[derive(Clone, Copy)]
struct Place<'a> {
    facts: &'a FactBase,
    index: usize,
    demand: &'a Demand,
    findings: Findings,
}

/// The imports of a file read as `input`: those a run recorded for it while its stamp says it
/// has not changed since, else scanned from its bytes (and recorded).
fn imports_of(
    target: &LintTarget,
    input: &Read,
    overrides: &Overrides,
    cache: Option<&Cache>,
) -> Vec<Import> {
    let stamp = cache
        .filter(|_| !overrides.contains(&target.path))
        .and_then(|_| Stamp::of_path(&target.path));
    cached_imports(target, stamp, cache, || scan(input))
}

/// The imports the cache holds for the file as `stamp` describes it, else those `scan` reads
/// (recorded with the stamp).
fn cached_imports(
    target: &LintTarget,
    stamp: Option<Stamp>,
    cache: Option<&Cache>,
    scan: impl FnOnce() -> Vec<Import>,
) -> Vec<Import> {
    let Some((cache, stamp)) = cache.zip(stamp) else {
        return scan();
    };
    if let Some(imports) = cache.imports(&target.path, stamp) {
        return imports;
    }
    let imports = scan();
    cache.put_imports(&target.path, stamp, &imports);
    imports
}

/// The imports of a file, from its bytes.
fn scan(input: &Read) -> Vec<Import> {
    match input {
        Ok(bytes) => std::str::from_utf8(bytes).map_or_else(|_| Vec::new(), imports::scan),
        Err(_) => Vec::new(),
    }
}

/// Which files each file imports (by index), and which names of each file the others import.
///
/// A package's `__init__.py` imports to re-export (`from .base import *`, `from .clip import
/// CLIPModel`): what it imports is asked of its modules only when someone asks it of the
/// package. Summarising every name a large package re-exports would cost more than linting it.
fn link(facts: &FactBase, scanned: &[Vec<Import>]) -> (Vec<Vec<Needed>>, Vec<Demand>) {
    // What each file needs of which other file (`None`: all of it), found in parallel.
    let needs: Vec<Vec<(usize, Need<'_>, bool)>> = scanned
        .par_iter()
        .enumerate()
        .map(|(importer, imports)| {
            let here = facts.import_base(importer);
            let package = here.ends_with(".__init__");
            let mut needs = Vec::new();
            for import in imports {
                let deferred = import.deferred;
                let module = crate::semantic::summary::absolute_module(&import.module, here);
                let target = facts.module_file(&module, Some(importer));
                match &import.names {
                    None if import.star && package => {
                        needs.extend(target.map(|file| (file, Need::Reexport(None), deferred)));
                    }
                    None => needs.extend(target.map(|file| (file, Need::Whole, deferred))),
                    Some(names) => {
                        for name in names {
                            // `from pkg import models`: a submodule, imported whole (asked
                            // only of names some file is named: most are classes and functions).
                            let submodule = facts
                                .has_module_named(name)
                                .then(|| format!("{module}.{name}"))
                                .and_then(|submodule| {
                                    facts.module_file(&submodule, Some(importer))
                                });
                            let (file, whole) = match submodule {
                                Some(file) if Some(file) != target => (file, true),
                                _ => match target {
                                    Some(file) => (file, false),
                                    None => continue,
                                },
                            };
                            let need = match (package, whole) {
                                (true, _) => Need::Reexport(Some((name, whole))),
                                (false, true) => Need::Whole,
                                (false, false) => Need::Name(name),
                            };
                            needs.push((file, need, deferred));
                        }
                    }
                }
            }
            needs.retain(|(file, _, _)| *file != importer);
            needs
        })
        .collect();
    let mut whole = vec![false; scanned.len()];
    let mut names: Vec<Vec<&str>> = vec![Vec::new(); scanned.len()];
    let dependencies = needs
        .iter()
        .map(|needs| {
            // A package waits for what it re-exports: its importers ask through it. A file
            // imported at module level and in a function is not a deferred import.
            let mut files: Vec<Needed> = needs
                .iter()
                .map(|&(file, _, deferred)| Needed { file, deferred })
                .collect();
            files.sort_unstable_by_key(|needed| (needed.file, needed.deferred));
            files.dedup_by_key(|needed| needed.file);
            for (file, need, _) in needs {
                match need {
                    Need::Whole => whole[*file] = true,
                    Need::Name(name) => names[*file].push(name),
                    Need::Reexport(_) => {}
                }
            }
            files
        })
        .collect();
    // What is asked of a package passes on to the modules it re-exports it from, and on from
    // them (a chain of `__init__.py`s), until nothing more is asked. A package imported whole
    // (`import pkg`) asks nothing of them: its names are read as `pkg.x`, rarely.
    let mut changed = true;
    while changed {
        changed = false;
        for (package, needs) in needs.iter().enumerate() {
            for (module, need, _) in needs {
                let Need::Reexport(reexported) = need else {
                    continue;
                };
                let wanted: Vec<&str> = match reexported {
                    // `from .base import *`: whatever is asked of the package.
                    None => names[package]
                        .iter()
                        .filter(|name| !names[*module].contains(name))
                        .copied()
                        .collect(),
                    Some((name, submodule)) if names[package].contains(name) => {
                        if *submodule && !whole[*module] {
                            whole[*module] = true;
                            changed = true;
                        }
                        if *submodule || names[*module].contains(name) {
                            Vec::new()
                        } else {
                            vec![*name]
                        }
                    }
                    Some(_) => Vec::new(),
                };
                if !wanted.is_empty() {
                    names[*module].extend(wanted);
                    changed = true;
                }
            }
        }
    }
    let mut shared: HashMap<&str, Arc<str>> = HashMap::default();
    let demand = whole
        .into_iter()
        .zip(names)
        .map(|(whole, mut names)| {
            if whole {
                return Demand::Everything;
            }
            names.sort_unstable();
            names.dedup();
            if names.is_empty() {
                Demand::Nothing
            } else {
                Demand::Names(
                    names
                        .into_iter()
                        .map(|name| Arc::clone(shared.entry(name).or_insert_with(|| name.into())))
                        .collect(),
                )
            }
        })
        .collect();
    (dependencies, demand)
}

/// What a file needs of a file it imports.
#[derive(Clone, Copy)]
enum Need<'s> {
    /// All of it (`import pkg.models`, `from m import *`).
    Whole,
    /// One name.
    Name(&'s str),
    /// What a package's `__init__.py` re-exports: every name asked of the package (`None`,
    /// `from .base import *`) or one (and whether it is a submodule, imported whole).
    Reexport(Option<(&'s str, bool)>),
}

/// A file's bytes, or its result when it could not be read.
type Read = Result<Vec<u8>, Box<Linted>>;

fn read(target: &LintTarget, overrides: &Overrides) -> Read {
    if let Some(bytes) = overrides.bytes(&target.path) {
        return Ok(bytes.to_vec());
    }
    std::fs::read(&target.path).map_err(|error| {
        let message = describe_io_error(&target.path, &error);
        Box::new(Linted {
            outcome: Held::Done(Outcome::Failed(FileError::new(&target.path, message))),
            hash: None,
            called: None,
            warning: None,
            graph_calls: Vec::new(),
        })
    })
}

/// Whether a file's result may come from the cache.
#[derive(Clone, Copy)]
enum Reuse {
    Cached,
    /// Linted again because the answers it was linted with changed.
    Afresh,
}

/// Lints one file of the project (or takes its results from the cache): its outcome, its
/// summary for the fact base, and the questions it asked.
fn lint_in_project(
    target: &LintTarget,
    bytes: &[u8],
    tree: Option<&Tree>,
    place: Place<'_>,
    cache: Option<&Cache>,
    reuse: Reuse,
) -> (Linted, FileSummary, Asked) {
    let Place {
        facts,
        index,
        demand,
        findings,
    } = place;
    let warning = source::unknown_coding_declaration(bytes).map(|label| {
        format!(
            "{}: declares the unknown encoding `{label}`; linted as UTF-8, which its bytes are",
            crate::escape::path(&display_path(&target.path))
        )
    });
    let project = ProjectContext {
        facts,
        file: Some(index),
        module: facts.import_base(index),
        demand,
        findings,
    };
    // The session keeps every file's hash (what a later update compares), cache or not.
    let hash = cache::content_hash(bytes);
    let shown = display_path(&target.path);
    let cached = match (cache, reuse) {
        (Some(cache), Reuse::Cached) => cache.get(
            &target.path,
            &shown,
            hash,
            &target.settings,
            demand,
            findings,
        ),
        _ => None,
    };
    if let Some(cached) = cached {
        let linted = Linted {
            outcome: Held::Findings {
                diagnostics: cached.diagnostics,
                internal_errors: Vec::new(),
            },
            hash: Some(hash),
            called: None,
            warning,
            graph_calls: cached.graph_calls,
        };
        let asked = Asked {
            questions: Questions::new(&cached.questions),
            reads: Reads::unknown(),
            cached: true,
            resummarised: false,
        };
        return (linted, cached.summary, asked);
    }
    let mut extra = Extra::default();
    let ((outcome, called), reads) = facts::noting_reads(|| {
        lint_bytes(
            &target.path,
            bytes,
            &target.settings,
            false,
            Some((project, &mut extra, tree)),
        )
    });
    if let Some(cache) = cache {
        let fresh = |diagnostics| Fresh {
            diagnostics: (findings == Findings::Made).then_some(diagnostics),
            summary: &extra.summary,
            demand,
            questions: &extra.questions,
            graph_calls: &extra.graph_calls,
        };
        match &outcome {
            Outcome::Clean => cache.put(&target.path, &shown, hash, &target.settings, fresh(&[])),
            Outcome::Linted {
                file,
                internal_errors,
            } if internal_errors.is_empty() => cache.put(
                &target.path,
                &shown,
                hash,
                &target.settings,
                fresh(&file.diagnostics),
            ),
            _ => cache.forget(&target.path),
        }
    }
    let linted = Linted {
        outcome: Held::of(outcome),
        hash: Some(hash),
        called,
        warning,
        graph_calls: extra.graph_calls,
    };
    let resummarised =
        cache.and_then(|cache| cache.summary_before(&target.path)) != Some(&extra.summary);
    let asked = Asked {
        questions: Questions::new(&extra.questions),
        reads,
        cached: false,
        resummarised,
    };
    (linted, extra.summary, asked)
}

/// What linting a file in a project yields besides its outcome.
#[derive(Default)]
struct Extra {
    summary: FileSummary,
    questions: Vec<Question>,
    graph_calls: Vec<GraphCall>,
}

/// The text the linter reads from a file's bytes, and its findings point into: a notebook's
/// code cells joined, or the decoded source. `None`: nothing to lint (a notebook of another
/// kernel language, or without code cells).
pub fn read_source(name: &Path, bytes: &[u8]) -> Result<Option<SourceFile>, FileError> {
    if SourceKind::from_path(name) == Some(SourceKind::Notebook) {
        return notebook::source_file(&display_path(name), bytes)
            .map_err(|message| FileError::new(name, message));
    }
    let text = source::decode(bytes).map_err(|error| FileError::new(name, error.to_string()))?;
    Ok(Some(SourceFile::new(display_path(name), text)))
}

/// Lints one file's bytes; with the outcome, the names the file calls, when it was linted.
fn lint_bytes(
    name: &Path,
    bytes: &[u8],
    settings: &Settings,
    parse_only: bool,
    project: Option<(ProjectContext<'_>, &mut Extra, Option<&Tree>)>,
) -> (Outcome, Option<CalledNames>) {
    let source = match read_source(name, bytes) {
        Ok(Some(source)) => source,
        Ok(None) => return (Outcome::Clean, None),
        Err(error) => return (Outcome::Failed(error), None),
    };
    if parse_only {
        if parse::check_parsable(source.text()).is_ok()
            && let Err(skipped) = parse::parse(source.text(), None)
        {
            return (
                Outcome::Failed(FileError::new(name, skipped.to_string())),
                None,
            );
        }
        return (Outcome::Parsed, None);
    }
    let (context, extra, tree) = match project {
        Some((context, extra, tree)) => (Some(context), Some(extra), tree),
        None => (None, None, None),
    };
    let outcome = match tree {
        // Parsed already, by the editor.
        Some(tree) => linter::lint_parsed_in(&source, tree, settings, context),
        None => match linter::lint_source_in(&source, settings, context) {
            Ok((_, outcome)) => outcome,
            Err(skipped) => {
                return (
                    Outcome::Failed(FileError::new(name, skipped.to_string())),
                    None,
                );
            }
        },
    };
    if let Some(extra) = extra {
        extra.summary = outcome.summary;
        extra.questions = outcome.questions;
        extra.graph_calls = outcome.graph_calls;
    }
    let called = Some(outcome.called);
    if outcome.diagnostics.is_empty() && outcome.internal_errors.is_empty() {
        // Nothing to show: drop the text now rather than holding every file in memory.
        return (Outcome::Clean, called);
    }
    let outcome = Outcome::Linted {
        file: FileDiagnostics {
            source: Arc::new(source),
            diagnostics: outcome.diagnostics,
        },
        internal_errors: outcome.internal_errors,
    };
    (outcome, called)
}

/// What the first pass learnt of each discovered file, in the order of the targets.
struct ProjectFacts<'a> {
    targets: &'a [LintTarget],
    hashes: &'a [Option<ContentHash>],
    called: &'a [Option<CalledNames>],
    overrides: &'a Overrides<'a>,
}

/// Keeps a finding on a line that keeps a parameter (`self.sum += val`) only if some call in
/// the run passes a graph-carrying tensor for it.
fn keep_findings_with_graph_arguments(outcomes: &mut [Held], calls: &[GraphCall]) {
    for diagnostics in outcomes.iter_mut().filter_map(Held::diagnostics_mut) {
        linter::keep_graph_argument_findings(diagnostics, calls);
    }
}

/// Drops the findings that rest on some file of the run naming an accelerator
/// (`Assumption::RunNamesAccelerator`): none does.
fn drop_findings_on_the_runs_device(outcomes: &mut [Held]) {
    for diagnostics in outcomes.iter_mut().filter_map(Held::diagnostics_mut) {
        diagnostics.retain(|d| !matches!(d.assumption, Some(Assumption::RunNamesAccelerator)));
    }
}

/// The second pass: drops the findings whose function the other files of the run only call
/// with grad disabled (`project`).
fn apply_project_facts(outcomes: &mut [Held], facts: &ProjectFacts<'_>, cache: Option<&Cache>) {
    let assumptions: Vec<Assumption> = outcomes
        .iter()
        .flat_map(Held::diagnostics)
        .filter_map(|diagnostic| diagnostic.assumption.clone())
        .filter(|assumption| matches!(assumption, Assumption::EnteredWithGrad { .. }))
        .collect();
    if assumptions.is_empty() {
        return;
    }
    let displays: Vec<PathBuf> = facts
        .targets
        .iter()
        .map(|t| display_path(&t.path))
        .collect();
    // The conclusion depends on every file of the run; it is reused only when none changed.
    let key = cache.and_then(|_| {
        let mut files = facts
            .targets
            .iter()
            .zip(&displays)
            .zip(facts.hashes)
            .map(|((target, display), hash)| {
                Some((display.clone(), (*hash)?, target.settings.fingerprint()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(cache::project_key(&mut files))
    });
    let no_grad: HashSet<FunctionKey> = match (cache, key) {
        (Some(cache), Some(key)) => match cache.project_facts(key) {
            Some(no_grad) => no_grad.into_iter().collect(),
            None => {
                let no_grad = no_grad_functions(facts, &displays, &assumptions);
                cache.put_project_facts(key, no_grad.iter().cloned().collect());
                no_grad
            }
        },
        _ => no_grad_functions(facts, &displays, &assumptions),
    };
    if no_grad.is_empty() {
        return;
    }
    for diagnostics in outcomes.iter_mut().filter_map(Held::diagnostics_mut) {
        diagnostics.retain(|diagnostic| match &diagnostic.assumption {
            Some(Assumption::EnteredWithGrad { function, .. }) => !no_grad.contains(function),
            _ => true,
        });
    }
}

fn no_grad_functions(
    facts: &ProjectFacts<'_>,
    displays: &[PathBuf],
    assumptions: &[Assumption],
) -> HashSet<FunctionKey> {
    let files: Vec<ProjectFile<'_>> = facts
        .targets
        .iter()
        .zip(displays)
        .zip(facts.called)
        .map(|((target, display), called)| ProjectFile {
            path: &target.path,
            display,
            kinds: Dispatch::of(&target.settings).kinds(),
            frameworks: Frameworks::of(&target.settings),
            called: called.as_ref(),
            text: facts.overrides.bytes(&target.path),
        })
        .collect();
    let assumptions: Vec<&Assumption> = assumptions.iter().collect();
    project::no_grad_functions(&files, &assumptions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::CliOverrides;

    const NOT_A_MODEL: &str = "def build_model(name):\n    return {\"name\": name}\n";
    const MODEL_FACTORY: &str = "import torchvision\n\ndef build_model(name):\n    return torchvision.models.resnet18(num_classes=10)\n";
    const EVALUATION: &str = "from pkg.factory import build_model\n\ndef evaluate(loader):\n    net = build_model(\"r18\")\n    hits = 0\n    for x, y in loader:\n        hits += (net(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return hits\n";

    fn codes(checked: &Checked) -> Vec<String> {
        match &checked.outcome {
            Outcome::Linted { file, .. } => file
                .diagnostics
                .iter()
                .map(|diagnostic| diagnostic.code().to_owned())
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn an_update_that_summarises_later_answers_with_the_summary_from_before() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pkg")).unwrap();
        std::fs::write(dir.path().join("pkg/factory.py"), NOT_A_MODEL).unwrap();
        std::fs::write(dir.path().join("pkg/eval.py"), EVALUATION).unwrap();
        let resolver = Arc::new(Resolver::new(CliOverrides::default(), None).unwrap());
        let targets = discovery::discover(&[dir.path().to_owned()], &resolver).targets;
        let mut session = Session::new(targets, &Overrides::new(), None);
        let factory = session.file(&dir.path().join("pkg/factory.py")).unwrap();
        let eval = session.file(&dir.path().join("pkg/eval.py")).unwrap();
        let eval_codes = |session: &Session, overrides: &Overrides| {
            codes(&session.report(&[eval], overrides, None)[0])
        };
        assert_eq!(
            eval_codes(&session, &Overrides::new()),
            Vec::<String>::new()
        );
        assert!(
            !session.summarise(&Overrides::new()),
            "nothing to summarise"
        );

        // The factory's buffer builds a model now: linted, but what `eval.py` reads of it is
        // the summary from before until it is summarised.
        let mut overrides = Overrides::new();
        let path = dir.path().join("pkg/factory.py");
        overrides.insert(path.clone(), MODEL_FACTORY.as_bytes().to_vec(), None);
        session.update(std::slice::from_ref(&path), &overrides, Summaries::Later);
        assert_eq!(eval_codes(&session, &overrides), Vec::<String>::new());
        assert!(
            session.summarise(&overrides),
            "the factory's summary changed"
        );
        assert_eq!(eval_codes(&session, &overrides), ["TL101"]);
        assert!(!session.summarise(&overrides), "summarised already");

        // An edit that leaves the summary as it was changes nothing once summarised.
        let mut overrides = Overrides::new();
        overrides.insert(
            path.clone(),
            format!("{MODEL_FACTORY}\n").into_bytes(),
            None,
        );
        session.update(std::slice::from_ref(&path), &overrides, Summaries::Later);
        assert!(!session.summarise(&overrides));
        assert_eq!(eval_codes(&session, &overrides), ["TL101"]);
        assert!(session.linted[factory].hash.is_some());

        // Summarised with the findings, as `torchlint check` and the first pass do.
        let mut overrides = Overrides::new();
        overrides.insert(path.clone(), NOT_A_MODEL.as_bytes().to_vec(), None);
        session.update(std::slice::from_ref(&path), &overrides, Summaries::Now);
        assert_eq!(eval_codes(&session, &overrides), Vec::<String>::new());
        assert!(!session.summarise(&overrides));
    }
}
