//! Where a setting was written — a config file, or one `--config 'KEY = VALUE'` of the command
//! line — so that an error in it, found however late, names that place: the file and line, or
//! the command-line text.

use toml::de::DeTable;

use super::config_file::ConfigFile;
use super::inline::InlineOverride;
use crate::error::FileError;

/// A source of settings: the keys of the torchlint table, as text with spans.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    File(&'a ConfigFile),
    CommandLine(&'a InlineOverride),
}

impl<'a> Origin<'a> {
    /// The torchlint table of this source, with spans into its text.
    pub fn table(self) -> DeTable<'a> {
        match self {
            Origin::File(config) => config.table(),
            Origin::CommandLine(inline) => inline.table(),
        }
    }

    /// Where the keys live, for messages.
    pub fn section(self) -> &'static str {
        match self {
            Origin::File(config) => config.section,
            Origin::CommandLine(_) => "torchlint's settings",
        }
    }

    /// An error at `offset` of this source's text.
    pub fn error_at(self, offset: usize, message: impl Into<String>) -> FileError {
        match self {
            Origin::File(config) => config.error_at(offset, message),
            // One line of the command line: the text itself says where.
            Origin::CommandLine(inline) => inline.error(message),
        }
    }

    /// The place `offset` of this source.
    pub fn at(self, offset: usize) -> At<'a> {
        At {
            origin: self,
            offset,
        }
    }
}

/// A place a value was written: its source and the byte offset there.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub origin: Origin<'a>,
    pub offset: usize,
}

impl At<'_> {
    pub fn error(self, message: impl Into<String>) -> FileError {
        self.origin.error_at(self.offset, message)
    }

    /// Whether this place is on the command line (for `--show-settings`).
    pub fn is_command_line(self) -> bool {
        matches!(self.origin, Origin::CommandLine(_))
    }
}
