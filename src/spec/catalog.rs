//! What the spec layer needs to know about benchmarks and agents.
//!
//! The spec layer sits below the benchmarks, so it cannot import them;
//! instead the caller passes a [`Catalog`] (implemented by `envs`) that
//! resolves task selections and built-in agents.

use super::pipeline::{Params, TaskInstance};

/// Which tasks of a benchmark a `tasks:` entry selects.
#[derive(Clone, Debug)]
pub enum Selection {
    /// Every task of the benchmark.
    All,
    /// Named tasks, in the order given.
    Names(Vec<String>),
}

/// Where inside a `tasks:` or `models:` entry a catalog problem lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IssueSite {
    /// The entry as a whole.
    Entry,
    /// The n-th name in `select:`.
    Selected(usize),
    /// A parameter, by name.
    Param(String),
}

/// A problem found by the catalog, located relative to its entry.
#[derive(Clone, Debug)]
pub struct CatalogIssue {
    /// Where in the entry.
    pub site: IssueSite,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

/// Knowledge of benchmarks and built-in agents, provided by a higher layer.
pub trait Catalog {
    /// Names of the benchmarks that can appear in `tasks:`.
    fn benchmarks(&self) -> Vec<&'static str>;

    /// Metric names a benchmark's scores support (for `metrics.select`).
    fn metrics(&self, benchmark: &str) -> Vec<String>;

    /// Model providers that can appear in `models:`.
    fn providers(&self) -> Vec<super::Provider>;

    /// Resolves a selection of one benchmark into task instances with
    /// parameters validated and defaults applied.
    fn resolve_tasks(&self, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>>;

    /// [`Self::resolve_tasks`] for an entry of a pipeline file in `base_dir` (tasks that
    /// name files read them relative to the pipeline); by default the same.
    fn resolve_tasks_in(
        &self,
        base_dir: &std::path::Path,
        benchmark: &str,
        select: &Selection,
        params: &Params,
    ) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        let _ = base_dir;
        self.resolve_tasks(benchmark, select, params)
    }

    /// Validates a built-in agent for the given benchmarks and returns its
    /// parameters with defaults applied.
    fn resolve_builtin(&self, agent: &str, params: &Params, benchmarks: &[String]) -> Result<Params, Vec<CatalogIssue>>;
}
