//! `qa`: your own tasks, declared in files. A task is a JSONL, CSV or Parquet dataset, a
//! prompt template (minijinja) and scorers named and behaving like Inspect AI's built-ins
//! (`match`, `includes`, `exact`, `f1`, `pattern`, `answer`, `choice`, `judge`). A cell is
//! one model × task × seed; each item is its own cached call, keyed by its own content, so
//! editing one row re-asks (or only rescores) that row. Documented in `docs/tasks.md`.

pub mod config;
pub mod dataset;
pub mod episode;
pub mod evalyaml;
pub mod image;
pub mod inspect;
pub mod item;
pub mod judge;
pub mod lm_eval;
mod parquet;
pub mod prompt;
pub mod reducers;
pub mod score;
pub mod task;

use std::path::Path;

use serde_json::{Value, json};

use super::benchmark::{Benchmark, SectionInput};
use super::metric::{Agg, MetricDef, Unit, UnitMetric};
use crate::exec::{BoxFuture, CallSite, EpisodeContext, StepError};
use crate::exhibit::Section;
use crate::providers::ChatRequest;
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

pub use task::NAME;

/// The benchmark as the registry sees it.
pub struct Qa;

/// The scorers of the tasks of one suite, in first-seen order, deduplicated by name.
fn columns(tasks: &[&TaskInstance]) -> Vec<config::Scorer> {
    let mut out: Vec<config::Scorer> = Vec::new();
    for t in tasks {
        for s in score::scorers(t).unwrap_or_default() {
            if !out.iter().any(|o| o.name == s.name) {
                out.push(s);
            }
        }
    }
    out
}

/// A mean for the cells table: three decimals, trailing zeros dropped.
fn short(v: f64) -> String {
    let text = format!("{v:.3}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

impl Benchmark for Qa {
    fn name(&self) -> &'static str {
        NAME
    }

    fn resolve_tasks(&self, data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        self.resolve_tasks_in(data_dir, Path::new("."), select, params)
    }

    /// Every `judge` scorer's model (entries that do not parse are the task's own error); with
    /// `eval_yaml`, the entry's `judge:` (the model its `model_graded_*` scorers use).
    fn helpers(&self, params: &Params) -> Vec<crate::spec::Helper> {
        if params.contains_key("eval_yaml") {
            let judge = params.get("judge").and_then(Value::as_object).and_then(|m| judge::judge_model(m).ok());
            return judge.map(|model| crate::spec::Helper { model, param: "judge", for_builtin: true, site: "judge" }).into_iter().collect();
        }
        let scorers = params.get("scorers").and_then(Value::as_array).into_iter().flatten();
        scorers
            // As written (`{judge: {model}}`), or as resolved (`{name, kind: {judge: {model}}}`).
            .filter_map(|s| s.get("judge").or_else(|| s.get("kind")?.get("judge"))?.get("model")?.as_object())
            .filter_map(|m| judge::judge_model(m).ok())
            .map(|model| crate::spec::Helper { model, param: "scorers", for_builtin: true, site: "judge" })
            .collect()
    }

    fn resolve_tasks_in(&self, _data_dir: &Path, base_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        let task = task::load(base_dir, params)?;
        if let Selection::Names(names) = select {
            for (i, n) in names.iter().enumerate() {
                if *n != task.task {
                    return Err(vec![CatalogIssue {
                        site: IssueSite::Selected(i),
                        message: format!("this qa entry declares one task, `{}`, not `{n}`", task.task),
                        hint: Some("leave `select:` out; name the task with `params.name`".into()),
                    }]);
                }
            }
        }
        Ok(vec![task])
    }

    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        if !episode::AGENTS.contains(&agent) {
            return Err(vec![CatalogIssue {
                site: IssueSite::Entry,
                message: format!("built-in agent `{agent}` cannot answer qa tasks"),
                hint: Some(format!("qa has the built-in agents {}", episode::AGENTS.join(", "))),
            }]);
        }
        let allowed: &[&str] = if agent == "random" { &["salt"] } else { &[] };
        let mut issues = Vec::new();
        for name in params.keys().filter(|k| !allowed.contains(&k.as_str())) {
            issues.push(CatalogIssue {
                site: IssueSite::Param(name.clone()),
                message: format!("built-in agent `{agent}` has no parameter `{name}`"),
                hint: suggestion(name, allowed),
            });
        }
        if agent == "random" && params.get("salt").is_some_and(|s| s.as_u64().is_none()) {
            issues.push(CatalogIssue { site: IssueSite::Param("salt".into()), message: "`salt` must be a non-negative integer".into(), hint: None });
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(if agent == "random" { [("salt".to_owned(), json!(params.get("salt").and_then(Value::as_u64).unwrap_or(0)))].into() } else { Params::new() })
    }

    fn metrics(&self) -> Vec<MetricDef> {
        Vec::new()
    }

    fn metrics_for(&self, tasks: &[&TaskInstance]) -> Vec<MetricDef> {
        columns(tasks).iter().map(|s| MetricDef { name: s.name.clone(), agg: Agg::Ratio(format!("{}_sum", s.name), format!("{}_n", s.name)) }).collect()
    }

    fn unit_metrics_for(&self, tasks: &[&TaskInstance]) -> Vec<UnitMetric> {
        columns(tasks).iter().map(|s| UnitMetric::new(&s.name, &s.name, &s.name, s.binary())).collect()
    }

    fn cell_headline(&self, score: &Value) -> Option<String> {
        let names = score.get("scorers")?.as_array()?;
        let shown: Vec<String> = names
            .iter()
            .filter_map(Value::as_str)
            .map(|n| match score.get(n).and_then(Value::as_f64) {
                Some(v) => format!("{n} {}", short(v)),
                None => format!("{n} –"),
            })
            .collect();
        (!shown.is_empty()).then(|| shown.join(" · "))
    }

    fn ungraded(&self, task: &TaskInstance, score: &Value) -> Vec<(String, u64, u64)> {
        let replies = score.get("n").and_then(Value::as_u64).unwrap_or(0);
        score::scorers(task)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| matches!(s.kind, config::ScorerKind::Judge(_)))
            .map(|s| {
                let graded = score.get(format!("{}_n", s.name)).and_then(Value::as_u64).unwrap_or(0);
                (s.name, replies.saturating_sub(graded), replies)
            })
            .collect()
    }

    fn units_for(&self, score: &Value, metrics: &[UnitMetric]) -> Vec<Unit> {
        let Some(items) = score.get("items").and_then(Value::as_array) else { return Vec::new() };
        items
            .iter()
            .map(|row| Unit {
                item: row.get("index").and_then(Value::as_u64).unwrap_or(0),
                id: row.get("id").and_then(Value::as_str).map(str::to_owned),
                values: metrics.iter().map(|m| super::metric::number(row.get("scores").and_then(|s| s.get(&m.name)))).collect(),
            })
            .collect()
    }

    fn unit_answers(&self, score: &Value) -> Vec<Option<String>> {
        let Some(items) = score.get("items").and_then(Value::as_array) else { return Vec::new() };
        items.iter().map(|row| row.get("line").and_then(Value::as_str).map(str::to_owned)).collect()
    }

    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        _data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(episode::run_episode(ctx, model, task, seed))
    }

    fn planned_helper_calls(
        &self,
        model: &ModelConfig,
        task: &TaskInstance,
        seed: u64,
        answered: &dyn Fn(&ChatRequest, &CallSite) -> Option<String>,
    ) -> Vec<super::benchmark::HelperCall> {
        episode::planned_gradings(model, task, seed, answered).unwrap_or_default()
    }

    fn cannot_serve(&self, task: &TaskInstance, model: &ModelConfig) -> Option<String> {
        let loaded = task::get(task).ok()?;
        if model.is_builtin() || !loaded.config.asks_logprobs() {
            return None;
        }
        if model.stream == crate::providers::StreamMode::On {
            // A streamed answer is folded back without its log-probabilities.
            return Some("its scorers read next-token log-probabilities, which evalgrid does not read from streamed answers: set `stream: auto` (a one-token call does not stream) or `false`".into());
        }
        if loaded.config.asks_loglikelihood() {
            if model.serve.as_ref().is_some_and(|serve| serve.engine == crate::spec::serve::Engine::LlamaCpp) {
                return Some("its scorers use `method: loglikelihood`, which needs the prompt's own token log-probabilities, and llama.cpp's server does not echo them (ggml-org/llama.cpp#27174): serve this checkpoint with `engine: vllm`, or score with `method: logprobs` (the next token)".into());
            }
            let ask = ChatRequest { params: crate::providers::logprobs::loglikelihood_params(), ..ChatRequest::default() };
            let scores = crate::providers::route::endpoint(model, &ask).is_ok_and(|e| e.kind.protocol().scores_prompts());
            return (!scores).then(|| {
                format!(
                    "its scorers use `method: loglikelihood`, which needs the prompt's own token log-probabilities from an OpenAI-compatible `/v1/completions` with `echo` (`provider: openai` at vLLM, SGLang or llama-cpp-python); provider `{}` gives none",
                    model.provider
                )
            });
        }
        let Ok(endpoint) = crate::providers::route::endpoint(model, &ChatRequest::default()) else {
            return Some(format!("provider `{}` gives no log-probabilities", model.provider));
        };
        endpoint.kind.protocol().next_token_params().is_none().then(|| {
            format!(
                "its scorers read next-token log-probabilities, which evalgrid cannot get from the `{}` protocol (Chat Completions servers give them: OpenAI, vLLM, llama.cpp's llama-server, and Gemini does; Anthropic gives none)",
                endpoint.kind
            )
        })
    }

    fn planned_calls(&self, _data_dir: &Path, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        episode::planned_calls(model, task, seed).ok()
    }

    fn score(&self, _data_dir: &Path, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        score::score(task, episode)
    }

    fn exchanges(&self, _data_dir: &Path, task: &TaskInstance, episode: &Value, _seed: u64) -> Vec<crate::envs::Exchange> {
        episode::exchanges(task, episode)
    }

    fn transcript(&self, episode: &Value) -> String {
        let mut out = String::new();
        for a in episode.get("answers").and_then(Value::as_array).into_iter().flatten() {
            let label = a.get("id").and_then(Value::as_str).map_or_else(|| a.get("index").map(ToString::to_string).unwrap_or_default(), str::to_owned);
            let text = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            out.push_str(&format!(
                "## item {label}\n\nQ: {}\n\nA: {}\n\ntarget: {}\n",
                text("input"),
                text("answer"),
                a.get("targets").map(ToString::to_string).unwrap_or_default()
            ));
            for (judge, reply) in a.get("judged").and_then(Value::as_object).into_iter().flatten() {
                out.push_str(&format!("\n{judge}: {}\n", reply.as_str().unwrap_or_default()));
            }
            out.push('\n');
        }
        out
    }

    fn sections(&self, input: &SectionInput<'_>) -> Result<Vec<Section>, StepError> {
        Ok(reducers::sections(input))
    }

    fn explain(&self, task: &TaskInstance, previous: &Value) -> Vec<String> {
        task::get(task).map(|t| task::changed_rows(&t, previous)).unwrap_or_default()
    }
}
