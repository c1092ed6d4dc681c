//! What a project run did besides finding things, for `check -v`: which files it read only
//! for their facts, which it left unread for their size, and which it linted twice. These are
//! the answers to "why did this one-file run take seconds", so they name files and causes.

use std::fmt;
use std::path::PathBuf;

use crate::discovery::display_path;
use crate::escape;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// How many files of the named files' projects the run took as context, for their facts
    /// (they import, or are imported by, a named file: linted, or their facts taken from the
    /// cache), and how many it left out (related by no import).
    Context { read: usize, unrelated: usize },
    /// A context file over its `context-size-limit` (a generated module): not read.
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// A file linted a second time.
    LintedAgain { path: PathBuf, cause: Again },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// It imports files that import it back: it could not wait for their facts, and they
    /// answered its questions otherwise once they were done.
    ImportCycle,
    /// Once every file's facts were in, some of its questions had other answers.
    AnswersChanged,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Context { read, unrelated } => write!(
                f,
                "context: {read} other file{} of the project, related to the named files by imports (their facts decide findings here); {unrelated} unrelated, left out",
                plural(*read)
            ),
            Note::TooLarge { path, size, limit } => write!(
                f,
                "{}: not read for facts: {size} bytes is over `context-size-limit` ({limit} bytes); name it to lint it",
                shown(path)
            ),
            Note::LintedAgain { path, cause } => {
                let why = match cause {
                    Again::ImportCycle => {
                        "it is part of an import cycle, and the files it imports answered its questions otherwise once they were linted"
                    }
                    Again::AnswersChanged => {
                        "once every file's facts were in, some of its questions had other answers"
                    }
                };
                write!(f, "{}: linted twice: {why}", shown(path))
            }
        }
    }
}

/// A path as the other messages show it: relative to the current folder, escaped.
fn shown(path: &std::path::Path) -> String {
    escape::path(&display_path(path))
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}
