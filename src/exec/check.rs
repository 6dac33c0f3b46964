//! `evalgrid check`: one small request to each distinct model endpoint of a pipeline, never
//! cached, so a user learns before a run (and before paying for one) that the server is
//! reachable, the key accepted, which model answers, how long a prompt it takes, and whether
//! tools and streaming work.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::calls::{endpoint, with_key};
use crate::providers::{Answered, CallError, ChatRequest, Endpoint, Message, ProviderClient, StreamMode, ToolSpec, answered_at};
use crate::sandbox::container::{self, Runtime, RuntimeChoice};
use crate::spec::{ModelConfig, Pipeline};

/// What one endpoint answered to the check's requests.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointCheck {
    /// The model entry's id (`rule-compiler` for Eleusis' compiler).
    pub model: String,
    /// The wire protocol the calls use.
    pub protocol: String,
    /// The URL the calls go to.
    pub url: String,
    /// The server answered at all (any HTTP response).
    pub reachable: bool,
    /// The key was accepted (`None`: the server was not reached).
    pub key_accepted: Option<bool>,
    /// The model id the server answered with, as sent.
    pub answered_model: Option<String>,
    /// How that id compares with the one asked for (`same`, `snapshot`, `served_file`, `other`).
    pub answered_as: Option<String>,
    /// The context window in tokens, where the server says it (llama.cpp `/props`, vLLM
    /// and llama.cpp `/models`).
    pub context_window: Option<u64>,
    /// A streamed request was answered.
    pub streaming: Option<bool>,
    /// A request offering a tool was accepted; `called` says whether the model called it.
    pub tools: Option<String>,
    /// Which log-probabilities the endpoint gives: `next-token` (its answers carry the next
    /// token's top alternatives, what `choice: {method: logprobs}`, `acc` and `acc_norm` read;
    /// probed with a one-token request when the pipeline has such a task), or `none` with why.
    pub logprobs: String,
    /// What is wrong, in words; empty when the endpoint is usable as configured.
    pub problems: Vec<String>,
}

impl EndpointCheck {
    /// Whether a run would work against this endpoint as configured.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl EndpointCheck {
    /// Nothing known yet about `model`'s endpoint.
    fn unchecked(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            protocol: String::new(),
            url: String::new(),
            reachable: false,
            key_accepted: None,
            answered_model: None,
            answered_as: None,
            context_window: None,
            streaming: None,
            tools: None,
            logprobs: String::new(),
            problems: Vec::new(),
        }
    }
}

/// The tokens each check request may generate: enough for "OK", little to pay.
const CHECK_TOKENS: u64 = 16;

/// Which log-probabilities a model's tasks read, so `check` asks its endpoint for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogprobProbe {
    /// None: no probe.
    None,
    /// The next token's top alternatives (`method: logprobs`, `acc`, `acc_norm`).
    NextToken,
    /// The prompt's own tokens, echoed (`method: loglikelihood`), besides the chat checks.
    Loglikelihood,
    /// Only the prompt's own tokens: every task of the pipeline scores by `method:
    /// loglikelihood`, so the model is never asked at its chat endpoint (a base model's
    /// server may have no chat template).
    LoglikelihoodOnly,
}

/// One prompt-scoring request (`echo: true` at the completions endpoint): the column's text,
/// and a problem when the server refuses it or answers without the prompt's log-probabilities.
async fn loglikelihood_probe(client: &ProviderClient, model: &ModelConfig, check: &mut EndpointCheck) -> String {
    let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
    params.extend(crate::providers::logprobs::loglikelihood_params());
    const PROMPT: &str = "The capital of France is Paris";
    let ask = ChatRequest { messages: vec![Message::user(PROMPT)], params, ..ChatRequest::default() };
    let target = match endpoint(model, &ask).and_then(|t| with_key(t, model)) {
        Ok(target) => target,
        Err(error) => {
            check.problems.push(format!("loglikelihood: {error}"));
            return "NO".into();
        }
    };
    if !target.kind.protocol().scores_prompts() {
        check.problems.push(format!(
            "loglikelihood: the `{}` protocol gives no prompt log-probabilities (OpenAI-compatible completions servers with `echo` do: vLLM)",
            target.kind
        ));
        return "NO: none from this protocol".into();
    }
    if check.protocol.is_empty() {
        check.protocol = target.kind.to_string();
        check.url = crate::providers::request_url(&target);
    }
    let plain = Endpoint { stream: StreamMode::Off, ..target };
    match client.call(&plain, &ask).await {
        Ok(outcome) => {
            (check.reachable, check.key_accepted) = (true, Some(true));
            // The prompt's own tokens, not only the generated one (which starts at its end).
            let echoed = outcome.response.logprobs.iter().filter(|t| t.offset.is_some_and(|o| o < PROMPT.len() as u64)).count();
            if echoed > 0 {
                format!("loglikelihood ({echoed} prompt tokens echoed)")
            } else {
                check.problems.push("the server answered an `echo: true, logprobs: 1` completions request without the prompt's log-probabilities, which this pipeline's `method: loglikelihood` scorers need".into());
                "NO: answered without them".into()
            }
        }
        Err(error) => {
            note_failure(check, &error);
            "NO: refused".into()
        }
    }
}

/// Checks `model`'s endpoint with a plain, a streamed and a tool-offering request (the
/// latter two only when the plain one is answered), and with a one-token request for the next
/// token's log-probabilities when `probe_logprobs` (a task of the pipeline reads them).
pub async fn check_endpoint(client: &ProviderClient, model: &ModelConfig, probe: LogprobProbe) -> EndpointCheck {
    let probe_logprobs = probe == LogprobProbe::NextToken;
    if probe == LogprobProbe::LoglikelihoodOnly {
        let mut check = EndpointCheck::unchecked(&model.id);
        check.logprobs = loglikelihood_probe(client, model, &mut check).await;
        return check;
    }
    let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
    params.insert("max_tokens".into(), json!(CHECK_TOKENS));
    let ask = ChatRequest { messages: vec![Message::user("Reply with the single word OK.")], params, ..ChatRequest::default() };
    let mut check = EndpointCheck::unchecked(&model.id);
    let target = match endpoint(model, &ask) {
        Ok(target) => target,
        Err(error) => {
            check.problems.push(error.to_string());
            return check;
        }
    };
    check.protocol = target.kind.to_string();
    check.url = crate::providers::request_url(&target);
    let logprob_params = target.kind.protocol().next_token_params();
    let gives_logprobs = logprob_params.is_some();
    check.logprobs = if gives_logprobs { "next-token (not probed)".into() } else { format!("none (the {} protocol has none evalgrid reads)", target.kind) };
    let target = match with_key(target, model) {
        Ok(target) => target,
        Err(error) => {
            check.problems.push(error.to_string());
            return check;
        }
    };
    let plain = Endpoint { stream: StreamMode::Off, ..target.clone() };
    match client.call(&plain, &ask).await {
        Ok(outcome) => {
            check.reachable = true;
            check.key_accepted = Some(true);
            let answered = outcome.response.answered_model.clone();
            let class = answered_at(&plain.base_url, &model.model, &answered);
            if class == Answered::Other && !model.accept_other_model {
                check.problems.push(format!(
                    "the server answers as model `{answered}`, not `{}`: set `model: {answered}`, or `accept_other_model: true` on model `{}`",
                    model.model, model.id
                ));
            }
            check.answered_as = Some(answered_class(class).to_owned());
            check.answered_model = (!answered.is_empty()).then_some(answered);
        }
        Err(error) => {
            note_failure(&mut check, &error);
            return check;
        }
    }
    check.context_window = context_window(&plain).await;
    let streamed = Endpoint { stream: StreamMode::On, ..target.clone() };
    match client.call(&streamed, &ask).await {
        Ok(_) => check.streaming = Some(true),
        Err(error) => {
            check.streaming = Some(false);
            check.problems.push(format!("streaming: {error}"));
        }
    }
    let tool = ToolSpec {
        name: "get_time".into(),
        description: "Returns the current time.".into(),
        parameters: json!({"type": "object", "properties": {}, "required": []}),
    };
    let with_tool = ChatRequest { messages: vec![Message::user("What time is it? Use the tool.")], tools: Some(vec![tool]), ..ask };
    check.tools = Some(match client.call(&plain, &with_tool).await {
        Ok(outcome) if !outcome.response.tool_calls.is_empty() => "called".into(),
        Ok(_) => "accepted, not called".into(),
        Err(error) => format!("refused: {}", crate::text::one_line(&error.to_string())),
    });
    if probe == LogprobProbe::Loglikelihood {
        check.logprobs = loglikelihood_probe(client, model, &mut check).await;
    }
    if probe_logprobs && let Some(asked) = logprob_params {
        let mut params: Map<String, Value> = model.params.clone().into_iter().collect();
        params.extend(asked);
        let ask =
            ChatRequest { messages: vec![Message::user("Which letter comes first: A, B or C? Answer with the letter.")], params, ..ChatRequest::default() };
        check.logprobs = match client.call(&plain, &ask).await {
            Ok(outcome) if !outcome.response.logprobs.is_empty() => format!("next-token (top {})", outcome.response.logprobs.len()),
            Ok(_) => {
                check.problems.push("the server answered a `logprobs: true, top_logprobs` request without log-probabilities, which this pipeline's log-probability scorers need".into());
                "NO: answered without them".into()
            }
            Err(error) => {
                check.problems.push(format!("log-probabilities: {}", crate::text::one_line(&error.to_string())));
                "NO: refused".into()
            }
        };
    }
    check
}

fn answered_class(class: Answered) -> &'static str {
    match class {
        Answered::Same => "same",
        Answered::Snapshot => "snapshot",
        Answered::ServedFile => "served_file",
        Answered::Other => "other",
    }
}

/// Fills in what a failed first request says about the endpoint.
fn note_failure(check: &mut EndpointCheck, error: &CallError) {
    match error {
        CallError::Connect { .. } | CallError::Timeout | CallError::Config { .. } => {}
        CallError::Auth { .. } => {
            check.reachable = true;
            check.key_accepted = Some(false);
        }
        _ => {
            check.reachable = true;
            check.key_accepted = Some(true);
        }
    }
    check.problems.push(crate::text::one_line(&error.to_string()).into_owned());
}

/// The context window the server reports: llama.cpp's `GET /props` (per slot, the real limit),
/// else `GET <base_url>/models` (vLLM's `max_model_len`, llama.cpp's `meta.n_ctx`) for the
/// model asked for or the only one served. `None` where the server says neither.
async fn context_window(endpoint: &Endpoint) -> Option<u64> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok()?;
    let base = endpoint.base_url.trim_end_matches('/');
    let get = |url: String| {
        let http = http.clone();
        async move { http.get(url).send().await.ok()?.error_for_status().ok()?.json::<Value>().await.ok() }
    };
    let root = base.strip_suffix("/v1").unwrap_or(base);
    if let Some(n) = get(format!("{root}/props")).await.and_then(|props| props.pointer("/default_generation_settings/n_ctx")?.as_u64()) {
        return Some(n);
    }
    let models = get(format!("{base}/models")).await?;
    let data = models.get("data")?.as_array()?;
    let entry = data.iter().find(|m| m.get("id").and_then(Value::as_str) == Some(endpoint.model.as_str())).or_else(|| (data.len() == 1).then(|| &data[0]))?;
    entry.get("max_model_len").and_then(Value::as_u64).or_else(|| entry.pointer("/meta/n_ctx").and_then(Value::as_u64))
}
/// What `evalgrid check` found about the container runtime some of a pipeline's tasks need
/// (Harbor task folders): which runtime, its version, and whether it can run a container,
/// so a run (or a shard on a cluster node) learns it before any trial.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeCheck {
    /// What the tasks asked for (`auto`, `podman`, `docker`).
    pub asked: RuntimeChoice,
    /// The runtime that would be used.
    pub runtime: Option<Runtime>,
    /// Its binary.
    pub binary: Option<String>,
    /// Its version.
    pub version: Option<String>,
    /// Whether it started a container here.
    pub can_run: bool,
    /// The tasks (`benchmark/task`) that need it.
    pub tasks: Vec<String>,
    /// What is wrong, in words; empty when trials can run.
    pub problems: Vec<String>,
}

impl RuntimeCheck {
    /// Whether trials needing this runtime can run here.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The runtimes a pipeline's tasks need, each with the tasks that need it (from each
/// benchmark's [`crate::envs::benchmark::Benchmark::container_runtime`]).
#[must_use]
pub fn runtimes_needed(pipeline: &Pipeline) -> BTreeMap<RuntimeChoice, Vec<String>> {
    let mut out: BTreeMap<RuntimeChoice, Vec<String>> = BTreeMap::new();
    for task in &pipeline.tasks {
        let Some(bench) = crate::envs::registry::get(&task.benchmark) else { continue };
        if let Some(choice) = bench.container_runtime(task) {
            out.entry(choice).or_default().push(task.qualified());
        }
    }
    out
}

/// Finds the runtime for `choice` and has it start a container (probed once per process).
#[must_use]
pub fn check_runtime(choice: RuntimeChoice, tasks: Vec<String>) -> RuntimeCheck {
    let mut check = RuntimeCheck { asked: choice, runtime: None, binary: None, version: None, can_run: false, tasks, problems: Vec::new() };
    match container::detect(choice) {
        Ok(rt) => {
            check.runtime = Some(rt.runtime);
            check.binary = Some(rt.binary.display().to_string());
            check.version = Some(rt.version);
            check.can_run = true;
        }
        Err(e) => {
            // Say which binary was found even when it cannot run a container.
            let candidates: &[Runtime] = match choice {
                RuntimeChoice::Auto => &[Runtime::Podman, Runtime::Docker],
                RuntimeChoice::Podman => &[Runtime::Podman],
                RuntimeChoice::Docker => &[Runtime::Docker],
            };
            if let Some(rt) = candidates.iter().find_map(|&r| container::locate(r).ok()) {
                check.runtime = Some(rt.runtime);
                check.binary = Some(rt.binary.display().to_string());
                check.version = Some(rt.version);
            }
            check.problems.push(format!("{e}; these tasks' trials would all be errored (see docs/agents.md, \"Runtime set-up\")"));
        }
    }
    check
}
