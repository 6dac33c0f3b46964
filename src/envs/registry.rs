//! The benchmarks evalgrid knows: one list of [`Benchmark`] trait objects, exposed to the
//! spec layer as a [`Catalog`] and to the scheduler as an [`EpisodeRunner`]. Adding a
//! benchmark = one folder under `envs/` plus one line in [`ALL`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::benchmark::Benchmark;
use super::metric::MetricDef;
use crate::exec::{BoxFuture, CallSite, EpisodeContext, EpisodeRunner, StepError};
use crate::providers::ChatRequest;
use crate::spec::{Catalog, CatalogIssue, IssueSite, ModelConfig, Params, Provider, Selection, TaskInstance};

/// Every benchmark, in listing order: the one place they are named.
pub static ALL: &[&dyn Benchmark] = &[
    &super::eleusis::benchmark::Eleusis,
    &super::bbeh::benchmark::Bbeh,
    &super::bbq::benchmark::Bbq,
    &super::weirdml::benchmark::WeirdMl,
    &super::guess::Guess,
    &super::qa::Qa,
    &super::harbor::Harbor,
];

/// The helper models a cell of `model` on `task` calls (a `qa` judge, the Eleusis rule
/// compiler), each priced at `prices` (the pipeline's helper prices) where its own entry
/// is not (a task's resolved params hold no price).
#[must_use]
pub fn cell_helpers(model: &ModelConfig, task: &TaskInstance, prices: &std::collections::BTreeMap<String, crate::spec::Price>) -> Vec<crate::spec::Helper> {
    let Some(benchmark) = get(&task.benchmark) else { return Vec::new() };
    let mut helpers = benchmark.helpers(&task.params);
    helpers.retain(|h| h.for_builtin || !model.provider.is_builtin());
    for h in &mut helpers {
        h.model.price = h.model.price.or_else(|| prices.get(&h.model.id).copied());
    }
    helpers
}

/// The helper calls a cell of `model` on `task` will make (`run --dry-run`): a `qa`
/// judge's gradings, exact where `answered` knows the answer they grade.
#[must_use]
pub fn planned_helper_calls(
    model: &ModelConfig,
    task: &TaskInstance,
    seed: u64,
    answered: &dyn Fn(&ChatRequest, &CallSite) -> Option<String>,
) -> Vec<super::benchmark::HelperCall> {
    get(&task.benchmark).map(|b| b.planned_helper_calls(model, task, seed, answered)).unwrap_or_default()
}

/// The benchmark called `name`.
#[must_use]
pub fn get(name: &str) -> Option<&'static dyn Benchmark> {
    ALL.iter().copied().find(|b| b.name() == name)
}

/// Names of the benchmarks, for listings.
#[must_use]
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|b| b.name()).collect()
}

/// Model providers a pipeline may name.
pub const PROVIDERS: &[Provider] = &Provider::ALL;

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
    /// needs the sandbox).
    #[must_use]
    pub fn runs_model_code(benchmark: &str, model: &ModelConfig) -> bool {
        get(benchmark).is_some_and(|b| b.runs_model_code(model))
    }

    /// The resource a cell of `benchmark` played by `model` needs most: `gpu` for
    /// benchmarks that want one and for models served on GPUs, `cpu` for models served on
    /// the CPU, `api` for models called over HTTP, else `cpu`.
    #[must_use]
    pub fn resource_class(benchmark: &str, model: &ModelConfig) -> crate::plan::ResourceClass {
        use crate::plan::ResourceClass;
        if get(benchmark).is_some_and(|b| b.uses_gpu()) || model.serve.as_ref().is_some_and(|s| s.gpus > 0) {
            ResourceClass::Gpu
        } else if model.serve.is_some() {
            // A server on the CPU (llama.cpp) does the model's work on the job's own cores.
            ResourceClass::Cpu
        } else if model.provider.over_http() {
            ResourceClass::Api
        } else {
            ResourceClass::Cpu
        }
    }

    /// Parameters `benchmark` adds to `model`'s own, as `key: value` texts.
    #[must_use]
    pub fn injected_params(benchmark: &str, model: &ModelConfig) -> Vec<String> {
        get(benchmark).map(|b| b.injected_params(model)).unwrap_or_default().into_iter().map(|(k, v)| format!("{k}: {v}")).collect()
    }

    /// Table columns of a benchmark.
    #[must_use]
    pub fn metric_defs(benchmark: &str) -> Vec<MetricDef> {
        get(benchmark).map(|b| b.metrics()).unwrap_or_default()
    }

    /// Table columns of a suite of `benchmark` made of `tasks` (a benchmark's tasks may
    /// declare their own columns).
    #[must_use]
    pub fn metric_defs_for(benchmark: &str, tasks: &[&TaskInstance]) -> Vec<MetricDef> {
        get(benchmark).map(|b| b.metrics_for(tasks)).unwrap_or_default()
    }
}

impl Catalog for Registry {
    fn benchmarks(&self) -> Vec<&'static str> {
        names()
    }

    fn metrics(&self, benchmark: &str) -> Vec<String> {
        Self::metric_defs(benchmark).into_iter().map(|m| m.name).collect()
    }

    fn providers(&self) -> Vec<Provider> {
        PROVIDERS.to_vec()
    }

    fn resolve_tasks(&self, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        self.resolve_tasks_in(Path::new("."), benchmark, select, params)
    }

    fn resolve_tasks_in(&self, base_dir: &Path, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        match get(benchmark) {
            Some(b) => b.resolve_tasks_in(&self.data_dir, base_dir, select, params),
            None => Err(vec![CatalogIssue { site: IssueSite::Entry, message: format!("unknown benchmark `{benchmark}`"), hint: None }]),
        }
    }

    fn helpers(&self, benchmark: &str, params: &Params) -> Vec<crate::spec::Helper> {
        get(benchmark).map(|b| b.helpers(params)).unwrap_or_default()
    }

    fn cannot_serve(&self, task: &TaskInstance, model: &ModelConfig) -> Option<String> {
        get(&task.benchmark)?.cannot_serve(task, model)
    }

    fn resolve_builtin(&self, agent: &str, params: &Params, benchmarks: &[String]) -> Result<Params, Vec<CatalogIssue>> {
        let mut resolved = None;
        for name in benchmarks {
            let Some(b) = get(name) else { continue };
            resolved = Some(b.resolve_builtin(agent, params).map_err(|mut issues| {
                for i in &mut issues {
                    i.message = format!("{} (benchmark `{name}`)", i.message);
                }
                issues
            })?);
        }
        Ok(resolved.unwrap_or_else(|| params.clone()))
    }
}

impl EpisodeRunner for Registry {
    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>> {
        match get(&task.benchmark) {
            Some(b) => b.run_episode(ctx, &self.data_dir, model, task, seed),
            None => Box::pin(async move { Err(StepError::Unsupported(format!("benchmark `{}` has no episode runner", task.benchmark))) }),
        }
    }

    fn planned_calls(&self, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        if model.is_builtin() {
            // Built-in agents never call a model.
            return Some(Vec::new());
        }
        get(&task.benchmark)?.planned_calls(&self.data_dir, model, task, seed)
    }

    fn waits_on_models(&self, model: &ModelConfig, task: &TaskInstance) -> bool {
        !model.is_builtin() && get(&task.benchmark).is_some_and(|b| !b.runs_model_code(model))
    }

    fn score(&self, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        match get(&task.benchmark) {
            Some(b) => b.score(&self.data_dir, task, episode),
            None => Err(StepError::Unsupported(format!("benchmark `{}` has no scorer", task.benchmark))),
        }
    }
}

/// Human-readable transcript of an episode record of `benchmark`.
#[must_use]
pub fn transcript(benchmark: &str, episode: &Value) -> String {
    match get(benchmark) {
        Some(b) => b.transcript(episode),
        None => serde_json::to_string_pretty(episode).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside `src/envs/` and `src/cli/`, no code names a benchmark (issue 15): plan,
    /// exec, metrics and report only see `&dyn Benchmark`. Comments and test code may.
    #[test]
    fn no_layer_outside_envs_and_cli_names_a_benchmark() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        for line in crate::guard::production_lines(&src, &["envs", "cli"]) {
            // The one benchmark-named setting of the pipeline file (`report.weirdml`, issue 25)
            // is checked against the pipeline's tasks where it is parsed.
            if line.file == "spec/resolve.rs" && line.text.contains("any(|b| b == \"weirdml\")") {
                continue;
            }
            for b in ALL {
                let quoted = format!("\"{}", b.name());
                let path_use = format!("envs::{}", b.name());
                if line.text.contains(&quoted) || line.text.contains(&path_use) {
                    offenders.push(format!("src/{line}"));
                }
            }
        }
        assert!(offenders.is_empty(), "benchmark names outside envs/ and cli/:\n{}", offenders.join("\n"));
    }

    /// What a benchmark adds to a model's parameters is said, never silent (issue 13).
    #[test]
    fn injected_parameters_are_reported_per_benchmark_and_model() {
        let model = |name: &str, params: &[(&str, serde_json::Value)]| ModelConfig {
            id: "m".into(),
            provider: Provider::OpenAi,
            model: name.into(),
            base_url: None,
            api_key_env: None,
            params: params.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
            price: None,
            accept_other_model: false,
            headers: std::collections::BTreeMap::new(),
            api: crate::providers::OpenAiApi::default(),
            background: crate::providers::Background::default(),
            stream: crate::providers::StreamMode::Auto,
            batch: None,
            serve: None,
            agent: None,
        };
        assert_eq!(Registry::injected_params("bbq", &model("gpt-5-mini", &[])), vec!["reasoning_effort: \"medium\"".to_owned()]);
        assert!(
            Registry::injected_params("bbq", &model("gpt-5-mini", &[("reasoning_effort", serde_json::json!("high"))])).is_empty(),
            "the user's own setting is kept"
        );
        assert!(Registry::injected_params("bbq", &model("gpt-4.1", &[])).is_empty());
        assert!(Registry::injected_params("bbeh", &model("gpt-5-mini", &[])).is_empty());
    }

    /// A benchmark's tools are one command named after it that clap accepts: the CLI adds
    /// it as `evalgrid <name>` and finds the benchmark again by that name.
    #[test]
    fn tool_commands_are_named_after_their_benchmark_and_well_formed() {
        let mut with_tools = Vec::new();
        for b in ALL {
            match b.tools() {
                Some(cmd) => {
                    assert_eq!(cmd.get_name(), b.name());
                    cmd.debug_assert();
                    with_tools.push(b.name());
                }
                None => {
                    let matches = clap::Command::new(b.name()).get_matches_from([b.name()]);
                    let ctx = crate::envs::ToolContext { data_dir: Path::new("data") };
                    assert!(matches!(b.run_tool(&matches, &ctx), Err(crate::envs::ToolError::Invalid(_))), "{}", b.name());
                }
            }
        }
        assert_eq!(with_tools, ["eleusis", "bbeh", "bbq", "weirdml"]);
    }

    #[test]
    fn every_benchmark_is_listed_once_and_found_by_name() {
        let names = names();
        for name in &names {
            assert_eq!(get(name).map(|b| b.name()), Some(*name));
            assert_eq!(names.iter().filter(|n| *n == name).count(), 1, "{name} listed twice");
        }
        assert!(get("no-such-benchmark").is_none());
    }
}
