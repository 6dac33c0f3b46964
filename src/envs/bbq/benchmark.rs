//! BBQ-Bench as an evalgrid benchmark: one cell = one model × function ×
//! seed; the episode plays the query/scratchpad/prediction rounds and the
//! score records whether, when and after how many queries it was solved.

use serde_json::{Value, json};

use super::agents::{RandomAgent, play};
use super::episode::Episode;
use super::record::EpisodeRecord;
use super::solver::SolverAgent;
use super::task::{Family, TaskId, TaskParams};
use crate::envs::metric::{Agg, MetricDef};
use crate::exec::StepError;
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Benchmark name in pipelines.
pub const NAME: &str = "bbq";
/// Bump when episodes (generator, protocol, built-in agents) change.
pub const EPISODE_VERSION: u32 = 2;
/// Bump when the score record changes.
pub const SCORE_VERSION: u32 = 1;
/// Built-in agents.
pub const BUILTIN_AGENTS: &[&str] = &["random", "solver"];
/// Budget fractions at which the solved-fraction curve is tabulated.
const CURVE: &[(&str, f64)] = &[("solved_by_10pct", 0.10), ("solved_by_25pct", 0.25), ("solved_by_50pct", 0.50), ("solved_by_75pct", 0.75)];

/// Table columns: solve rate with its 95 % interval, numeric and string
/// sub-scores, queries used, and the solved-vs-budget curve.
#[must_use]
pub fn metrics() -> Vec<MetricDef> {
    let ratio = |name: &str, agg: fn(String, String) -> Agg, num: &str, den: &str| MetricDef { name: name.into(), agg: agg(num.into(), den.into()) };
    let mut m = vec![
        ratio("solve_rate", Agg::Ratio, "solved", "one"),
        ratio("ci_low", Agg::WilsonLow, "solved", "one"),
        ratio("ci_high", Agg::WilsonHigh, "solved", "one"),
        ratio("numeric_score", Agg::Ratio, "solved_numeric", "numeric"),
        ratio("string_score", Agg::Ratio, "solved_string", "string"),
        MetricDef::mean("mean_queries_used", "queries_used"),
    ];
    m.extend(CURVE.iter().map(|(name, _)| MetricDef::mean(name, name)));
    m
}

fn task_id(name: &str) -> Option<TaskId> {
    name.parse().ok()
}

/// Resolves `select:` (function ids or `all`) and `params:` (the spec's
/// evalgrid defaults, each overridable and part of the key).
pub fn resolve_tasks(select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
    let mut issues = Vec::new();
    let object: serde_json::Map<String, Value> = params.clone().into_iter().collect();
    let task_params: TaskParams = match serde_json::from_value(Value::Object(object)) {
        Ok(p) => p,
        Err(e) => {
            let known: Vec<String> =
                serde_json::to_value(TaskParams::default()).ok().and_then(|v| v.as_object().map(|o| o.keys().cloned().collect())).unwrap_or_default();
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            let name = params.keys().find(|k| !known.contains(&k.as_str())).cloned();
            issues.push(CatalogIssue {
                site: name.clone().map_or(IssueSite::Entry, IssueSite::Param),
                message: format!("invalid BBQ-Bench parameters: {e}"),
                hint: name.and_then(|n| suggestion(&n, &known)),
            });
            TaskParams::default()
        }
    };
    let ids: Vec<TaskId> = match select {
        Selection::All => TaskId::ALL.to_vec(),
        Selection::Names(names) => {
            let known: Vec<&str> = TaskId::ALL.iter().map(|t| t.as_str()).collect();
            names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    let id = task_id(n);
                    if id.is_none() {
                        issues.push(CatalogIssue {
                            site: IssueSite::Selected(i),
                            message: format!("unknown BBQ-Bench function `{n}`"),
                            hint: suggestion(n, &known),
                        });
                    }
                    id
                })
                .collect()
        }
    };
    if !issues.is_empty() {
        return Err(issues);
    }
    let resolved = serde_json::to_value(&task_params).unwrap_or(Value::Null);
    let params: Params = resolved.as_object().map(|o| o.clone().into_iter().collect()).unwrap_or_default();
    Ok(ids
        .into_iter()
        .map(|id| {
            let task = id.task();
            let content = format!("bbq-task\0{}\0{}\0{:?}", id.as_str(), task.rule, task.family);
            TaskInstance {
                benchmark: NAME.into(),
                task: id.as_str().to_owned(),
                content_hash: blake3::hash(content.as_bytes()).to_hex().to_string(),
                params: params.clone(),
                episode_version: EPISODE_VERSION,
                score_version: SCORE_VERSION,
                suite: NAME.into(),
            }
        })
        .collect())
}

/// Validates a built-in agent's parameters.
pub fn resolve_builtin(agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
    if !BUILTIN_AGENTS.contains(&agent) {
        return Err(vec![CatalogIssue {
            site: IssueSite::Entry,
            message: format!("built-in agent `{agent}` cannot play BBQ-Bench"),
            hint: suggestion(agent, BUILTIN_AGENTS),
        }]);
    }
    let mut issues = Vec::new();
    for name in params.keys().filter(|k| *k != "salt") {
        issues.push(CatalogIssue {
            site: IssueSite::Param(name.clone()),
            message: format!("built-in agent `{agent}` has no parameter `{name}`"),
            hint: suggestion(name, &["salt"]),
        });
    }
    let salt = params.get("salt").map_or(Some(0), Value::as_u64);
    match salt {
        Some(salt) if issues.is_empty() => Ok([("salt".to_owned(), json!(salt))].into()),
        Some(_) => Err(issues),
        None => {
            issues.push(CatalogIssue { site: IssueSite::Param("salt".into()), message: "`salt` must be a non-negative integer".into(), hint: None });
            Err(issues)
        }
    }
}

/// Plays one episode with a built-in agent (CPU-bound).
pub fn run_episode(model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let id = task_id(&task.task).ok_or_else(|| StepError::Unsupported(format!("unknown function `{}`", task.task)))?;
    let object: serde_json::Map<String, Value> = task.params.clone().into_iter().collect();
    let params: TaskParams = serde_json::from_value(Value::Object(object)).map_err(StepError::episode)?;
    if !model.is_builtin() {
        return Err(StepError::Unsupported(format!("provider `{}` is not wired to BBQ-Bench yet (built-in agents only)", model.provider)));
    }
    let episode = Episode::new(id, seed, params).map_err(StepError::episode)?;
    let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
    let agent_seed = {
        let mut h = blake3::Hasher::new_derive_key("evalgrid bbq agent v1");
        h.update(&salt.to_le_bytes());
        h.update(id.as_str().as_bytes());
        h.update(&seed.to_le_bytes());
        u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("blake3 output has 32 bytes"))
    };
    let record = match model.model.as_str() {
        "random" => play(episode, &mut RandomAgent::new(agent_seed)),
        "solver" => play(episode, &mut SolverAgent::new(agent_seed)),
        other => return Err(StepError::Unsupported(format!("unknown built-in agent `{other}`"))),
    };
    serde_json::to_value(record).map_err(StepError::episode)
}

/// Per-episode score record.
pub fn score(episode: &Value) -> Result<Value, StepError> {
    let r: EpisodeRecord = serde_json::from_value(episode.clone()).map_err(|e| StepError::score_in("not a BBQ-Bench record", e))?;
    let numeric = r.task.task().family == Family::Numeric;
    let budget = f64::from(r.total_queries.max(1));
    let used_fraction = r.solved_at_queries.map(|q| f64::from(q) / budget);
    let mut out = json!({
        "solved": r.solved,
        "one": 1,
        "numeric": numeric,
        "string": !numeric,
        "solved_numeric": r.solved && numeric,
        "solved_string": r.solved && !numeric,
        "solved_round": r.solved_round,
        "solved_at_queries": r.solved_at_queries,
        "queries_used": r.queries_used,
        "budget_fraction_at_solve": used_fraction,
        "forfeits": r.forfeits.len(),
    });
    for (name, fraction) in CURVE {
        out[*name] = json!(used_fraction.is_some_and(|u| u <= *fraction + 1e-12));
    }
    Ok(out)
}

/// BBQ-Bench as the registry sees it.
pub struct Bbq;

impl crate::envs::benchmark::Benchmark for Bbq {
    fn name(&self) -> &'static str {
        NAME
    }
    fn resolve_tasks(&self, _data_dir: &std::path::Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        resolve_tasks(select, params)
    }
    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        resolve_builtin(agent, params)
    }
    fn metrics(&self) -> Vec<MetricDef> {
        metrics()
    }
    /// One unit per cell (spec: statistics.md).
    fn unit_metrics(&self) -> Vec<crate::envs::metric::UnitMetric> {
        use crate::envs::metric::UnitMetric;
        vec![UnitMetric::new("solved", "solved", "solve_rate", true)]
    }
    /// `reasoning_effort: medium` for GPT-5-family OpenAI models that set none (§4.10).
    fn injected_params(&self, model: &ModelConfig) -> Vec<(String, Value)> {
        if model.is_builtin() {
            return Vec::new();
        }
        let sent = super::llm_episode::generation_params(model);
        sent.into_iter().filter(|(k, _)| !model.params.contains_key(k)).collect()
    }
    /// API players may run code through `execute_python`.
    fn runs_model_code(&self, model: &ModelConfig) -> bool {
        !model.is_builtin()
    }
    fn run_episode<'a>(
        &'a self,
        ctx: crate::exec::EpisodeContext<'a>,
        _data_dir: &'a std::path::Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> crate::exec::BoxFuture<'a, Result<Value, StepError>> {
        crate::envs::benchmark::builtin_on_cpu_or(model, task, seed, run_episode, super::llm_episode::run(ctx, model, task, seed))
    }
    fn score(&self, _data_dir: &std::path::Path, _task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        score(episode)
    }
    fn headline_field(&self) -> Option<&'static str> {
        Some("solved")
    }
    fn figures(&self, input: &crate::envs::benchmark::FigureInput<'_>) -> Vec<crate::exhibit::Figure> {
        super::report::figures(input)
    }
    fn tools(&self) -> Option<clap::Command> {
        Some(super::tools::command())
    }
    fn run_tool(&self, matches: &clap::ArgMatches, _ctx: &crate::envs::ToolContext<'_>) -> Result<crate::envs::ToolOutput, crate::envs::ToolError> {
        super::tools::run(matches)
    }
}
