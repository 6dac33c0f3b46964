//! Planning: a validated pipeline becomes cells and steps with keys.

pub mod canonical;
pub mod filter;
pub mod grid;
pub mod key;
pub mod shard;
pub mod template;

pub use filter::{FilterError, parse_filter};
pub use grid::{Cell, Plan, episode_components, metrics_components, plan, report_components, score_components};
pub use key::{KEY_SCHEMA_VERSION, StepKey, StepKind};
pub use shard::{ResourceClass, Shard, shard_of};
