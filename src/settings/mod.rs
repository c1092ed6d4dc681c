//! Settings: what one configuration (a config file plus the command line) means for linting —
//! enabled rules, their options, per-file ignores, excludes, extra rule packs and the framework
//! table's lists. Data only: what the layers above build from it (the rules' dispatch table,
//! the compiled framework table) they keep in its `Memo` slots.

pub mod config_file;
pub mod frameworks;
pub mod inline;
pub mod memo;
mod origin;
mod raw;
pub mod resolver;
pub mod selector;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::error::FileError;
use crate::rule_meta::{Applicability, RuleMeta, RuleRegistry};
pub use config_file::ConfigFile;
use frameworks::Table;
use inline::InlineOverride;
use memo::Memo;
use origin::{At, Origin};
use raw::{KNOWN_KEYS, RawOptions, SpannedStrings};
use selector::{SelectionLayer, Selector};

/// Folders no one wants linted; `exclude` replaces this list, `extend-exclude` adds to it.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "__pycache__",
    "__pypackages__",
    ".mypy_cache",
    ".ruff_cache",
    ".torchlint_cache",
    ".ipynb_checkpoints",
    "build",
    "dist",
    "site-packages",
    "node_modules",
];

/// Settings given on the command line; they apply on top of every config file, as Ruff's
/// flags do: first the inline `--config` pairs, then the other flags (Ruff's order).
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--config 'KEY = VALUE'` pairs, in the order given: each over the config file and the
    /// pairs before it.
    pub inline: Vec<InlineOverride>,
    pub select: Option<Vec<String>>,
    pub extend_select: Vec<String>,
    pub ignore: Vec<String>,
    /// `--exclude`: replaces the configured (or built-in) exclusion patterns.
    pub exclude: Option<Vec<String>>,
    /// `--extend-exclude`: patterns added to them.
    pub extend_exclude: Vec<String>,
    /// `--per-file-ignores PATTERN:RULES`: entries added to the configured ones.
    pub per_file_ignores: Vec<(String, Vec<String>)>,
    /// The run puts no tensor on an accelerator (the probe on a machine without a GPU): the
    /// memory a finding says grows is host memory, whatever device the code names.
    pub host_only: bool,
}

pub struct Settings {
    pub registry: Arc<RuleRegistry>,
    enabled: Vec<Arc<RuleMeta>>,
    enabled_codes: BTreeSet<String>,
    per_file_ignores: Vec<PerFileIgnore>,
    exclude: Exclude,
    rule_options: HashMap<String, toml::Table>,
    /// The (rule code, option) pairs of `rule_options` an inline `--config` set.
    options_from_command_line: BTreeSet<(String, String)>,
    /// The `--config 'KEY = VALUE'` pairs applied over the config file, as given.
    pub inline_overrides: Vec<String>,
    /// The folder relative paths in the config are resolved against.
    pub project_root: PathBuf,
    /// The config file these settings came from, if any.
    pub config_path: Option<PathBuf>,
    /// See [`CliOverrides::host_only`].
    pub host_only: bool,
    /// A context file (one of the project a run was not given) larger than this many bytes is
    /// not read: a generated module holds no fact the named files need.
    pub context_size_limit: u64,
    /// `fix = true` / `unsafe-fixes = true` in the config (the command line's flags win).
    pub fix: Option<bool>,
    pub unsafe_fixes: Option<bool>,
    /// The codes whose fixes may be applied (`fixable` less `unfixable`), and those made safe
    /// or unsafe by `extend-safe-fixes` / `extend-unsafe-fixes`.
    fixable: BTreeSet<String>,
    safe_fixes: BTreeSet<String>,
    unsafe_fixes_of: BTreeSet<String>,
    /// The enabled rules' dispatch table, built and read by `rules::Dispatch::of`.
    pub dispatch: Memo,
    /// What the findings of a file depend on besides its text, hashed (see [`Settings::fingerprint`]).
    fingerprint: u128,
    /// The framework table with the config's additions, when it has any (checked: its
    /// patterns compile).
    framework_table: Option<Table>,
    /// That table compiled, built and read by `semantic::frameworks::Frameworks::of`.
    pub compiled_frameworks: Memo,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("enabled", &self.enabled_codes)
            .field("project_root", &self.project_root)
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

struct PerFileIgnore {
    /// The pattern and its selectors as written (for `--show-settings`).
    pattern: String,
    written: Vec<String>,
    absolute: globset::GlobMatcher,
    basename: globset::GlobMatcher,
    selectors: Vec<Selector>,
}

impl PerFileIgnore {
    /// The entry for `pattern`, matched against a path's absolute form (anchored at `root`)
    /// and its file name.
    fn new(
        root: &Path,
        pattern: &str,
        written: Vec<String>,
        selectors: Vec<Selector>,
    ) -> Result<Self, globset::Error> {
        Ok(PerFileIgnore {
            pattern: pattern.to_owned(),
            written,
            absolute: Glob::new(&anchored(root, pattern))?.compile_matcher(),
            basename: Glob::new(pattern)?.compile_matcher(),
            selectors,
        })
    }
}

/// Exclusion globs, matched against a path's absolute form and its file name (as Ruff does).
/// Only a walk matches paths against them: a run on named files never does. So the built-in
/// list is compiled when first matched, a config's at once, so that a bad pattern is an error
/// at its line.
struct Exclude {
    patterns: Vec<String>,
    root: PathBuf,
    sets: OnceLock<ExcludeSets>,
}

struct ExcludeSets {
    absolute: GlobSet,
    basename: GlobSet,
}

impl Exclude {
    /// The patterns, compiled at once when `check_now` (some were written in a config file or
    /// a `--config` pair: a bad one is an error there; on error, the index of the pattern when
    /// one is to blame).
    fn build(
        patterns: Vec<String>,
        root: &Path,
        check_now: bool,
    ) -> Result<Self, (Option<usize>, String)> {
        let exclude = Exclude {
            patterns,
            root: root.to_owned(),
            sets: OnceLock::new(),
        };
        if check_now {
            let sets = ExcludeSets::compile(&exclude.patterns, root)?;
            let _ = exclude.sets.set(sets);
        }
        Ok(exclude)
    }

    fn matches(&self, path: &Path) -> bool {
        let sets = self.sets.get_or_init(|| {
            // The built-in patterns compile (a test holds them to it), under any root.
            ExcludeSets::compile(&self.patterns, &self.root).unwrap_or_else(|_| ExcludeSets {
                absolute: GlobSet::empty(),
                basename: GlobSet::empty(),
            })
        });
        sets.absolute.is_match(path)
            || path
                .file_name()
                .is_some_and(|name| sets.basename.is_match(Path::new(name)))
    }
}

/// `pattern` under `root`, whose own characters match only themselves (a project in a folder
/// named `data[1]` is no glob).
fn anchored(root: &Path, pattern: &str) -> String {
    if Path::new(pattern).is_absolute() {
        return pattern.to_owned();
    }
    let root = globset::escape(&root.to_string_lossy());
    format!("{}/{pattern}", root.trim_end_matches('/'))
}

impl ExcludeSets {
    /// On error, the index of the pattern to blame, when one is.
    fn compile(patterns: &[String], root: &Path) -> Result<Self, (Option<usize>, String)> {
        let mut absolute = GlobSetBuilder::new();
        let mut basename = GlobSetBuilder::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let glob = |text: &str| {
                Glob::new(text).map_err(|e| (Some(index), format!("invalid glob `{pattern}`: {e}")))
            };
            absolute.add(glob(&anchored(root, pattern))?);
            basename.add(glob(pattern)?);
        }
        let build = |builder: GlobSetBuilder| {
            builder
                .build()
                .map_err(|e| (None, format!("invalid exclude globs: {e}")))
        };
        Ok(ExcludeSets {
            absolute: build(absolute)?,
            basename: build(basename)?,
        })
    }
}

/// Registries with user packs, shared by every config that names the same pack folders.
static EXTENDED_REGISTRIES: LazyLock<Mutex<HashMap<Vec<PathBuf>, Arc<RuleRegistry>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The default `context-size-limit`: 1 MiB, above the largest hand-written modules of the
/// pinned corpus (transformers' `modeling_utils.py`, about 250 kB) and below generated ones.
pub const DEFAULT_CONTEXT_SIZE_LIMIT: u64 = 1 << 20;

impl Settings {
    /// Settings with no config file: default rules, default excludes, `root` for globs.
    pub fn defaults(root: &Path, cli: &CliOverrides) -> Result<Settings, FileError> {
        Settings::build(None, root, cli)
    }

    pub fn from_config(config: &ConfigFile, cli: &CliOverrides) -> Result<Settings, FileError> {
        Settings::build(Some(config), config.directory(), cli)
    }

    fn build(
        config: Option<&ConfigFile>,
        root: &Path,
        cli: &CliOverrides,
    ) -> Result<Settings, FileError> {
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
        let cli_error = |message: String| FileError::command_line(message);

        // The config's errors and the inline overrides', all of them: a run reports every
        // error of the file at once.
        let mut errors: Vec<FileError> = Vec::new();
        let sources = config
            .map(Origin::File)
            .into_iter()
            .chain(cli.inline.iter().map(Origin::CommandLine));
        let mut raw = RawOptions::default();
        for source in sources {
            let (options, source_errors) = RawOptions::read(source);
            raw = raw.overlaid(options);
            errors.extend(source_errors);
        }

        let registry = match &raw.extend_rule_packs {
            packs if !packs.is_empty() => {
                let folders: Vec<PathBuf> = packs.iter().map(|(p, _)| root.join(p)).collect();
                match load_packs(&folders) {
                    Ok(registry) => registry,
                    Err(pack_errors) => {
                        // Without its packs, the config's selectors of their rules would be
                        // errors too: stop at what is known.
                        let details: Vec<String> =
                            pack_errors.iter().map(|e| format!("  {e}")).collect();
                        errors.extend(unknown_key_errors(
                            &raw.unknown_keys,
                            &RuleRegistry::builtin(),
                        ));
                        errors.push(packs[0].1.error(format!(
                            "a rule pack in `extend-rule-packs` is invalid:\n{}",
                            details.join("\n")
                        )));
                        return Err(FileError::combined(errors).expect("an error was pushed"));
                    }
                }
            }
            _ => RuleRegistry::builtin(),
        };

        // Selection: the config's layer, the inline overrides', then the other flags'.
        let parse_spanned = |items: &[(String, At)], errors: &mut Vec<FileError>| {
            items
                .iter()
                .filter_map(|(text, at)| {
                    Selector::parse(text, &registry)
                        .map_err(|message| errors.push(at.error(message)))
                        .ok()
                })
                .collect::<Vec<Selector>>()
        };
        let parse_cli = |items: &[String]| -> Result<Vec<Selector>, FileError> {
            items
                .iter()
                .map(|text| Selector::parse(text, &registry).map_err(&cli_error))
                .collect()
        };
        let mut layers: Vec<SelectionLayer> = raw
            .selections
            .iter()
            .map(|layer| SelectionLayer {
                select: layer
                    .select
                    .as_deref()
                    .map(|items| parse_spanned(items, &mut errors)),
                extend_select: parse_spanned(&layer.extend_select, &mut errors),
                ignore: parse_spanned(&layer.ignore, &mut errors),
            })
            .collect();
        layers.push(SelectionLayer {
            select: cli.select.as_deref().map(parse_cli).transpose()?,
            extend_select: parse_cli(&cli.extend_select)?,
            ignore: parse_cli(&cli.ignore)?,
        });
        let enabled_codes = selector::resolve(&registry, &layers);
        let enabled = registry
            .iter()
            .filter(|rule| enabled_codes.contains(&rule.code))
            .cloned()
            .collect();

        let mut per_file_ignores = Vec::new();
        for (pattern, pattern_at, selectors) in raw.per_file_ignores.unwrap_or_default() {
            let written = selectors.iter().map(|(text, _)| text.clone()).collect();
            let selectors = parse_spanned(&selectors, &mut errors);
            match PerFileIgnore::new(&root, &pattern, written, selectors) {
                Ok(ignore) => per_file_ignores.push(ignore),
                Err(e) => errors.push(pattern_at.error(format!("invalid glob `{pattern}`: {e}"))),
            }
        }

        // The command line's entries, after the config's (a bad glob is the command line's
        // error, as a bad selector is).
        for (pattern, written) in &cli.per_file_ignores {
            let ignore = PerFileIgnore::new(&root, pattern, written.clone(), parse_cli(written)?)
                .map_err(|e| {
                cli_error(format!("--per-file-ignores: invalid glob `{pattern}`: {e}"))
            })?;
            per_file_ignores.push(ignore);
        }

        // Each pattern with the place it was written (None: built in, or a flag's).
        let mut excludes: Vec<(String, Option<At>)> = match (&cli.exclude, raw.exclude) {
            (Some(exclude), _) => exclude.iter().map(|p| (p.clone(), None)).collect(),
            (None, Some(exclude)) => exclude.into_iter().map(|(p, at)| (p, Some(at))).collect(),
            (None, None) => DEFAULT_EXCLUDES
                .iter()
                .map(|p| ((*p).to_owned(), None))
                .collect(),
        };
        excludes.extend(raw.extend_exclude.into_iter().map(|(p, at)| (p, Some(at))));
        for pattern in cli.exclude.iter().flatten().chain(&cli.extend_exclude) {
            if let Err(error) = Glob::new(pattern) {
                return Err(cli_error(format!(
                    "invalid exclude glob `{pattern}`: {error}"
                )));
            }
        }
        excludes.extend(cli.extend_exclude.iter().map(|p| (p.clone(), None)));
        let written = excludes.iter().any(|(_, at)| at.is_some());
        let patterns = excludes.iter().map(|(p, _)| p.clone()).collect();
        let exclude = Exclude::build(patterns, &root, written)
            .map_err(
                |(index, message)| match index.and_then(|index| excludes[index].1) {
                    Some(at) => errors.push(at.error(message)),
                    None => errors.push(cli_error(message)),
                },
            )
            .ok();

        errors.extend(unknown_key_errors(&raw.unknown_keys, &registry));

        // Merged option by option: a later source's value replaces only that option.
        let mut rule_options: HashMap<String, toml::Table> = HashMap::new();
        let mut options_from_command_line = BTreeSet::new();
        for (name, at, table) in raw.rule_tables {
            let Some(rule) = registry.find(&name) else {
                errors.push(at.error(format!(
                    "unknown key `{name}` in {} (expected {KNOWN_KEYS})",
                    at.origin.section()
                )));
                continue;
            };
            let options = rule_options.entry(rule.code.clone()).or_default();
            for raw_option in table {
                let Some(option) = rule.option(&raw_option.name) else {
                    let known: Vec<&str> = rule.options.iter().map(|o| o.name.as_str()).collect();
                    errors.push(raw_option.at.error(format!(
                        "`{}` is not an option of {} {} ({})",
                        raw_option.name,
                        rule.code,
                        rule.name,
                        if known.is_empty() {
                            "it has no options".to_owned()
                        } else {
                            format!("its options: {}", known.join(", "))
                        }
                    )));
                    continue;
                };
                if !option.kind.accepts(&raw_option.value) {
                    errors.push(raw_option.value_at.error(format!(
                        "option `{}` of {} takes {}",
                        option.name,
                        rule.code,
                        option.kind.described()
                    )));
                    continue;
                }
                let key = (rule.code.clone(), option.name.clone());
                if raw_option.at.is_command_line() {
                    options_from_command_line.insert(key);
                } else {
                    options_from_command_line.remove(&key);
                }
                options.insert(option.name.clone(), raw_option.value);
            }
        }

        // Ruff's fix selection: a rule is fixable when `fixable` (all rules by default)
        // selects it and `unfixable` does not.
        let codes_of = |selectors: &[Selector]| -> BTreeSet<String> {
            registry
                .iter()
                .filter(|rule| selectors.iter().any(|selector| selector.matches(rule)))
                .map(|rule| rule.code.clone())
                .collect()
        };
        let fixable_selectors = match &raw.fixable {
            Some(items) => parse_spanned(items, &mut errors),
            None => vec![Selector::All],
        };
        let unfixable = codes_of(&parse_spanned(&raw.unfixable, &mut errors));
        let fixable: BTreeSet<String> = codes_of(&fixable_selectors)
            .into_iter()
            .filter(|code| !unfixable.contains(code))
            .collect();
        let safe_fixes = codes_of(&parse_spanned(&raw.extend_safe_fixes, &mut errors));
        let unsafe_fixes_of = codes_of(&parse_spanned(&raw.extend_unsafe_fixes, &mut errors));

        let framework_table = if raw.frameworks.is_empty() {
            None
        } else {
            framework_table(&raw.frameworks)
                .map_err(|error| errors.push(error))
                .ok()
        };

        if let Some(error) = FileError::combined(errors) {
            return Err(error);
        }
        let exclude = exclude.expect("an exclude error is an error of the config");
        let fingerprint = fingerprint(config, &root, cli, &registry);
        Ok(Settings {
            registry,
            enabled,
            enabled_codes,
            per_file_ignores,
            exclude,
            rule_options,
            options_from_command_line,
            inline_overrides: cli.inline.iter().map(|i| i.text().to_owned()).collect(),
            project_root: root,
            config_path: config.map(|c| c.path.clone()),
            host_only: cli.host_only,
            context_size_limit: raw.context_size_limit.unwrap_or(DEFAULT_CONTEXT_SIZE_LIMIT),
            fix: raw.fix,
            unsafe_fixes: raw.unsafe_fixes,
            fixable,
            safe_fixes,
            unsafe_fixes_of,
            dispatch: Memo::default(),
            fingerprint,
            framework_table,
            compiled_frameworks: Memo::default(),
        })
    }

    /// A hash of the effective configuration: the config file, the command-line selection, the
    /// project root and the user rule packs' files. Two runs whose settings share it produce the
    /// same findings for the same text (the result cache's key).
    pub fn fingerprint(&self) -> u128 {
        self.fingerprint
    }

    /// The built-in framework table plus the config's `[frameworks]` lists, when it has any
    /// (else the analysis uses the built-in table).
    pub fn framework_table(&self) -> Option<&Table> {
        self.framework_table.as_ref()
    }

    /// How a fix of rule `code` applies under the fix selection: a rule that is not fixable
    /// keeps its fix as a suggestion only (shown, never applied); `extend-unsafe-fixes`
    /// makes a safe fix unsafe, `extend-safe-fixes` an unsafe one safe (a rule both lists
    /// name is unsafe: the cautious reading).
    pub fn fix_applicability(&self, code: &str, applicability: Applicability) -> Applicability {
        if applicability == Applicability::DisplayOnly || !self.fixable.contains(code) {
            return Applicability::DisplayOnly;
        }
        if self.unsafe_fixes_of.contains(code) {
            Applicability::Unsafe
        } else if self.safe_fixes.contains(code) {
            Applicability::Safe
        } else {
            applicability
        }
    }

    pub fn enabled_rules(&self) -> &[Arc<RuleMeta>] {
        &self.enabled
    }

    pub fn is_enabled(&self, code: &str) -> bool {
        self.enabled_codes.contains(code)
    }

    /// Whether discovery skips this path (file or folder).
    pub fn is_excluded(&self, path: &Path) -> bool {
        self.exclude.matches(path)
    }

    /// Whether `per-file-ignores` turns this rule off for this file.
    pub fn is_ignored_for_file(&self, path: &Path, rule: &Arc<RuleMeta>) -> bool {
        if self.per_file_ignores.is_empty() {
            return false;
        }
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let name = path.file_name().map(Path::new);
        self.per_file_ignores.iter().any(|ignore| {
            (ignore.absolute.is_match(&absolute)
                || name.is_some_and(|name| ignore.basename.is_match(name)))
                && selector::any_matches(&ignore.selectors, rule)
        })
    }

    /// The exclusion patterns, as written (the built-in ones unless the config set `exclude`).
    pub fn exclude_patterns(&self) -> impl Iterator<Item = &str> {
        self.exclude.patterns.iter().map(String::as_str)
    }

    /// The `per-file-ignores` entries, as written: each pattern and what it turns off.
    pub fn per_file_ignore_patterns(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.per_file_ignores
            .iter()
            .map(|ignore| (ignore.pattern.as_str(), ignore.written.as_slice()))
    }

    /// Where this option of the rule got its value (for `--show-settings`).
    pub fn rule_option_source(&self, rule: &RuleMeta, name: &str) -> OptionSource {
        let set = self
            .rule_options
            .get(&rule.code)
            .is_some_and(|options| options.contains_key(name));
        if !set {
            OptionSource::Default
        } else if self
            .options_from_command_line
            .contains(&(rule.code.clone(), name.to_owned()))
        {
            OptionSource::CommandLine
        } else {
            OptionSource::ConfigFile
        }
    }

    /// A rule option's configured value, or its declared default.
    pub fn rule_option(&self, rule: &RuleMeta, name: &str) -> Option<toml::Value> {
        self.rule_options
            .get(&rule.code)
            .and_then(|options| options.get(name))
            .cloned()
            .or_else(|| rule.option(name).map(|option| option.default.clone()))
    }
}

/// Where a rule option's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionSource {
    Default,
    ConfigFile,
    /// An inline `--config` pair.
    CommandLine,
}

/// The errors of keys that are neither settings nor rule tables.
fn unknown_key_errors<'a>(
    keys: &'a [(String, At<'a>)],
    registry: &'a RuleRegistry,
) -> impl Iterator<Item = FileError> + 'a {
    keys.iter().map(|(name, at)| {
        at.error(format!(
            "unknown key `{name}` in {} (expected {KNOWN_KEYS}){}",
            at.origin.section(),
            option_hint(registry, name)
        ))
    })
}

/// For an unknown key that is an option of some rule, where it belongs: `max-gated-interval`
/// alone is `empty-cache-in-loop.max-gated-interval`.
fn option_hint(registry: &RuleRegistry, key: &str) -> String {
    let owners: Vec<String> = registry
        .iter()
        .filter(|rule| rule.option(key).is_some())
        .map(|rule| format!("`{}.{key}`", rule.name))
        .collect();
    if owners.is_empty() {
        String::new()
    } else {
        format!(
            "; a rule's option goes under its rule: {}",
            owners.join(" or ")
        )
    }
}

/// The built-in framework table extended with the config's lists; a pattern that does not
/// compile is an error at the pattern.
fn framework_table(lists: &[(String, At, SpannedStrings)]) -> Result<Table, FileError> {
    let mut table = Table::default();
    for (list, _, patterns) in lists {
        for (pattern, at) in patterns {
            if matches!(list.as_str(), "backward-methods" | "gathering-methods")
                && !frameworks::is_method_name(pattern)
            {
                return Err(at.error(
                    format!(
                        "`{pattern}` in `frameworks.{list}` is not a method name: list the method alone (`backprop` for `engine.backprop(loss)`), without a receiver or `*`"
                    ),
                ));
            }
            if list == "per-batch-hooks" {
                if let Err(error) = frameworks::parse_hook(pattern) {
                    return Err(at.error(format!("{error} in `frameworks.per-batch-hooks`")));
                }
                // Not a pattern: a name and parameter names.
            } else if let Err(error) = globset::Glob::new(pattern) {
                return Err(at.error(format!(
                    "`{pattern}` in `frameworks.{list}` is not a valid pattern: {error}"
                )));
            }
        }
        let Some(target) = table.list_mut(list) else {
            continue;
        };
        target.extend(patterns.iter().map(|(pattern, _)| pattern.clone()));
    }
    let table = Table::builtin().extended(&table);
    table.check().map_err(|error| lists[0].1.error(error))?;
    Ok(table)
}

fn fingerprint(
    config: Option<&ConfigFile>,
    root: &Path,
    cli: &CliOverrides,
    registry: &RuleRegistry,
) -> u128 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut part = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    if let Some(config) = config {
        part(config.path.as_os_str().as_encoded_bytes());
        part(config.text.as_bytes());
    }
    part(root.as_os_str().as_encoded_bytes());
    part(format!("{cli:?}").as_bytes());
    part(&registry.user_files_hash().to_le_bytes());
    hasher.digest128()
}

fn load_packs(folders: &[PathBuf]) -> Result<Arc<RuleRegistry>, Vec<FileError>> {
    let mut cache = EXTENDED_REGISTRIES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(registry) = cache.get(folders) {
        return Ok(Arc::clone(registry));
    }
    let registry = Arc::new(RuleRegistry::builtin().extended(folders)?);
    cache.insert(folders.to_vec(), Arc::clone(&registry));
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_excludes_compile_under_any_root() {
        let patterns: Vec<String> = DEFAULT_EXCLUDES
            .iter()
            .map(|pattern| (*pattern).to_owned())
            .collect();
        for root in ["/work/project", "/data[1/{a,b}/x*"] {
            let root = Path::new(root);
            assert!(ExcludeSets::compile(&patterns, root).is_ok(), "{root:?}");
            let exclude = Exclude::build(patterns.clone(), root, true).unwrap();
            assert!(exclude.matches(&root.join(".venv")), "{root:?}");
            assert!(exclude.matches(&root.join("src/build")), "{root:?}");
            assert!(!exclude.matches(&root.join("train.py")), "{root:?}");
        }
    }
}
