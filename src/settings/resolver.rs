//! Which settings govern a path: `--config FILE` if given, else the closest config file found
//! from the path's folder upward, else the defaults. Resolved once per folder and cached.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::config_file;
use super::{CliOverrides, Settings};
use crate::error::FileError;

type Resolved = Result<Arc<Settings>, FileError>;

pub struct Resolver {
    cli: CliOverrides,
    /// Settings from `--config`, which govern every file.
    forced: Option<Arc<Settings>>,
    by_folder: Mutex<HashMap<PathBuf, Resolved>>,
    default_root: PathBuf,
}

impl Resolver {
    /// `config` is the `--config` file; an error in it stops the run before any linting.
    pub fn new(cli: CliOverrides, config: Option<&Path>) -> Result<Resolver, FileError> {
        let default_root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let forced = match config {
            None => None,
            Some(path) => {
                let settings = match config_file::read(path)? {
                    Some(file) => Settings::from_config(&file, &cli)?,
                    None => {
                        return Err(FileError {
                            path: path.to_owned(),
                            line: None,
                            message: "has no `[tool.torchlint]` table".to_owned(),
                            more: Vec::new(),
                        });
                    }
                };
                Some(Arc::new(settings))
            }
        };
        Ok(Resolver {
            cli,
            forced,
            by_folder: Mutex::new(HashMap::new()),
            default_root,
        })
    }

    /// The settings for a file, from its folder.
    pub fn for_file(&self, file: &Path) -> Resolved {
        let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
        let folder = absolute.parent().unwrap_or(Path::new("/"));
        self.for_folder(folder)
    }

    /// The settings for everything directly inside `folder`.
    pub fn for_folder(&self, folder: &Path) -> Resolved {
        if let Some(forced) = &self.forced {
            return Ok(Arc::clone(forced));
        }
        let folder = std::path::absolute(folder).unwrap_or_else(|_| folder.to_owned());
        if let Some(resolved) = self.cached(&folder) {
            return resolved;
        }
        let resolved = match config_file::find_in(&folder) {
            Err(error) => Err(error),
            Ok(Some(config)) => Settings::from_config(&config, &self.cli).map(Arc::new),
            Ok(None) => match folder.parent() {
                Some(parent) => self.for_folder(parent),
                None => Settings::defaults(&self.default_root, &self.cli).map(Arc::new),
            },
        };
        self.by_folder
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(folder, resolved.clone());
        resolved
    }

    fn cached(&self, folder: &Path) -> Option<Resolved> {
        self.by_folder
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(folder)
            .cloned()
    }
}
