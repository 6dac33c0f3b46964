//! Benchmarks: each folder holds one benchmark's episode logic, scorer and
//! built-in agents; [`Registry`] exposes them to the spec and exec layers.

pub mod bbeh;
pub mod eleusis;
pub mod registry;

pub use registry::{BENCHMARKS, Registry, transcript};
