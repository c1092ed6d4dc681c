//! Which classes of a file are `nn.Module`s: subclasses of `torch.nn.Module` (or of the
//! framework bases built on it), directly or through other classes of the same file, and
//! classes that define `forward`.

use super::analysis::Analysis;
use super::facts::Ask;

#[derive(Debug, Default)]
pub struct ModuleInfo {
    /// By index into `SemanticModel::classes`.
    module_classes: Vec<bool>,
}

impl ModuleInfo {
    pub fn build(analysis: &Analysis<'_>) -> Self {
        let classes = &analysis.model.classes;
        let mut module_classes: Vec<bool> = classes
            .iter()
            .map(|class| {
                // A class with a `forward` and a layer-like base is a module even when the
                // base comes from another file of the project (`class Decoder(RTDetrDecoder)`).
                (class.methods.iter().any(|(name, _)| *name == "forward")
                    && class
                        .bases
                        .iter()
                        .any(|base| layer_like(analysis.text(*base))))
                    || class
                        .bases
                        .iter()
                        .any(|base| model_like(analysis.text(*base)))
                    || class.bases.iter().any(|base| {
                        analysis.qualified_name(*base).is_some_and(|name| {
                            if is_module_base(&name) {
                                return true;
                            }
                            // A class of another file of the project (or a library's), also
                            // through one of several star imports.
                            let name = if name.contains('.') {
                                Some(name)
                            } else {
                                analysis.star_imported(&name)
                            };
                            name.is_some_and(|name| analysis.ask(Ask::ModuleClass(name)).is_some())
                        })
                    })
            })
            .collect();
        // Through the file's own classes: `class LitBase(nn.Module)`, `class Net(LitBase)`.
        loop {
            let mut changed = false;
            for (index, class) in classes.iter().enumerate() {
                if module_classes[index] {
                    continue;
                }
                let inherits = class.bases.iter().any(|base| {
                    let name = analysis.text(*base);
                    classes
                        .iter()
                        .enumerate()
                        .any(|(other, candidate)| candidate.name == name && module_classes[other])
                });
                if inherits {
                    module_classes[index] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        ModuleInfo { module_classes }
    }

    pub fn is_module_class(&self, class: usize) -> bool {
        self.module_classes.get(class).copied().unwrap_or(false)
    }
}

/// Base class names of layers and models: `LlamaPreTrainedModel`, `RTDetrDecoder`,
/// `GradientCheckpointingLayer`.
fn layer_like(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    [
        "Model",
        "Module",
        "Layer",
        "Block",
        "Decoder",
        "Encoder",
        "Head",
        "Net",
        "Network",
        "Embedding",
        "Embeddings",
        "Attention",
        "MLP",
        "Transformer",
        "Backbone",
        "Stage",
        "Conv",
        "Norm",
        "Pooler",
        "Projector",
        "Quantizer",
    ]
    .iter()
    .any(|suffix| last.ends_with(suffix))
}

/// Base class names that are models whatever the class defines: `...Model`, `...Module`,
/// `...Layer`, and Hugging Face heads (`LlamaForCausalLM`).
fn model_like(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let hf_head = last
        .match_indices("For")
        .any(|(i, _)| i > 0 && last[i + 3..].starts_with(|c: char| c.is_ascii_uppercase()));
    last.ends_with("Model") || last.ends_with("Module") || last.ends_with("Layer") || hf_head
}

/// `torch.nn.Module` and the framework classes built on it, by qualified name.
pub fn is_module_base(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    (name.starts_with("torch.nn.") && last.starts_with(|c: char| c.is_ascii_uppercase()))
        || last == "LightningModule"
        || last.ends_with("PreTrainedModel")
        || name.starts_with("mmengine.model.")
        || (last == "Module" && name.contains("nn"))
}

/// Whether a class derives only from `torch.nn` classes, directly or through classes of this
/// file: no framework base (whose hooks run without grad) can be hiding in another file.
pub fn bases_are_plain_modules(analysis: &Analysis<'_>, class: usize) -> bool {
    let classes = &analysis.model.classes;
    let mut pending = vec![class];
    let mut seen = Vec::new();
    while let Some(class) = pending.pop() {
        if seen.contains(&class) {
            continue;
        }
        seen.push(class);
        for base in &classes[class].bases {
            let text = analysis.text(*base);
            if let Some(own) = classes.iter().position(|c| c.name == text) {
                pending.push(own);
            } else if !analysis
                .qualified_name(*base)
                .is_some_and(|name| name.starts_with("torch.nn."))
            {
                return false;
            }
        }
    }
    true
}
