//! The one error type for problems with files the user gave torchlint — a source file, a
//! config file, a rule file: which file, the line when known, and what to do about it.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
    /// The file's further errors, in file order (a config file's are all reported at once,
    /// not one per run).
    pub more: Vec<FileError>,
}

/// The "file" of errors in command-line arguments (`--select TL999`).
pub const COMMAND_LINE: &str = "command line";

impl FileError {
    /// An error in the command-line arguments rather than in a file.
    pub fn command_line(message: impl Into<String>) -> Self {
        FileError::new(COMMAND_LINE, message)
    }

    pub fn is_command_line(&self) -> bool {
        self.path.as_os_str() == COMMAND_LINE
    }

    pub fn new(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        FileError {
            path: path.into(),
            line: None,
            message: message.into(),
            more: Vec::new(),
        }
    }

    pub fn at_line(path: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        FileError {
            path: path.into(),
            line: Some(line),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// Several errors of one file as one, in file order (those without a line first); None
    /// for none.
    pub fn combined(mut errors: Vec<FileError>) -> Option<FileError> {
        errors.sort_by_key(|error| error.line);
        let mut errors = errors.into_iter();
        let mut first = errors.next()?;
        first.more.extend(errors);
        Some(first)
    }

    /// This error and the further ones it carries, in order.
    pub fn all(&self) -> impl Iterator<Item = &FileError> {
        std::iter::once(self).chain(&self.more)
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "{}:{line}: {}",
                crate::escape::path(&self.path),
                self.message
            ),
            None => write!(f, "{}: {}", crate::escape::path(&self.path), self.message),
        }
    }
}
