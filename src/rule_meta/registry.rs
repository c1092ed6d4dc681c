//! The rules one configuration knows, by code and name: the built-in packs compiled into the
//! binary, plus the user packs a config names in `extend-rule-packs`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use super::rule_file;
use super::{Origin, RuleMeta};
use crate::error::FileError;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_rules.rs"));
}

/// All rules known to one configuration: the built-in packs plus any user packs.
#[derive(Debug)]
pub struct RuleRegistry {
    rules: Vec<Arc<RuleMeta>>,
    by_code: HashMap<String, usize>,
    /// A hash of the user rule files' paths and texts, as read (0 for the built-ins alone,
    /// which the torchlint version identifies).
    user_files: u128,
    /// The user pack folders and rule files read, for whoever must notice them change.
    user_paths: Vec<PathBuf>,
}

static BUILTIN: LazyLock<Arc<RuleRegistry>> = LazyLock::new(|| {
    Arc::new(RuleRegistry::load_builtin().unwrap_or_else(|errors| {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        panic!("built-in rule files are invalid:\n{}", errors.join("\n"))
    }))
});

impl RuleRegistry {
    pub fn builtin() -> Arc<RuleRegistry> {
        Arc::clone(&BUILTIN)
    }

    /// Parses the rule files compiled into the binary.
    pub fn load_builtin() -> Result<RuleRegistry, Vec<FileError>> {
        let mut errors = Vec::new();
        let mut rules = Vec::new();
        for (path, text) in builtin::BUILTIN_RULE_FILES {
            // Whether a `rust` rule has its module is the rules layer's to check (its test
            // `every_rust_rule_has_a_check`): this layer does not know the checks.
            match rule_file::parse_builtin_rule_file(path, text) {
                Ok(rule) => rules.push(rule),
                Err(error) => errors.push(error),
            }
        }
        let registry = RuleRegistry::from_rules(Vec::new(), rules, &mut errors);
        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(errors)
        }
    }

    /// This registry plus the declarative rules of each pack folder.
    pub fn extended(&self, packs: &[PathBuf]) -> Result<RuleRegistry, Vec<FileError>> {
        let mut errors = Vec::new();
        let mut added = Vec::new();
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&self.user_files.to_le_bytes());
        let mut user_paths = self.user_paths.clone();
        for folder in packs {
            user_paths.push(folder.clone());
            let entries = match fs::read_dir(folder) {
                Ok(entries) => entries,
                Err(error) => {
                    errors.push(FileError::new(
                        folder,
                        format!("cannot read the rule pack folder: {error}"),
                    ));
                    continue;
                }
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
                .collect();
            files.sort();
            if files.is_empty() {
                errors.push(FileError::new(
                    folder,
                    "the rule pack folder holds no rule files (`<rule-name>.md`)",
                ));
            }
            user_paths.extend(files.iter().cloned());
            for file in files {
                match read_user_rule(&file, &mut hasher) {
                    Ok(rule) if rule.code.starts_with("TL") => errors.push(FileError::new(
                        &file,
                        format!(
                            "`{}`: codes starting with `TL` are reserved for built-in rules; pick a prefix of your own, like `ACME101`",
                            rule.code
                        ),
                    )),
                    Ok(rule) => added.push(rule),
                    Err(error) => errors.push(error),
                }
            }
        }
        let mut registry = RuleRegistry::from_rules(self.rules.clone(), added, &mut errors);
        registry.user_files = hasher.digest128();
        registry.user_paths = user_paths;
        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(errors)
        }
    }

    fn from_rules(
        mut rules: Vec<Arc<RuleMeta>>,
        added: Vec<RuleMeta>,
        errors: &mut Vec<FileError>,
    ) -> RuleRegistry {
        for rule in added {
            let clash = rules
                .iter()
                .find(|known| known.code == rule.code || known.name == rule.name);
            match clash {
                Some(known) => errors.push(FileError::new(
                    rule.origin.display(),
                    format!(
                        "{} {} clashes with {} {} from {}: codes and names must be unique",
                        rule.code,
                        rule.name,
                        known.code,
                        known.name,
                        known.origin.display()
                    ),
                )),
                None => rules.push(Arc::new(rule)),
            }
        }
        rules.sort_by(|a, b| a.code.cmp(&b.code));
        let by_code = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (rule.code.clone(), i))
            .collect();
        RuleRegistry {
            rules,
            by_code,
            user_files: 0,
            user_paths: Vec::new(),
        }
    }

    /// What the user rule files said when they were read (see `user_files`): part of the
    /// settings' fingerprint, so editing a rule file invalidates cached results.
    pub fn user_files_hash(&self) -> u128 {
        self.user_files
    }

    /// The user pack folders and rule files this registry was read from.
    pub fn user_paths(&self) -> &[PathBuf] {
        &self.user_paths
    }

    pub fn get(&self, code: &str) -> Option<&Arc<RuleMeta>> {
        self.by_code.get(code).map(|&i| &self.rules[i])
    }

    /// Looks a rule up by code or by name.
    pub fn find(&self, code_or_name: &str) -> Option<&Arc<RuleMeta>> {
        self.get(&code_or_name.to_ascii_uppercase())
            .or_else(|| self.rules.iter().find(|rule| rule.name == code_or_name))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RuleMeta>> {
        self.rules.iter()
    }
}

/// Reads and parses one user rule file, adding its path and text to `hasher`.
fn read_user_rule(
    path: &Path,
    hasher: &mut xxhash_rust::xxh3::Xxh3,
) -> Result<RuleMeta, FileError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_CONFIG_BYTES)
        .map_err(|error| FileError::new(path, format!("cannot read the rule file: {error}")))?;
    for part in [path.as_os_str().as_encoded_bytes(), text.as_bytes()] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    rule_file::parse_rule_file(
        Origin::User {
            path: path.to_owned(),
        },
        &text,
    )
}
