//! The first pass of `torchlint check`: every file linted once, in parallel, each after the
//! files it imports, so that what it asks of the project's fact base (is `SeqNet` a model?
//! what does `build_model` return?) is answered from their summaries. Answers given without a
//! summary (a cycle of imports, an import the scan missed, a cached file whose imports changed)
//! are checked once every file is in, and the files whose answers changed are linted again.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::check::{Outcome, display_path};
use crate::cache::{self, Cache, ContentHash, Fresh};
use crate::diagnostic::FileDiagnostics;
use crate::discovery::{FileError, LintTarget, describe_io_error};
use crate::linter::{self, ProjectContext, SourceKind};
use crate::notebook;
use crate::parse;
use crate::project::imports::{self, Import};
use crate::project::{CalledNames, GraphCall, schedule};
use crate::semantic::facts::{FactBase, Question};
use crate::semantic::summary::{Demand, FileSummary};
use crate::settings::Settings;
use crate::source::{self, SourceFile};

/// One file of the first pass: its outcome, the hash the cache knows its content by, and the
/// names it calls when it was linted (not read from the cache).
pub(super) struct Linted {
    pub outcome: Outcome,
    pub hash: Option<ContentHash>,
    pub called: Option<CalledNames>,
    /// Something to tell the user that does not stop the file being linted.
    pub warning: Option<String>,
    /// Calls that pass a graph-carrying tensor to the project's functions.
    pub graph_calls: Vec<GraphCall>,
}

/// Lints the targets as one project; `parse_only` only reads and parses them.
pub(super) fn lint_targets(
    targets: &[LintTarget],
    parse_only: bool,
    cache: Option<&Cache>,
) -> Vec<Linted> {
    if parse_only {
        return targets
            .par_iter()
            .map(|target| match read(target) {
                Ok(bytes) => {
                    let (outcome, called) =
                        lint_bytes(&target.path, &bytes, &target.settings, true, None);
                    Linted {
                        outcome,
                        hash: None,
                        called,
                        warning: None,
                        graph_calls: Vec::new(),
                    }
                }
                Err(linted) => *linted,
            })
            .collect();
    }
    // Each file's bytes, taken by the task that lints it, and its imports, read while the
    // bytes are at hand.
    let (inputs, scanned): (Vec<Mutex<Option<Read>>>, Vec<Vec<Import>>) = targets
        .par_iter()
        .map(|target| {
            let input = read(target);
            let imports = match &input {
                Ok(bytes) => std::str::from_utf8(bytes).map_or_else(|_| Vec::new(), imports::scan),
                Err(_) => Vec::new(),
            };
            (Mutex::new(Some(input)), imports)
        })
        .unzip();
    // The run's framework table: the config's at the root of the run (the first target's).
    let facts = FactBase::new(targets.iter().map(|target| target.path.as_path())).with_frameworks(
        targets
            .first()
            .and_then(|target| target.settings.extended_frameworks()),
    );
    let (dependencies, demand) = link(&facts, &scanned);
    drop(scanned);

    let results: Vec<OnceLock<Linted>> = targets.iter().map(|_| OnceLock::new()).collect();
    let questions: Vec<OnceLock<Vec<Question>>> = targets.iter().map(|_| OnceLock::new()).collect();
    let lint = |index: usize, bytes: &[u8], reuse: Reuse| {
        lint_in_project(
            &targets[index],
            bytes,
            cache,
            &facts,
            index,
            &demand[index],
            reuse,
        )
    };
    schedule::in_dependency_order(&dependencies, |index| {
        let input = lock(&inputs[index]).take();
        let (linted, summary, asked) = match input {
            Some(Ok(bytes)) => lint(index, &bytes, Reuse::Cached),
            Some(Err(linted)) => (*linted, FileSummary::default(), Vec::new()),
            None => unreachable!("each file is linted once"),
        };
        facts.set_summary(index, Arc::new(summary));
        let _ = questions[index].set(asked);
        let _ = results[index].set(linted);
    });
    let mut results: Vec<Linted> = results
        .into_iter()
        .map(|linted| linted.into_inner().expect("every file was linted"))
        .collect();

    // Answers that changed now that every summary is in: lint those files again.
    let stale: Vec<usize> = questions
        .iter()
        .enumerate()
        .filter(|(index, asked)| {
            asked.get().is_some_and(|asked| {
                asked
                    .iter()
                    .any(|question| facts.answer(&question.ask, Some(*index)) != question.answer)
            })
        })
        .map(|(index, _)| index)
        .collect();
    let relinted: Vec<(usize, Linted)> = stale
        .par_iter()
        .map(|&index| {
            let target = &targets[index];
            let linted = match read(target) {
                // Its cached result (if it came from the cache) rests on the old answers.
                Ok(bytes) => lint(index, &bytes, Reuse::Afresh).0,
                Err(linted) => *linted,
            };
            (index, linted)
        })
        .collect();
    for (index, linted) in relinted {
        results[index] = linted;
    }
    results
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which files each file imports (by index), and which names of each file the others import.
fn link(facts: &FactBase, scanned: &[Vec<Import>]) -> (Vec<Vec<usize>>, Vec<Demand>) {
    // What each file needs of which other file (`None`: all of it), found in parallel.
    let needs: Vec<Vec<(usize, Option<&str>)>> = scanned
        .par_iter()
        .enumerate()
        .map(|(importer, imports)| {
            let here = facts.module(importer);
            let mut needs = Vec::new();
            for import in imports {
                let module = crate::semantic::summary::absolute_module(&import.module, here);
                let target = facts.module_file(&module, Some(importer));
                match &import.names {
                    None => needs.extend(target.map(|file| (file, None))),
                    Some(names) => {
                        for name in names {
                            // `from pkg import models`: a submodule, imported whole.
                            let submodule = format!("{module}.{name}");
                            if let Some(file) = facts.module_file(&submodule, Some(importer))
                                && Some(file) != target
                            {
                                needs.push((file, None));
                            } else if let Some(file) = target {
                                needs.push((file, Some(name.as_str())));
                            }
                        }
                    }
                }
            }
            needs.retain(|(file, _)| *file != importer);
            needs
        })
        .collect();
    let mut whole = vec![false; scanned.len()];
    let mut names: Vec<Vec<&str>> = vec![Vec::new(); scanned.len()];
    let dependencies = needs
        .iter()
        .map(|needs| {
            let mut files: Vec<usize> = needs.iter().map(|(file, _)| *file).collect();
            files.sort_unstable();
            files.dedup();
            for (file, name) in needs {
                match name {
                    None => whole[*file] = true,
                    Some(name) => names[*file].push(name),
                }
            }
            files
        })
        .collect();
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
                Demand::Names(names.into_iter().map(str::to_owned).collect())
            }
        })
        .collect();
    (dependencies, demand)
}

/// A file's bytes, or its result when it could not be read.
type Read = Result<Vec<u8>, Box<Linted>>;

fn read(target: &LintTarget) -> Read {
    std::fs::read(&target.path).map_err(|error| {
        let message = describe_io_error(&target.path, &error);
        Box::new(Linted {
            outcome: Outcome::Failed(FileError::new(&target.path, message)),
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
    cache: Option<&Cache>,
    facts: &FactBase,
    index: usize,
    demand: &Demand,
    reuse: Reuse,
) -> (Linted, FileSummary, Vec<Question>) {
    let warning = source::unknown_coding_declaration(bytes).map(|label| {
        format!(
            "{}: declares the unknown encoding `{label}`; linted as UTF-8, which its bytes are",
            display_path(&target.path).display()
        )
    });
    let project = ProjectContext {
        facts,
        file: Some(index),
        module: facts.module(index),
        demand,
    };
    let Some(cache) = cache else {
        let mut extra = Extra::default();
        let (outcome, called) = lint_bytes(
            &target.path,
            bytes,
            &target.settings,
            false,
            Some((project, &mut extra)),
        );
        let linted = Linted {
            outcome,
            hash: None,
            called,
            warning,
            graph_calls: extra.graph_calls,
        };
        return (linted, extra.summary, extra.questions);
    };
    let hash = cache::content_hash(bytes);
    let shown = display_path(&target.path);
    let cached = match reuse {
        Reuse::Cached => cache.get(&target.path, &shown, hash, &target.settings, demand),
        Reuse::Afresh => None,
    };
    if let Some(cached) = cached {
        let outcome = if cached.diagnostics.is_empty() {
            Outcome::Clean
        } else {
            match read_source(&target.path, bytes) {
                Ok(Some(source)) => Outcome::Linted {
                    file: FileDiagnostics {
                        source: Arc::new(source),
                        diagnostics: cached.diagnostics,
                    },
                    internal_errors: Vec::new(),
                },
                Ok(None) => Outcome::Clean,
                Err(error) => Outcome::Failed(error),
            }
        };
        let linted = Linted {
            outcome,
            hash: Some(hash),
            called: None,
            warning,
            graph_calls: cached.graph_calls,
        };
        return (linted, cached.summary, cached.questions);
    }
    let mut extra = Extra::default();
    let (outcome, called) = lint_bytes(
        &target.path,
        bytes,
        &target.settings,
        false,
        Some((project, &mut extra)),
    );
    let fresh = |diagnostics| Fresh {
        diagnostics,
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
    let linted = Linted {
        outcome,
        hash: Some(hash),
        called,
        warning,
        graph_calls: extra.graph_calls,
    };
    (linted, extra.summary, extra.questions)
}

/// What linting a file in a project yields besides its outcome.
#[derive(Default)]
pub(super) struct Extra {
    summary: FileSummary,
    questions: Vec<Question>,
    graph_calls: Vec<GraphCall>,
}

/// The text the linter reads from a file's bytes, and its findings point into: a notebook's
/// code cells joined, or the decoded source. `None`: nothing to lint (a notebook of another
/// kernel language, or without code cells).
pub(super) fn read_source(name: &Path, bytes: &[u8]) -> Result<Option<SourceFile>, FileError> {
    if SourceKind::from_path(name) == Some(SourceKind::Notebook) {
        return notebook::source_file(&display_path(name), bytes)
            .map_err(|message| FileError::new(name, message));
    }
    let text = source::decode(bytes).map_err(|error| FileError::new(name, error.to_string()))?;
    Ok(Some(SourceFile::new(display_path(name), text)))
}

/// Lints one file's bytes; with the outcome, the names the file calls, when it was linted.
pub(super) fn lint_bytes(
    name: &Path,
    bytes: &[u8],
    settings: &Settings,
    parse_only: bool,
    project: Option<(ProjectContext<'_>, &mut Extra)>,
) -> (Outcome, Option<CalledNames>) {
    let source = match read_source(name, bytes) {
        Ok(Some(source)) => source,
        Ok(None) => return (Outcome::Clean, None),
        Err(error) => return (Outcome::Failed(error), None),
    };
    if parse_only {
        if parse::check_parsable(source.text()).is_ok() {
            let _tree = parse::parse(source.text(), None);
        }
        return (Outcome::Parsed, None);
    }
    let (context, extra) = match project {
        Some((context, extra)) => (Some(context), Some(extra)),
        None => (None, None),
    };
    let (_tree, outcome) = linter::lint_source_in(&source, settings, context);
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
