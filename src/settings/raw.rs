//! One source's settings as written — a config file's torchlint table, or one inline
//! `--config` pair — checked for known keys and value types, each value kept with the place it
//! was written ([`At`]) for the errors found once the rule registry is known; and how a source
//! applies over the ones before it ([`RawOptions::overlaid`]).

use std::borrow::Cow;

use toml::Spanned;
use toml::de::DeValue;

use super::frameworks::Table;
use super::origin::{At, Origin};
use crate::error::FileError;

pub const KNOWN_KEYS: &str = "select, extend-select, ignore, per-file-ignores, exclude, extend-exclude, extend-rule-packs, frameworks, context-size-limit, fix, unsafe-fixes, fixable, unfixable, extend-safe-fixes, extend-unsafe-fixes, or a rule name with options";

/// The lists of `[tool.torchlint.frameworks]`, as in the built-in table.
const FRAMEWORK_KEYS: &[&str] = Table::LISTS;

/// Strings of a list, each with the place it was written.
pub type SpannedStrings<'a> = Vec<(String, At<'a>)>;

/// `select`, `extend-select` and `ignore` of one source: one layer of Ruff's selection.
#[derive(Default)]
pub struct RawSelection<'a> {
    pub select: Option<SpannedStrings<'a>>,
    pub extend_select: SpannedStrings<'a>,
    pub ignore: SpannedStrings<'a>,
}

/// The settings of one source, or of several laid over each other.
#[derive(Default)]
pub struct RawOptions<'a> {
    /// A layer per source, in order: a later source's selection applies over the earlier
    /// ones' (as Ruff's `--config 'ignore = [...]'` and `--ignore` do), not in their place.
    pub selections: Vec<RawSelection<'a>>,
    pub per_file_ignores: Option<Vec<(String, At<'a>, SpannedStrings<'a>)>>,
    pub exclude: Option<SpannedStrings<'a>>,
    pub extend_exclude: SpannedStrings<'a>,
    pub extend_rule_packs: SpannedStrings<'a>,
    pub context_size_limit: Option<u64>,
    /// `fix = true`: `check` applies the fixes as `--fix` does; `unsafe-fixes = true`, as
    /// `--unsafe-fixes` does.
    pub fix: Option<bool>,
    pub unsafe_fixes: Option<bool>,
    /// Ruff's fix selection: the rules whose fixes may be applied (`fixable`, all by default,
    /// less `unfixable`), and those whose fixes count as safe or unsafe whatever the rule says.
    pub fixable: Option<SpannedStrings<'a>>,
    pub unfixable: SpannedStrings<'a>,
    pub extend_safe_fixes: SpannedStrings<'a>,
    pub extend_unsafe_fixes: SpannedStrings<'a>,
    /// `[frameworks]`: (list name, place, patterns).
    pub frameworks: Vec<(String, At<'a>, SpannedStrings<'a>)>,
    /// `[rule-name]` tables: (name, place, options), in source order.
    pub rule_tables: Vec<(String, At<'a>, Vec<RawRuleOption<'a>>)>,
    /// Keys that are neither settings nor tables (reported once the rules are known, which
    /// can say where a rule's option belongs).
    pub unknown_keys: Vec<(String, At<'a>)>,
}

pub struct RawRuleOption<'a> {
    pub name: String,
    pub at: At<'a>,
    pub value: toml::Value,
    pub value_at: At<'a>,
}

impl<'a> RawOptions<'a> {
    /// The options a source sets, and every error in them (each key is read whatever the
    /// others hold: a run reports all of a file's errors at once).
    pub fn read(origin: Origin<'a>) -> (RawOptions<'a>, Vec<FileError>) {
        let mut raw = RawOptions {
            selections: vec![RawSelection::default()],
            ..RawOptions::default()
        };
        let mut errors = Vec::new();
        for (key, value) in origin.table() {
            if let Err(error) = raw.read_key(origin, key, value) {
                errors.push(error);
            }
        }
        (raw, errors)
    }

    /// These settings with `over`'s applied on top, as Ruff combines a `--config` pair with
    /// the config file: a key `over` sets replaces this one's, except that selection is a
    /// further layer, `extend-*` lists add to these, and a rule option or a `frameworks` list
    /// replaces only itself (the others of its table stay).
    pub fn overlaid(mut self, over: RawOptions<'a>) -> RawOptions<'a> {
        self.selections.extend(over.selections);
        self.per_file_ignores = over.per_file_ignores.or(self.per_file_ignores);
        self.exclude = over.exclude.or(self.exclude);
        self.extend_exclude.extend(over.extend_exclude);
        self.extend_rule_packs.extend(over.extend_rule_packs);
        self.context_size_limit = over.context_size_limit.or(self.context_size_limit);
        self.fix = over.fix.or(self.fix);
        self.unsafe_fixes = over.unsafe_fixes.or(self.unsafe_fixes);
        self.fixable = over.fixable.or(self.fixable);
        self.unfixable.extend(over.unfixable);
        self.extend_safe_fixes.extend(over.extend_safe_fixes);
        self.extend_unsafe_fixes.extend(over.extend_unsafe_fixes);
        for list in over.frameworks {
            self.frameworks.retain(|(name, _, _)| *name != list.0);
            self.frameworks.push(list);
        }
        // Merged option by option where the tables are read, in this order.
        self.rule_tables.extend(over.rule_tables);
        self.unknown_keys.extend(over.unknown_keys);
        self
    }

    fn read_key(
        &mut self,
        origin: Origin<'a>,
        key: Spanned<Cow<'_, str>>,
        value: Spanned<DeValue<'_>>,
    ) -> Result<(), FileError> {
        let raw = self;
        let at = origin.at(key.span().start);
        let value_at = origin.at(value.span().start);
        let name = key.get_ref().to_string();
        let list = || string_list(origin, &name, &value);
        let selection = raw
            .selections
            .last_mut()
            .expect("a source read has its selection layer");
        match name.as_str() {
            "select" => selection.select = Some(list()?),
            "extend-select" => selection.extend_select = list()?,
            "ignore" => selection.ignore = list()?,
            "exclude" => raw.exclude = Some(list()?),
            "extend-exclude" => raw.extend_exclude = list()?,
            "extend-rule-packs" => raw.extend_rule_packs = list()?,
            "fixable" => raw.fixable = Some(list()?),
            "unfixable" => raw.unfixable = list()?,
            "extend-safe-fixes" => raw.extend_safe_fixes = list()?,
            "extend-unsafe-fixes" => raw.extend_unsafe_fixes = list()?,
            "fix" | "unsafe-fixes" => {
                let DeValue::Boolean(on) = value.get_ref() else {
                    return Err(value_at.error(format!("`{name}` takes `true` or `false`")));
                };
                if name == "fix" {
                    raw.fix = Some(*on);
                } else {
                    raw.unsafe_fixes = Some(*on);
                }
            }
            "context-size-limit" => {
                const TAKES: &str = "`context-size-limit` takes a number of bytes, like `context-size-limit = 1_048_576`";
                let DeValue::Integer(number) = value.get_ref() else {
                    return Err(value_at.error(TAKES));
                };
                raw.context_size_limit = Some(
                    u64::from_str_radix(&number.as_str().replace('_', ""), number.radix())
                        .map_err(|_| value_at.error(TAKES))?,
                );
            }
            "frameworks" => {
                let DeValue::Table(table) = value.get_ref() else {
                    return Err(value_at.error(
                        "`frameworks` takes a table of lists, like `model-factories = [\"acme.models.build_*\"]`",
                    ));
                };
                for (list, patterns) in table {
                    let list_name = list.get_ref().to_string();
                    let list_at = origin.at(list.span().start);
                    if !FRAMEWORK_KEYS.contains(&list_name.as_str()) {
                        return Err(list_at.error(format!(
                            "unknown key `{list_name}` in `frameworks` (expected {})",
                            FRAMEWORK_KEYS.join(", ")
                        )));
                    }
                    let patterns = string_list(origin, &list_name, patterns)?;
                    raw.frameworks.push((list_name, list_at, patterns));
                }
            }
            "per-file-ignores" => {
                let DeValue::Table(table) = value.get_ref() else {
                    return Err(value_at.error(
                        "`per-file-ignores` takes a table of glob = [codes], like `\"tests/*\" = [\"TL108\"]`",
                    ));
                };
                let mut entries = Vec::new();
                for (pattern, selectors) in table {
                    let pattern_text = pattern.get_ref().to_string();
                    let codes = string_list(origin, &pattern_text, selectors)?;
                    entries.push((pattern_text, origin.at(pattern.span().start), codes));
                }
                raw.per_file_ignores = Some(entries);
            }
            _ => {
                // A rule's options table, validated once the registry is known.
                let DeValue::Table(table) = value.get_ref() else {
                    raw.unknown_keys.push((name, at));
                    return Ok(());
                };
                let options = table
                    .iter()
                    .map(|(option, value)| RawRuleOption {
                        name: option.get_ref().to_string(),
                        at: origin.at(option.span().start),
                        value: to_value(value.get_ref()),
                        value_at: origin.at(value.span().start),
                    })
                    .collect();
                raw.rule_tables.push((name, at, options));
            }
        }
        Ok(())
    }
}

fn string_list<'a>(
    origin: Origin<'a>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<SpannedStrings<'a>, FileError> {
    let error = |offset: usize| {
        origin.error_at(
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
            DeValue::String(text) => Ok((text.to_string(), origin.at(item.span().start))),
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
