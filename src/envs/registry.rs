//! The set of benchmarks evalgrid knows, as a spec [`Catalog`] and an exec
//! [`EpisodeRunner`]. Adding a benchmark = one folder under `envs/` plus a
//! few match arms here.

use serde_json::Value;

use super::eleusis::benchmark as eleusis;
use crate::exec::{BoxFuture, EpisodeRunner, StepError, on_cpu};
use crate::spec::resolve::BUILTIN_PROVIDER;
use crate::spec::{Catalog, CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Every benchmark evalgrid can run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Registry;

/// Names of the benchmarks, for listings.
pub const BENCHMARKS: &[&str] = &[eleusis::NAME];

impl Registry {
    /// Metric columns of a benchmark: (column, score field).
    #[must_use]
    pub fn metric_columns(&self, benchmark: &str) -> &'static [(&'static str, &'static str)] {
        match benchmark {
            eleusis::NAME => eleusis::METRICS,
            _ => &[],
        }
    }
}

impl Catalog for Registry {
    fn benchmarks(&self) -> Vec<&'static str> {
        BENCHMARKS.to_vec()
    }

    fn metrics(&self, benchmark: &str) -> Vec<&'static str> {
        self.metric_columns(benchmark).iter().map(|(name, _)| *name).collect()
    }

    fn providers(&self) -> Vec<&'static str> {
        vec![BUILTIN_PROVIDER]
    }

    fn resolve_tasks(&self, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        match benchmark {
            eleusis::NAME => eleusis::resolve_tasks(select, params),
            other => Err(vec![CatalogIssue { site: IssueSite::Entry, message: format!("unknown benchmark `{other}`"), hint: None }]),
        }
    }

    fn resolve_builtin(&self, agent: &str, params: &Params, benchmarks: &[String]) -> Result<Params, Vec<CatalogIssue>> {
        let mut resolved = None;
        for b in benchmarks {
            let r = match b.as_str() {
                eleusis::NAME => eleusis::resolve_builtin(agent, params),
                _ => continue,
            };
            resolved = Some(r.map_err(|mut issues| {
                for i in &mut issues {
                    i.message = format!("{} (benchmark `{b}`)", i.message);
                }
                issues
            })?);
        }
        Ok(resolved.unwrap_or_else(|| params.clone()))
    }
}

impl EpisodeRunner for Registry {
    fn run_episode<'a>(&'a self, model: &'a ModelConfig, task: &'a TaskInstance, seed: u64) -> BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(async move {
            match task.benchmark.as_str() {
                eleusis::NAME => {
                    let (model, task) = (model.clone(), task.clone());
                    on_cpu(move || eleusis::run_episode(&model, &task, seed)).await?
                }
                other => Err(StepError::Unsupported(format!("benchmark `{other}` has no episode runner"))),
            }
        })
    }

    fn score(&self, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        match task.benchmark.as_str() {
            eleusis::NAME => eleusis::score(episode),
            other => Err(StepError::Unsupported(format!("benchmark `{other}` has no scorer"))),
        }
    }
}

/// Human-readable transcript of an episode record of `benchmark`.
#[must_use]
pub fn transcript(benchmark: &str, episode: &Value) -> String {
    match benchmark {
        eleusis::NAME => eleusis::transcript(episode),
        _ => serde_json::to_string_pretty(episode).unwrap_or_default(),
    }
}
