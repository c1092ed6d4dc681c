//! Which classes of a file are `nn.Module`s: subclasses of `torch.nn.Module` (or of the
//! framework bases built on it), directly or through other classes of the same file.

use super::analysis::Analysis;

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
                class.bases.iter().any(|base| {
                    analysis
                        .qualified_name(*base)
                        .is_some_and(|name| is_module_base(&name))
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

/// `torch.nn.Module` and the framework classes built on it, by qualified name.
pub fn is_module_base(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    (name.starts_with("torch.nn.") && last.starts_with(|c: char| c.is_ascii_uppercase()))
        || last == "LightningModule"
        || last.ends_with("PreTrainedModel")
        || name.starts_with("mmengine.model.")
        || (last == "Module" && name.contains("nn"))
}
