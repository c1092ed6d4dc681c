//! Rust implementations of the `suggestions` pack (`rules/suggestions/`): no hazard, but a
//! change most training code gains memory from. Off by default.

pub mod no_mixed_precision;
