//! `harbor`: agentic tasks in Harbor's task-folder format (Terminal-Bench 2.0 and others),
//! each trial run in a container built from the task's `environment/` and verified by its
//! own `tests/test.sh`. A cell is one agent × task × seed (a seed is a repeated trial). The
//! agents of part 1 are built in and need no model: `oracle` (the task's `solution/`) and
//! `nop` (nothing), declared like every benchmark's baselines, `provider: builtin`.
//! Documented in `docs/agents.md`.

pub mod agent_trial;
pub mod backend;
pub mod config;
pub mod task;
pub mod terminal;
pub mod trial;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::benchmark::{Benchmark, SectionInput};
use super::metric::{MetricDef, Unit, UnitMetric};
use crate::exec::{BoxFuture, EpisodeContext, StepError};
use crate::exhibit::Section;
use crate::spec::agent::AgentConfig;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

pub use task::NAME;
use trial::{Outcome, TrialRecord};

/// The benchmark as the registry sees it.
pub struct Harbor;

/// The outcome columns of the outcomes table, in order.
pub const OUTCOMES: [&str; 7] = ["reward", "agent_timeout", "max_turns", "token_limit", "context_exceeded", "verifier_timeout", "verifier_error"];
/// Title of the outcomes table.
pub const OUTCOMES_TITLE: &str = "Harbor trial outcomes (trials per model)";
/// Title of the repeats table.
pub const REPEATS_TITLE: &str = "Harbor repeats per task (seeds as trials)";

/// The named rewards the entry declared (`params.rewards`), for `items.csv` columns.
fn named_columns(tasks: &[&TaskInstance]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tasks {
        for n in task::get(t).map(|l| l.reward_columns.clone()).unwrap_or_default() {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

impl Benchmark for Harbor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn resolve_tasks(&self, data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        self.resolve_tasks_in(data_dir, Path::new("."), select, params)
    }

    fn resolve_tasks_in(&self, _data_dir: &Path, base_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        task::resolve(base_dir, select, params)
    }

    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        if !trial::AGENTS.contains(&agent) {
            return Err(vec![CatalogIssue {
                site: IssueSite::Entry,
                message: format!("harbor has no built-in agent `{agent}`"),
                hint: Some("built-in harbor agents: oracle (the task's solution/solve.sh), nop (does nothing)".into()),
            }]);
        }
        if let Some(k) = params.keys().next() {
            return Err(vec![CatalogIssue { site: IssueSite::Param(k.clone()), message: format!("built-in agent `{agent}` has no parameters"), hint: None }]);
        }
        Ok(Params::new())
    }

    fn metrics(&self) -> Vec<MetricDef> {
        vec![
            MetricDef::mean("mean_reward", "reward"),
            MetricDef::mean("pass_rate", "passed"),
            MetricDef::mean("rewarded", "rewarded"),
            MetricDef::mean("agent_timeout", "agent_timeout"),
            MetricDef::mean("max_turns", "max_turns"),
            MetricDef::mean("verifier_timeout", "verifier_timeout"),
            MetricDef::mean("verifier_error", "verifier_error"),
        ]
    }

    fn unit_metrics(&self) -> Vec<UnitMetric> {
        vec![UnitMetric::new("reward", "reward", "mean_reward", false)]
    }

    fn unit_metrics_for(&self, tasks: &[&TaskInstance]) -> Vec<UnitMetric> {
        let mut out = self.unit_metrics();
        for n in named_columns(tasks) {
            out.push(UnitMetric { name: format!("reward.{n}"), field: n, summary: None, binary: false });
        }
        out
    }

    fn units_for(&self, score: &Value, metrics: &[UnitMetric]) -> Vec<Unit> {
        let values = metrics
            .iter()
            .map(|m| {
                if m.name == "reward" {
                    super::metric::number(score.get("reward"))
                } else {
                    super::metric::number(score.get("rewards").and_then(|r| r.get(&m.field)))
                }
            })
            .collect();
        vec![Unit { item: 0, id: None, values }]
    }

    fn unit_answers(&self, score: &Value) -> Vec<Option<String>> {
        vec![score.get("outcome").and_then(Value::as_str).map(str::to_owned)]
    }

    fn container_runtime(&self, task: &TaskInstance) -> Option<crate::sandbox::container::RuntimeChoice> {
        task::get(task).ok().map(|t| backend::choice(t.env.runtime))
    }

    /// The task's own image; a prebuilt `docker_image` is not evalgrid's to drop.
    fn container_images(&self, task: &TaskInstance) -> Option<Vec<String>> {
        task::get(task).ok().map(|t| vec![t.image_tag.clone()])
    }

    fn explain(&self, task: &TaskInstance, previous: &Value) -> Vec<String> {
        task::get(task).map(|t| task::changes(&t, previous)).unwrap_or_default()
    }

    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        _data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(async move {
            if !model.is_builtin() {
                let config = agent_config(task, model)?;
                let loaded = task::get(task)?;
                let cache_root = ctx.calls.store().root().to_path_buf();
                let params: serde_json::Map<String, Value> = model.params.clone().into_iter().collect();
                let mut chat = ApiChat { ctx, model, seed, scope: crate::plan::StepKey::compute(&json!({"harbor_agent": terminal::PROMPT_VERSION})) };
                let record = agent_trial::run(loaded, &mut chat, &config, &params, cache_root).await?;
                return serde_json::to_value(record).map_err(StepError::episode);
            }
            let loaded = task::get(task)?;
            let agent = model.model.clone();
            let cache_root = ctx.calls.store().root().to_path_buf();
            let record = tokio::task::spawn_blocking(move || backend::run_trial(&loaded, &agent, &cache_root)).await.map_err(StepError::worker)??;
            serde_json::to_value(record).map_err(StepError::episode)
        })
    }

    fn score(&self, _data_dir: &Path, _task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        let r: TrialRecord = serde_json::from_value(episode.clone()).map_err(|e| StepError::score_in("not a harbor trial record", e))?;
        let flag = |o: Outcome| u8::from(r.outcome == o);
        Ok(json!({
            "outcome": r.outcome.as_str(),
            "reward": r.reward,
            "rewards": r.rewards,
            "rewarded": r.reward.is_some(),
            "passed": r.reward.map(|x| x >= 1.0),
            "agent_timeout": flag(Outcome::AgentTimeout),
            "max_turns": flag(Outcome::MaxTurns),
            "token_limit": flag(Outcome::TokenLimit),
            "context_exceeded": flag(Outcome::ContextExceeded),
            "turns": r.agent_log.as_ref().map(|l| l.turns.len()),
            "verifier_timeout": flag(Outcome::VerifierTimeout),
            "verifier_error": flag(Outcome::VerifierError),
        }))
    }

    fn transcript(&self, episode: &Value) -> String {
        serde_json::from_value::<TrialRecord>(episode.clone())
            .map_or_else(|_| serde_json::to_string_pretty(episode).unwrap_or_default(), |r| trial::transcript(&r))
    }

    fn exchanges(&self, _data_dir: &Path, task: &TaskInstance, episode: &Value, _seed: u64) -> Vec<crate::envs::Exchange> {
        let Ok(loaded) = task::get(task) else { return Vec::new() };
        vec![crate::envs::Exchange {
            item: 0,
            id: None,
            system: None,
            prompt: vec![crate::providers::Message::user(loaded.instruction.clone())],
            input: loaded.instruction.clone(),
            targets: Vec::new(),
            choices: Vec::new(),
            answer: self.transcript(episode),
            finish_reason: None,
            input_tokens: 0,
            output_tokens: 0,
            details: Vec::new(),
            trajectory: serde_json::from_value::<TrialRecord>(episode.clone())
                .ok()
                .and_then(|r| r.agent_log)
                .map(|l| trajectory(&l, &loaded.instruction))
                .unwrap_or_default(),
        }]
    }

    fn headline_field(&self) -> Option<&'static str> {
        Some("reward")
    }

    fn sections(&self, input: &SectionInput<'_>) -> Result<Vec<Section>, StepError> {
        Ok(sections(input))
    }
}

/// An agent's turns as Inspect `ChatMessage`s: the system prompt, the instruction, each
/// answer with its tool calls (arguments that are not an object: `{}` and a `parse_error`),
/// and each command's output as a `tool` message (text-fallback outputs as a user turn).
fn trajectory(log: &terminal::AgentLog, instruction: &str) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": log.system_prompt}), json!({"role": "user", "content": instruction})];
    let id_of = |c: &terminal::AgentCall, turn: u32, i: usize| if c.id.is_empty() { format!("call_{turn}_{i}") } else { c.id.clone() };
    for t in &log.turns {
        let mut assistant = json!({"role": "assistant", "content": t.text});
        if t.native && !t.calls.is_empty() {
            let calls: Vec<Value> = t
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut call = json!({"id": id_of(c, t.turn, i), "function": c.name, "type": "function"});
                    if c.arguments.is_object() {
                        call["arguments"] = c.arguments.clone();
                    } else {
                        call["arguments"] = json!({});
                        call["parse_error"] = json!(format!("the arguments are not a JSON object: {}", c.arguments));
                    }
                    call
                })
                .collect();
            assistant["tool_calls"] = Value::Array(calls);
        }
        out.push(assistant);
        if t.native {
            for (i, c) in t.calls.iter().enumerate() {
                out.push(json!({"role": "tool", "tool_call_id": id_of(c, t.turn, i), "function": c.name, "content": c.reply}));
            }
        } else if !t.calls.is_empty() {
            let replies: Vec<String> = t.calls.iter().enumerate().map(|(i, c)| format!("Output of block {}:\n{}", i + 1, c.reply)).collect();
            out.push(json!({"role": "user", "content": replies.join("\n\n")}));
        }
        if let Some(note) = &t.note {
            out.push(json!({"role": "user", "content": note}));
        }
    }
    out
}

/// The agent an API model plays on `task`: the entry's `agent:` settings, then the model's.
fn agent_config(task: &TaskInstance, model: &ModelConfig) -> Result<AgentConfig, StepError> {
    let mut config = AgentConfig::default();
    for overrides in [task.params.get("agent").and_then(Value::as_object), model.agent.as_ref()].into_iter().flatten() {
        config = config.with(overrides).map_err(StepError::Unsupported)?;
    }
    Ok(config)
}

/// The agent's model calls, cached and keyed by the whole conversation: scoped to the agent
/// (not the task's tests), so a trial re-run for an edited verifier replays its calls.
struct ApiChat<'c> {
    ctx: EpisodeContext<'c>,
    model: &'c ModelConfig,
    seed: u64,
    scope: crate::plan::StepKey,
}

impl terminal::AgentChat for ApiChat<'_> {
    fn chat<'a>(
        &'a mut self,
        request: &'a crate::providers::ChatRequest,
        turn: u32,
    ) -> BoxFuture<'a, Result<(crate::providers::ChatResponse, bool), StepError>> {
        let site = crate::exec::CallSite { scope: Some(self.scope), position: format!("turn {turn}"), sample: self.seed };
        Box::pin(async move { self.ctx.chat_traced(self.model, request, &site).await })
    }
}

/// The outcomes table (one row per model: scored trials by outcome, and trials planned but
/// not scored, which are errored or not yet run) and the repeats table (per model and task:
/// trials, mean reward, pass@1, pass@k and max@k over seeds).
fn sections(input: &SectionInput<'_>) -> Vec<Section> {
    let mut outcomes: BTreeMap<usize, [f64; OUTCOMES.len()]> = BTreeMap::new();
    let mut repeats: BTreeMap<(usize, String), Vec<Option<f64>>> = BTreeMap::new();
    for cell in &input.cells {
        let model = input.models.iter().position(|m| m.id == cell.model).unwrap_or(usize::MAX);
        let outcome = cell.score.get("outcome").and_then(Value::as_str).unwrap_or_default();
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            outcomes.entry(model).or_default()[i] += 1.0;
        }
        repeats.entry((model, cell.task.clone())).or_default().push(cell.score.get("reward").and_then(Value::as_f64));
    }
    if outcomes.is_empty() {
        return Vec::new();
    }
    let label = |m: usize| input.models.get(m).map_or("?", |m| m.id.as_str()).to_owned();
    let mut columns: Vec<String> = OUTCOMES.iter().map(|s| (*s).to_owned()).collect();
    columns.push("not scored (environment_error or not run)".into());
    let rows = outcomes
        .iter()
        .map(|(m, counts)| {
            let scored: f64 = counts.iter().sum();
            let planned = (input.planned)(&label(*m)) as f64;
            let mut v: Vec<Option<f64>> = counts.iter().map(|c| Some(*c)).collect();
            v.push(Some((planned - scored).max(0.0)));
            (label(*m), v)
        })
        .collect();
    let mut out = vec![Section { title: OUTCOMES_TITLE.into(), columns, rows }];
    let columns = ["trials", "rewarded", "mean", "pass@1", "pass@k", "max@k"].map(str::to_owned).to_vec();
    let rows = repeats
        .iter()
        .map(|((m, t), rewards)| {
            let got: Vec<f64> = rewards.iter().flatten().copied().collect();
            let n = got.len() as u64;
            let c = got.iter().filter(|r| **r >= 1.0).count() as u64;
            let (mean, p1, pk, max) = if n == 0 {
                (None, None, None, None)
            } else {
                (
                    Some(got.iter().sum::<f64>() / n as f64),
                    Some(c as f64 / n as f64),
                    Some(super::qa::reducers::pass_at_k(n, c, n)),
                    Some(got.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                )
            };
            (format!("{} · {t}", label(*m)), vec![Some(rewards.len() as f64), Some(n as f64), mean, p1, pk, max])
        })
        .collect();
    out.push(Section { title: REPEATS_TITLE.into(), columns, rows });
    out
}
