//! Framework knowledge compiled: the table of `settings::frameworks` (the built-in lists in
//! `frameworks.toml`, which library calls return models, which base classes make one, plus a
//! config's additions) with its patterns compiled, and what a name it matches means as a fact.

use std::sync::{LazyLock, OnceLock};

use std::sync::Arc;

use globset::GlobSet;

use super::facts::module_facts;
use super::values::{Kind, Tri, ValueFacts};
use crate::settings::Settings;
use crate::settings::frameworks::{Table, compile, method_patterns, parse_hook};

/// The table with its patterns compiled.
pub struct Frameworks {
    model_factories: Patterns,
    weight_loaders: Patterns,
    tensor_functions: Patterns,
    /// The first dotted parts of the `tensor_functions` patterns.
    tensor_function_heads: Vec<String>,
    not_models: Patterns,
    module_bases: Patterns,
    device_loaders: Patterns,
    device_placers: Patterns,
    /// The method names `device_placers` allow: asked before the receiver's class is resolved.
    device_placer_methods: Patterns,
    no_grad_hooks: Patterns,
    /// The method names `no_grad_hooks` allow.
    no_grad_hook_methods: Patterns,
    /// Plain names, not patterns: the model's walk looks them up among the calls it recorded
    /// by name.
    backward_methods: Vec<String>,
    /// Methods a framework calls once per batch.
    per_batch_hooks: Vec<PerBatchHook>,
    /// Plain names: methods returning their argument's tensors where they were.
    gathering_methods: Vec<String>,
}

/// A method a framework calls once per batch, with the names of its parameters that receive
/// the batch on the accelerator (`*`: all of them).
struct PerBatchHook {
    /// The base class the method's class derives from; `None`: any class's method of the name.
    class: Option<Patterns>,
    method: String,
    parameters: Vec<String>,
}

impl Frameworks {
    /// The table, each list compiled when first matched. `Table::check` compiles the same
    /// lists (the settings check a config's table with it), so a table they accepted compiles;
    /// an entry of `per-batch-hooks` that does not read is an error here too.
    pub fn from_table(table: &Table) -> Result<Self, String> {
        Ok(Frameworks {
            model_factories: Patterns::new(&table.model_factories, compile),
            weight_loaders: Patterns::new(&table.weight_loaders, compile),
            tensor_functions: Patterns::new(&table.tensor_functions, compile),
            tensor_function_heads: table
                .tensor_functions
                .iter()
                .map(|p| p.split('.').next().unwrap_or(p).to_owned())
                .collect(),
            not_models: Patterns::new(&table.not_models, compile),
            module_bases: Patterns::new(&table.module_bases, compile),
            device_loaders: Patterns::new(&table.device_loaders, compile),
            device_placers: Patterns::new(&table.device_placers, compile),
            device_placer_methods: Patterns::new(&table.device_placers, method_patterns),
            no_grad_hooks: Patterns::new(&table.no_grad_hooks, compile),
            no_grad_hook_methods: Patterns::new(&table.no_grad_hooks, method_patterns),
            backward_methods: table.backward_methods.clone(),
            gathering_methods: table.gathering_methods.clone(),
            per_batch_hooks: table
                .per_batch_hooks
                .iter()
                .map(|entry| {
                    let hook = parse_hook(entry)?;
                    let class = hook
                        .class
                        .map(|class| Patterns::new(&[class.to_owned()], compile));
                    Ok(PerBatchHook {
                        class,
                        method: hook.method.to_owned(),
                        parameters: hook.parameters.into_iter().map(str::to_owned).collect(),
                    })
                })
                .collect::<Result<_, String>>()?,
        })
    }

    fn makes_model(&self, qualified: &str) -> bool {
        self.model_factories.is_match(qualified) && !self.not_models.is_match(qualified)
    }
}

/// A list's patterns, compiled into one set the first time a name is matched against them: a
/// file asks few of the lists, and compiling all of them up front was most of what linting a
/// one-line file cost. The patterns were checked where the table was read (`Table::check`: the
/// settings check a config's, a test the built-in ones).
struct Patterns {
    patterns: Vec<String>,
    compile: fn(&[String]) -> Result<GlobSet, String>,
    set: OnceLock<GlobSet>,
}

impl Patterns {
    fn new(patterns: &[String], compile: fn(&[String]) -> Result<GlobSet, String>) -> Patterns {
        Patterns {
            patterns: patterns.to_vec(),
            compile,
            set: OnceLock::new(),
        }
    }

    fn is_match(&self, name: impl AsRef<std::path::Path>) -> bool {
        self.set
            .get_or_init(|| (self.compile)(&self.patterns).unwrap_or_else(|_| GlobSet::empty()))
            .is_match(name)
    }
}

static BUILTIN: LazyLock<Frameworks> = LazyLock::new(|| {
    Frameworks::from_table(&Table::builtin()).expect("frameworks.toml's patterns compile")
});

/// The built-in table, for runs whose config adds nothing.
pub fn builtin() -> &'static Frameworks {
    &BUILTIN
}

impl Frameworks {
    /// The table a file is linted with: the built-in one, or its extension by the config.
    pub fn of(settings: &Settings) -> &Frameworks {
        Frameworks::extension_of(settings).map_or(builtin(), |table| table)
    }

    /// The config's extension of the table, if it has one: compiled on first use and kept with
    /// the settings (the project's fact base shares it).
    pub fn extension_of(settings: &Settings) -> Option<&Arc<Frameworks>> {
        let table = settings.framework_table()?;
        Some(settings.compiled_frameworks.get_or_init(|| {
            Arc::new(
                Frameworks::from_table(table)
                    .expect("the settings check the table's patterns when they read the config"),
            )
        }))
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
        self.names_no_grad_hook(method)
            && package_suffixes(base)
                .any(|base| self.no_grad_hooks.is_match(format!("{base}.{method}")))
    }

    /// Whether a method of this name returns its first argument's tensors gathered across
    /// processes, on their device.
    pub fn gathers(&self, method: &str) -> bool {
        self.gathering_methods.iter().any(|name| name == method)
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

    /// Whether some framework calls a method of this name once per batch: the cheap question
    /// before [`Frameworks::batch_parameters`], which resolves the class's bases.
    pub fn names_per_batch_hook(&self, method: &str) -> bool {
        self.per_batch_hooks
            .iter()
            .any(|hook| hook.method == method)
    }

    /// Whether a framework calls a method of this name once per batch whatever its class
    /// (Lightning's `training_step`).
    pub fn is_per_batch_hook_of_any_class(&self, method: &str) -> bool {
        self.per_batch_hooks
            .iter()
            .any(|hook| hook.class.is_none() && hook.method == method)
    }

    /// The parameters of a per-batch hook that receive the batch on the accelerator, as the
    /// framework names them (`*`: all), and whether the hook is known by its class's base (a
    /// class of the framework: its code runs where the framework puts it); `None` when a method
    /// of this name, of a class with these bases (qualified), is no per-batch hook.
    pub fn batch_parameters(&self, method: &str, bases: &[String]) -> Option<(&[String], bool)> {
        self.per_batch_hooks
            .iter()
            .find(|hook| {
                hook.method == method
                    && hook
                        .class
                        .as_ref()
                        .is_none_or(|class| bases.iter().any(|base| class.is_match(base)))
            })
            .map(|hook| (hook.parameters.as_slice(), hook.class.is_some()))
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

/// A qualified name, then the names it has from each package below its first part: a base
/// class of the library's own source, linted in a checkout, is named by its path
/// (`checkout.transformers.pipelines.base.Pipeline`), where the table names it as its users
/// import it (`transformers.*Pipeline`).
fn package_suffixes(qualified: &str) -> impl Iterator<Item = &str> {
    std::iter::once(qualified).chain(
        qualified
            .match_indices('.')
            .map(move |(at, _)| &qualified[at + 1..])
            .filter(|rest| rest.contains('.')),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::frameworks::is_method_name;

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
    fn a_per_batch_hook_named_with_its_base_applies_to_that_base_s_classes_only() {
        let table = builtin();
        let metric = ["torchmetrics.Metric".to_owned()];
        let (parameters, of_framework_class) = table.batch_parameters("update", &metric).unwrap();
        assert_eq!(
            (parameters, of_framework_class),
            (&["*".to_owned()][..], true)
        );
        assert!(table.batch_parameters("update", &[]).is_none());
        assert!(
            table
                .batch_parameters("update", &["acme.Buffer".to_owned()])
                .is_none()
        );
        assert!(table.names_per_batch_hook("update"));
        assert!(!table.is_per_batch_hook_of_any_class("update"));
        let (parameters, of_framework_class) =
            table.batch_parameters("training_step", &[]).unwrap();
        assert_eq!(
            (parameters, of_framework_class),
            (&["batch".to_owned()][..], false)
        );
        assert!(table.is_per_batch_hook_of_any_class("training_step"));
        let bad = Table {
            per_batch_hooks: vec!["acme.Meter.add(preds, 1x)".to_owned()],
            ..Table::default()
        };
        let error = bad.check().unwrap_err();
        assert!(error.contains("`1x` is not a name"), "{error}");
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
        let table = Frameworks::from_table(&Table::builtin().extended(&extra)).unwrap();
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
        let bad = Table::builtin().extended(&bad);
        let error = bad.check().unwrap_err();
        assert!(error.contains("acme.["), "{error}");
        assert_eq!(
            Table::builtin().check(),
            Ok(()),
            "frameworks.toml's patterns compile"
        );
    }
}
