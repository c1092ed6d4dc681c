//! The projects of the open documents. A document is linted with the rest of its project as
//! context (the folder of its config, or its git repository: `run::project_root`), exactly as
//! `torchlint check` lints a file named on its command line, so that the editor agrees with
//! CI: a helper whose callers disable grad is not flagged here either.
//!
//! Each project keeps its discovered files and a result cache in memory: a lint after a
//! keystroke lints the changed buffer afresh and takes every other file's summary and findings
//! from the cache, then decides again what the files owe to each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tree_sitter::Tree;

use crate::cache::{self, Cache};
use crate::diagnostic::FileDiagnostics;
use crate::discovery::{self, LintTarget};
use crate::project::run::{Checked, Outcome, Overrides, Session, Summaries};
use crate::settings::resolver::Resolver;

struct Project {
    /// The project's files on disk; `None` until first needed, and again after files were
    /// created or deleted.
    files: Option<Vec<LintTarget>>,
    /// The project linted, kept between lints; `None` until first needed.
    session: Option<Session>,
    /// Files that may differ from what the session linted: changed on disk, or a buffer
    /// closed (the file stands in for it again).
    changed: Vec<PathBuf>,
    cache: Cache,
}

/// The projects by root folder.
#[derive(Default)]
pub struct Projects {
    roots: HashMap<PathBuf, Project>,
}

/// An open document of a project: its target, its text (which stands in for the file), and
/// the editor's parse of that text, both borrowed from the document: the lint's overrides take
/// the one copy of the text it needs.
pub struct OpenFile<'t> {
    pub target: LintTarget,
    pub text: &'t [u8],
    pub tree: Option<&'t Tree>,
}

impl Projects {
    /// Forgets everything (settings changed: every target's settings may have).
    pub fn clear(&mut self) {
        self.roots.clear();
    }

    /// Files were created or deleted: each project finds its files again when next linted.
    pub fn rediscover(&mut self) {
        for project in self.roots.values_mut() {
            project.files = None;
            project.session = None;
        }
    }

    /// A file may differ from what its project was linted with (changed on disk; or its
    /// buffer closed, so that the file stands in for it again).
    pub fn changed(&mut self, path: &Path) {
        for (root, project) in &mut self.roots {
            if path.starts_with(root) {
                project.changed.push(path.to_owned());
            }
        }
    }

    /// Every project's findings in the files the editor has not open, as its last lint left
    /// them (for workspace diagnostics): each file's absolute path, its text as read now and
    /// its findings. `open`: the open documents' absolute paths.
    pub fn findings_elsewhere(&self, open: &[PathBuf]) -> Vec<(PathBuf, FileDiagnostics)> {
        let mut found = Vec::new();
        for project in self.roots.values() {
            let Some(session) = &project.session else {
                continue;
            };
            let files: Vec<usize> = (0..session.files()).collect();
            for checked in session.report(&files, &Overrides::new(), Some(&project.cache)) {
                // Shown paths are relative to the server's folder, as `check` shows them.
                if let Outcome::Linted { file, .. } = checked.outcome
                    && !file.diagnostics.is_empty()
                    && let Ok(path) = std::path::absolute(file.source.name())
                    && !open.contains(&path)
                {
                    found.push((path, file));
                }
            }
        }
        found
    }

    /// Lints the open documents of the project at `root` with the rest of it as context; what
    /// each came to, in the order given.
    pub fn lint(
        &mut self,
        root: &Path,
        open: &[OpenFile],
        resolver: &Arc<Resolver>,
    ) -> Vec<Checked> {
        let project = self
            .roots
            .entry(root.to_owned())
            .or_insert_with(|| Project {
                files: None,
                session: None,
                changed: Vec::new(),
                // A cache `torchlint check` left there gives a warm start.
                cache: Cache::open(&root.join(cache::FOLDER)),
            });
        let overrides = overrides_of(open);
        let files = project
            .files
            .get_or_insert_with(|| discovery::discover(&[root.to_owned()], resolver).targets);
        // A document the project's discovery leaves out (excluded) is linted with it anyway.
        let outside = |session: &Session| {
            open.iter()
                .any(|file| session.file(&file.target.path).is_none())
        };
        match &mut project.session {
            Some(session) if !outside(session) => {
                let mut paths = std::mem::take(&mut project.changed);
                paths.extend(open.iter().map(|file| file.target.path.clone()));
                // The findings first: the server publishes them, then asks `summarise`.
                session.update(&paths, &overrides, Summaries::Later);
            }
            _ => {
                let mut targets: Vec<LintTarget> = open
                    .iter()
                    .filter(|file| !files.iter().any(|target| target.path == file.target.path))
                    .map(|file| file.target.clone())
                    .collect();
                targets.extend(files.iter().cloned());
                project.changed.clear();
                project.session = Some(Session::new(targets, &overrides, Some(&project.cache)));
                // Linting a whole project is what takes time: its results are written to the
                // project's cache, as `torchlint check` writes them, so that the next start
                // (and the next `check`) reads them instead.
                if let Err(error) = project.cache.persist() {
                    super::log(&format!(
                        "torchlint: cannot write the result cache in {}: {error}",
                        project.cache.location().display()
                    ));
                }
            }
        }
        let session = project.session.as_ref().expect("the session was just made");
        report(session, open, &overrides, &mut project.cache)
    }

    /// After the findings of [`Projects::lint`] are published: summarises the documents it
    /// linted and, if that changed what other files read of them, what the open documents come
    /// to now (`None`: the same as before, as after most keystrokes).
    pub fn summarise(&mut self, root: &Path, open: &[OpenFile]) -> Option<Vec<Checked>> {
        let project = self.roots.get_mut(root)?;
        let session = project.session.as_mut()?;
        let overrides = overrides_of(open);
        if !session.summarise(&overrides) {
            return None;
        }
        Some(report(session, open, &overrides, &mut project.cache))
    }
}

fn overrides_of<'t>(open: &[OpenFile<'t>]) -> Overrides<'t> {
    let mut overrides = Overrides::new();
    for file in open {
        overrides.insert(file.target.path.clone(), file.text.to_vec(), file.tree);
    }
    overrides
}

/// What the open documents come to, in the order given.
fn report(
    session: &Session,
    open: &[OpenFile],
    overrides: &Overrides,
    cache: &mut Cache,
) -> Vec<Checked> {
    let reported: Vec<usize> = open
        .iter()
        .filter_map(|file| session.file(&file.target.path))
        .collect();
    let checked = session.report(&reported, overrides, Some(cache));
    cache.absorb();
    checked
}
