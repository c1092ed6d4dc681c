//! Baselines: adopt torchlint on a codebase that already has hazards. `--write-baseline`
//! records today's findings; `--baseline FILE` then reports (and fails on) only the findings
//! that are not in it, and lists the recorded ones that are gone.
//!
//! Findings are matched by [`Fingerprint`] — rule, file and normalized flagged text plus an
//! occurrence index, never a line number — so edits elsewhere in a file keep the baseline
//! valid. The file is sorted JSON, one entry per finding, so it diffs well in review.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::diagnostic::FileDiagnostics;
use crate::error::FileError;
use crate::fingerprint::Fingerprinter;

/// Where `--write-baseline` writes without `--baseline`.
pub const DEFAULT_PATH: &str = "torchlint-baseline.json";

/// The only format version so far; a newer one is refused rather than misread.
const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    version: u32,
    findings: Vec<Entry>,
}

/// One recorded finding. `file` is relative to the baseline's folder, with `/` separators.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub file: String,
    pub code: String,
    /// The flagged source, whitespace collapsed: for the reader; matching uses `fingerprint`.
    pub source: String,
    pub fingerprint: String,
}

/// What applying a baseline left: the new findings stay in the files; these are the rest.
#[derive(Debug, Default)]
pub struct Applied {
    /// Findings dropped because the baseline records them.
    pub known: usize,
    /// Baseline entries for linted files that matched no finding: fixed since.
    pub fixed: Vec<Entry>,
}

impl Baseline {
    pub fn read(path: &Path) -> Result<Baseline, FileError> {
        let text = crate::files::read_regular_to_string(path, crate::files::MAX_RECORD_BYTES)
            .map_err(|error| {
                let hint = if error.kind() == io::ErrorKind::NotFound {
                    "; create it with `torchlint check --baseline FILE --write-baseline`"
                } else {
                    ""
                };
                FileError::new(path, format!("cannot read the baseline: {error}{hint}"))
            })?;
        let baseline: Baseline = serde_json::from_str(&text).map_err(|error| {
            FileError::at_line(
                path,
                error.line(),
                format!("not a torchlint baseline: {error}; regenerate it with `--write-baseline`"),
            )
        })?;
        if baseline.version != VERSION {
            return Err(FileError::new(
                path,
                format!(
                    "baseline format version {} is not supported (this torchlint reads version {VERSION}); regenerate it with `--write-baseline`",
                    baseline.version
                ),
            ));
        }
        Ok(baseline)
    }

    /// The baseline for `files`' findings, keeping the entries of files this run did not lint
    /// (`linted`): a run over part of a project must not forget the rest of it.
    pub fn record(
        &self,
        baseline_path: &Path,
        files: &[FileDiagnostics],
        linted: &[PathBuf],
    ) -> Baseline {
        let folder = folder_of(baseline_path);
        let linted: BTreeSet<String> = linted.iter().map(|p| relative_to(&folder, p)).collect();
        let mut findings: Vec<Entry> = self
            .findings
            .iter()
            .filter(|entry| !linted.contains(&entry.file))
            .cloned()
            .collect();
        findings.extend(
            entries(&folder, files)
                .into_iter()
                .map(|(_, _, entry)| entry),
        );
        findings.sort();
        Baseline {
            version: VERSION,
            findings,
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a baseline serializes");
        bytes.push(b'\n');
        bytes
    }

    pub fn len(&self) -> usize {
        self.findings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.findings.is_empty()
    }

    /// Drops from `files` the findings the baseline records. Entries of files in `linted`
    /// that matched nothing are returned as fixed; entries of other files are left alone.
    pub fn apply(
        &self,
        baseline_path: &Path,
        files: &mut Vec<FileDiagnostics>,
        linted: &[PathBuf],
    ) -> Applied {
        let folder = folder_of(baseline_path);
        let mut recorded: HashMap<&str, usize> = HashMap::new();
        for entry in &self.findings {
            *recorded.entry(entry.fingerprint.as_str()).or_default() += 1;
        }
        let mut known_flags: Vec<Vec<bool>> = files
            .iter()
            .map(|file| vec![false; file.diagnostics.len()])
            .collect();
        let mut known = 0;
        for (file_index, diagnostic_index, entry) in &entries(&folder, files) {
            if let Some(count) = recorded.get_mut(entry.fingerprint.as_str())
                && *count > 0
            {
                *count -= 1;
                known_flags[*file_index][*diagnostic_index] = true;
                known += 1;
            }
        }
        for (file, flags) in files.iter_mut().zip(&known_flags) {
            let mut flags = flags.iter();
            file.diagnostics
                .retain(|_| !flags.next().copied().unwrap_or(false));
        }
        files.retain(|file| !file.diagnostics.is_empty());

        let linted: BTreeSet<String> = linted.iter().map(|p| relative_to(&folder, p)).collect();
        let mut fixed = Vec::new();
        for entry in &self.findings {
            if let Some(count) = recorded.get_mut(entry.fingerprint.as_str())
                && *count > 0
                && linted.contains(&entry.file)
            {
                *count -= 1;
                fixed.push(entry.clone());
            }
        }
        Applied { known, fixed }
    }
}

/// Each finding of `files` as a baseline entry, with its file and finding index.
fn entries(folder: &Path, files: &[FileDiagnostics]) -> Vec<(usize, usize, Entry)> {
    let mut fingerprints = Fingerprinter::default();
    let mut entries = Vec::new();
    for (file_index, file) in files.iter().enumerate() {
        let path = relative_to(folder, file.source.name());
        for (index, diagnostic) in file.diagnostics.iter().enumerate() {
            let fingerprint = fingerprints.fingerprint(&path, &file.source, diagnostic);
            entries.push((
                file_index,
                index,
                Entry {
                    file: path.clone(),
                    code: diagnostic.code().to_owned(),
                    source: shorten(&fingerprint.flagged),
                    fingerprint: fingerprint.hash,
                },
            ));
        }
    }
    entries
}

fn folder_of(baseline_path: &Path) -> PathBuf {
    let absolute = lexical_absolute(baseline_path);
    absolute.parent().map(Path::to_owned).unwrap_or_default()
}

/// The absolute form of `path` with `.` and `..` resolved by name: `--baseline ../b.json`
/// from `src/` must name the same folder as `b.json` from the root.
fn lexical_absolute(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.into());
    let mut normal = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// `path` relative to the baseline's folder, `/`-separated, so the baseline means the same
/// from any working directory and on any OS.
fn relative_to(folder: &Path, path: &Path) -> String {
    let absolute = lexical_absolute(path);
    let shown = absolute.strip_prefix(folder).unwrap_or(&absolute);
    shown
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Long flagged regions (a whole block) are cut for the reader; the fingerprint covers all.
fn shorten(text: &str) -> String {
    const MAX: usize = 120;
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX - 3).collect();
    format!("{cut}...")
}
