//! evalgrid: declarative, content-hashed, cached grids of LLM benchmark runs.
//!
//! Data flows one way: [`spec`] (YAML → validated pipeline) → [`plan`] (grid →
//! steps with keys) → [`cache`] (content-addressed store) → [`exec`]
//! (scheduler; [`envs`] hold each benchmark's episode logic) → [`metrics`]
//! (polars) → [`report`]. No module imports one above it. [`exhibit`] (tables and figures
//! as plain data) and [`sandbox`] sit beside the flow and are used by it; [`text`] (making
//! outside text safe to print) is below everything.

pub mod cache;
pub mod envs;
pub mod exec;
pub mod exhibit;
pub mod export;
#[cfg(test)]
pub(crate) mod guard;
pub mod metrics;
pub mod plan;
pub mod platform;
pub mod providers;
pub mod report;
pub mod sandbox;
pub mod serve;
pub mod spec;
pub mod text;
