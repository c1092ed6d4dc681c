//! Rule selectors (`ALL`, `TL`, `TL1`, `TL108`, `load-without-map-location`) and Ruff's way of
//! combining `select`, `extend-select` and `ignore`: within one layer the most specific
//! selector wins (ignore on a tie); a layer with `select` starts from nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::rule_meta::{RuleMeta, RuleRegistry};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    All,
    Prefix(String),
    Name(String),
}

impl Selector {
    /// Parses a selector, checking that it names at least one known rule.
    pub fn parse(text: &str, registry: &RuleRegistry) -> Result<Selector, String> {
        let text = text.trim();
        let selector = if text.eq_ignore_ascii_case("ALL") {
            Selector::All
        } else if text.contains('-') || text.chars().all(|c| c.is_ascii_lowercase()) {
            Selector::Name(text.to_owned())
        } else {
            Selector::Prefix(text.to_ascii_uppercase())
        };
        if registry.iter().any(|rule| selector.matches(rule)) {
            Ok(selector)
        } else {
            Err(format!(
                "`{text}` selects no rule (use a code like `TL108`, a prefix like `TL1`, a rule name, or `ALL`; `torchlint rule --all` lists them)"
            ))
        }
    }

    pub fn matches(&self, rule: &RuleMeta) -> bool {
        match self {
            Selector::All => true,
            Selector::Prefix(prefix) => rule.code.starts_with(prefix.as_str()),
            Selector::Name(name) => rule.name == *name,
        }
    }

    fn specificity(&self) -> usize {
        match self {
            Selector::All => 0,
            Selector::Prefix(prefix) => prefix.len(),
            Selector::Name(_) => usize::MAX,
        }
    }
}

/// One level of selection: the config file, then the command line.
#[derive(Debug, Clone, Default)]
pub struct SelectionLayer {
    pub select: Option<Vec<Selector>>,
    pub extend_select: Vec<Selector>,
    pub ignore: Vec<Selector>,
}

/// The codes enabled after applying each layer in order to the defaults.
pub fn resolve(registry: &RuleRegistry, layers: &[SelectionLayer]) -> BTreeSet<String> {
    let mut enabled: BTreeSet<String> = registry
        .iter()
        .filter(|rule| rule.enabled_by_default)
        .map(|rule| rule.code.clone())
        .collect();
    for layer in layers {
        let mut next = BTreeSet::new();
        for rule in registry.iter() {
            let selected = layer
                .select
                .iter()
                .flatten()
                .chain(&layer.extend_select)
                .filter(|s| s.matches(rule))
                .map(Selector::specificity)
                .max();
            let ignored = layer
                .ignore
                .iter()
                .filter(|s| s.matches(rule))
                .map(Selector::specificity)
                .max();
            let on = match (selected, ignored) {
                (Some(selected), Some(ignored)) => selected > ignored,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => layer.select.is_none() && enabled.contains(&rule.code),
            };
            if on {
                next.insert(rule.code.clone());
            }
        }
        enabled = next;
    }
    enabled
}

/// Whether any selector of `selectors` matches the rule (for per-file ignores).
pub fn any_matches(selectors: &[Selector], rule: &Arc<RuleMeta>) -> bool {
    selectors.iter().any(|selector| selector.matches(rule))
}
