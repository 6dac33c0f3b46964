//! What an API model is shown in a BBQ-Bench episode (spec §2.1, §4.7, §4.8): the versioned
//! system prompt `bbq-system-v1`, the per-phase state message (scratchpad, full query
//! history, remaining budget, instruction, numbered test inputs) and the JSON-schema tool
//! definitions. Pure text; the driver in [`super::llm_episode`] decides when to send what.

use serde_json::{Value, json};

use super::episode::Episode;
use super::record::Phase;
use super::task::{InputKind, OutputKind, Task, TaskParams};
use crate::providers::ToolSpec;

/// Version of the system prompt asset; must equal `TaskParams::system_prompt_version`.
pub const PROMPT_VERSION: &str = "bbq-system-v1";

/// Name of the query tool (§4.8).
pub const QUERY: &str = "query";
/// Name of the prediction tool (§4.8).
pub const SUBMIT: &str = "submit_predictions";
/// Name of the Python tool (§4.8).
pub const PYTHON: &str = "execute_python";

/// An example query input of the task's type, for the fallback-format example.
fn example_input(task: &Task) -> Value {
    match task.input {
        InputKind::Int { .. } => json!(7),
        InputKind::Tuple { triangle: true, .. } => json!("(0, 0, 3, 0, 0, 4)"),
        InputKind::Tuple { arity, .. } => {
            let items: Vec<String> = (1..=arity).map(|i| i.to_string()).collect();
            json!(format!("({})", items.join(", ")))
        }
        InputKind::Str => json!("abc"),
    }
}

/// How inputs are written in `query` calls, for the system prompt.
fn encoding_line(task: &Task) -> &'static str {
    match task.input {
        InputKind::Int { .. } => "Write each input as a JSON integer (e.g. 7) or a string holding one (\"7\").",
        InputKind::Tuple { .. } => {
            "Write each input as a tuple string in parentheses (e.g. \"(1, 2, 3)\") or as a JSON array of integers; \
             `inputs` is always a list of such inputs."
        }
        InputKind::Str => "Write each input as a JSON string of lower-case letters (e.g. \"abc\").",
    }
}

/// The system prompt (`bbq-system-v1`): goal, `Input:`/`Output:` lines with the valid domain,
/// budget, batch limit, task paragraph, the seven guidelines and the tool-usage rules.
pub fn system_prompt(task: &Task, params: &TaskParams) -> String {
    let batch = task.query_batch_size;
    let plural = if batch == 1 { "input" } else { "inputs" };
    let example = format!("{{\"name\": \"{QUERY}\", \"arguments\": {{\"inputs\": [{}]}}}}", example_input(task));
    format!(
        "Your goal is to discover a hidden rule (a black-box function) through strategic queries, \
and then to predict its outputs on a set of test inputs.\n\
\n\
{input}\n\
{output}\n\
Query budget: {total}\n\
Batch limit: up to {batch} {plural} per query call. This limit must not be exceeded.\n\
\n\
TASK: The hidden rule is numerical or string-based. It uses no semantics or world knowledge: \
numbers are interpreted mathematically, and strings are interpreted as sequences of lexicographic \
characters. Each query reveals the function's output for the input you submit.\n\
\n\
The task runs in rounds (at most {rounds}). Round 0 is a single evaluation using only the sample \
pairs. Every later round has three phases:\n\
1. Query phase: call `{QUERY}` once with up to {batch} {plural}.\n\
2. Scratchpad phase: reply with plain text only (no tool call): your notes - observations, \
hypotheses, planned experiments - in at most {words} words; longer notes are truncated. The \
scratchpad and the full query history are the only things carried to later phases: every phase \
starts a fresh conversation.\n\
3. Evaluation phase: call `{SUBMIT}` with one prediction per test input. You are not told which \
predictions are right; the task ends as soon as all of them are right.\n\
\n\
GUIDELINES:\n\
1. Query widely at first to see the function's general behaviour.\n\
2. Turn your observations into explicit hypotheses.\n\
3. Refine your hypotheses with strategic queries.\n\
4. Actively seek evidence that could disconfirm your current hypothesis.\n\
5. Once confident, test corner cases.\n\
6. Choose the queries that reduce your uncertainty the most.\n\
7. Prefer simpler explanations when several fit the data.\n\
\n\
TOOLS: `{QUERY}(inputs)` in the query phase, `{SUBMIT}(predictions)` in the evaluation phase, and \
`{PYTHON}(code)` in any phase: Python 3 with the standard library only, no network, {secs} s and \
{mib} MiB limits, stdout and stderr each cut to {cap} characters, so print what you need. Python \
runs successfully at most once per phase. Each tool allows up to {attempts} attempts per phase: an \
invalid query, a wrong number of predictions, a malformed or missing call, or a Python run that \
fails counts as an attempt. After {attempts} failed attempts the phase is forfeited (no queries \
this round, or this evaluation counts as not solved; Python stays unavailable for the phase).\n\
{encoding}\n\
If you cannot call tools natively, write the call in your reply as\n\
<TOOL>{example}</TOOL>\n\
with the tool's name and its arguments object (a ```json fenced block holding the same object is \
accepted too).",
        input = task.input_description(params),
        output = task.output_description(),
        total = task.total_queries,
        rounds = task.rounds(),
        words = params.scratchpad_max_words,
        secs = params.python_timeout_s,
        mib = params.python_memory_mib,
        cap = params.python_output_cap_chars,
        attempts = params.max_attempts.max(1),
        encoding = encoding_line(task),
    )
}

/// The phase's state message (§4.7): round, scratchpad (from round 1 on), the full query
/// history, the remaining budget and the phase instruction (with the numbered test inputs in
/// the evaluation phase).
pub fn phase_message(episode: &Episode) -> String {
    let task = episode.task();
    let round = episode.round();
    let mut s = if round == 0 { "Round 0 (before any queries).".to_string() } else { format!("Round {round} of {}.", task.rounds()) };
    if round > 0 {
        let pad = episode.scratchpad();
        let pad = if pad.is_empty() { "(empty)" } else { pad };
        s.push_str(&format!("\n\nYour scratchpad:\n{pad}"));
    }
    let history = episode.history_lines();
    let history = if history.is_empty() { "(none)".to_string() } else { history };
    s.push_str(&format!(
        "\n\nQuery history ({}, in query order):\n{history}\n\nRemaining query budget: {} of {}.",
        count(episode.history().len(), "query", "queries"),
        episode.remaining_budget(),
        task.total_queries
    ));
    let words = episode.params().scratchpad_max_words;
    match episode.phase() {
        Phase::Query => {
            let max = task.query_batch_size.min(episode.remaining_budget()).max(1);
            let list = if max == 1 { "a list holding 1 input".to_string() } else { format!("a list of 1 to {max} inputs") };
            s.push_str(&format!("\n\nQUERY PHASE: call `{QUERY}` with {list}."));
        }
        Phase::Scratchpad => s.push_str(&format!(
            "\n\nSCRATCHPAD PHASE: reply with plain text only (no tool call): your updated scratchpad \
             (at most {words} words; longer text is truncated). It replaces the current scratchpad."
        )),
        Phase::Evaluation => {
            let inputs = episode.test_inputs();
            s.push_str(&format!(
                "\n\nEVALUATION PHASE: call `{SUBMIT}` with a list of exactly {} predictions, one per \
                 test input, in this order.\nTest inputs:",
                inputs.len()
            ));
            for (i, x) in inputs.iter().enumerate() {
                s.push_str(&format!("\n{}. {x}", i + 1));
            }
        }
        Phase::Finished => s.push_str("\n\nThe task is over."),
    }
    s
}

/// `n` with the singular or plural noun.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// JSON schema of one query input (a tuple is a string or an integer array).
fn input_schema(task: &Task) -> Value {
    match task.input {
        InputKind::Int { .. } => json!({"type": "integer"}),
        InputKind::Tuple { arity, .. } => json!({
            "type": "array", "items": {"type": "integer"},
            "description": format!("one input: the {arity} integers of the tuple, in order"),
        }),
        InputKind::Str => json!({"type": "string"}),
    }
}

/// JSON schema of one prediction.
fn output_schema(task: &Task) -> Value {
    match task.output {
        OutputKind::Class { .. } | OutputKind::Int => json!({"type": "integer"}),
        OutputKind::Str => json!({"type": "string"}),
    }
}

/// The `query` tool (§4.8).
pub fn query_tool(task: &Task) -> ToolSpec {
    ToolSpec {
        name: QUERY.into(),
        description: format!(
            "Reveal the hidden function's output for up to {} (each costs one query from the budget).",
            count(usize::try_from(task.query_batch_size).unwrap_or(usize::MAX), "input", "inputs")
        ),
        parameters: json!({
            "type": "object",
            "properties": {"inputs": {"type": "array", "items": input_schema(task), "description": "the inputs to query"}},
            "required": ["inputs"],
        }),
    }
}

/// The `submit_predictions` tool (§4.8).
pub fn submit_tool(task: &Task) -> ToolSpec {
    ToolSpec {
        name: SUBMIT.into(),
        description: "Submit one predicted output per test input, in the order listed. Correctness is not revealed.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"predictions": {"type": "array", "items": output_schema(task), "description": "one prediction per test input"}},
            "required": ["predictions"],
        }),
    }
}

/// The `execute_python` tool (§4.8).
pub fn python_tool(params: &TaskParams) -> ToolSpec {
    ToolSpec {
        name: PYTHON.into(),
        description: format!(
            "Run Python 3 code (standard library only, no network, {} s, {} MiB) and get its stdout, stderr, exit code \
             and whether it timed out. At most one successful run per phase.",
            params.python_timeout_s, params.python_memory_mib
        ),
        parameters: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the program; print the results you need"}},
            "required": ["code"],
        }),
    }
}

/// Tools offered in `phase`: the phase's own tool (none in the scratchpad phase) and
/// `execute_python`; the list is fixed per phase so requests stay cache-stable.
pub fn tools(task: &Task, params: &TaskParams, phase: Phase) -> Vec<ToolSpec> {
    let mut out = match phase {
        Phase::Query => vec![query_tool(task)],
        Phase::Evaluation => vec![submit_tool(task)],
        Phase::Scratchpad | Phase::Finished => Vec::new(),
    };
    out.push(python_tool(params));
    out
}

/// Short phase name used in call positions and logs.
pub fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Query => "query",
        Phase::Scratchpad => "scratchpad",
        Phase::Evaluation => "evaluation",
        Phase::Finished => "finished",
    }
}
