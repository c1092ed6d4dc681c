//! `torchlint clean`: removes the result caches (`.torchlint_cache` folders) under the given
//! folders, as `ruff clean` does for Ruff's. Only folders that carry torchlint's cache tag are
//! removed: a folder that merely has the name is the user's.

use std::path::{Path, PathBuf};

use super::print_error;
use crate::cache;

pub fn run(paths: &[PathBuf], quiet: bool) -> u8 {
    let roots = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    };
    let mut status = 0;
    for root in &roots {
        if !root.is_dir() {
            print_error(&format!(
                "{}: not a folder; `torchlint clean` removes the caches under folders",
                crate::escape::path(root)
            ));
            status = 2;
            continue;
        }
        for folder in caches_under(root) {
            match std::fs::remove_dir_all(&folder) {
                Ok(()) if !quiet => println!(
                    "removed {}",
                    crate::escape::path(folder.strip_prefix(".").unwrap_or(&folder))
                ),
                Ok(()) => {}
                Err(error) => {
                    print_error(&format!(
                        "cannot remove {}: {error}",
                        crate::escape::path(&folder)
                    ));
                    status = 2;
                }
            }
        }
    }
    status
}

/// The cache folders under `root`: every folder named `.torchlint_cache` with torchlint's
/// `CACHEDIR.TAG`, found without honouring ignore files (caches are ignored by design) and
/// without entering symlinked folders.
fn caches_under(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_type().is_some_and(|kind| kind.is_dir()))
        .build();
    for entry in walker.flatten() {
        if entry.file_name() == cache::FOLDER && cache::is_tagged(entry.path()) {
            found.push(entry.path().to_owned());
        }
    }
    found
}
