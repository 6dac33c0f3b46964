//! One cell of a `qa` task: every item asked once (each a cached call, keyed by its own
//! prompt, so an edited row re-asks that row only), then each `judge` scorer's grading
//! call (cached by answer, criterion, rubric and judge model). Built-in agents answer
//! without calls: `echo` repeats the question, `oracle` answers the target, `random` picks.

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::item::Item;
use super::judge;
use super::task::{Task, choice_order, get, ideal_answer};
use crate::envs::benchmark::all_items;
use crate::envs::splitmix::SplitMix64;
use crate::exec::{CallSite, EpisodeContext, StepError};
use crate::providers::{ChatRequest, Message};
use crate::spec::{ModelConfig, TaskInstance};

/// Built-in agents.
pub const AGENTS: &[&str] = &["echo", "oracle", "random"];

/// One answered item of an episode record: what the score step needs, with nothing read
/// again from the dataset.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    /// 0-based row index.
    pub index: u64,
    /// The row's id, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Short hash of what was asked (every column but the target).
    pub ask: String,
    /// Short hash of the target.
    pub target: String,
    /// Accepted answers.
    pub targets: Vec<String>,
    /// The choice order the model saw (`order[i]` = original choice shown at letter `i`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<usize>,
    /// The row's question (what a judge is shown, as Inspect shows `input_text`).
    pub input: String,
    /// The model's answer.
    pub answer: String,
    /// Why generation stopped, when not a normal stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Each judge's reply, by scorer name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub judged: Map<String, Value>,
}

fn shuffle(task: &Task) -> bool {
    task.config.choice().is_some_and(|(s, _)| s)
}

/// The request for one item: system prompt, few-shot turns, the rendered question.
fn item_call(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> Result<(ChatRequest, CallSite), StepError> {
    let (system, messages) = prompt(task, item, order)?;
    let params: Map<String, Value> = model.params.clone().into_iter().collect();
    // Single-shot and independent: no scope, so identical prompts share one entry per seed.
    Ok((ChatRequest { messages, system, params, ..ChatRequest::default() }, CallSite { scope: None, position: String::new(), sample: seed }))
}

fn random_answer(task: &Task, item: &Item, order: &[usize], salt: u64, seed: u64) -> String {
    let mut h = blake3::Hasher::new_derive_key("evalgrid qa random-agent v1");
    h.update(&salt.to_le_bytes());
    h.update(&seed.to_le_bytes());
    h.update(item.label().as_bytes());
    let mut rng = SplitMix64::new(u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap_or_default()));
    if !order.is_empty() {
        return format!("ANSWER: {}", super::inspect::letter(rng.index(order.len())));
    }
    task.items.get(rng.index(task.items.len())).and_then(|o| o.targets.first()).cloned().unwrap_or_default()
}

fn answered(item: &Item, order: Vec<usize>, answer: String) -> Answer {
    Answer {
        index: item.index,
        id: item.id.clone(),
        ask: Item::short(&item.ask_hash),
        target: Item::short(&item.target_hash),
        targets: item.targets.clone(),
        order,
        input: item.input.clone(),
        answer,
        finish_reason: None,
        input_tokens: 0,
        output_tokens: 0,
        judged: Map::new(),
    }
}

/// The system prompt and turns an item is asked with: few-shot turns, then the rendered question.
fn prompt(task: &Task, item: &Item, order: &[usize]) -> Result<(Option<String>, Vec<Message>), StepError> {
    let (system, user) = task.prompt.render(item, order).map_err(|e| StepError::episode_in(format!("item {}", item.label()), e))?;
    let mut messages = Vec::with_capacity(task.fewshot.len() * 2 + 1);
    for (q, a) in &task.fewshot {
        messages.push(Message::user(q.clone()));
        messages.push(Message::assistant(a.clone()));
    }
    messages.push(Message::user(user));
    Ok((system, messages))
}

/// Each answered item's prompt, targets and answer (for exports): the prompt rendered
/// again from the task with the choice order the record kept.
#[must_use]
pub fn exchanges(instance: &TaskInstance, episode: &Value) -> Vec<crate::envs::Exchange> {
    let Ok(task) = get(instance) else { return Vec::new() };
    let answers: Vec<Answer> = serde_json::from_value(episode.get("answers").cloned().unwrap_or(Value::Null)).unwrap_or_default();
    answers
        .into_iter()
        .map(|a| {
            let item = task.items.iter().find(|i| i.index == a.index);
            let (system, prompt) = item.and_then(|i| prompt(&task, i, &a.order).ok()).unwrap_or_default();
            let choices = item.map(|i| a.order.iter().filter_map(|&o| i.choices.get(o).cloned()).collect()).unwrap_or_default();
            crate::envs::Exchange {
                item: a.index,
                id: a.id,
                system,
                prompt,
                input: a.input,
                targets: a.targets,
                choices,
                answer: a.answer,
                finish_reason: a.finish_reason,
                input_tokens: a.input_tokens,
                output_tokens: a.output_tokens,
            }
        })
        .collect()
}

/// Plays one cell: asks (or answers, for a built-in agent) every item, then the judges.
pub async fn run_episode(ctx: EpisodeContext<'_>, model: &ModelConfig, instance: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let task = get(instance)?;
    let task = task.as_ref();
    let shuffled = shuffle(task);
    let results: Vec<Result<Answer, StepError>> = if model.is_builtin() {
        let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
        task.items
            .iter()
            .map(|item| {
                let order = choice_order(item, seed, shuffled);
                let answer = match model.model.as_str() {
                    "oracle" => ideal_answer(&task.config, item, &order),
                    "random" => random_answer(task, item, &order, salt, seed),
                    _ => item.input.clone(),
                };
                Ok(answered(item, order, answer))
            })
            .collect()
    } else {
        join_all(task.items.iter().map(|item| async move {
            let order = choice_order(item, seed, shuffled);
            let (request, site) = item_call(task, model, item, &order, seed)?;
            let response = ctx.chat(model, &request, &site).await?;
            let finish = response.finish_reason.class();
            let mut a = answered(item, order, response.text);
            a.finish_reason = (finish != "stop").then(|| finish.to_owned());
            a.input_tokens = response.usage.input;
            a.output_tokens = response.usage.output;
            Ok(a)
        }))
        .await
    };
    let mut answers = all_items(results)?;
    if !task.judges.is_empty() {
        let graded = join_all(answers.iter().map(|a| grade(ctx, task, a))).await;
        for (a, judged) in answers.iter_mut().zip(all_items(graded)?) {
            a.judged = judged;
        }
    }
    Ok(json!({"task": instance.task, "answers": answers}))
}

/// Every judge's reply for one answer.
async fn grade(ctx: EpisodeContext<'_>, task: &Task, a: &Answer) -> Result<Map<String, Value>, StepError> {
    let mut out = Map::new();
    for (name, model, j) in &task.judges {
        let text = judge::prompt(&a.input, &a.answer, &a.targets, j.rubric.as_deref(), &j.grades);
        let request = ChatRequest { messages: vec![Message::user(text)], params: model.params.clone().into_iter().collect(), ..ChatRequest::default() };
        // Keyed by its prompt (answer, criterion, rubric) and the judge model only: the same
        // answer graded by the same judge is one entry, whichever seed or model gave it.
        let site = CallSite { scope: None, position: "judge".into(), sample: 0 };
        let reply = ctx.chat(model, &request, &site).await?;
        out.insert(name.clone(), Value::String(reply.text));
    }
    Ok(out)
}

/// Every call an episode makes before judging (for `run --dry-run`).
pub fn planned_calls(model: &ModelConfig, instance: &TaskInstance, seed: u64) -> Result<Vec<(ChatRequest, CallSite)>, StepError> {
    let task = get(instance)?;
    let shuffled = shuffle(&task);
    task.items
        .iter()
        .map(|item| {
            let order = choice_order(item, seed, shuffled);
            item_call(&task, model, item, &order, seed)
        })
        .collect()
}
