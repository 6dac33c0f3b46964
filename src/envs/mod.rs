//! Benchmarks: each folder holds one benchmark's episode logic, scorer and
//! built-in agents; [`Registry`] exposes them to the spec and exec layers.

pub mod bbeh;
pub mod bbq;
pub mod eleusis;
pub mod metric;
pub mod pystr;
pub mod registry;
pub mod splitmix;
pub mod weirdml;

pub use registry::{BENCHMARKS, PROVIDERS, Registry, transcript};
