//! Which files to lint: walk the given paths honouring `.gitignore`/`.ignore` and the
//! configured excludes; a file named on the command line is always linted. Symlinked files
//! are linted; symlinked folders are not entered (which also rules out symlink loops).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::WalkBuilder;

pub use crate::error::FileError;
use crate::settings::Settings;
use crate::settings::config_file::CONFIG_FILE_NAMES;
use crate::settings::resolver::Resolver;
use crate::source::SourceKind;

#[derive(Clone)]
pub struct LintTarget {
    pub path: PathBuf,
    pub kind: SourceKind,
    pub settings: Arc<Settings>,
}

#[derive(Default)]
pub struct Discovered {
    /// Sorted by path, each once.
    pub targets: Vec<LintTarget>,
    pub errors: Vec<FileError>,
    /// What the walks' result depends on besides the files found: every folder listed, the
    /// ignore files read in them and above the walked roots, and git's own exclude files. A
    /// run that knows these unchanged (`cache::record`) knows the walk would find the same.
    pub walked: Vec<PathBuf>,
}

/// How named files meet the excludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// A file named on the command line is linted whatever the excludes say.
    Linted,
    /// `--force-exclude`: the excludes apply to it too (and to the folders it is in), as
    /// pre-commit, which names every staged file, needs.
    Excluded,
}

pub fn discover(paths: &[PathBuf], resolver: &Arc<Resolver>) -> Discovered {
    discover_with(paths, resolver, Named::Linted)
}

pub fn discover_with(paths: &[PathBuf], resolver: &Arc<Resolver>, named: Named) -> Discovered {
    let mut targets: BTreeMap<PathBuf, (SourceKind, Arc<Settings>)> = BTreeMap::new();
    let errors = Mutex::new(Vec::new());
    let report = |error: FileError| errors.lock().unwrap_or_else(|p| p.into_inner()).push(error);

    let mut linked_file_found = false;
    let mut walked = Vec::new();
    for root in paths {
        let root = tidy(root);
        let metadata = match std::fs::metadata(&root) {
            Ok(metadata) => metadata,
            Err(error) => {
                report(FileError::new(&root, describe_io_error(&root, &error)));
                continue;
            }
        };
        if !metadata.is_file() && !metadata.is_dir() {
            // A FIFO, a socket or a device: reading it could block or never end.
            report(FileError::new(
                &root,
                format!(
                    "it is {}, not a regular file; torchlint lints files and folders",
                    crate::files::describe_kind(&metadata.file_type())
                ),
            ));
            continue;
        }
        if named == Named::Excluded && excluded_with_folders(resolver, &root) {
            continue;
        }
        if metadata.is_file() {
            // Named on the command line: linted whatever its name or the excludes say.
            match resolver.for_file(&root) {
                Ok(settings) => {
                    let kind = SourceKind::from_path(&root).unwrap_or(SourceKind::Python);
                    targets.insert(root, (kind, settings));
                }
                Err(error) => report(error),
            }
            continue;
        }

        walked.extend(read_above_root(&root));
        let walker = WalkBuilder::new(&root)
            .hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry({
                let root = root.clone();
                let resolver = Arc::clone(resolver);
                move |entry| entry.path() == root || !is_excluded(&resolver, entry.path())
            })
            .build();
        for entry in walker {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    let (path, message) = describe_walk_error(&root, &error);
                    report(FileError::new(path, message));
                    continue;
                }
            };
            let path = entry.path();
            let Some(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() || IGNORE_FILES.iter().any(|name| entry.file_name() == *name) {
                walked.push(path.to_owned());
            }
            let Some(kind) = SourceKind::from_path(path) else {
                continue;
            };
            if file_type.is_symlink() {
                linked_file_found = true;
                match std::fs::metadata(path) {
                    Ok(target) if target.is_file() => {}
                    Ok(_) => continue,
                    Err(error) => {
                        report(FileError::new(tidy(path), describe_io_error(path, &error)));
                        continue;
                    }
                }
            } else if !file_type.is_file() {
                continue;
            }
            match resolver.for_file(path) {
                Ok(settings) => {
                    targets.insert(tidy(path), (kind, settings));
                }
                Err(error) => report(error),
            }
        }
    }

    // One walk of one folder yields each path once; only several roots or a symlinked file
    // can name a file twice, and only then is every path resolved.
    if paths.len() > 1 || linked_file_found {
        dedupe_by_file(&mut targets);
    }
    let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    errors.sort_by(|a, b| (&a.path, a.line, &a.message).cmp(&(&b.path, b.line, &b.message)));
    errors.dedup();
    Discovered {
        targets: targets
            .into_iter()
            .map(|(path, (kind, settings))| LintTarget {
                path,
                kind,
                settings,
            })
            .collect(),
        errors,
        walked,
    }
}

/// The ignore files a walk reads inside the folders it lists (git's `info/exclude` is read
/// from the repository's `.git`).
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// What a walk of `root` reads from outside it: the ignore files of the folders above it and
/// the repository's exclude file, git's global excludes at their default places (a
/// `core.excludesFile` set elsewhere is not watched), and where a config file or a `.git` that
/// would change the files' settings or project could appear above it.
fn read_above_root(root: &Path) -> Vec<PathBuf> {
    let absolute = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
    let mut files = Vec::new();
    for folder in absolute.ancestors() {
        files.push(folder.join(".git/info/exclude"));
        if folder != absolute {
            let names = IGNORE_FILES
                .iter()
                .chain(&CONFIG_FILE_NAMES)
                .chain(&[".git"]);
            files.extend(names.map(|name| folder.join(name)));
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|home| home.join(".config")));
    files.extend(
        config
            .map(|config| config.join("git"))
            .into_iter()
            .flat_map(|git| [git.join("config"), git.join("ignore")]),
    );
    files.extend(home.map(|home| home.join(".gitconfig")));
    files
}

/// Whether the excludes of its project skip `path`, or a folder it is in below the project's
/// root (`build/gen.py` under the default excludes).
fn excluded_with_folders(resolver: &Resolver, path: &Path) -> bool {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let Ok(settings) = resolver.for_file(&absolute) else {
        return false;
    };
    let root = settings.project_root.as_path();
    let folders = absolute
        .ancestors()
        .skip(1)
        .take_while(|folder| folder.starts_with(root) && *folder != root);
    std::iter::once(absolute.as_path())
        .chain(folders)
        .any(|path| is_excluded(resolver, path))
}

fn is_excluded(resolver: &Resolver, path: &Path) -> bool {
    let folder = path.parent().unwrap_or(Path::new("."));
    // A broken config is reported when its files are resolved; do not hide them here.
    resolver
        .for_folder(folder)
        .is_ok_and(|settings| settings.is_excluded(path))
}

/// `./src/../train.py` stays as typed, but a leading `./` is dropped, as Ruff shows paths.
fn tidy(path: &Path) -> PathBuf {
    let stripped = path.strip_prefix(".").unwrap_or(path);
    if stripped.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        stripped.to_owned()
    }
}

pub fn describe_io_error(path: &Path, error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::NotFound if path.symlink_metadata().is_ok() => {
            "broken symbolic link: its target does not exist; fix or remove the link, or exclude it"
                .to_owned()
        }
        ErrorKind::NotFound => "no such file or directory".to_owned(),
        ErrorKind::PermissionDenied => {
            "permission denied: torchlint cannot read it (check its permissions, or exclude it)"
                .to_owned()
        }
        _ if error.raw_os_error() == Some(libc::ELOOP) => {
            if symlinks_loop(path) {
                "symbolic link loop: the link points back at itself; fix or remove the link"
                    .to_owned()
            } else {
                "too many levels of symbolic links: the chain of links is longer than the system follows; point the link nearer its target".to_owned()
            }
        }
        _ => format!("cannot read it: {error}"),
    }
}

/// Keeps one path per file: `train.py` and `/abs/path/train.py` on one command line, or a
/// link beside its target, would otherwise be linted twice and every finding printed twice.
/// The file's own path wins over a link to it.
fn dedupe_by_file(targets: &mut BTreeMap<PathBuf, (SourceKind, Arc<Settings>)>) {
    let mut chosen: std::collections::HashMap<PathBuf, PathBuf> = Default::default();
    let mut dropped = Vec::new();
    for path in targets.keys() {
        let Ok(file) = std::fs::canonicalize(path) else {
            continue;
        };
        match chosen.entry(file) {
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(path.clone());
            }
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                let is_link = |path: &Path| path.is_symlink();
                if is_link(entry.get()) && !is_link(path) {
                    dropped.push(entry.insert(path.clone()));
                } else {
                    dropped.push(path.clone());
                }
            }
        }
    }
    for path in dropped {
        targets.remove(&path);
    }
}

/// Whether following the links from `path` comes back to a link already followed (ELOOP also
/// means a chain longer than the system follows, which is no loop).
fn symlinks_loop(path: &Path) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut current = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    while let Ok(link) = std::fs::read_link(&current) {
        // A link that names itself through ever longer `..` paths never repeats a path.
        if !seen.insert(current.clone()) || seen.len() > 1000 {
            return true;
        }
        current = match current.parent() {
            Some(parent) if link.is_relative() => parent.join(link),
            _ => link,
        };
    }
    false
}

fn describe_walk_error(root: &Path, error: &ignore::Error) -> (PathBuf, String) {
    match error {
        ignore::Error::WithPath { path, err } => {
            let (_, message) = describe_walk_error(path, err);
            (tidy(path), message)
        }
        ignore::Error::WithDepth { err, .. } => describe_walk_error(root, err),
        ignore::Error::Loop { child, .. } => (
            tidy(child),
            "symbolic link loop: the link points back at a folder above it".to_owned(),
        ),
        ignore::Error::Io(io) => (tidy(root), describe_io_error(root, io)),
        other => (tidy(root), other.to_string()),
    }
}

/// Paths under the current folder are shown relative to it, as Ruff does.
pub fn display_path(path: &Path) -> PathBuf {
    if path.is_absolute()
        && let Ok(cwd) = std::env::current_dir()
        && let Ok(relative) = path.strip_prefix(&cwd)
    {
        return relative.to_owned();
    }
    path.to_owned()
}
