//! Framework knowledge as data: the table in `frameworks.toml` (which library calls return
//! models, which base classes make one), compiled into the binary and read once.

use std::sync::LazyLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use super::facts::module_facts;
use super::values::{Kind, Tri, ValueFacts};

const TABLE: &str = include_str!("frameworks.toml");

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
            _ => return None,
        })
    }
}

/// The table with its patterns compiled.
pub struct Frameworks {
    model_factories: GlobSet,
    weight_loaders: GlobSet,
    tensor_functions: GlobSet,
    /// The first dotted parts of the `tensor_functions` patterns.
    tensor_function_heads: Vec<String>,
    not_models: GlobSet,
    module_bases: GlobSet,
    device_loaders: GlobSet,
    device_placers: GlobSet,
    /// The method names `device_placers` allow: asked before the receiver's class is resolved.
    device_placer_methods: GlobSet,
    no_grad_hooks: GlobSet,
    /// The method names `no_grad_hooks` allow.
    no_grad_hook_methods: GlobSet,
    /// Plain names, not patterns: the model's walk looks them up among the calls it recorded
    /// by name.
    backward_methods: Vec<String>,
}

fn compile(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern).map_err(|error| format!("`{pattern}`: {error}"))?;
        builder.add(glob);
    }
    builder.build().map_err(|error| error.to_string())
}

/// Whether an entry of `backward-methods` is a method name (no receiver, no pattern): the
/// config's entries are checked with this where they are read, so that the error names the line.
pub fn is_method_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c == '_' || c.is_alphanumeric())
}

/// The method names `Class.method` patterns allow, as patterns of their own: the last dotted
/// part of each (`Base.{val_step,test_step}` allows two names, `Engine.setup*` any `setup…`).
fn method_patterns(patterns: &[String]) -> Result<GlobSet, String> {
    let tails: Vec<String> = patterns
        .iter()
        .map(|pattern| pattern.rsplit('.').next().unwrap_or(pattern).to_owned())
        .collect();
    compile(&tails)
}

impl Frameworks {
    pub fn from_table(table: &Table) -> Result<Self, String> {
        Ok(Frameworks {
            model_factories: compile(&table.model_factories)?,
            weight_loaders: compile(&table.weight_loaders)?,
            tensor_functions: compile(&table.tensor_functions)?,
            tensor_function_heads: table
                .tensor_functions
                .iter()
                .map(|p| p.split('.').next().unwrap_or(p).to_owned())
                .collect(),
            not_models: compile(&table.not_models)?,
            module_bases: compile(&table.module_bases)?,
            device_loaders: compile(&table.device_loaders)?,
            device_placers: compile(&table.device_placers)?,
            device_placer_methods: method_patterns(&table.device_placers)?,
            no_grad_hooks: compile(&table.no_grad_hooks)?,
            no_grad_hook_methods: method_patterns(&table.no_grad_hooks)?,
            backward_methods: table.backward_methods.clone(),
        })
    }

    fn makes_model(&self, qualified: &str) -> bool {
        self.model_factories.is_match(qualified) && !self.not_models.is_match(qualified)
    }
}

static BUILTIN: LazyLock<Frameworks> = LazyLock::new(|| {
    Frameworks::from_table(&builtin_table()).expect("frameworks.toml's patterns compile")
});

fn builtin_table() -> Table {
    toml::from_str(TABLE).expect("frameworks.toml is a valid table")
}

/// The built-in table, for runs whose config adds nothing.
pub fn builtin() -> &'static Frameworks {
    &BUILTIN
}

impl Frameworks {
    /// The built-in table with a config's `[tool.torchlint.frameworks]` lists added to it;
    /// an error names the pattern that does not compile.
    pub fn extended(extra: &Table) -> Result<Frameworks, String> {
        let mut table = builtin_table();
        let mut extra = extra.clone();
        for name in Table::LISTS {
            if let (Some(list), Some(more)) = (table.list_mut(name), extra.list_mut(name)) {
                list.append(more);
            }
        }
        Frameworks::from_table(&table)
    }

    /// Whether a class of this qualified name makes its subclasses models.
    pub fn is_module_base(&self, qualified: &str) -> bool {
        self.module_bases.is_match(qualified)
    }

    /// What calling a library name returns, when the table knows: a model, or a loader whose
    /// batches are on the accelerator.
    pub fn call_result(&self, qualified: &str) -> Option<ValueFacts> {
        if self.device_loaders.is_match(qualified) {
            return Some(ValueFacts {
                device: Tri::Yes,
                ..ValueFacts::of(Kind::Loader)
            });
        }
        self.makes_model(qualified).then(|| ValueFacts {
            pretrained: self.weight_loaders.is_match(qualified),
            ..module_facts(Kind::Module)
        })
    }

    /// Whether a framework runs a method of this name without grad (on a class derived from
    /// its base): `validation_step`. A class whose bases the file does not show may be one.
    pub fn names_no_grad_hook(&self, method: &str) -> bool {
        self.no_grad_hook_methods.is_match(method)
    }

    /// Whether the framework runs `method` of a class derived from `base` (qualified) without
    /// grad: Lightning's `validation_step`.
    pub fn is_no_grad_hook(&self, base: &str, method: &str) -> bool {
        self.names_no_grad_hook(method) && self.no_grad_hooks.is_match(format!("{base}.{method}"))
    }

    /// Whether some library method of this name returns its arguments placed on the
    /// accelerator: the cheap question before [`Frameworks::places_on_device`].
    pub fn may_place_on_device(&self, method: &str) -> bool {
        self.device_placer_methods.is_match(method)
    }

    /// Whether a library call returns its arguments placed on the accelerator
    /// (`model, opt, loader = accelerator.prepare(model, opt, loader)`).
    pub fn places_on_device(&self, qualified: &str) -> bool {
        self.device_placers.is_match(qualified)
    }

    /// The method names whose call runs a backward, through the receiver (`loss.backward()`)
    /// or the first argument (`accelerator.backward(loss)`).
    pub fn backward_methods(&self) -> &[String] {
        &self.backward_methods
    }

    /// Whether a call of this method name runs a backward.
    pub fn is_backward_method(&self, method: &str) -> bool {
        self.backward_methods.iter().any(|name| name == method)
    }

    /// Whether a library function returns a tensor that keeps its arguments' graph and device.
    pub fn keeps_graph(&self, qualified: &str) -> bool {
        // Most names are `torch.*` or builtins: a glob match per call would cost more than the
        // rest of the call's analysis.
        let head = qualified.split('.').next().unwrap_or(qualified);
        self.tensor_function_heads.iter().any(|h| h == head)
            && self.tensor_functions.is_match(qualified)
    }

    /// What a library name holds as a value (a model class).
    pub fn value_of(&self, qualified: &str) -> Option<ValueFacts> {
        let class = qualified
            .rsplit('.')
            .next()
            .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_uppercase()));
        (class && self.makes_model(qualified)).then(|| module_facts(Kind::ModuleClass))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_knows_model_factories_and_what_is_not_one() {
        let table = builtin();
        assert!(table.call_result("torchvision.models.resnet50").is_some());
        assert!(table.call_result("timm.create_model").is_some());
        assert!(
            table
                .call_result("transformers.AutoModelForCausalLM.from_pretrained")
                .is_some()
        );
        assert!(
            table
                .call_result("transformers.AutoTokenizer.from_pretrained")
                .is_none()
        );
        assert!(
            table
                .call_result("torchvision.models.ResNet50_Weights.DEFAULT")
                .is_none()
        );
        assert!(table.call_result("numpy.zeros").is_none());
        assert!(table.is_module_base("pytorch_lightning.LightningModule"));
        assert!(table.is_no_grad_hook("lightning.pytorch.LightningModule", "validation_step"));
        assert!(table.is_no_grad_hook("pytorch_lightning.LightningModule", "predict_step"));
        assert!(table.is_no_grad_hook("mmengine.model.BaseModel", "val_step"));
        assert!(!table.is_no_grad_hook("pytorch_lightning.LightningModule", "training_step"));
        assert!(!table.is_no_grad_hook("acme.LightningModule", "validation_step"));
        assert!(table.names_no_grad_hook("test_step") && !table.names_no_grad_hook("forward"));
        let loader = table
            .call_result("fastai.data.core.DataLoaders.from_dsets")
            .unwrap();
        assert_eq!((loader.kind, loader.device), (Kind::Loader, Tri::Yes));
        assert!(!table.is_module_base("object"));
    }

    #[test]
    fn the_built_in_backward_methods_are_method_names() {
        let methods = builtin().backward_methods();
        assert!(methods.iter().any(|m| m == "manual_backward"));
        assert!(methods.iter().all(|m| is_method_name(m)), "{methods:?}");
        assert!(!is_method_name("engine.backprop") && !is_method_name("back*"));
    }

    #[test]
    fn a_config_adds_to_the_table() {
        let extra = Table {
            model_factories: vec!["acme.models.build_*".to_owned()],
            module_bases: vec!["acme.train.Task".to_owned()],
            device_placers: vec!["acme.dist.Engine.place".to_owned()],
            no_grad_hooks: vec!["acme.train.Task.score_batch".to_owned()],
            ..Table::default()
        };
        let table = Frameworks::extended(&extra).unwrap();
        assert!(table.call_result("acme.models.build_resnet").is_some());
        assert!(table.is_module_base("acme.train.Task"));
        assert!(table.places_on_device("acme.dist.Engine.place"));
        assert!(table.may_place_on_device("place") && table.may_place_on_device("setup_module"));
        assert!(!table.may_place_on_device("forward"));
        assert!(table.is_no_grad_hook("acme.train.Task", "score_batch"));
        assert!(table.names_no_grad_hook("validation_step"));
        assert!(!builtin().names_no_grad_hook("score_batch"));
        assert!(table.places_on_device("accelerate.Accelerator.prepare"));
        assert!(!builtin().places_on_device("acme.dist.Engine.place"));
        assert!(table.call_result("timm.create_model").is_some());
        assert!(builtin().call_result("acme.models.build_resnet").is_none());
        let bad = Table {
            model_factories: vec!["acme.[".to_owned()],
            ..Table::default()
        };
        let Err(error) = Frameworks::extended(&bad) else {
            panic!("an unclosed class is not a pattern");
        };
        assert!(error.contains("acme.["), "{error}");
    }
}
