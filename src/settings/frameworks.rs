//! The framework table as data: the built-in lists in `frameworks.toml` (which library calls
//! return models, which base classes make one, ...) and a config's `[tool.torchlint.frameworks]`
//! additions. `semantic::frameworks` compiles a table and answers from it. The patterns compile
//! with the functions here, so that settings check a config's table where they read it (the
//! error names its line) and the compiled table cannot fail later.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

const TABLE: &str = include_str!("frameworks.toml");

/// The lists of the table, by their names in `frameworks.toml` and in a config.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Table {
    #[serde(default)]
    pub model_factories: Vec<String>,
    #[serde(default)]
    pub weight_loaders: Vec<String>,
    #[serde(default)]
    pub tensor_functions: Vec<String>,
    #[serde(default)]
    pub not_models: Vec<String>,
    #[serde(default)]
    pub module_bases: Vec<String>,
    #[serde(default)]
    pub device_loaders: Vec<String>,
    #[serde(default)]
    pub device_placers: Vec<String>,
    #[serde(default)]
    pub no_grad_hooks: Vec<String>,
    #[serde(default)]
    pub backward_methods: Vec<String>,
    #[serde(default)]
    pub per_batch_hooks: Vec<String>,
    #[serde(default)]
    pub gathering_methods: Vec<String>,
}

impl Table {
    /// The table's lists, by their names in `frameworks.toml` and in a config.
    pub const LISTS: &'static [&'static str] = &[
        "model-factories",
        "weight-loaders",
        "tensor-functions",
        "not-models",
        "module-bases",
        "device-loaders",
        "device-placers",
        "no-grad-hooks",
        "backward-methods",
        "per-batch-hooks",
        "gathering-methods",
    ];

    /// The list of that name (one of [`Table::LISTS`]).
    pub fn list_mut(&mut self, name: &str) -> Option<&mut Vec<String>> {
        Some(match name {
            "model-factories" => &mut self.model_factories,
            "weight-loaders" => &mut self.weight_loaders,
            "tensor-functions" => &mut self.tensor_functions,
            "not-models" => &mut self.not_models,
            "module-bases" => &mut self.module_bases,
            "device-loaders" => &mut self.device_loaders,
            "device-placers" => &mut self.device_placers,
            "no-grad-hooks" => &mut self.no_grad_hooks,
            "backward-methods" => &mut self.backward_methods,
            "per-batch-hooks" => &mut self.per_batch_hooks,
            "gathering-methods" => &mut self.gathering_methods,
            _ => return None,
        })
    }

    /// The built-in table.
    pub fn builtin() -> Table {
        toml::from_str(TABLE).expect("frameworks.toml is a valid table")
    }

    /// This table with `extra`'s lists added to it.
    pub fn extended(&self, extra: &Table) -> Table {
        let mut table = self.clone();
        let mut extra = extra.clone();
        for name in Table::LISTS {
            if let (Some(list), Some(more)) = (table.list_mut(name), extra.list_mut(name)) {
                list.append(more);
            }
        }
        table
    }

    /// Whether the patterns compile as `semantic::frameworks::Frameworks::from_table` compiles
    /// them, list by list in its order; the error names the first pattern that does not.
    pub fn check(&self) -> Result<(), String> {
        compile(&self.model_factories)?;
        compile(&self.weight_loaders)?;
        compile(&self.tensor_functions)?;
        compile(&self.not_models)?;
        compile(&self.module_bases)?;
        compile(&self.device_loaders)?;
        compile(&self.device_placers)?;
        method_patterns(&self.device_placers)?;
        compile(&self.no_grad_hooks)?;
        method_patterns(&self.no_grad_hooks)?;
        for hook in &self.per_batch_hooks {
            parse_hook(hook)?;
        }
        Ok(())
    }
}

/// A list's patterns as one set; an error names the pattern that does not compile.
pub fn compile(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern).map_err(|error| format!("`{pattern}`: {error}"))?;
        builder.add(glob);
    }
    builder.build().map_err(|error| error.to_string())
}

/// Whether an entry of `backward-methods` or `gathering-methods` is a method name (no receiver, no pattern): the
/// config's entries are checked with this where they are read, so that the error names the line.
pub fn is_method_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c == '_' || c.is_alphanumeric())
}

/// An entry of `per-batch-hooks`, read: `training_step(batch)`, or `torchmetrics.Metric.update(*)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook<'e> {
    /// The base class pattern the method's class must derive from (`torchmetrics.Metric`);
    /// `None` for a bare method name, a hook of whatever class defines it.
    pub class: Option<&'e str>,
    pub method: &'e str,
    /// The parameters, as the framework's signature names them, that receive the batch (or its
    /// outputs) on the accelerator; `*` stands for every parameter.
    pub parameters: Vec<&'e str>,
}

/// An entry of `per-batch-hooks`: the method's name, after the base class pattern its class
/// derives from when the name alone says too little (`torchmetrics.Metric.update`), and the
/// parameters, named in parentheses as the framework's signature names them, that receive the
/// batch on the accelerator (`training_step(batch)`, `on_train_batch_end(outputs, batch)`,
/// `*` for all); none for a bare name.
pub fn parse_hook(entry: &str) -> Result<Hook<'_>, String> {
    let (path, parameters) = match entry.split_once('(') {
        Some((path, rest)) => {
            let inside = rest.strip_suffix(')').ok_or_else(|| {
                format!("`{entry}`: a hook is `name` or `name(batch, ...)`, closed by `)`")
            })?;
            let parameters: Vec<&str> = inside
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            (path.trim(), parameters)
        }
        None => (entry.trim(), Vec::new()),
    };
    let (class, method) = match path.rsplit_once('.') {
        Some((class, method)) => {
            Glob::new(class).map_err(|error| format!("`{entry}`: {error}"))?;
            (Some(class), method)
        }
        None => (None, path),
    };
    if let Some(bad) = std::iter::once(method)
        .chain(parameters.iter().copied().filter(|p| *p != "*"))
        .find(|part| !is_method_name(part))
    {
        return Err(format!(
            "`{entry}`: `{bad}` is not a name; a hook is `name`, `name(batch, ...)` or `package.Base.name(*)`"
        ));
    }
    Ok(Hook {
        class,
        method,
        parameters,
    })
}

/// The method names `Class.method` patterns allow, as patterns of their own: the last dotted
/// part of each (`Base.{val_step,test_step}` allows two names, `Engine.setup*` any `setup…`).
pub fn method_patterns(patterns: &[String]) -> Result<GlobSet, String> {
    let tails: Vec<String> = patterns
        .iter()
        .map(|pattern| pattern.rsplit('.').next().unwrap_or(pattern).to_owned())
        .collect();
    compile(&tails)
}
