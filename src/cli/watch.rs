//! `torchlint check --watch`: lint, then lint again whenever a Python file, notebook or config
//! file under the paths changes, clearing the screen between runs (Ruff's `--watch`). It runs
//! until interrupted; the status lines go to stderr, so stdout holds only reports.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use super::{CheckArgs, print_error};
use crate::settings::config_file::CONFIG_FILE_NAMES;

/// Events closer together than this are one change (an editor's save is several).
const SETTLE: Duration = Duration::from_millis(150);

pub fn run(args: CheckArgs) -> u8 {
    if args.paths.iter().any(|path| path == Path::new("-")) {
        print_error("`--watch` cannot watch stdin: name files or folders");
        return 2;
    }
    let (events, changes) = mpsc::channel();
    let mut watcher = match notify::recommended_watcher(events) {
        Ok(watcher) => watcher,
        Err(error) => {
            print_error(&format!("cannot watch for changes: {error}"));
            return 2;
        }
    };
    let paths: Vec<PathBuf> = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    for path in &paths {
        if let Err(error) = watcher.watch(path, RecursiveMode::Recursive) {
            print_error(&format!(
                "cannot watch {}: {error}",
                crate::escape::path(path)
            ));
            return 2;
        }
    }
    let once = CheckArgs {
        watch: false,
        ..args
    };
    let clear = std::io::stdout().is_terminal();
    eprintln!("Linting in watch mode: it lints again when a file changes (Ctrl-C stops it).");
    loop {
        super::check::run(once.clone());
        let _ = std::io::stdout().flush();
        // Wait for a change that can change the report, then for the burst to settle.
        loop {
            match changes.recv() {
                Ok(Ok(event)) if matters(&event) => break,
                Ok(_) => {}
                Err(_) => return 2,
            }
        }
        while changes.recv_timeout(SETTLE).is_ok() {}
        if clear {
            // Erase the screen and its scrollback, and go home (what `clear` does).
            print!("\x1b[2J\x1b[3J\x1b[H");
        }
        eprintln!("File change detected: linting again.");
    }
}

/// A change to a file the run reads: a Python file, a notebook or a config file (not the
/// cache the run itself writes).
fn matters(event: &notify::Event) -> bool {
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    event.paths.iter().any(|path| {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        let linted = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("py" | "pyi" | "ipynb")
        );
        (linted || CONFIG_FILE_NAMES.contains(&name))
            && !path
                .components()
                .any(|part| part.as_os_str() == crate::cache::FOLDER)
    })
}
