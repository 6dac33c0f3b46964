//! Reports: the metrics and report steps, rendered to `reports/<pipeline>/`.

pub mod build;
pub mod diff;
pub mod diff_page;
pub mod early;
pub mod escape;
pub mod html;
pub mod items;
pub mod items_page;
pub mod page;
pub mod partial;
pub mod render;
pub mod svg;

pub use build::{ReportError, ReportOutcome, build, build_after, comparisons};
pub use render::{ModelUsage, RunFacts, Section, csv, latex, markdown};
