//! Rust implementations of the `performance` pack (`rules/performance/`): hazards that cost
//! step time rather than memory.

pub mod compile_in_loop;
pub mod empty_cache_in_loop;
