//! Run records: what a run of the same files came to last time, replayed when nothing it read
//! has changed since.
//!
//! A run on one staged file of a large repository lints that file with its project as context,
//! and even with every file's results cached it walks the repository, reads the cache whole
//! and links every file's imports before it can report. A record holds the run's report (each
//! named file's findings) with the stamp ([`Stamp`]: length, modification time, inode) of
//! everything the run depended on: each file of the run and of its context, each folder the
//! context walk listed and the ignore files it read, each config and rule pack the files'
//! settings came from. When a run names the same files with the same settings and every one
//! of those stamps is unchanged, the report is the same, and the run replays it: it stats the
//! project and reads the files it reports on (for their snippets). A folder's stamp changes
//! when a file is added to it, removed or renamed, so a new file that would import the named
//! one is not missed.
//!
//! A stamp taken while a file may still be changing proves nothing: a file written in the same
//! clock tick as it was read keeps its stamp. As git does for its index, a run whose inputs
//! include one modified after the run started (less a margin for coarse file-system clocks)
//! leaves no record.
//!
//! Records live beside the result cache, one file per set of named files, the least recently
//! written dropped past [`KEEP`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{CachedDiagnostic, ContentHash, Stamp};
use crate::diagnostic::FileDiagnostics;
use crate::discovery::LintTarget;
use crate::project::run::{self, Outcome};

/// The records kept: one per set of named files a run was asked about (pre-commit's staged
/// sets, the folders a user lints), the oldest dropped first.
const KEEP: usize = 32;

/// How far before a run's start a stamp may be and still have changed during the run: file
/// systems date writes from a clock that lags the one the run reads by up to a tick.
const RACY_MARGIN: Duration = Duration::from_millis(100);

#[derive(Serialize, Deserialize)]
struct Record {
    build: String,
    key: u128,
    /// Each input with its stamp when the run ended (`None`: it did not exist).
    inputs: Vec<(PathBuf, Option<Stamp>)>,
    /// What each named file came to, in the order of the run's targets.
    reported: Vec<Reported>,
}

#[derive(Serialize, Deserialize)]
enum Reported {
    Clean,
    /// Findings in the text with this hash.
    Findings {
        text: ContentHash,
        diagnostics: Vec<CachedDiagnostic>,
    },
}

/// The records of one cache folder, for one torchlint build.
pub struct Records {
    folder: PathBuf,
    build: String,
}

impl Records {
    /// The records kept in the cache folder `root` (`.torchlint_cache`).
    pub fn new(root: &Path) -> Records {
        Records {
            folder: Records::folder_in(root),
            build: super::build_id(),
        }
    }

    /// Where the records of the cache folder `root` are.
    pub fn folder_in(root: &Path) -> PathBuf {
        root.join(env!("CARGO_PKG_VERSION")).join("runs")
    }

    /// What the last run on exactly these targets (the files named, with their settings) came
    /// to, if nothing it depended on has changed since: one outcome per target.
    pub fn replay(&self, targets: &[LintTarget]) -> Option<Vec<Outcome>> {
        let key = key(targets);
        let bytes =
            crate::files::read_regular(&self.file(key), crate::files::MAX_RECORD_BYTES).ok()?;
        let record: Record = postcard::from_bytes(&bytes).ok()?;
        if record.build != self.build || record.key != key || record.reported.len() != targets.len()
        {
            return None;
        }
        let unchanged = record
            .inputs
            .par_iter()
            .all(|(path, stamp)| Stamp::of_path(path) == *stamp);
        if !unchanged {
            return None;
        }
        targets
            .iter()
            .zip(record.reported)
            .map(|(target, reported)| replayed(target, reported))
            .collect()
    }

    /// Records what a run on `targets` came to (`outcomes`, one per target), linted with
    /// `context` (found by a walk that depended on `walked`). A run that started at `started`
    /// and read a file changed since is not recorded, nor one with outcomes other than
    /// findings or none.
    pub fn record(
        &self,
        targets: &[LintTarget],
        outcomes: &[Outcome],
        context: &[LintTarget],
        walked: Vec<PathBuf>,
        started: SystemTime,
    ) {
        let Some(reported) = outcomes.iter().map(reported).collect::<Option<Vec<_>>>() else {
            return;
        };
        let mut inputs = walked;
        inputs.extend(
            targets
                .iter()
                .chain(context)
                .map(|target| target.path.clone()),
        );
        inputs.extend(settings_files(targets.iter().chain(context)));
        inputs.sort();
        inputs.dedup();
        let racy_after = started - RACY_MARGIN;
        let Some(inputs) = inputs
            .into_par_iter()
            .map(|path| {
                let stamp = Stamp::of_path(&path);
                let racy = stamp.is_some_and(|stamp| stamp.modified_after(racy_after));
                (!racy).then_some((path, stamp))
            })
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        let key = key(targets);
        let record = Record {
            build: self.build.clone(),
            key,
            inputs,
            reported,
        };
        // A record that cannot be written costs the next run its shortcut, nothing more.
        let Ok(bytes) = postcard::to_allocvec(&record) else {
            return;
        };
        if super::replace(&self.file(key), &bytes).is_ok() {
            self.drop_oldest();
        }
    }

    fn file(&self, key: u128) -> PathBuf {
        self.folder.join(format!("{key:032x}.postcard"))
    }

    fn drop_oldest(&self) {
        let Ok(entries) = std::fs::read_dir(&self.folder) else {
            return;
        };
        let mut records: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
            .collect();
        if records.len() <= KEEP {
            return;
        }
        records.sort();
        for (_, path) in &records[..records.len() - KEEP] {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// What tells runs apart: the named files (as shown and where they are), their kinds and the
/// fingerprints of their settings (config text, command-line selection, rule packs).
fn key(targets: &[LintTarget]) -> u128 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut part = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    if let Ok(folder) = std::env::current_dir() {
        part(folder.as_os_str().as_encoded_bytes());
    }
    for target in targets {
        part(target.path.as_os_str().as_encoded_bytes());
        part(format!("{:?}", target.kind).as_bytes());
        part(&target.settings.fingerprint().to_le_bytes());
    }
    hasher.digest128()
}

/// The config files and rule packs the targets' settings were read from.
fn settings_files<'a>(targets: impl Iterator<Item = &'a LintTarget>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut seen: Vec<&Arc<crate::settings::Settings>> = Vec::new();
    for target in targets {
        if seen
            .iter()
            .any(|settings| Arc::ptr_eq(settings, &target.settings))
        {
            continue;
        }
        seen.push(&target.settings);
        files.extend(target.settings.config_path.iter().cloned());
        files.extend(target.settings.registry.user_paths().iter().cloned());
    }
    files
}

fn reported(outcome: &Outcome) -> Option<Reported> {
    match outcome {
        Outcome::Clean => Some(Reported::Clean),
        Outcome::Linted {
            file,
            internal_errors,
        } if internal_errors.is_empty() => Some(Reported::Findings {
            text: super::content_hash(file.source.text().as_bytes()),
            diagnostics: file.diagnostics.iter().map(CachedDiagnostic::of).collect(),
        }),
        _ => None,
    }
}

/// The outcome recorded for `target`, with its text read again (None: it no longer reads as
/// the text the findings were made in).
fn replayed(target: &LintTarget, reported: Reported) -> Option<Outcome> {
    let (text, diagnostics) = match reported {
        Reported::Clean => return Some(Outcome::Clean),
        Reported::Findings { text, diagnostics } => (text, diagnostics),
    };
    let bytes = std::fs::read(&target.path).ok()?;
    let source = run::read_source(&target.path, &bytes).ok()??;
    if super::content_hash(source.text().as_bytes()) != text {
        return None;
    }
    let diagnostics = diagnostics
        .iter()
        .map(|cached| cached.diagnostic(&target.settings))
        .collect::<Option<Vec<_>>>()?;
    Some(Outcome::Linted {
        file: FileDiagnostics {
            source: Arc::new(source),
            diagnostics,
        },
        internal_errors: Vec::new(),
    })
}
