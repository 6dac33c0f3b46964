//! A BBQ-Bench task-run played by an API model (spec §2, §4.7–4.10) on top of the
//! model-independent [`Episode`] state machine.
//!
//! Every phase is a fresh conversation: the system prompt (`bbq-system-v1`), the samples
//! message, and one state message (scratchpad, full query history, remaining budget, the
//! phase instruction). Within a phase the conversation grows by the model's turn and the tool
//! results until the phase ends. The providers' [`Message`] carries text only, so the model's
//! native tool calls are replayed as `<TOOL>{"name": .., "arguments": ..}</TOOL>` lines in
//! its assistant turn and tool results come back as a user message starting `Tool results:`.
//! Calls are read natively or from the text fallback ([`super::reply`]). Failed attempts
//! (missing or malformed calls, rejected queries, wrong prediction counts, failing Python)
//! are counted by the state machine, which forfeits the phase after `max_attempts`.
//! Provider and sandbox errors fail the cell; they are never scored as wrong answers.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::episode::Episode;
use super::prompt::{self, PROMPT_VERSION, PYTHON, QUERY, SUBMIT, phase_name};
use super::python::{PythonLimits, PythonRun, PythonRunner, SandboxRunner};
use super::record::{EpisodeRecord, Phase, Tool};
use super::reply::{self, Item, Reply};
use super::task::{TaskId, TaskParams};
use crate::exec::{BoxFuture, CallSite, EpisodeContext, StepError};
use crate::providers::{ChatRequest, ChatResponse, FinishReason, Message};
use crate::spec::{ModelConfig, TaskInstance};

/// Sends one request of the episode; a trait so tests can drive the loop without HTTP.
pub trait Chat: Send {
    /// Answers `request`, made at `position` (`round R phase P attempt A`) of the episode.
    fn chat<'a>(&'a mut self, request: &'a ChatRequest, position: &'a str) -> BoxFuture<'a, Result<ChatResponse, StepError>>;
}

/// Cached calls to the cell's model, scoped to the episode and sampled by the seed.
struct ApiChat<'c> {
    ctx: EpisodeContext<'c>,
    model: &'c ModelConfig,
    seed: u64,
}

impl Chat for ApiChat<'_> {
    fn chat<'a>(&'a mut self, request: &'a ChatRequest, position: &'a str) -> BoxFuture<'a, Result<ChatResponse, StepError>> {
        let site = CallSite { scope: Some(self.ctx.episode_key), position: position.to_owned(), sample: self.seed };
        Box::pin(async move { self.ctx.chat(self.model, request, &site).await })
    }
}

/// One model call, for the episode's `llm` log.
#[derive(Debug, Clone, Serialize)]
pub struct CallLog {
    /// Round of the call.
    pub round: u32,
    /// Phase of the call.
    pub phase: Phase,
    /// 1-based call number within the phase.
    pub attempt: u32,
    /// Native tool calls in the reply.
    pub native_calls: usize,
    /// Calls read from the text fallback.
    pub text_calls: usize,
    /// Why generation stopped.
    pub finish_reason: String,
    /// Input tokens as billed.
    pub input_tokens: u64,
    /// Output tokens as billed (reasoning included).
    pub output_tokens: u64,
}

/// One `execute_python` run, for the episode's `llm` log.
#[derive(Debug, Clone, Serialize)]
pub struct PythonLog {
    /// Round of the run.
    pub round: u32,
    /// Phase of the run.
    pub phase: Phase,
    /// What happened (outputs already cut to the cap).
    pub run: PythonRun,
}

/// Model-side facts of an episode that the state machine's record does not hold.
#[derive(Debug, Clone, Serialize)]
pub struct LlmLog {
    /// System prompt version.
    pub prompt_version: String,
    /// BLAKE3 of the system prompt text as sent.
    pub system_prompt_hash: String,
    /// Generation parameters sent with every call.
    pub sent_params: Map<String, Value>,
    /// Every model call.
    pub calls: Vec<CallLog>,
    /// Every Python run.
    pub python_runs: Vec<PythonLog>,
    /// Sum of input tokens.
    pub input_tokens: u64,
    /// Sum of output tokens.
    pub output_tokens: u64,
}

/// The generation parameters sent: the model's own, plus reasoning effort "medium" for
/// GPT-5-family OpenAI models that set none (§4.10, as in the write-up).
pub fn generation_params(model: &ModelConfig) -> Map<String, Value> {
    let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
    if model.provider == crate::spec::Provider::OpenAi && model.model.starts_with("gpt-5") && !params.contains_key("reasoning_effort") {
        params.insert("reasoning_effort".into(), json!("medium"));
    }
    params
}

/// Runs a BBQ-Bench cell with an API model; returns the [`EpisodeRecord`] JSON (what
/// `benchmark::score` reads) with the [`LlmLog`] under `llm`.
pub async fn run(ctx: EpisodeContext<'_>, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let id: TaskId = task.task.parse().map_err(|e: super::task::UnknownTask| StepError::Unsupported(e.to_string()))?;
    let object: Map<String, Value> = task.params.clone().into_iter().collect();
    let params: TaskParams = serde_json::from_value(Value::Object(object)).map_err(StepError::episode)?;
    if params.system_prompt_version != PROMPT_VERSION {
        return Err(StepError::Unsupported(format!("system prompt `{}` is not available (this build has `{PROMPT_VERSION}`)", params.system_prompt_version)));
    }
    let python = SandboxRunner { limits: PythonLimits::from_params(&params) };
    let episode = Episode::new(id, seed, params).map_err(StepError::episode)?;
    let mut chat = ApiChat { ctx, model, seed };
    let (record, log) = play(episode, &mut chat, &python, generation_params(model)).await?;
    let mut out = serde_json::to_value(record).map_err(StepError::episode)?;
    out["llm"] = serde_json::to_value(log).map_err(StepError::episode)?;
    Ok(out)
}

/// The tool a phase requires (the scratchpad's plain-text reply counts as a tool).
fn required_tool(phase: Phase) -> Tool {
    match phase {
        Phase::Query => Tool::Query,
        Phase::Evaluation => Tool::SubmitPredictions,
        Phase::Scratchpad | Phase::Finished => Tool::Scratchpad,
    }
}

/// The tool name a phase requires, for messages.
fn required_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Query => QUERY,
        Phase::Evaluation => SUBMIT,
        Phase::Scratchpad | Phase::Finished => "(plain-text scratchpad)",
    }
}

fn bug(e: impl std::error::Error + Send + Sync + 'static) -> StepError {
    StepError::episode_in("BBQ-Bench driver out of step with the episode", e)
}

/// Plays `episode` to the end with `chat`, running `execute_python` through `python`.
pub async fn play(
    mut episode: Episode,
    chat: &mut dyn Chat,
    python: &dyn PythonRunner,
    params: Map<String, Value>,
) -> Result<(EpisodeRecord, LlmLog), StepError> {
    let system = prompt::system_prompt(episode.task(), episode.params());
    let mut log = LlmLog {
        prompt_version: PROMPT_VERSION.into(),
        system_prompt_hash: blake3::hash(system.as_bytes()).to_hex().to_string(),
        sent_params: params.clone(),
        calls: Vec::new(),
        python_runs: Vec::new(),
        input_tokens: 0,
        output_tokens: 0,
    };
    // Each reply either ends the phase, runs Python (at most 1 + max_attempts times per
    // phase) or counts a failed attempt (at most max_attempts); this bound is only a guard.
    let cap = 4 * (episode.params().max_attempts.max(1) + 2);
    while !episode.is_finished() {
        let (phase, round) = (episode.phase(), episode.round());
        let tools = prompt::tools(episode.task(), episode.params(), phase);
        let mut messages = vec![Message::user(episode.samples_message()), Message::user(prompt::phase_message(&episode))];
        let mut attempt = 0;
        while episode.phase() == phase && episode.round() == round {
            attempt += 1;
            if attempt > cap {
                forfeit(&mut episode, phase, round, "too many calls in one phase")?;
                break;
            }
            let request =
                ChatRequest { messages: messages.clone(), system: Some(system.clone()), params: params.clone(), json_mode: false, tools: Some(tools.clone()) };
            let position = format!("round {round} phase {} attempt {attempt}", phase_name(phase));
            let response = chat.chat(&request, &position).await?;
            let reply = reply::parse(&response.text, &response.tool_calls);
            log.input_tokens += response.usage.input;
            log.output_tokens += response.usage.output;
            log.calls.push(CallLog {
                round,
                phase,
                attempt,
                native_calls: if reply.native { reply.items.len() } else { 0 },
                text_calls: if reply.native { 0 } else { reply.items.len() },
                finish_reason: response.finish_reason.to_string(),
                input_tokens: response.usage.input,
                output_tokens: response.usage.output,
            });
            // The phase's conversation no longer fits the model's context, and it only grows
            // within the phase: the phase is forfeited (the next one starts a new conversation).
            if response.finish_reason == FinishReason::ContextExceeded {
                forfeit(&mut episode, phase, round, "the prompt exceeds the model's context window")?;
                break;
            }
            let results = handle(&mut episode, phase, &reply, python, &mut log).await?;
            if episode.phase() == phase && episode.round() == round {
                messages.push(Message::assistant(reply::render_turn(&response.text, &response.tool_calls)));
                messages.push(Message::user(format!("Tool results:\n{}", results.join("\n"))));
            }
        }
    }
    Ok((episode.into_record(), log))
}

/// Ends a phase the model cannot finish: it never stopped calling (the guard in [`play`]),
/// or its prompt outgrew the model's context.
fn forfeit(episode: &mut Episode, phase: Phase, round: u32, why: &str) -> Result<(), StepError> {
    while episode.phase() == phase && episode.round() == round {
        episode.record_failure(required_tool(phase), why).map_err(bug)?;
    }
    Ok(())
}

/// Failed attempts of `tool` so far in the current phase, for the model's feedback.
fn failures_so_far(episode: &Episode, phase: Phase, round: u32, tool: Tool) -> usize {
    episode.record().failures.iter().filter(|f| f.round == round && f.phase == phase && f.tool == tool).count()
}

/// `{"error": ..}` with the attempt count appended.
fn error_line(name: &str, episode: &Episode, phase: Phase, round: u32, tool: Tool, message: &str) -> String {
    let n = failures_so_far(episode, phase, round, tool);
    let max = episode.params().max_attempts.max(1);
    json_line(name, &json!({"error": format!("{message} (failed attempt {n} of {max})")}))
}

fn json_line(name: &str, value: &Value) -> String {
    format!("{name}: {value}")
}

/// Applies one reply to the episode; returns the tool-result lines for the model.
async fn handle(episode: &mut Episode, phase: Phase, reply: &Reply, python: &dyn PythonRunner, log: &mut LlmLog) -> Result<Vec<String>, StepError> {
    let round = episode.round();
    let required = required_tool(phase);
    let mut lines = Vec::new();
    let mut counted = false;
    for item in &reply.items {
        if episode.phase() != phase || episode.round() != round {
            break;
        }
        let (name, arguments) = match item {
            Item::Call { name, arguments } => (name.as_str(), arguments),
            Item::Malformed(why) => {
                if phase == Phase::Scratchpad {
                    if episode.python_available() {
                        episode.record_failure(Tool::ExecutePython, &format!("malformed tool call: {why}")).map_err(bug)?;
                        counted = true;
                        lines.push(error_line("tool call", episode, phase, round, Tool::ExecutePython, &format!("malformed tool call: {why}")));
                    } else {
                        lines.push(json_line("tool call", &json!({"error": format!("malformed tool call: {why}")})));
                    }
                } else {
                    episode.record_failure(required, &format!("malformed tool call: {why}")).map_err(bug)?;
                    counted = true;
                    lines.push(error_line("tool call", episode, phase, round, required, &format!("malformed tool call: {why}")));
                }
                continue;
            }
        };
        match (name, phase) {
            (PYTHON, _) => {
                if python_call(episode, arguments, python, log, &mut lines).await? {
                    counted = true;
                }
            }
            (QUERY, Phase::Query) => {
                counted = true;
                let Some(inputs) = arguments.get("inputs").and_then(Value::as_array) else {
                    let why = "malformed `query` arguments: expected {\"inputs\": [...]}";
                    episode.record_failure(Tool::Query, why).map_err(bug)?;
                    lines.push(error_line(QUERY, episode, phase, round, Tool::Query, why));
                    continue;
                };
                match episode.query_json(inputs) {
                    Ok(resp) => lines.push(json_line(QUERY, &serde_json::to_value(&resp).map_err(bug)?)),
                    Err(e) => lines.push(error_line(QUERY, episode, phase, round, Tool::Query, &e.to_string())),
                }
            }
            (SUBMIT, Phase::Evaluation) => {
                counted = true;
                let Some(predictions) = arguments.get("predictions").and_then(Value::as_array) else {
                    let why = "malformed `submit_predictions` arguments: expected {\"predictions\": [...]}";
                    episode.record_failure(Tool::SubmitPredictions, why).map_err(bug)?;
                    lines.push(error_line(SUBMIT, episode, phase, round, Tool::SubmitPredictions, why));
                    continue;
                };
                let n = predictions.len();
                match episode.submit_json_predictions(predictions.clone()) {
                    Ok(_) => lines.push(json_line(SUBMIT, &json!({"received": n}))),
                    Err(e) => lines.push(error_line(SUBMIT, episode, phase, round, Tool::SubmitPredictions, &e.to_string())),
                }
            }
            (other, _) => {
                let why = if [QUERY, SUBMIT].contains(&other) {
                    format!("`{other}` is not available in the {} phase", phase_name(phase))
                } else {
                    format!("unknown tool `{other}`")
                };
                if phase == Phase::Scratchpad {
                    lines.push(json_line(other, &json!({"error": why})));
                } else {
                    episode.record_failure(required, &why).map_err(bug)?;
                    counted = true;
                    lines.push(error_line(other, episode, phase, round, required, &why));
                }
            }
        }
    }
    if counted || episode.phase() != phase || episode.round() != round {
        return Ok(lines);
    }
    match phase {
        Phase::Scratchpad if reply.prose.is_empty() => episode.record_failure(Tool::Scratchpad, "empty scratchpad reply").map_err(bug)?,
        Phase::Scratchpad => {
            episode.set_scratchpad(&reply.prose).map_err(bug)?;
        }
        _ => {
            let name = required_name(phase);
            let why = if reply.items.is_empty() {
                format!("no tool call found: call `{name}` (natively, or as <TOOL>{{\"name\": \"{name}\", \"arguments\": {{...}}}}</TOOL>)")
            } else {
                format!("no `{name}` call")
            };
            episode.record_failure(required, &why).map_err(bug)?;
            lines.push(error_line(name, episode, phase, round, required, &why));
        }
    }
    Ok(lines)
}

/// One `execute_python` call; returns whether it counted (a run happened or malformed args).
async fn python_call(
    episode: &mut Episode,
    arguments: &Map<String, Value>,
    python: &dyn PythonRunner,
    log: &mut LlmLog,
    lines: &mut Vec<String>,
) -> Result<bool, StepError> {
    let (phase, round) = (episode.phase(), episode.round());
    if !episode.python_available() {
        let why = episode.record_python_success().err().map_or_else(|| "execute_python is unavailable".to_owned(), |e| e.to_string());
        lines.push(json_line(PYTHON, &json!({"error": why})));
        return Ok(false);
    }
    let Some(code) = arguments.get("code").and_then(Value::as_str) else {
        let why = "malformed `execute_python` arguments: expected {\"code\": \"...\"}";
        episode.record_failure(Tool::ExecutePython, why).map_err(bug)?;
        lines.push(error_line(PYTHON, episode, phase, round, Tool::ExecutePython, why));
        return Ok(true);
    };
    let run = python.run(code).await?;
    let mut result = run.tool_result();
    if run.succeeded() {
        episode.record_python_success().map_err(bug)?;
    } else {
        episode.record_failure(Tool::ExecutePython, &run.failure_cause()).map_err(bug)?;
        let n = failures_so_far(episode, phase, round, Tool::ExecutePython);
        let max = episode.params().max_attempts.max(1);
        result["error"] = json!(format!("{} (failed attempt {n} of {max})", run.failure_cause()));
    }
    lines.push(json_line(PYTHON, &result));
    log.python_runs.push(PythonLog { round, phase, run });
    Ok(true)
}

#[cfg(test)]
mod tests;
