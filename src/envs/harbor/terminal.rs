//! The `terminal` agent: a model works the trial's container through a shell until it says
//! it is done or a limit ends its phase. Tools are offered natively (`bash(command)`,
//! `done()`) on every protocol; with `tools: false`, or when a model answers in text, its
//! fenced `bash` blocks run and a line `DONE` ends the phase. Every call is keyed by the
//! whole conversation so far (instruction, each earlier answer and each command's output),
//! so a rerun replays from the cache for as long as the container answers the same.
//! Command output is data for the model and for every view: it is never read as a call.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::trial::PhaseRun;
use crate::exec::{BoxFuture, StepError};
use crate::providers::{ChatRequest, ChatResponse, FinishReason, Message, ToolCall, ToolSpec};
use crate::spec::agent::AgentConfig;

/// Version of the prompt and the loop (part of every agent trial's key through the episode
/// version, and recorded).
pub const PROMPT_VERSION: &str = "terminal-v1";
/// The line that ends the agent phase in the text fallback.
pub const DONE_MARKER: &str = "DONE";

/// Sends one model call of the agent; a trait so the loop is tested without HTTP.
pub trait AgentChat: Send {
    /// Answers `request`, the `turn`-th call (1-based); `true` with the answer when it was
    /// read from the cache.
    fn chat<'a>(&'a mut self, request: &'a ChatRequest, turn: u32) -> BoxFuture<'a, Result<(ChatResponse, bool), StepError>>;
}

/// Runs a command in the trial's container; a trait so the loop is tested without a runtime.
pub trait Shell: Send {
    /// Runs `command` with bash from the working directory, killed after `timeout`, its
    /// merged output cut to `cap` bytes (head and tail, a note where cut).
    fn run<'a>(&'a mut self, command: &'a str, timeout: Duration, cap: usize) -> BoxFuture<'a, Result<PhaseRun, String>>;
}

/// How the agent phase ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentEnd {
    /// The model said it was done.
    Done,
    /// `max_turns` calls were made without `done`.
    MaxTurns,
    /// The task's `[agent].timeout_sec` passed (model calls and commands included).
    AgentTimeout,
    /// The trial's calls used `max_tokens_total` tokens.
    TokenLimit,
    /// The conversation no longer fits the model's context window.
    ContextExceeded,
}

impl AgentEnd {
    /// The name in records and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::MaxTurns => "max_turns",
            Self::AgentTimeout => "agent_timeout",
            Self::TokenLimit => "token_limit",
            Self::ContextExceeded => "context_exceeded",
        }
    }
}

/// One tool call of a turn (native, or a fenced block of the text fallback) and what it did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentCall {
    /// The provider's call id (empty in the text fallback and on Gemini).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// `bash`, `done`, or whatever the model named.
    pub name: String,
    /// The arguments as the model sent them.
    pub arguments: Value,
    /// The command run (`bash` with valid arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<PhaseRun>,
    /// What the model was told back (the output as sent, or why nothing ran).
    pub reply: String,
}

/// One model call of the agent and the commands it led to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// 1-based.
    pub turn: u32,
    /// The model's text.
    pub text: String,
    /// Its reasoning, where the provider returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Calls, in order.
    pub calls: Vec<AgentCall>,
    /// Whether the calls were native tool calls (else read from the text).
    pub native: bool,
    /// Why generation stopped.
    pub finish_reason: String,
    /// Input tokens as billed.
    pub input_tokens: u64,
    /// Output tokens as billed.
    pub output_tokens: u64,
    /// Whether the answer was read from the cache (a replay).
    pub replayed: bool,
    /// A note the model was sent instead of command output (no call in the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The agent phase of a trial played by a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentLog {
    /// [`PROMPT_VERSION`].
    pub prompt_version: String,
    /// The settings it ran with.
    pub config: AgentConfig,
    /// Its system prompt, as sent.
    pub system_prompt: String,
    /// Every turn.
    pub turns: Vec<Turn>,
    /// How it ended.
    pub end: AgentEnd,
    /// Turns read from the cache.
    pub replayed_turns: u32,
    /// The first turn sent to the model after earlier ones were replayed: where a rerun's
    /// container first answered differently (or where the earlier trial had stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverged_at: Option<u32>,
    /// Input tokens of all calls.
    pub input_tokens: u64,
    /// Output tokens of all calls.
    pub output_tokens: u64,
    /// Wall seconds of the phase.
    pub seconds: f64,
}

/// The working state a loop needs: the task's words and limits.
#[derive(Clone, Debug)]
pub struct Brief<'a> {
    /// `instruction.md`, verbatim.
    pub instruction: &'a str,
    /// The container's working directory.
    pub workdir: &'a str,
    /// `[agent].timeout_sec`.
    pub agent_timeout_s: f64,
}

/// The system prompt: who the agent is, where it works, its limits and how to act.
#[must_use]
pub fn system_prompt(config: &AgentConfig, brief: &Brief<'_>) -> String {
    let mut s = String::from("You are an AI agent working on a task in a Linux container, through a bash shell. The user's message is the task.\n\n");
    s.push_str(&format!("Working directory: {}\n", brief.workdir));
    s.push_str(&format!(
        "Limits: at most {} turns (replies); each command is killed after {} s; each command's output is cut to {} KB (the middle is left out); the whole task must be done within {} s.\n\n",
        config.max_turns,
        trim_float(config.command_timeout_s),
        config.max_output_kb,
        trim_float(brief.agent_timeout_s)
    ));
    if config.tools {
        s.push_str(
            "Run shell commands with the `bash` tool, one command per call; several calls in one reply run in order, and you see each output (with its exit code) before your next reply. Commands run non-interactively: do not start editors or anything that waits for input. When the task is complete, call the `done` tool; your work is then checked.",
        );
    } else {
        s.push_str(&format!(
            "To run shell commands, write them in a fenced block:\n\n```bash\nls -la\n```\n\nEvery such block in your reply runs in order, and the next message gives each output with its exit code. Commands run non-interactively: do not start editors or anything that waits for input. When the task is complete, write {DONE_MARKER} alone on the last line of a reply (after any blocks); your work is then checked."
        ));
    }
    s
}

fn trim_float(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x}") }
}

/// The native tools: `bash(command)` and `done()`.
#[must_use]
pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: "Runs a bash command in the task's container, from the working directory, and returns its output (stdout and stderr) and exit code."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command to run."}},
                "required": ["command"]
            }),
        },
        ToolSpec {
            name: "done".into(),
            description: "Says the task is complete; the work is then checked. Call it last.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ]
}

/// The command of a `bash` call's arguments, or why there is none.
fn command_of(arguments: &Value) -> Result<String, String> {
    let object = match arguments {
        Value::Object(map) => map.clone(),
        // Some servers encode the arguments twice; anything else is not JSON.
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(map)) => map,
            _ => return Err(format!("the arguments are not a JSON object: {}", preview(raw))),
        },
        other => return Err(format!("the arguments are not a JSON object: {}", preview(&other.to_string()))),
    };
    match object.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => Ok(c.clone()),
        Some(Value::String(_)) => Err("`command` is empty".into()),
        Some(other) => Err(format!("`command` must be a string, not {}", preview(&other.to_string()))),
        None => Err("the arguments have no `command`".into()),
    }
}

fn preview(s: &str) -> String {
    let cut: String = s.chars().take(200).collect();
    if cut.len() < s.len() { format!("{cut}…") } else { cut }
}

/// A line that says the task is done: `DONE` alone, in any case, bare or in markdown
/// emphasis or code (`**DONE**`, `` `DONE` ``), a final `.` or `!` allowed.
fn is_done_line(line: &str) -> bool {
    let word = line.trim().trim_matches(|c| c == '*' || c == '`' || c == '_').trim_end_matches(['.', '!']);
    word.eq_ignore_ascii_case(DONE_MARKER)
}

/// What the text fallback reads from an answer: the fenced `bash` (or `sh`, `shell`)
/// blocks, in order, and whether a line `DONE` follows the last of them.
#[must_use]
pub fn parse_text(text: &str) -> (Vec<String>, bool) {
    let mut commands = Vec::new();
    let mut done = false;
    let mut block: Option<(String, bool)> = None; // (body, is a shell block)
    let mut fence = "";
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut block {
            Some((body, shell)) => {
                if trimmed.trim_end() == fence {
                    if *shell && !body.trim().is_empty() {
                        commands.push(body.trim_end_matches('\n').to_owned());
                        done = false;
                    }
                    block = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            None => {
                let ticks = trimmed.chars().take_while(|c| *c == '`').count();
                if ticks >= 3 {
                    fence = &trimmed[..ticks];
                    let lang = trimmed[ticks..].trim().to_ascii_lowercase();
                    block = Some((String::new(), matches!(lang.as_str(), "bash" | "sh" | "shell")));
                } else if is_done_line(line) {
                    done = true;
                }
            }
        }
    }
    (commands, done)
}

/// What the model is told a command did: its exit code (or that it was killed), then its
/// output as captured (cut in the middle past the cap, with a note).
fn reply_of(run: &PhaseRun, timeout_s: f64) -> String {
    let head = if run.timed_out {
        format!("[killed: the command ran past {} s]", trim_float(timeout_s))
    } else {
        match run.exit_code {
            Some(c) => format!("[exit code {c}]"),
            None => "[no exit code]".into(),
        }
    };
    if run.output.is_empty() { format!("{head}\n(no output)") } else { format!("{head}\n{}", run.output) }
}

/// The mutable state of one agent phase.
struct Phase<'a> {
    config: &'a AgentConfig,
    deadline: Instant,
    tokens: u64,
}

impl Phase<'_> {
    /// Runs one command under the per-command timeout and what is left of the agent's time.
    async fn command(&self, shell: &mut dyn Shell, command: &str) -> Result<(PhaseRun, String, bool), StepError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let per_command = Duration::from_secs_f64(self.config.command_timeout_s);
        let (timeout, by_deadline) = if left < per_command { (left.max(Duration::from_millis(1)), true) } else { (per_command, false) };
        let cap = self.config.max_output_kb as usize * 1024;
        let run = shell.run(command, timeout, cap).await.map_err(super::backend::failed)?;
        let reply = reply_of(&run, timeout.as_secs_f64());
        let out_of_time = run.timed_out && by_deadline;
        Ok((run, reply, out_of_time))
    }

    fn out_of_time(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

/// Plays the agent phase to its end: calls, commands, limits. Provider and container
/// failures are errors (the trial is errored, never scored); everything a model does,
/// invalid calls included, is part of the record.
///
/// # Errors
/// A call that failed (after its retries), a budget halt, or a container that failed.
pub async fn play(
    chat: &mut dyn AgentChat,
    shell: &mut dyn Shell,
    config: &AgentConfig,
    brief: &Brief<'_>,
    params: &Map<String, Value>,
) -> Result<AgentLog, StepError> {
    let start = Instant::now();
    let system = system_prompt(config, brief);
    let offered = config.tools.then(tools);
    let mut phase = Phase { config, deadline: start + Duration::from_secs_f64(brief.agent_timeout_s.max(0.001)), tokens: 0 };
    let mut log = AgentLog {
        prompt_version: PROMPT_VERSION.into(),
        config: config.clone(),
        system_prompt: system.clone(),
        turns: Vec::new(),
        end: AgentEnd::MaxTurns,
        replayed_turns: 0,
        diverged_at: None,
        input_tokens: 0,
        output_tokens: 0,
        seconds: 0.0,
    };
    let mut messages = vec![Message::user(brief.instruction)];
    let mut end = None;
    for turn in 1..=config.max_turns {
        if phase.out_of_time() {
            end = Some(AgentEnd::AgentTimeout);
            break;
        }
        if config.max_tokens_total.is_some_and(|max| phase.tokens >= max) {
            end = Some(AgentEnd::TokenLimit);
            break;
        }
        let request =
            ChatRequest { messages: messages.clone(), system: Some(system.clone()), params: params.clone(), json_mode: false, tools: offered.clone() };
        let (response, replayed) = chat.chat(&request, turn).await?;
        if replayed {
            log.replayed_turns += 1;
        } else if log.replayed_turns > 0 && log.diverged_at.is_none() {
            log.diverged_at = Some(turn);
        }
        let used = response.usage.input.saturating_add(response.usage.output);
        phase.tokens = phase.tokens.saturating_add(used);
        log.input_tokens = log.input_tokens.saturating_add(response.usage.input);
        log.output_tokens = log.output_tokens.saturating_add(response.usage.output);
        let mut record = Turn {
            turn,
            text: response.text.clone(),
            reasoning: response.reasoning.clone(),
            calls: Vec::new(),
            native: false,
            finish_reason: response.finish_reason.to_string(),
            input_tokens: response.usage.input,
            output_tokens: response.usage.output,
            replayed,
            note: None,
        };
        if response.finish_reason == FinishReason::ContextExceeded {
            log.turns.push(record);
            end = Some(AgentEnd::ContextExceeded);
            break;
        }
        messages.push(Message::assistant_turn(&response));
        let native: Vec<&ToolCall> = if config.tools { response.tool_calls.iter().collect() } else { Vec::new() };
        let mut finished = false;
        let mut timed_out = false;
        if native.is_empty() {
            let (commands, done) = parse_text(&response.text);
            let mut replies = Vec::new();
            for (i, command) in commands.iter().enumerate() {
                if timed_out {
                    break;
                }
                let (run, reply, out) = phase.command(shell, command).await?;
                timed_out = out;
                replies.push(format!("Output of block {}:\n{reply}", i + 1));
                record.calls.push(AgentCall { id: String::new(), name: "bash".into(), arguments: json!({"command": command}), run: Some(run), reply });
            }
            finished = done && !timed_out;
            if !finished && !timed_out {
                let note = if replies.is_empty() {
                    if config.tools {
                        "No command was run: call the `bash` tool to run one, or `done` when the task is complete.".to_owned()
                    } else {
                        format!("No command was run: write a command in a ```bash block, or {DONE_MARKER} on a line of its own when the task is complete.")
                    }
                } else {
                    replies.join("\n\n")
                };
                if replies.is_empty() {
                    record.note = Some(note.clone());
                }
                messages.push(Message::user(note));
            }
        } else {
            record.native = true;
            let mut outputs: Vec<(String, String)> = Vec::new();
            for call in native {
                let reply = if finished || timed_out {
                    "[not run: an earlier call in this reply ended the task]".to_owned()
                } else {
                    match call.name.as_str() {
                        "bash" => match command_of(&call.arguments) {
                            Ok(command) => {
                                let (run, reply, out) = phase.command(shell, &command).await?;
                                timed_out = out;
                                record.calls.push(AgentCall {
                                    id: call.id.clone(),
                                    name: call.name.clone(),
                                    arguments: call.arguments.clone(),
                                    run: Some(run),
                                    reply: reply.clone(),
                                });
                                outputs.push((call.id.clone(), reply));
                                continue;
                            }
                            Err(why) => format!("[error: {why}; call bash with {{\"command\": \"...\"}}]"),
                        },
                        "done" => {
                            finished = true;
                            "[ok: the task is being checked]".to_owned()
                        }
                        other => format!("[error: there is no tool `{}`; the tools are bash and done]", preview(other)),
                    }
                };
                record.calls.push(AgentCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    run: None,
                    reply: reply.clone(),
                });
                outputs.push((call.id.clone(), reply));
            }
            if !finished && !timed_out {
                messages.push(Message::tool_outputs(outputs.iter().map(|(id, out)| (id.as_str(), out.as_str())), ""));
            }
        }
        log.turns.push(record);
        if finished {
            end = Some(AgentEnd::Done);
            break;
        }
        if timed_out || phase.out_of_time() {
            end = Some(AgentEnd::AgentTimeout);
            break;
        }
    }
    log.end = end.unwrap_or(AgentEnd::MaxTurns);
    log.seconds = start.elapsed().as_secs_f64();
    Ok(log)
}

#[cfg(test)]
mod tests;
