//! The result cache: a second run over unchanged files reads their findings instead of
//! linting them again.
//!
//! Each file's entry is keyed by its path, a hash of its bytes and the fingerprint of its
//! effective settings (config file, command-line selection, user rule packs); the cache file
//! as a whole belongs to one torchlint build (version plus the executable's identity), so an
//! upgrade or a rebuild starts afresh. Entries hold findings *before* the project pass: what
//! one file's findings owe to other files is recomputed unless the whole run is unchanged
//! (`ProjectFacts`), so editing a caller in `train.py` re-decides a finding in `utils.py`.
//!
//! The cache lives in `.torchlint_cache/` (with a `CACHEDIR.TAG` and a `.gitignore`) at the
//! project root. It is read once and written once per run, atomically (a temporary file
//! renamed over the old one), so concurrent runs never see half a file; a cache that cannot be
//! read or parsed, or was written by another build, is ignored and replaced.

pub mod record;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::checker::Findings;
use crate::diagnostic::{Diagnostic, Fix, Label, Severity};
use crate::project::imports::Import;
use crate::semantic::cross_file::{Assumption, FunctionKey, GraphCall};
use crate::semantic::facts::Question;
use crate::semantic::summary::{Demand, FileSummary};
use crate::settings::Settings;
use crate::source::TextRange;

/// The folder's name under the project root.
pub const FOLDER: &str = ".torchlint_cache";

/// The cache file in the version folder: postcard, a compact binary serde format, since a
/// warm run of a large repository spent more time parsing the cache as JSON than linting.
const FILE_NAME: &str = "results.postcard";

const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by torchlint.\n# For information about cache directory tags see https://bford.info/cachedir/\n";

/// A hash of a file's bytes.
pub type ContentHash = u128;

pub fn content_hash(bytes: &[u8]) -> ContentHash {
    xxhash_rust::xxh3::xxh3_128(bytes)
}

#[derive(Default, Serialize, Deserialize)]
struct CacheFile {
    build: String,
    /// By absolute path (lossy UTF-8; the content hash still decides).
    files: HashMap<String, Entry>,
    project: Option<ProjectFacts>,
    /// Every file's imports as last read, by absolute path: a run on a few files of a large
    /// repository finds the files related to them without reading the others again.
    imports: HashMap<String, Scanned>,
}

/// A file's imports, and the stamp of the file they were read from.
#[derive(Clone, Serialize, Deserialize)]
struct Scanned {
    stamp: Stamp,
    imports: Vec<Import>,
}

/// What says, without reading a file, that it has not changed since it was read: its length,
/// modification time and, on Unix, device and inode (as Ruff's cache decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    len: u64,
    modified: u128,
    device: u64,
    inode: u64,
}

impl Stamp {
    pub fn of(metadata: &std::fs::Metadata) -> Option<Stamp> {
        let modified = metadata
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (metadata.dev(), metadata.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        Some(Stamp {
            len: metadata.len(),
            modified,
            device,
            inode,
        })
    }
}

impl Stamp {
    /// The stamp of the file at `path` now (None: it cannot be read, or does not exist).
    pub fn of_path(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().as_ref().and_then(Stamp::of)
    }

    /// Whether the file was modified after `time` (as its file system dates writes).
    pub fn modified_after(&self, time: std::time::SystemTime) -> bool {
        time.duration_since(std::time::UNIX_EPOCH)
            .map_or(true, |since| self.modified > since.as_nanos())
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct Entry {
    /// The path findings show: the project pass derives module names from it.
    shown: PathBuf,
    content: ContentHash,
    settings: u128,
    /// None: the file was linted only for its facts (a context file of its run).
    diagnostics: Option<Vec<CachedDiagnostic>>,
    /// The file's facts for the rest of the project: its summary (of the names `demand`
    /// covered when it was made), and the questions its findings rest on.
    #[serde(default)]
    summary: FileSummary,
    #[serde(default)]
    demand: Demand,
    #[serde(default)]
    questions: Vec<Question>,
    #[serde(default)]
    graph_calls: Vec<GraphCall>,
}

/// What the cache holds for a file: its findings, and its project facts.
pub struct Cached {
    pub diagnostics: Vec<Diagnostic>,
    pub summary: FileSummary,
    pub questions: Vec<Question>,
    pub graph_calls: Vec<GraphCall>,
}

/// What a freshly linted file leaves in the cache.
pub struct Fresh<'a> {
    /// None: linted only for its facts ([`Findings::FactsOnly`]).
    pub diagnostics: Option<&'a [Diagnostic]>,
    pub summary: &'a FileSummary,
    pub demand: &'a Demand,
    pub questions: &'a [Question],
    pub graph_calls: &'a [GraphCall],
}

/// A [`Diagnostic`] with its rule named by code (looked up again in the settings' registry).
#[derive(Clone, Serialize, Deserialize)]
struct CachedDiagnostic {
    code: String,
    severity: Severity,
    message: String,
    range: TextRange,
    labels: Vec<Label>,
    help: Option<String>,
    fix: Option<Fix>,
    assumption: Option<Assumption>,
}

impl CachedDiagnostic {
    fn of(diagnostic: &Diagnostic) -> CachedDiagnostic {
        CachedDiagnostic {
            code: diagnostic.rule.code.clone(),
            severity: diagnostic.severity,
            message: diagnostic.message.clone(),
            range: diagnostic.range.clone(),
            labels: diagnostic.labels.clone(),
            help: diagnostic.help.clone(),
            fix: diagnostic.fix.clone(),
            assumption: diagnostic.assumption.clone(),
        }
    }

    /// The finding again, its rule looked up in `settings` (None: no such rule there now).
    fn diagnostic(&self, settings: &Settings) -> Option<Diagnostic> {
        Some(Diagnostic {
            rule: Arc::clone(settings.registry.get(&self.code)?),
            severity: self.severity,
            message: self.message.clone(),
            range: self.range.clone(),
            labels: self.labels.clone(),
            help: self.help.clone(),
            fix: self.fix.clone(),
            assumption: self.assumption.clone(),
        })
    }
}

/// The project pass's conclusion for one exact set of files.
#[derive(Clone, Serialize, Deserialize)]
struct ProjectFacts {
    /// A hash of every file's path, content and settings in the run.
    key: u128,
    no_grad: Vec<FunctionKey>,
}

pub struct Cache {
    file: PathBuf,
    root: PathBuf,
    build: String,
    loaded: CacheFile,
    updated: Mutex<HashMap<String, Option<Entry>>>,
    project: Mutex<Option<ProjectFacts>>,
    scanned: Mutex<HashMap<String, Scanned>>,
}

impl Cache {
    /// Opens the cache in folder `root` (`.torchlint_cache`). A missing, corrupt or foreign
    /// cache file opens as an empty cache.
    pub fn open(root: &Path) -> Cache {
        let root = root.to_owned();
        let build = build_id();
        let file = root.join(env!("CARGO_PKG_VERSION")).join(FILE_NAME);
        let loaded = crate::files::read_regular(&file, crate::files::MAX_RECORD_BYTES)
            .ok()
            .and_then(|bytes| postcard::from_bytes::<CacheFile>(&bytes).ok())
            .filter(|cache| cache.build == build)
            .unwrap_or_default();
        Cache {
            file,
            root,
            build,
            loaded,
            updated: Mutex::new(HashMap::new()),
            project: Mutex::new(None),
            scanned: Mutex::new(HashMap::new()),
        }
    }

    /// The imports read from the file at `path` when it had this stamp, if any.
    pub fn imports(&self, path: &Path, stamp: Stamp) -> Option<Vec<Import>> {
        self.loaded
            .imports
            .get(&key(path))
            .filter(|scanned| scanned.stamp == stamp)
            .map(|scanned| scanned.imports.clone())
    }

    /// Records the imports read from the file at `path`, which had this stamp.
    pub fn put_imports(&self, path: &Path, stamp: Stamp, imports: &[Import]) {
        let scanned = Scanned {
            stamp,
            imports: imports.to_vec(),
        };
        self.scanned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key(path), scanned);
    }

    /// What is recorded for `path` with this content and settings, if any, and a summary of
    /// at least the names `demand` asks for; with its findings, unless `findings` says only
    /// the facts are wanted (then the findings given are none).
    pub fn get(
        &self,
        path: &Path,
        shown: &Path,
        content: ContentHash,
        settings: &Settings,
        demand: &Demand,
        findings: Findings,
    ) -> Option<Cached> {
        let entry = self.loaded.files.get(&key(path))?;
        if entry.content != content
            || entry.settings != settings.fingerprint()
            || entry.shown != shown
            || !entry.demand.covers(demand)
        {
            return None;
        }
        let diagnostics = match (&entry.diagnostics, findings) {
            (_, Findings::FactsOnly) => Vec::new(),
            (None, Findings::Made) => return None,
            (Some(diagnostics), Findings::Made) => diagnostics
                .iter()
                .map(|cached| cached.diagnostic(settings))
                .collect::<Option<Vec<_>>>()?,
        };
        Some(Cached {
            diagnostics,
            summary: entry.summary.clone(),
            questions: entry.questions.clone(),
            graph_calls: entry.graph_calls.clone(),
        })
    }

    /// Records the findings of a freshly linted file.
    pub fn put(
        &self,
        path: &Path,
        shown: &Path,
        content: ContentHash,
        settings: &Settings,
        fresh: Fresh<'_>,
    ) {
        let entry = Entry {
            shown: shown.to_owned(),
            content,
            settings: settings.fingerprint(),
            summary: fresh.summary.clone(),
            demand: fresh.demand.clone(),
            questions: fresh.questions.to_vec(),
            graph_calls: fresh.graph_calls.to_vec(),
            diagnostics: fresh
                .diagnostics
                .map(|diagnostics| diagnostics.iter().map(CachedDiagnostic::of).collect()),
        };
        self.lock_updated().insert(key(path), Some(entry));
    }

    /// The summary the last run left for a file, whatever its bytes were then: a file linted
    /// again to the same summary changes no other file's answers.
    pub fn summary_before(&self, path: &Path) -> Option<&FileSummary> {
        self.loaded
            .files
            .get(&key(path))
            .map(|entry| &entry.summary)
    }

    /// Forgets a file (it failed to lint, or a rule broke on it: nothing to reuse).
    pub fn forget(&self, path: &Path) {
        let path = key(path);
        if self.loaded.files.contains_key(&path) {
            self.lock_updated().insert(path, None);
        }
    }

    /// The project pass's result for a run whose files hash to `key`.
    pub fn project_facts(&self, key: u128) -> Option<Vec<FunctionKey>> {
        let facts = self.loaded.project.as_ref()?;
        (facts.key == key).then(|| facts.no_grad.clone())
    }

    pub fn put_project_facts(&self, key: u128, no_grad: Vec<FunctionKey>) {
        *self.project.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(ProjectFacts { key, no_grad });
    }

    /// Makes what this run recorded what the next run's `get` reads, without writing it: a
    /// long-lived process (the server) keeps one cache in memory across its lints.
    pub fn absorb(&mut self) {
        let updated = std::mem::take(self.updated.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (path, entry) in updated {
            match entry {
                Some(entry) => self.loaded.files.insert(path, entry),
                None => self.loaded.files.remove(&path),
            };
        }
        if let Some(project) = self
            .project
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            self.loaded.project = Some(project);
        }
        let scanned = std::mem::take(self.scanned.get_mut().unwrap_or_else(|p| p.into_inner()));
        self.loaded.imports.extend(scanned);
    }

    /// Writes the cache back if this run changed it. Returns why it could not, for a warning.
    pub fn save(mut self) -> io::Result<()> {
        self.persist()
    }

    /// Writes what this cache recorded since it was opened or last persisted, and keeps it
    /// for the next `get` (a long-lived process saves as it goes).
    pub fn persist(&mut self) -> io::Result<()> {
        let changed = !self.lock_updated().is_empty()
            || self
                .project
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
            || !self
                .scanned
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty();
        if !changed {
            return Ok(());
        }
        self.absorb();
        self.loaded.build = self.build.clone();
        let folder = self
            .file
            .parent()
            .expect("the cache file is in a version folder");
        prepare_folder(&self.root, folder)?;
        let bytes = postcard::to_allocvec(&self.loaded).map_err(io::Error::other)?;
        replace(&self.file, &bytes)
    }

    pub fn location(&self) -> &Path {
        &self.root
    }

    fn lock_updated(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<Entry>>> {
        self.updated.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Cache files from another version or another build of this version are not read: a rule
/// that changed would otherwise replay stale findings. The executable's size and modification
/// time tell builds apart without hashing the binary.
fn build_id() -> String {
    let exe = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}-{modified}", m.len())
        })
        .unwrap_or_default();
    format!("{} {exe}", env!("CARGO_PKG_VERSION"))
}

/// Whether `folder` is a cache folder torchlint made (it holds torchlint's `CACHEDIR.TAG`).
pub fn is_tagged(folder: &Path) -> bool {
    std::fs::read_to_string(folder.join("CACHEDIR.TAG")).is_ok_and(|tag| tag == CACHEDIR_TAG)
}

/// Makes the cache folder `root`, if need be, with its tag and `.gitignore`, and `folder`
/// inside it. A run makes it before it starts reading the project, so that its appearing in
/// the project's folder is no change the run's record must notice (see [`record`]).
pub fn prepare(root: &Path) -> io::Result<()> {
    prepare_folder(root, &record::Records::folder_in(root))
}

fn prepare_folder(root: &Path, folder: &Path) -> io::Result<()> {
    std::fs::create_dir_all(folder)?;
    write_if_missing(&root.join("CACHEDIR.TAG"), CACHEDIR_TAG)?;
    write_if_missing(&root.join(".gitignore"), "# Created by torchlint.\n*\n")
}

fn write_if_missing(path: &Path, content: &str) -> io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    replace(path, content.as_bytes())
}

/// A cache file, replaced whole (see [`crate::files::replace`]).
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::files::replace(path, bytes, crate::files::Durability::Unsynced)
}

fn key(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_owned())
        .to_string_lossy()
        .into_owned()
}

/// The key of the project pass: every file of the run, its content and its settings.
pub fn project_key(files: &mut [(PathBuf, ContentHash, u128)]) -> u128 {
    files.sort();
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for (path, content, settings) in files.iter() {
        let path = path.as_os_str().as_encoded_bytes();
        hasher.update(&(path.len() as u64).to_le_bytes());
        hasher.update(path);
        hasher.update(&content.to_le_bytes());
        hasher.update(&settings.to_le_bytes());
    }
    hasher.digest128()
}
