//! Reports: the metrics and report steps, rendered to `reports/<pipeline>/`.

pub mod build;
pub mod render;

pub use build::{ReportError, ReportOutcome, build};
pub use render::{ModelUsage, RunFacts, csv, markdown};
