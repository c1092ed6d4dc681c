//! Settings: what one configuration (a config file plus the command line) means for linting —
//! enabled rules, their options, per-file ignores, excludes, extra rule packs and the framework
//! table's lists. Data only: what the layers above build from it (the rules' dispatch table,
//! the compiled framework table) they keep in its `Memo` slots.

pub mod config_file;
pub mod frameworks;
pub mod memo;
pub mod resolver;
pub mod selector;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use globset::{Glob, GlobSet, GlobSetBuilder};
use toml::Spanned;
use toml::de::DeValue;

use crate::error::FileError;
use crate::rule_meta::{RuleMeta, RuleRegistry};
pub use config_file::ConfigFile;
use frameworks::Table;
use memo::Memo;
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

/// Rule selection, excludes and per-file ignores given on the command line; they apply on
/// top of every config file, as Ruff's flags do.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
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
    /// The folder relative paths in the config are resolved against.
    pub project_root: PathBuf,
    /// The config file these settings came from, if any.
    pub config_path: Option<PathBuf>,
    /// See [`CliOverrides::host_only`].
    pub host_only: bool,
    /// A context file (one of the project a run was not given) larger than this many bytes is
    /// not read: a generated module holds no fact the named files need.
    pub context_size_limit: u64,
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
    /// Each pattern with its offset in the config (None: a built-in one).
    patterns: Vec<(String, Option<usize>)>,
    root: PathBuf,
    sets: OnceLock<ExcludeSets>,
}

struct ExcludeSets {
    absolute: GlobSet,
    basename: GlobSet,
}

impl Exclude {
    fn build(
        patterns: &[(String, Option<usize>)],
        root: &Path,
    ) -> Result<Self, (Option<usize>, String)> {
        let exclude = Exclude {
            patterns: patterns.to_vec(),
            root: root.to_owned(),
            sets: OnceLock::new(),
        };
        if patterns.iter().any(|(_, offset)| offset.is_some()) {
            let sets = ExcludeSets::compile(patterns, root)?;
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
    fn compile(
        patterns: &[(String, Option<usize>)],
        root: &Path,
    ) -> Result<Self, (Option<usize>, String)> {
        let mut absolute = GlobSetBuilder::new();
        let mut basename = GlobSetBuilder::new();
        for (pattern, offset) in patterns {
            let glob = |text: &str| {
                Glob::new(text).map_err(|e| (*offset, format!("invalid glob `{pattern}`: {e}")))
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

const KNOWN_KEYS: &str = "select, extend-select, ignore, per-file-ignores, exclude, extend-exclude, extend-rule-packs, frameworks, context-size-limit, or a rule name with options";

/// The lists of `[tool.torchlint.frameworks]`, as in the built-in table.
const FRAMEWORK_KEYS: &[&str] = Table::LISTS;

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

        // The config's errors, all of them: a run reports every error of the file at once.
        let mut errors: Vec<FileError> = Vec::new();
        let mut raw = RawOptions::default();
        if let Some(config) = config {
            (raw, errors) = RawOptions::read(config);
        }

        let registry = match &raw.extend_rule_packs {
            Some(packs) if !packs.is_empty() => {
                let config = config.expect("packs come from a config file");
                let folders: Vec<PathBuf> = packs.iter().map(|(p, _)| root.join(p)).collect();
                match load_packs(&folders) {
                    Ok(registry) => registry,
                    Err(pack_errors) => {
                        // Without its packs, the config's selectors of their rules would be
                        // errors too: stop at what is known.
                        let offset = packs[0].1;
                        let details: Vec<String> =
                            pack_errors.iter().map(|e| format!("  {e}")).collect();
                        errors.push(config.error_at(
                            offset,
                            format!(
                                "a rule pack in `extend-rule-packs` is invalid:\n{}",
                                details.join("\n")
                            ),
                        ));
                        return Err(FileError::combined(errors).expect("an error was pushed"));
                    }
                }
            }
            _ => RuleRegistry::builtin(),
        };

        // Selection: the config layer, then the command line.
        let parse_spanned = |items: &[(String, usize)], errors: &mut Vec<FileError>| {
            items
                .iter()
                .filter_map(|(text, offset)| {
                    Selector::parse(text, &registry)
                        .map_err(|message| {
                            let config = config.expect("spanned selectors come from a config file");
                            errors.push(config.error_at(*offset, message));
                        })
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
        let config_layer = SelectionLayer {
            select: raw
                .select
                .as_deref()
                .map(|items| parse_spanned(items, &mut errors)),
            extend_select: parse_spanned(
                raw.extend_select.as_deref().unwrap_or_default(),
                &mut errors,
            ),
            ignore: parse_spanned(raw.ignore.as_deref().unwrap_or_default(), &mut errors),
        };
        let cli_layer = SelectionLayer {
            select: cli.select.as_deref().map(parse_cli).transpose()?,
            extend_select: parse_cli(&cli.extend_select)?,
            ignore: parse_cli(&cli.ignore)?,
        };
        let enabled_codes = selector::resolve(&registry, &[config_layer, cli_layer]);
        let enabled = registry
            .iter()
            .filter(|rule| enabled_codes.contains(&rule.code))
            .cloned()
            .collect();

        let mut per_file_ignores = Vec::new();
        for (pattern, pattern_offset, selectors) in raw.per_file_ignores.unwrap_or_default() {
            let config = config.expect("per-file-ignores come from a config file");
            let written = selectors.iter().map(|(text, _)| text.clone()).collect();
            let selectors = parse_spanned(&selectors, &mut errors);
            match PerFileIgnore::new(&root, &pattern, written, selectors) {
                Ok(ignore) => per_file_ignores.push(ignore),
                Err(e) => errors.push(
                    config.error_at(pattern_offset, format!("invalid glob `{pattern}`: {e}")),
                ),
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

        let mut excludes: Vec<(String, Option<usize>)> = match (&cli.exclude, raw.exclude) {
            (Some(exclude), _) => exclude.iter().map(|p| (p.clone(), None)).collect(),
            (None, Some(exclude)) => exclude.into_iter().map(|(p, o)| (p, Some(o))).collect(),
            (None, None) => DEFAULT_EXCLUDES
                .iter()
                .map(|p| ((*p).to_owned(), None))
                .collect(),
        };
        excludes.extend(
            raw.extend_exclude
                .unwrap_or_default()
                .into_iter()
                .map(|(p, o)| (p, Some(o))),
        );
        for pattern in cli.exclude.iter().flatten().chain(&cli.extend_exclude) {
            if let Err(error) = Glob::new(pattern) {
                return Err(cli_error(format!(
                    "invalid exclude glob `{pattern}`: {error}"
                )));
            }
        }
        excludes.extend(cli.extend_exclude.iter().map(|p| (p.clone(), None)));
        let exclude = Exclude::build(&excludes, &root)
            .map_err(|(offset, message)| match (config, offset) {
                (Some(config), Some(offset)) => errors.push(config.error_at(offset, message)),
                _ => errors.push(cli_error(message)),
            })
            .ok();

        let mut rule_options = HashMap::new();
        for (name, offset, table) in raw.rule_tables {
            let config = config.expect("rule tables come from a config file");
            let Some(rule) = registry.find(&name) else {
                errors.push(config.error_at(
                    offset,
                    format!(
                        "unknown key `{name}` in {} (expected {KNOWN_KEYS})",
                        config.section
                    ),
                ));
                continue;
            };
            let mut options = toml::Table::new();
            for raw_option in table {
                let Some(option) = rule.option(&raw_option.name) else {
                    let known: Vec<&str> = rule.options.iter().map(|o| o.name.as_str()).collect();
                    errors.push(config.error_at(
                        raw_option.offset,
                        format!(
                            "`{}` is not an option of {} {} ({})",
                            raw_option.name,
                            rule.code,
                            rule.name,
                            if known.is_empty() {
                                "it has no options".to_owned()
                            } else {
                                format!("its options: {}", known.join(", "))
                            }
                        ),
                    ));
                    continue;
                };
                if !option.kind.accepts(&raw_option.value) {
                    errors.push(config.error_at(
                        raw_option.value_offset,
                        format!(
                            "option `{}` of {} takes a {}",
                            option.name,
                            rule.code,
                            option.kind.as_str()
                        ),
                    ));
                    continue;
                }
                options.insert(option.name.clone(), raw_option.value);
            }
            rule_options.insert(rule.code.clone(), options);
        }

        let framework_table = match config {
            Some(config) if !raw.frameworks.is_empty() => framework_table(config, &raw.frameworks)
                .map_err(|error| errors.push(error))
                .ok(),
            _ => None,
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
            project_root: root,
            config_path: config.map(|c| c.path.clone()),
            host_only: cli.host_only,
            context_size_limit: raw.context_size_limit.unwrap_or(DEFAULT_CONTEXT_SIZE_LIMIT),
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
        self.exclude
            .patterns
            .iter()
            .map(|(pattern, _)| pattern.as_str())
    }

    /// The `per-file-ignores` entries, as written: each pattern and what it turns off.
    pub fn per_file_ignore_patterns(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.per_file_ignores
            .iter()
            .map(|ignore| (ignore.pattern.as_str(), ignore.written.as_slice()))
    }

    /// Whether the config sets this option of the rule (else it has its default).
    pub fn sets_rule_option(&self, rule: &RuleMeta, name: &str) -> bool {
        self.rule_options
            .get(&rule.code)
            .is_some_and(|options| options.contains_key(name))
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

/// The built-in framework table extended with the config's lists; a pattern that does not
/// compile is an error at the pattern.
fn framework_table(
    config: &ConfigFile,
    lists: &[(String, usize, SpannedStrings)],
) -> Result<Table, FileError> {
    let mut table = Table::default();
    for (list, _, patterns) in lists {
        for (pattern, offset) in patterns {
            if matches!(list.as_str(), "backward-methods" | "gathering-methods")
                && !frameworks::is_method_name(pattern)
            {
                return Err(config.error_at(
                    *offset,
                    format!(
                        "`{pattern}` in `frameworks.{list}` is not a method name: list the method alone (`backprop` for `engine.backprop(loss)`), without a receiver or `*`"
                    ),
                ));
            }
            if list == "per-batch-hooks" {
                if let Err(error) = frameworks::parse_hook(pattern) {
                    return Err(config
                        .error_at(*offset, format!("{error} in `frameworks.per-batch-hooks`")));
                }
                // Not a pattern: a name and parameter names.
            } else if let Err(error) = globset::Glob::new(pattern) {
                return Err(config.error_at(
                    *offset,
                    format!("`{pattern}` in `frameworks.{list}` is not a valid pattern: {error}"),
                ));
            }
        }
        let Some(target) = table.list_mut(list) else {
            continue;
        };
        target.extend(patterns.iter().map(|(pattern, _)| pattern.clone()));
    }
    let table = Table::builtin().extended(&table);
    table
        .check()
        .map_err(|error| config.error_at(lists[0].1, error))?;
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

/// Strings of a config list, each with the byte offset it was written at.
type SpannedStrings = Vec<(String, usize)>;

/// The config table checked for known keys and value types, with offsets for errors.
#[derive(Default)]
struct RawOptions {
    select: Option<Vec<(String, usize)>>,
    extend_select: Option<Vec<(String, usize)>>,
    ignore: Option<Vec<(String, usize)>>,
    per_file_ignores: Option<Vec<(String, usize, SpannedStrings)>>,
    exclude: Option<Vec<(String, usize)>>,
    extend_exclude: Option<Vec<(String, usize)>>,
    extend_rule_packs: Option<Vec<(String, usize)>>,
    context_size_limit: Option<u64>,
    /// `[frameworks]`: (list name, offset, patterns).
    frameworks: Vec<(String, usize, SpannedStrings)>,
    /// `[rule-name]` tables: (name, offset, [(option, offset, value, value offset)]).
    rule_tables: Vec<(String, usize, Vec<RawRuleOption>)>,
}

struct RawRuleOption {
    name: String,
    offset: usize,
    value: toml::Value,
    value_offset: usize,
}

impl RawOptions {
    /// The options the config sets, and every error in them (each key is read whatever the
    /// others hold: a run reports all of a file's errors at once).
    fn read(config: &ConfigFile) -> (RawOptions, Vec<FileError>) {
        let mut raw = RawOptions::default();
        let mut errors = Vec::new();
        for (key, value) in config.table() {
            if let Err(error) = raw.read_key(config, key, value) {
                errors.push(error);
            }
        }
        (raw, errors)
    }

    fn read_key(
        &mut self,
        config: &ConfigFile,
        key: Spanned<std::borrow::Cow<'_, str>>,
        value: Spanned<DeValue<'_>>,
    ) -> Result<(), FileError> {
        let raw = self;
        {
            let offset = key.span().start;
            let name = key.get_ref().to_string();
            let list = || string_list(config, &name, &value);
            match name.as_str() {
                "select" => raw.select = Some(list()?),
                "extend-select" => raw.extend_select = Some(list()?),
                "ignore" => raw.ignore = Some(list()?),
                "exclude" => raw.exclude = Some(list()?),
                "extend-exclude" => raw.extend_exclude = Some(list()?),
                "extend-rule-packs" => raw.extend_rule_packs = Some(list()?),
                "context-size-limit" => match value.get_ref() {
                    DeValue::Integer(number) => {
                        raw.context_size_limit = Some(
                            u64::from_str_radix(&number.as_str().replace('_', ""), number.radix())
                                .map_err(|_| {
                                    config.error_at(
                                        value.span().start,
                                        "`context-size-limit` takes a number of bytes, like `context-size-limit = 1_048_576`",
                                    )
                                })?,
                        );
                    }
                    _ => {
                        return Err(config.error_at(
                            value.span().start,
                            "`context-size-limit` takes a number of bytes, like `context-size-limit = 1_048_576`",
                        ));
                    }
                },
                "frameworks" => {
                    let DeValue::Table(table) = value.get_ref() else {
                        return Err(config.error_at(
                            value.span().start,
                            "`frameworks` takes a table of lists, like `model-factories = [\"acme.models.build_*\"]`",
                        ));
                    };
                    for (list, patterns) in table {
                        let list_name = list.get_ref().to_string();
                        if !FRAMEWORK_KEYS.contains(&list_name.as_str()) {
                            return Err(config.error_at(
                                list.span().start,
                                format!(
                                    "unknown key `{list_name}` in `frameworks` (expected {})",
                                    FRAMEWORK_KEYS.join(", ")
                                ),
                            ));
                        }
                        let patterns = string_list(config, &list_name, patterns)?;
                        raw.frameworks
                            .push((list_name, list.span().start, patterns));
                    }
                }
                "per-file-ignores" => {
                    let DeValue::Table(table) = value.get_ref() else {
                        return Err(config.error_at(
                            value.span().start,
                            "`per-file-ignores` takes a table of glob = [codes], like `\"tests/*\" = [\"TL108\"]`",
                        ));
                    };
                    let mut entries = Vec::new();
                    for (pattern, selectors) in table {
                        let pattern_text = pattern.get_ref().to_string();
                        let codes = string_list(config, &pattern_text, selectors)?;
                        entries.push((pattern_text, pattern.span().start, codes));
                    }
                    raw.per_file_ignores = Some(entries);
                }
                _ => {
                    // A rule's options table, validated once the registry is known.
                    let DeValue::Table(table) = value.get_ref() else {
                        return Err(config.error_at(
                            offset,
                            format!(
                                "unknown key `{name}` in {} (expected {KNOWN_KEYS})",
                                config.section
                            ),
                        ));
                    };
                    let options = table
                        .iter()
                        .map(|(option, value)| RawRuleOption {
                            name: option.get_ref().to_string(),
                            offset: option.span().start,
                            value: to_value(value.get_ref()),
                            value_offset: value.span().start,
                        })
                        .collect();
                    raw.rule_tables.push((name, offset, options));
                }
            }
        }
        Ok(())
    }
}

fn string_list(
    config: &ConfigFile,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<(String, usize)>, FileError> {
    let error = |offset: usize| {
        config.error_at(
            offset,
            format!("`{key}` takes a list of strings, like `[\"TL1\", \"TL201\"]`"),
        )
    };
    let DeValue::Array(items) = value.get_ref() else {
        return Err(error(value.span().start));
    };
    items
        .iter()
        .map(|item| match item.get_ref() {
            DeValue::String(text) => Ok((text.to_string(), item.span().start)),
            _ => Err(error(item.span().start)),
        })
        .collect()
}

/// A spanned TOML value as a plain `toml::Value`.
fn to_value(value: &DeValue<'_>) -> toml::Value {
    match value {
        DeValue::String(text) => toml::Value::String(text.to_string()),
        DeValue::Integer(integer) => {
            let digits = integer.as_str().replace('_', "");
            i64::from_str_radix(&digits, integer.radix())
                .map(toml::Value::Integer)
                .unwrap_or_else(|_| toml::Value::String(integer.to_string()))
        }
        DeValue::Float(float) => float
            .as_str()
            .replace('_', "")
            .parse::<f64>()
            .map(toml::Value::Float)
            .unwrap_or(toml::Value::Float(f64::NAN)),
        DeValue::Boolean(flag) => toml::Value::Boolean(*flag),
        DeValue::Datetime(datetime) => toml::Value::Datetime(*datetime),
        DeValue::Array(items) => {
            toml::Value::Array(items.iter().map(|item| to_value(item.get_ref())).collect())
        }
        DeValue::Table(table) => toml::Value::Table(
            table
                .iter()
                .map(|(key, value)| (key.get_ref().to_string(), to_value(value.get_ref())))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_excludes_compile_under_any_root() {
        let patterns: Vec<(String, Option<usize>)> = DEFAULT_EXCLUDES
            .iter()
            .map(|pattern| ((*pattern).to_owned(), None))
            .collect();
        for root in ["/work/project", "/data[1/{a,b}/x*"] {
            let root = Path::new(root);
            assert!(ExcludeSets::compile(&patterns, root).is_ok(), "{root:?}");
            let exclude = Exclude::build(&patterns, root).unwrap();
            assert!(exclude.matches(&root.join(".venv")), "{root:?}");
            assert!(exclude.matches(&root.join("src/build")), "{root:?}");
            assert!(!exclude.matches(&root.join("train.py")), "{root:?}");
        }
    }
}
