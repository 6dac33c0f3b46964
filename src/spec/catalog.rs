//! What the spec layer needs to know about benchmarks and agents.
//!
//! The spec layer sits below the benchmarks, so it cannot import them;
//! instead the caller passes a [`Catalog`] (implemented by `envs`) that
//! resolves task selections and built-in agents.

use super::pipeline::{ModelConfig, Params, TaskInstance};

/// A model a task calls besides the contestant (a `qa` judge, the Eleusis rule compiler):
/// it is paid like one, so a budget, the estimate and the cost table must count it.
#[derive(Clone, Debug)]
pub struct Helper {
    /// Its entry as a model (`id`: the id its calls are counted under; `price`: as written).
    pub model: ModelConfig,
    /// The task parameter it is written in, for a located error.
    pub param: &'static str,
    /// Whether a cell of a built-in agent calls it too (a judge grades every answer; the
    /// rule compiler only compiles an API player's guesses).
    pub for_builtin: bool,
    /// How its calls' positions begin (a call site's `position`): its cached calls are
    /// told from the contestant's by it, to price them at its own price.
    pub site: &'static str,
}

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
    /// The n-th element of a list parameter (one scorer of `scorers`).
    ParamItem(String, usize),
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

    /// The helper models the tasks of one entry call, read from its `params` (as written, or
    /// as resolved into a task's params); none by default.
    fn helpers(&self, benchmark: &str, params: &Params) -> Vec<Helper> {
        let _ = (benchmark, params);
        Vec::new()
    }

    /// Why `model` cannot play `task` (its endpoint lacks what the task's scorers need);
    /// `None` by default.
    fn cannot_serve(&self, task: &super::TaskInstance, model: &super::ModelConfig) -> Option<String> {
        let _ = (task, model);
        None
    }

    /// Validates a built-in agent for the given benchmarks and returns its
    /// parameters with defaults applied.
    fn resolve_builtin(&self, agent: &str, params: &Params, benchmarks: &[String]) -> Result<Params, Vec<CatalogIssue>>;
}
