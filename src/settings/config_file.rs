//! Finding and reading configuration files: `.torchlint.toml`, `torchlint.toml`, or the
//! `[tool.torchlint]` table of `pyproject.toml`, keeping spans so errors name the line.

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
            more: Vec::new(),
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
    // A wrong `tool` was reported when the file was read.
    find_torchlint_table(document).unwrap_or_default()
}

/// `[tool.torchlint]` of a pyproject document: None when the file does not configure
/// torchlint, an error (the offset of the wrong value and what it is) when `tool` or
/// `tool.torchlint` is there but not a table, which would otherwise be ignored without a word.
fn find_torchlint_table(document: DeTable<'_>) -> Result<Option<DeTable<'_>>, (usize, String)> {
    let Some((key, tool)) = document
        .into_iter()
        .find(|(key, _)| key.get_ref() == "tool")
    else {
        return Ok(None);
    };
    let start = key.span().start;
    let tool = match tool.into_inner() {
        DeValue::Table(tool) => tool,
        other => {
            return Err((
                start,
                format!(
                    "`tool` is {}; it must be a table, with torchlint's settings under `[tool.torchlint]`",
                    describe_value(&other)
                ),
            ));
        }
    };
    let Some((key, torchlint)) = tool
        .into_iter()
        .find(|(key, _)| key.get_ref() == "torchlint")
    else {
        return Ok(None);
    };
    let start = key.span().start;
    match torchlint.into_inner() {
        DeValue::Table(table) => Ok(Some(table)),
        other => Err((
            start,
            format!(
                "`tool.torchlint` is {}; it must be a table: write the settings under `[tool.torchlint]`",
                describe_value(&other)
            ),
        )),
    }
}

fn describe_value(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(array)
            if array
                .iter()
                .all(|item| matches!(item.get_ref(), DeValue::Table(_)))
                && !array.is_empty() =>
        {
            "an array of tables (`[[...]]`)"
        }
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Reads a config file named by the user or found by discovery. A `pyproject.toml` without a
/// `[tool.torchlint]` table yields `None` (it configures other tools).
pub fn read(path: &Path) -> Result<Option<ConfigFile>, FileError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_CONFIG_BYTES).map_err(
        |error| FileError {
            path: path.to_owned(),
            line: None,
            message: format!("cannot read the config file: {error}"),
            more: Vec::new(),
        },
    )?;
    let document = DeTable::parse(&text).map_err(|error| FileError {
        path: path.to_owned(),
        line: error.span().map(|span| line_of(&text, span.start)),
        message: format!("invalid TOML: {}", error.message().trim()),
        more: Vec::new(),
    })?;
    let is_pyproject = path
        .file_name()
        .is_some_and(|name| name == "pyproject.toml");
    if is_pyproject {
        let has_table = match find_torchlint_table(document.into_inner()) {
            Ok(table) => table.is_some(),
            Err((offset, message)) => {
                return Err(FileError {
                    path: path.to_owned(),
                    line: Some(line_of(&text, offset)),
                    message,
                    more: Vec::new(),
                });
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
        let Ok(metadata) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !metadata.is_file() {
            // A FIFO or a device where a config belongs would hang or flood a read: say so.
            return Err(FileError::new(
                &candidate,
                format!(
                    "cannot read the config file: it is {}, not a regular file",
                    crate::files::describe_kind(&metadata.file_type())
                ),
            ));
        }
        if let Some(config) = read(&candidate)? {
            return Ok(Some(config));
        }
    }
    Ok(None)
}

pub fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset.min(text.len())]).count() + 1
}
