//! `--config`, as Ruff has it: each value is either the path of a config file or an inline
//! `KEY = VALUE` pair of TOML, with the keys of the config file's torchlint table
//! (`--config 'select = ["TL1"]'`, `--config 'empty-cache-in-loop.max-gated-interval = 20'`).
//! Inline pairs apply over every config file, in the order given.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use crate::error::FileError;

/// One `--config` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigArgument {
    /// The config file that governs every file, instead of discovering one per folder.
    File(PathBuf),
    /// Settings over every config file.
    Inline(InlineOverride),
}

impl ConfigArgument {
    /// A value that names an existing file, or ends in `.toml` (a missing config file is then
    /// an error where it is read), is a path; anything else must be TOML.
    pub fn parse(value: &OsStr) -> Result<ConfigArgument, FileError> {
        let path = Path::new(value);
        if path.is_file()
            || path
                .extension()
                .is_some_and(|extension| extension == "toml")
        {
            return Ok(ConfigArgument::File(path.to_owned()));
        }
        let shown = crate::escape::path(path);
        let neither = |why: String| {
            FileError::command_line(format!(
                "--config '{shown}' is not a path to a file, and it cannot be parsed as a TOML `KEY = VALUE` pair ({why}); give a config file's path, or a setting like --config 'select = [\"TL1\"]'"
            ))
        };
        let Some(text) = value.to_str() else {
            return Err(neither("it is not UTF-8".to_owned()));
        };
        match DeTable::parse(text) {
            Ok(table) if table.get_ref().is_empty() => Err(neither("it sets no key".to_owned())),
            Ok(_) => Ok(ConfigArgument::Inline(InlineOverride {
                text: text.to_owned(),
            })),
            Err(error) => Err(neither(error.message().trim().to_owned())),
        }
    }

    /// The one config file and the inline overrides, in the order given, of all the values;
    /// two files are an error, as in Ruff.
    pub fn split(
        values: impl IntoIterator<Item = ConfigArgument>,
    ) -> Result<(Option<PathBuf>, Vec<InlineOverride>), FileError> {
        let mut file: Option<PathBuf> = None;
        let mut inline = Vec::new();
        for value in values {
            match value {
                ConfigArgument::Inline(pair) => inline.push(pair),
                ConfigArgument::File(path) => {
                    if let Some(first) = &file {
                        return Err(FileError::command_line(format!(
                            "--config names two config files, {} and {}: give one, and further settings as --config 'KEY = VALUE'",
                            crate::escape::path(first),
                            crate::escape::path(&path)
                        )));
                    }
                    file = Some(path);
                }
            }
        }
        Ok((file, inline))
    }
}

/// A `--config 'KEY = VALUE'` pair: TOML text (checked to parse) holding keys of the torchlint
/// table. Kept as text, as a config file is, so that its errors can quote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineOverride {
    text: String,
}

impl InlineOverride {
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its table, with spans into [`InlineOverride::text`].
    pub fn table(&self) -> DeTable<'_> {
        DeTable::parse(&self.text)
            .expect("the pair parsed when the command line was read")
            .into_inner()
    }

    /// An error in this pair: the command line's, quoting the pair.
    pub fn error(&self, message: impl Into<String>) -> FileError {
        FileError::command_line(format!(
            "--config '{}': {}",
            crate::escape::control_characters(&self.text),
            message.into()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<ConfigArgument, FileError> {
        ConfigArgument::parse(OsStr::new(value))
    }

    #[test]
    fn a_toml_name_is_a_path_and_a_pair_is_inline() {
        assert_eq!(
            parse("missing/ci.toml").unwrap(),
            ConfigArgument::File(PathBuf::from("missing/ci.toml"))
        );
        assert!(matches!(
            parse("empty-cache-in-loop.max-gated-interval = 20").unwrap(),
            ConfigArgument::Inline(_)
        ));
        let error = parse("select TL1").unwrap_err();
        assert!(error.is_command_line());
        assert!(
            error.message.contains("not a path to a file")
                && error.message.contains("cannot be parsed as a TOML"),
            "{}",
            error.message
        );
        assert!(parse("").is_err());
    }

    #[test]
    fn two_files_are_an_error_and_pairs_keep_their_order() {
        let values = ["a = 1", "b.toml", "c = 2"].map(|value| parse(value).unwrap());
        let (file, inline) = ConfigArgument::split(values).unwrap();
        assert_eq!(file, Some(PathBuf::from("b.toml")));
        let texts: Vec<&str> = inline.iter().map(InlineOverride::text).collect();
        assert_eq!(texts, ["a = 1", "c = 2"]);
        let two = ["a.toml", "b.toml"].map(|value| parse(value).unwrap());
        assert!(ConfigArgument::split(two).is_err());
    }
}
