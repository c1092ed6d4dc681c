//! Finding and reading configuration files: `.torchlint.toml`, `torchlint.toml`, or the
//! `[tool.torchlint]` table of `pyproject.toml`, keeping spans so errors name the line.

use std::fs;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use crate::error::FileError;

/// Config file names in the order they win when several sit in one folder.
pub const CONFIG_FILE_NAMES: [&str; 3] = [".torchlint.toml", "torchlint.toml", "pyproject.toml"];

/// A config file holding torchlint settings, kept as text: its spanned table is re-parsed
/// on demand (it borrows from the text) so every error can name its line.
#[derive(Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub text: String,
    /// Where the keys live, for messages: `[tool.torchlint]` or the file's top level.
    pub section: &'static str,
}

impl ConfigFile {
    pub fn directory(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    pub fn error_at(&self, offset: usize, message: impl Into<String>) -> FileError {
        FileError {
            path: self.path.clone(),
            line: Some(line_of(&self.text, offset)),
            message: message.into(),
        }
    }

    /// The torchlint table with spans into [`ConfigFile::text`].
    pub fn table(&self) -> DeTable<'_> {
        let document = DeTable::parse(&self.text)
            .expect("the file parsed when it was read")
            .into_inner();
        if self.section == PYPROJECT_SECTION {
            torchlint_table(document).unwrap_or_default()
        } else {
            document
        }
    }
}

const PYPROJECT_SECTION: &str = "[tool.torchlint]";

fn torchlint_table(document: DeTable<'_>) -> Option<DeTable<'_>> {
    let (_, tool) = document
        .into_iter()
        .find(|(key, _)| key.get_ref() == "tool")?;
    let DeValue::Table(tool) = tool.into_inner() else {
        return None;
    };
    let (_, torchlint) = tool
        .into_iter()
        .find(|(key, _)| key.get_ref() == "torchlint")?;
    match torchlint.into_inner() {
        DeValue::Table(table) => Some(table),
        _ => None,
    }
}

/// Reads a config file named by the user or found by discovery. A `pyproject.toml` without a
/// `[tool.torchlint]` table yields `None` (it configures other tools).
pub fn read(path: &Path) -> Result<Option<ConfigFile>, FileError> {
    let text = fs::read_to_string(path).map_err(|error| FileError {
        path: path.to_owned(),
        line: None,
        message: format!("cannot read the config file: {error}"),
    })?;
    let document = DeTable::parse(&text).map_err(|error| FileError {
        path: path.to_owned(),
        line: error.span().map(|span| line_of(&text, span.start)),
        message: format!("invalid TOML: {}", error.message().trim()),
    })?;
    let is_pyproject = path
        .file_name()
        .is_some_and(|name| name == "pyproject.toml");
    if is_pyproject {
        let has_table = match torchlint_table(document.into_inner()) {
            Some(_) => true,
            None => {
                // `tool.torchlint` present but not a table is a mistake worth naming.
                false
            }
        };
        if !has_table {
            return Ok(None);
        }
        Ok(Some(ConfigFile {
            path: path.to_owned(),
            text,
            section: PYPROJECT_SECTION,
        }))
    } else {
        Ok(Some(ConfigFile {
            path: path.to_owned(),
            text,
            section: "the top level",
        }))
    }
}

/// The config file that governs `directory` itself (not its parents), if any.
pub fn find_in(directory: &Path) -> Result<Option<ConfigFile>, FileError> {
    for name in CONFIG_FILE_NAMES {
        let candidate = directory.join(name);
        if candidate.is_file()
            && let Some(config) = read(&candidate)?
        {
            return Ok(Some(config));
        }
    }
    Ok(None)
}

pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
