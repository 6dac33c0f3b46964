//! One cell of a `qa` task: every item asked once (each a cached call, keyed by its own
//! prompt, so an edited row re-asks that row only), then each `judge` scorer's grading
//! call (cached by answer, criterion, rubric and judge model). Built-in agents answer
//! without calls: `echo` repeats the question, `oracle` answers the target, `random` picks.

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::inspect::target_positions;
use super::item::Item;
use super::judge;
use super::task::{Task, choice_order, get, ideal_answer};
use crate::envs::benchmark::{HelperCall, all_items};
use crate::envs::splitmix::SplitMix64;
use crate::exec::{CallSite, EpisodeContext, StepError};
use crate::providers::logprobs::TokenLogprob;
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
    /// The choices in the order shown, for the scorers that read their texts (`acc`,
    /// `acc_norm`); only in records of tasks asked for log-probabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// The next token's top alternatives with their log-probabilities (tasks asked for them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprob>,
    /// Each shown choice's continuation log-likelihood (`method: loglikelihood` tasks only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loglikelihoods: Vec<f64>,
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
    let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
    params.extend(task.config.generation.clone());
    if task.config.asks_logprobs() {
        // What this model's protocol asks for (refused at `validate` where there is none).
        let endpoint = crate::providers::route::endpoint(model, &ChatRequest::default()).map_err(|e| StepError::Unsupported(e.to_string()))?;
        let asked = endpoint
            .kind
            .protocol()
            .next_token_params()
            .ok_or_else(|| StepError::Unsupported(format!("the `{}` protocol gives no next-token log-probabilities evalgrid reads", endpoint.kind)))?;
        params.extend(asked);
    }
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

fn answered(task: &Task, item: &Item, order: Vec<usize>, answer: String) -> Answer {
    let choices = if task.config.asks_logprobs() { order.iter().filter_map(|&o| item.choices.get(o).cloned()).collect() } else { Vec::new() };
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
        choices,
        logprobs: Vec::new(),
        loglikelihoods: Vec::new(),
        judged: Map::new(),
    }
}

/// One prompt-scoring call of `method: loglikelihood`: the request, where it is asked, and
/// where its continuation starts and ends in the prompt (characters).
struct Scoring {
    request: ChatRequest,
    site: CallSite,
    context_chars: u64,
    prompt_chars: u64,
}

/// The prompt-scoring calls of one item, one per choice in the order shown: the rendered
/// prompt as one text (the context, as a completions call sends it), then `" "` and the
/// choice's text (`acc`, `acc_norm`) or its letter (`choice`), as lm-eval's
/// `multiple_choice` requests are built.
fn loglikelihood_calls(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> Result<Vec<Scoring>, StepError> {
    if item.image.is_some() {
        return Err(StepError::episode_msg(format!("item {}: `method: loglikelihood` scores text only (a completions call takes no image)", item.label())));
    }
    let (system, messages) = prompt(task, item, order)?;
    let context = crate::providers::completions::prompt_text(&ChatRequest { system, messages, ..ChatRequest::default() });
    let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
    params.extend(task.config.generation.clone());
    params.extend(crate::providers::logprobs::loglikelihood_params());
    let letters = task.config.loglikelihood_of_letters();
    Ok(order
        .iter()
        .enumerate()
        .map(|(shown, &o)| {
            let continuation = if letters { super::inspect::letter(shown) } else { item.choices.get(o).cloned().unwrap_or_default() };
            let text = format!("{context} {continuation}");
            Scoring {
                context_chars: context.chars().count() as u64,
                prompt_chars: text.chars().count() as u64,
                request: ChatRequest { messages: vec![Message::user(text)], params: params.clone(), ..ChatRequest::default() },
                site: CallSite { scope: None, position: String::new(), sample: seed },
            }
        })
        .collect())
}

/// Asks each choice's continuation log-likelihood of one item; the pick's text is the answer.
async fn ask_loglikelihoods(ctx: EpisodeContext<'_>, task: &Task, model: &ModelConfig, item: &Item, order: Vec<usize>, seed: u64) -> Result<Answer, StepError> {
    let calls = loglikelihood_calls(task, model, item, &order, seed)?;
    let answers = join_all(calls.iter().map(|c| ctx.chat(model, &c.request, &c.site))).await;
    let mut a = answered(task, item, order, String::new());
    for (call, response) in calls.iter().zip(answers) {
        let response = response?;
        a.input_tokens = a.input_tokens.saturating_add(response.usage.input);
        a.output_tokens = a.output_tokens.saturating_add(response.usage.output);
        // Never a column of zeros: a server that echoed no log-probabilities fails the item.
        let ll = crate::providers::logprobs::continuation_loglikelihood(&response.logprobs, call.context_chars, call.prompt_chars).ok_or_else(|| {
            StepError::episode_msg(format!(
                "item {}: the server answered without the prompt's token log-probabilities (asked `echo: true`, `logprobs: 1` at /completions); it cannot serve `method: loglikelihood`",
                item.label()
            ))
        })?;
        a.loglikelihoods.push(ll);
    }
    a.answer = loglikelihood_answer(task, &a);
    Ok(a)
}

/// What a `method: loglikelihood` item shows as its answer: the likeliest continuation (per
/// character when every scorer is `acc_norm`), its letter or its text as scored.
fn loglikelihood_answer(task: &Task, a: &Answer) -> String {
    let norm = task.config.scorers.iter().all(|s| matches!(s.kind, super::config::ScorerKind::AccLoglikelihood { norm: true }));
    let pick = super::score::loglikelihood_argmax(a, norm.then_some(a.choices.as_slice()));
    pick.map(|p| if task.config.loglikelihood_of_letters() { super::inspect::letter(p) } else { a.choices.get(p).cloned().unwrap_or_default() })
        .unwrap_or_default()
}

/// A built-in agent's continuation log-likelihoods: 0 for its pick (as in
/// [`builtin_logprobs`]), -10 for every other choice; `echo` picks nothing (all equal).
fn builtin_loglikelihoods(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> Vec<f64> {
    let picked = builtin_pick(task, model, item, order, seed);
    (0..order.len()).map(|i| if Some(i) == picked { 0.0 } else { -10.0 }).collect()
}

/// A built-in agent's next-token alternatives for a log-probability task: its pick at
/// log-probability 0, as letter and as text.
fn builtin_logprobs(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> Vec<TokenLogprob> {
    let Some(shown) = builtin_pick(task, model, item, order, seed) else { return Vec::new() };
    let text = order.get(shown).and_then(|&o| item.choices.get(o)).cloned().unwrap_or_default();
    vec![TokenLogprob { token: super::inspect::letter(shown), logprob: 0.0, offset: None }, TokenLogprob { token: text, logprob: 0.0, offset: None }]
}

/// The shown choice a built-in agent picks on a log-probability task: the target for
/// `oracle`, a draw for `random`; `echo` picks nothing.
fn builtin_pick(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> Option<usize> {
    match model.model.as_str() {
        "oracle" => target_positions(&item.targets).ok().and_then(|p| p.first().and_then(|t| order.iter().position(|o| o == t))),
        "random" => {
            let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
            let drawn = random_answer(task, item, order, salt, seed);
            drawn.strip_prefix("ANSWER: ").and_then(|l| (0..order.len()).find(|&i| super::inspect::letter(i) == l))
        }
        _ => None,
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
    let mut question = Message::user(user);
    if let Some(image) = &item.image {
        question.images.push((*image.part).clone());
    }
    messages.push(question);
    Ok((system, messages))
}

/// The turns as exports and `show` print them: each image is its label (source, type, size,
/// hash) after the turn's text, never its bytes.
fn labelled(mut messages: Vec<Message>, item: &Item) -> Vec<Message> {
    for m in &mut messages {
        if !m.images.is_empty() {
            m.images.clear();
            if let Some(image) = &item.image {
                m.content = format!(
                    "{}

{}",
                    m.content,
                    image.label()
                );
            }
        }
    }
    messages
}

/// Each answered item's prompt, targets and answer (for exports): the prompt rendered
/// again from the task with the choice order the record kept.
#[must_use]
pub fn exchanges(instance: &TaskInstance, episode: &Value) -> Vec<crate::envs::Exchange> {
    let Ok(task) = get(instance) else { return Vec::new() };
    let answers: Vec<Answer> = serde_json::from_value(episode.get("answers").cloned().unwrap_or(Value::Null)).unwrap_or_default();
    let scorers = super::score::scorers(instance).unwrap_or_default();
    answers
        .into_iter()
        .map(|a| {
            let item = task.items.iter().find(|i| i.index == a.index);
            let (system, prompt) = item.and_then(|i| prompt(&task, i, &a.order).ok().map(|(s, p)| (s, labelled(p, i)))).unwrap_or_default();
            let choices = item.map(|i| a.order.iter().filter_map(|&o| i.choices.get(o).cloned()).collect()).unwrap_or_default();
            let details = scorers.iter().map(|s| super::score::detail(s, &a)).collect();
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
                details,
                trajectory: Vec::new(),
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
        task.items
            .iter()
            .map(|item| {
                let order = choice_order(item, seed, shuffled);
                let answer = builtin_answer(task, model, item, &order, seed);
                let mut a = answered(task, item, order, answer);
                if task.config.asks_loglikelihood() {
                    a.loglikelihoods = builtin_loglikelihoods(task, model, item, &a.order, seed);
                    a.answer = loglikelihood_answer(task, &a);
                } else if task.config.asks_logprobs() {
                    a.logprobs = builtin_logprobs(task, model, item, &a.order, seed);
                }
                Ok(a)
            })
            .collect()
    } else {
        join_all(task.items.iter().map(|item| async move {
            let order = choice_order(item, seed, shuffled);
            if task.config.asks_loglikelihood() {
                return ask_loglikelihoods(ctx, task, model, item, order, seed).await;
            }
            let (request, site) = item_call(task, model, item, &order, seed)?;
            let response = ctx.chat(model, &request, &site).await?;
            let finish = response.finish_reason.class();
            if task.config.asks_logprobs() && response.logprobs.is_empty() && finish != "context_exceeded" {
                // Never a column of zeros: an answer without them cannot be scored this way.
                return Err(StepError::episode_msg(format!(
                    "item {}: the server answered without log-probabilities (asked for the next token's top {}); it cannot serve this task's log-probability scorers",
                    item.label(),
                    crate::providers::logprobs::TOP_LOGPROBS
                )));
            }
            let mut a = answered(task, item, order, response.text);
            a.logprobs = response.logprobs;
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

/// A built-in agent's answer to `item`: `oracle` the target, `random` a draw, `echo` the question.
fn builtin_answer(task: &Task, model: &ModelConfig, item: &Item, order: &[usize], seed: u64) -> String {
    let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
    match model.model.as_str() {
        "oracle" => ideal_answer(&task.config, item, order),
        "random" => random_answer(task, item, order, salt, seed),
        _ => item.input.clone(),
    }
}

/// One judge's grading call for `answer` to the question `input` with these targets.
fn grading(judge_model: &ModelConfig, j: &super::config::Judge, input: &str, answer: &str, targets: &[String]) -> (ChatRequest, CallSite) {
    let text = judge::prompt_as(j.fact, input, answer, targets, j.rubric.as_deref(), &j.grades);
    let request = ChatRequest { messages: vec![Message::user(text)], params: judge_model.params.clone().into_iter().collect(), ..ChatRequest::default() };
    // Keyed by its prompt (answer, criterion, rubric) and the judge model only: the same
    // answer graded by the same judge is one entry, whichever seed or model gave it.
    (request, CallSite { scope: None, position: "judge".into(), sample: 0 })
}

/// Every judge's reply for one answer.
async fn grade(ctx: EpisodeContext<'_>, task: &Task, a: &Answer) -> Result<Map<String, Value>, StepError> {
    let mut out = Map::new();
    for (name, model, j) in &task.judges {
        let (request, site) = grading(model, j, &a.input, &a.answer, &a.targets);
        let reply = ctx.chat(model, &request, &site).await?;
        out.insert(name.clone(), Value::String(reply.text));
    }
    Ok(out)
}

/// Every grading a cell will ask for (`run --dry-run`): exact where the answer is known (a
/// built-in agent's, or cached: `answered`), else made with an empty answer and marked so.
pub fn planned_gradings(
    model: &ModelConfig,
    instance: &TaskInstance,
    seed: u64,
    answered: &dyn Fn(&ChatRequest, &CallSite) -> Option<String>,
) -> Result<Vec<HelperCall>, StepError> {
    let task = get(instance)?;
    if task.judges.is_empty() {
        return Ok(Vec::new());
    }
    let shuffled = shuffle(&task);
    let mut out = Vec::new();
    for item in &task.items {
        let order = choice_order(item, seed, shuffled);
        let answer = if model.is_builtin() {
            Some(builtin_answer(&task, model, item, &order, seed))
        } else {
            let (request, site) = item_call(&task, model, item, &order, seed)?;
            answered(&request, &site)
        };
        for (_, judge_model, j) in &task.judges {
            let (request, site) = grading(judge_model, j, &item.input, answer.as_deref().unwrap_or_default(), &item.targets);
            out.push(HelperCall { model: judge_model.clone(), request, site, known: answer.is_some() });
        }
    }
    Ok(out)
}

/// Every call an episode makes before judging (for `run --dry-run`).
pub fn planned_calls(model: &ModelConfig, instance: &TaskInstance, seed: u64) -> Result<Vec<(ChatRequest, CallSite)>, StepError> {
    let task = get(instance)?;
    let shuffled = shuffle(&task);
    if task.config.asks_loglikelihood() {
        let mut calls = Vec::new();
        for item in &task.items {
            let order = choice_order(item, seed, shuffled);
            calls.extend(loglikelihood_calls(&task, model, item, &order, seed)?.into_iter().map(|c| (c.request, c.site)));
        }
        return Ok(calls);
    }
    task.items
        .iter()
        .map(|item| {
            let order = choice_order(item, seed, shuffled);
            item_call(&task, model, item, &order, seed)
        })
        .collect()
}
