//! torchlint: a static linter for the memory hazards of PyTorch training code.
//!
//! The pipeline, each stage consuming the previous one's output: discovery (`discovery`) →
//! source text (`source`, `notebook`) → parse (`parse`) → semantic model (`semantic`) → rules
//! (`checker`, `rules`) → diagnostics (`diagnostic`, `suppression`) → renderers (`render`).
//! `project` resolves what one file cannot know about another. `linter` is the engine API the command line, the editor server and the probe share.

pub mod baseline;
pub mod cache;
pub mod checker;
pub mod cli;
pub mod diagnostic;
pub mod discovery;
pub mod error;
pub mod escape;
pub mod files;
pub mod fingerprint;
pub mod fix;
pub mod linter;
pub mod node_children;
pub mod notebook;
pub mod parse;
pub mod probe;
pub mod project;
pub mod render;
pub mod rule_meta;
pub mod rules;
pub mod semantic;
pub mod server;
pub mod settings;
pub mod source;
pub mod suppression;
pub mod syntax;
