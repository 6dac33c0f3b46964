//! BBEH as an evalgrid benchmark: one cell = one model × BBEH task × seed;
//! the episode asks every item once (each call cached separately, so an
//! interrupted task resumes item by item) and the score step applies the
//! official scorer.

use std::path::Path;

use futures::future::join_all;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::answer_space::{ANSWER_SPACE_VERSION, random_answer};
pub use super::dataset::data_path;
use super::dataset::{Item, TASKS, load_task_shared, mini_indices};
use super::prompt::{SUFFIX, SUFFIX_VERSION, build_prompt_with};
use super::scorer::{SCORER_VERSION, score as score_item};
use crate::envs::metric::{Agg, MetricDef};
use crate::exec::{CallSite, EpisodeContext, StepError};
use crate::providers::{ChatRequest, Message};
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Benchmark name in pipelines.
pub const NAME: &str = "bbeh";
/// Bump when the episode (prompting, item selection) changes.
pub const EPISODE_VERSION: u32 = 1;
/// Bump when the score record changes.
pub const SCORE_VERSION: u32 = 1;
/// Built-in agents.
pub const BUILTIN_AGENTS: &[&str] = &["random"];
/// Suffix of task ids that run the BBEH Mini subset.
const MINI_SUFFIX: &str = "/mini";

/// Table columns offered by BBEH.
#[must_use]
pub fn metrics() -> Vec<MetricDef> {
    let ratio = |name: &str, agg: fn(String, String) -> Agg, num: &str| MetricDef { name: name.into(), agg: agg(num.into(), "n".into()) };
    vec![
        ratio("accuracy", Agg::Ratio, "correct"),
        ratio("ci_low", Agg::WilsonLow, "correct"),
        ratio("ci_high", Agg::WilsonHigh, "correct"),
        ratio("harmonic_mean", Agg::HarmonicPercent, "correct"),
        ratio("extraction_failure_rate", Agg::Ratio, "extraction_failures"),
    ]
}

fn not_installed(data_dir: &Path) -> CatalogIssue {
    CatalogIssue {
        site: IssueSite::Entry,
        message: format!("the BBEH dataset is not installed under `{}`", data_path(data_dir).display()),
        hint: Some("run `evalgrid datasets fetch bbeh` (or `--from <dir>` with a local copy)".into()),
    }
}

/// Resolves `select:` (task directory names or `all`) and `params: {subset: full|mini}`.
pub fn resolve_tasks(data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
    let mut issues = Vec::new();
    const PARAMS: &[&str] = &["subset", "suffix"];
    for name in params.keys().filter(|k| !PARAMS.contains(&k.as_str())) {
        issues.push(CatalogIssue {
            site: IssueSite::Param(name.clone()),
            message: format!("unknown BBEH task parameter `{name}`"),
            hint: suggestion(name, PARAMS),
        });
    }
    let suffix = match params.get("suffix") {
        None => SUFFIX.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            issues.push(CatalogIssue { site: IssueSite::Param("suffix".into()), message: "`suffix` must be a string".into(), hint: None });
            String::new()
        }
    };
    let mini = match params.get("subset").map(|v| v.as_str()) {
        None | Some(Some("full")) => false,
        Some(Some("mini")) => true,
        Some(_) => {
            issues.push(CatalogIssue { site: IssueSite::Param("subset".into()), message: "`subset` must be `full` or `mini`".into(), hint: None });
            false
        }
    };
    let names: Vec<&str> = match select {
        Selection::All => TASKS.to_vec(),
        Selection::Names(names) => names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match TASKS.iter().find(|t| **t == n || t.strip_prefix("bbeh_") == Some(n.as_str())) {
                Some(t) => Some(*t),
                None => {
                    issues.push(CatalogIssue { site: IssueSite::Selected(i), message: format!("unknown BBEH task `{n}`"), hint: suggestion(n, &TASKS) });
                    None
                }
            })
            .collect(),
    };
    if !issues.is_empty() {
        return Err(issues);
    }
    let dir = data_path(data_dir);
    // Each task file is read, parsed and hashed on its own core (17 MB for the full set).
    let hashed: Vec<Option<String>> =
        names.par_iter().map(|task| load_task_shared(&dir, task).ok().map(|items| content_hash(&select_items(&items, task, mini), &suffix))).collect();
    let mut out = Vec::new();
    for (task, content_hash) in names.into_iter().zip(hashed) {
        let content_hash = content_hash.ok_or_else(|| vec![not_installed(data_dir)])?;
        out.push(TaskInstance {
            benchmark: NAME.into(),
            task: if mini { format!("{task}{MINI_SUFFIX}") } else { task.to_owned() },
            content_hash,
            params: [
                ("subset".to_owned(), json!(if mini { "mini" } else { "full" })),
                ("suffix".to_owned(), json!(suffix)),
                ("suffix_version".to_owned(), json!(SUFFIX_VERSION)),
            ]
            .into(),
            episode_version: EPISODE_VERSION,
            score_version: SCORE_VERSION,
            suite: if mini { format!("{NAME}-mini") } else { NAME.to_owned() },
        });
    }
    Ok(out)
}

/// The hash of what a task asks and expects: the suffix, then each selected item's index,
/// input and target, each length-prefixed.
fn content_hash(selected: &[&Item], suffix: &str) -> String {
    // The bytes are gathered first and hashed in one `update`, which lets blake3 hash
    // many chunks at once (the same bytes, so the same hash, several times faster).
    let mut bytes = Vec::with_capacity(selected.iter().map(|item| item.input.len() + item.target.len() + 24).sum::<usize>() + suffix.len() + 8);
    bytes.extend_from_slice(&(suffix.len() as u64).to_le_bytes());
    bytes.extend_from_slice(suffix.as_bytes());
    for item in selected {
        bytes.extend_from_slice(&(item.index as u64).to_le_bytes());
        bytes.extend_from_slice(&(item.input.len() as u64).to_le_bytes());
        bytes.extend_from_slice(item.input.as_bytes());
        bytes.extend_from_slice(&(item.target.len() as u64).to_le_bytes());
        bytes.extend_from_slice(item.target.as_bytes());
    }
    let mut hasher = blake3::Hasher::new_derive_key("evalgrid bbeh task-content v1");
    hasher.update(&bytes);
    hasher.finalize().to_hex().to_string()
}

fn select_items<'a>(items: &'a [Item], task: &str, mini: bool) -> Vec<&'a Item> {
    if mini { mini_indices(task, items.len()).into_iter().filter_map(|i| items.get(i)).collect() } else { items.iter().collect() }
}

pub(super) fn load_selected(data_dir: &Path, task: &TaskInstance) -> Result<Vec<Item>, StepError> {
    let (name, mini) = match task.task.strip_suffix(MINI_SUFFIX) {
        Some(name) => (name, true),
        None => (task.task.as_str(), false),
    };
    let items = load_task_shared(&data_path(data_dir), name).map_err(StepError::episode)?;
    Ok(select_items(&items, name, mini).into_iter().cloned().collect())
}

/// Validates a built-in agent's parameters.
pub fn resolve_builtin(agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
    if agent != "random" {
        return Err(vec![CatalogIssue {
            site: IssueSite::Entry,
            message: format!("built-in agent `{agent}` cannot answer BBEH"),
            hint: Some("BBEH has the built-in agent `random`".into()),
        }]);
    }
    let mut issues = Vec::new();
    for name in params.keys().filter(|k| *k != "salt") {
        issues.push(CatalogIssue {
            site: IssueSite::Param(name.clone()),
            message: format!("built-in agent `random` has no parameter `{name}`"),
            hint: suggestion(name, &["salt"]),
        });
    }
    let salt = params.get("salt").map_or(Some(0), Value::as_u64);
    match salt {
        // The answer-space version is in the model key: a changed space changes the random answers.
        Some(salt) if issues.is_empty() => Ok([("salt".to_owned(), json!(salt)), ("answer_space".to_owned(), json!(ANSWER_SPACE_VERSION))].into()),
        None => {
            issues.push(CatalogIssue { site: IssueSite::Param("salt".into()), message: "`salt` must be a non-negative integer".into(), hint: None });
            Err(issues)
        }
        Some(_) => Err(issues),
    }
}

/// One answered item of an episode record.
#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    index: usize,
    response: String,
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    /// Why generation stopped when not a normal stop (`length`, `content_filter`,
    /// `refusal`, …): such an answer is scored like any other, so usually wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finish_reason: Option<String>,
}

/// Asks every item of the task once and records the responses.
pub async fn run_episode(ctx: EpisodeContext<'_>, data_dir: &Path, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let items = load_selected(data_dir, task)?;
    let answers: Vec<Result<Answer, StepError>> = if model.is_builtin() {
        let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
        items
            .iter()
            .map(|item| {
                let response = random_answer(item, random_seed(salt, seed, item)).map(|a| format!("The answer is: {a}")).unwrap_or_default();
                Ok(Answer { index: item.index, response, input_tokens: 0, output_tokens: 0, finish_reason: None })
            })
            .collect()
    } else {
        join_all(items.iter().map(|item| {
            async move {
                // Built when the call is reached, not for every item up front.
                let (request, site) = item_call(model, task, item, seed);
                let response = ctx.chat(model, &request, &site).await?;
                let finish = response.finish_reason.class();
                let finish_reason = (finish != "stop").then(|| finish.to_owned());
                Ok(Answer {
                    index: item.index,
                    response: response.text,
                    input_tokens: response.usage.input,
                    output_tokens: response.usage.output,
                    finish_reason,
                })
            }
        }))
        .await
    };
    let ok = crate::envs::benchmark::all_items(answers)?;
    Ok(json!({"task": task.task, "answers": ok}))
}

/// The request and call site for one item: single-shot, so identical
/// prompts (BBEH has duplicate inputs) share a cache entry per sample.
fn item_call(model: &ModelConfig, task: &TaskInstance, item: &Item, seed: u64) -> (ChatRequest, CallSite) {
    let params: serde_json::Map<String, Value> = model.params.clone().into_iter().collect();
    let request = ChatRequest { messages: vec![Message::user(item_prompt(task, item))], params, ..ChatRequest::default() };
    (request, CallSite { scope: None, position: String::new(), sample: seed })
}

/// The one prompt an item is asked with (the task's answer-format suffix appended).
pub(super) fn item_prompt(task: &TaskInstance, item: &Item) -> String {
    build_prompt_with(&item.input, task.params.get("suffix").and_then(Value::as_str).unwrap_or(SUFFIX))
}

/// Every call an episode would make (for `run --dry-run`).
pub fn planned_calls(data_dir: &Path, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Vec<(ChatRequest, CallSite)>, StepError> {
    if model.is_builtin() {
        return Ok(Vec::new());
    }
    Ok(load_selected(data_dir, task)?.iter().map(|item| item_call(model, task, item, seed)).collect())
}

fn random_seed(salt: u64, seed: u64, item: &Item) -> u64 {
    let mut h = blake3::Hasher::new_derive_key("evalgrid bbeh random-agent v1");
    h.update(&salt.to_le_bytes());
    h.update(&seed.to_le_bytes());
    h.update(item.task.as_bytes());
    h.update(&(item.index as u64).to_le_bytes());
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("blake3 output has 32 bytes"))
}

/// Scores an episode record with the official scorer.
pub fn score(data_dir: &Path, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
    let items = load_selected(data_dir, task).map_err(StepError::score)?;
    let answers: Vec<Answer> =
        serde_json::from_value(episode.get("answers").cloned().unwrap_or(Value::Null)).map_err(|e| StepError::score_in("not a BBEH episode record", e))?;
    let mut rows = Vec::with_capacity(answers.len());
    let (mut correct, mut failures, mut tokens_in, mut tokens_out) = (0u64, 0u64, 0u64, 0u64);
    for a in &answers {
        tokens_in += a.input_tokens;
        tokens_out += a.output_tokens;
        let item = items.iter().find(|i| i.index == a.index).ok_or_else(|| StepError::score_msg(format!("item {} is not in task `{}`", a.index, task.task)))?;
        let detail = score_item(&a.response, &item.target);
        correct += u64::from(detail.correct);
        failures += u64::from(!detail.extraction_found_prefix);
        rows.push(json!({"index": a.index, "extracted": detail.prediction_after_preprocess, "correct": detail.correct, "answer_found": detail.extraction_found_prefix}));
    }
    Ok(json!({
        "n": answers.len(),
        "correct": correct,
        "accuracy": if answers.is_empty() { Value::Null } else { json!(correct as f64 / answers.len() as f64) },
        "extraction_failures": failures,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "scorer": SCORER_VERSION,
        "items": rows,
    }))
}

/// BBEH as the registry sees it.
pub struct Bbeh;

impl crate::envs::benchmark::Benchmark for Bbeh {
    fn name(&self) -> &'static str {
        NAME
    }
    fn resolve_tasks(&self, data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        resolve_tasks(data_dir, select, params)
    }
    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        resolve_builtin(agent, params)
    }
    fn metrics(&self) -> Vec<MetricDef> {
        metrics()
    }
    fn unit_metrics(&self) -> Vec<crate::envs::metric::UnitMetric> {
        super::units::unit_metrics()
    }
    fn units(&self, score: &Value) -> Vec<crate::envs::metric::Unit> {
        super::units::units(score)
    }
    fn unit_answers(&self, score: &Value) -> Vec<Option<String>> {
        super::units::answers(score)
    }
    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> crate::exec::BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(run_episode(ctx, data_dir, model, task, seed))
    }
    fn planned_calls(&self, data_dir: &Path, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        planned_calls(data_dir, model, task, seed).ok()
    }
    fn score(&self, data_dir: &Path, task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        score(data_dir, task, episode)
    }
    fn exchanges(&self, data_dir: &Path, task: &TaskInstance, episode: &Value, _seed: u64) -> Vec<crate::envs::Exchange> {
        super::units::exchanges(data_dir, task, episode)
    }
    fn headline_field(&self) -> Option<&'static str> {
        Some("accuracy")
    }
    fn figures(&self, input: &crate::envs::benchmark::FigureInput<'_>) -> Vec<crate::exhibit::Figure> {
        super::report::figures(input)
    }
    fn tools(&self) -> Option<clap::Command> {
        Some(super::tools::command())
    }
    fn run_tool(&self, matches: &clap::ArgMatches, ctx: &crate::envs::ToolContext<'_>) -> Result<crate::envs::ToolOutput, crate::envs::ToolError> {
        super::tools::run(matches, ctx)
    }
}
