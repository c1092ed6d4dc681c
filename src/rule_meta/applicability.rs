//! How safe a fix is to apply: declared by a declarative rule's `fix`, carried by a finding.

use serde::{Deserialize, Serialize};

/// Ruff's fix applicability levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    Safe,
    Unsafe,
    DisplayOnly,
}
