//! The set of benchmarks evalgrid knows, as a spec [`Catalog`] and an exec
//! [`EpisodeRunner`]. Adding a benchmark = one folder under `envs/` plus a
//! few match arms here.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::bbeh::benchmark as bbeh;
use super::bbq::benchmark as bbq;
use super::eleusis::benchmark as eleusis;
use super::weirdml::benchmark as weirdml;
use super::metric::MetricDef;
use crate::exec::{BoxFuture, CallSite, EpisodeContext, EpisodeRunner, StepError, on_cpu};
use crate::providers::ChatRequest;
use crate::spec::resolve::BUILTIN_PROVIDER;
use crate::spec::{Catalog, CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Names of the benchmarks, for listings.
pub const BENCHMARKS: &[&str] = &[eleusis::NAME, bbeh::NAME, bbq::NAME, weirdml::NAME];

/// Model providers a pipeline may name.
pub const PROVIDERS: &[&str] = &[BUILTIN_PROVIDER, "openai", "anthropic", "gemini", crate::spec::resolve::SCRIPTED_PROVIDER];

/// Every benchmark evalgrid can run, with where installed datasets live.
#[derive(Clone, Debug)]
pub struct Registry {
    data_dir: PathBuf,
}

impl Registry {
    /// A registry reading installed datasets from `data_dir`.
    #[must_use]
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self { data_dir: data_dir.into() }
    }

    /// Where datasets are installed.
    #[must_use]
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Whether a cell of `benchmark` played by `model` runs model-written code (and so
    /// needs the sandbox): WeirdML always, Eleusis and BBQ-Bench with API players.
    #[must_use]
    pub fn runs_model_code(benchmark: &str, model: &ModelConfig) -> bool {
        match benchmark {
            weirdml::NAME => true,
            eleusis::NAME | bbq::NAME => model.provider != BUILTIN_PROVIDER,
            _ => false,
        }
    }

    /// Table columns of a benchmark.
    #[must_use]
    pub fn metric_defs(benchmark: &str) -> Vec<MetricDef> {
        match benchmark {
            eleusis::NAME => eleusis::metrics(),
            bbeh::NAME => bbeh::metrics(),
            bbq::NAME => bbq::metrics(),
            weirdml::NAME => weirdml::metrics(),
            _ => Vec::new(),
        }
    }
}

impl Catalog for Registry {
    fn benchmarks(&self) -> Vec<&'static str> {
        BENCHMARKS.to_vec()
    }

    fn metrics(&self, benchmark: &str) -> Vec<String> {
        Self::metric_defs(benchmark).into_iter().map(|m| m.name).collect()
    }

    fn providers(&self) -> Vec<&'static str> {
        PROVIDERS.to_vec()
    }

    fn resolve_tasks(&self, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        match benchmark {
            eleusis::NAME => eleusis::resolve_tasks(select, params),
            bbeh::NAME => bbeh::resolve_tasks(&self.data_dir, select, params),
            bbq::NAME => bbq::resolve_tasks(select, params),
            weirdml::NAME => weirdml::resolve_tasks(&self.data_dir, select, params),
            other => Err(vec![CatalogIssue { site: IssueSite::Entry, message: format!("unknown benchmark `{other}`"), hint: None }]),
        }
    }

    fn resolve_builtin(&self, agent: &str, params: &Params, benchmarks: &[String]) -> Result<Params, Vec<CatalogIssue>> {
        let mut resolved = None;
        for b in benchmarks {
            let r = match b.as_str() {
                eleusis::NAME => eleusis::resolve_builtin(agent, params),
                bbeh::NAME => bbeh::resolve_builtin(agent, params),
                bbq::NAME => bbq::resolve_builtin(agent, params),
                weirdml::NAME => weirdml::resolve_builtin(agent, params),
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
    fn run_episode<'a>(&'a self, ctx: EpisodeContext<'a>, model: &'a ModelConfig, task: &'a TaskInstance, seed: u64) -> BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(async move {
            match task.benchmark.as_str() {
                eleusis::NAME if model.provider != BUILTIN_PROVIDER => super::eleusis::llm_episode::run_task(ctx, model, task, seed).await,
                eleusis::NAME => {
                    let (model, task) = (model.clone(), task.clone());
                    on_cpu(move || eleusis::run_episode(&model, &task, seed)).await?
                }
                bbeh::NAME => bbeh::run_episode(ctx, &self.data_dir, model, task, seed).await,
                bbq::NAME if model.provider != BUILTIN_PROVIDER => super::bbq::llm_episode::run(ctx, model, task, seed).await,
                bbq::NAME => {
                    let (model, task) = (model.clone(), task.clone());
                    on_cpu(move || bbq::run_episode(&model, &task, seed)).await?
                }
                weirdml::NAME => weirdml::run_episode(ctx, &self.data_dir, model, task, seed).await,
                other => Err(StepError::Unsupported(format!("benchmark `{other}` has no episode runner"))),
            }
        })
    }

    fn planned_calls(&self, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        if model.provider == BUILTIN_PROVIDER {
            return Some(Vec::new());
        }
        match task.benchmark.as_str() {
            bbeh::NAME => bbeh::planned_calls(&self.data_dir, model, task, seed).ok(),
            _ => None,
        }
    }

    fn score(&self, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        match task.benchmark.as_str() {
            eleusis::NAME => eleusis::score(episode),
            bbeh::NAME => bbeh::score(&self.data_dir, task, episode),
            bbq::NAME => bbq::score(episode),
            weirdml::NAME => weirdml::score(episode),
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
