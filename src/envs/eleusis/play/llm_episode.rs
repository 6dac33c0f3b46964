//! An Eleusis round played by an API model (spec §4): per turn up to three
//! attempts at an `<ACTION>` reply, then a seeded fallback card; formal and
//! shadow guesses are compiled to Python by the rule-compiler model and
//! judged by the sandboxed Python judge.
//!
//! Every model call (player and compiler) is a cached step, and every
//! verdict is cached under (secret rule, guessed code, start mainline,
//! simulation parameters), so a resumed round replays for free.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::compiler::{CompileAttempts, CompileStep, render_compile_prompt};
use super::prompt::{PROMPT_VERSION, render_action_prompt};
use super::response::{AttemptLoop, AttemptRecord, AttemptStep, TokenCounts};
use crate::envs::eleusis::game::equivalence::SimulationParams;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{self, GameConfig, Round};
use crate::envs::eleusis::judge::pyjudge::{JudgeError, PyJudge, PyJudgeConfig, PyVerdict};
use crate::exec::{CallSite, EpisodeContext, Fresh, StepError, SubStep};
use crate::plan::StepKind;
use crate::plan::key::key_components;
use crate::providers::{ChatRequest, FinishReason, Message};
use crate::spec::ModelConfig;

/// Version of the verdict record and judge protocol (part of verdict keys).
/// 2: the judge worker is no longer sent the secret verdicts (issue 21), so verdicts of a
/// guess that read them are judged again.
const VERDICT_VERSION: u32 = 2;
/// Compiler attempts before a guess is judged "no code" (the older runs' 3).
const COMPILE_ATTEMPTS: u32 = 3;

/// Per-turn bookkeeping that the round record does not hold.
#[derive(Debug, Serialize)]
struct TurnMeta {
    turn: u32,
    fallback: bool,
    retry_count: u32,
    failures: Vec<AttemptRecord>,
    tokens: TokenCounts,
    tokens_all_calls: TokenCounts,
    compile_attempts: Option<u32>,
    judge_error: Option<String>,
}

/// Judges one guess in a fresh sandboxed process (forked by a shared zygote): a process
/// never outlives one check, so guess code that poisons its interpreter can never judge
/// another guess (of this cell or any other), and a verdict never depends on what ran before it.
fn judge(rule: SecretRule, code: Option<String>, mainline: Vec<game::card::Card>) -> Result<PyVerdict, StepError> {
    let mut j = PyJudge::new(PyJudgeConfig::default()).map_err(|e| StepError::episode_in("cannot start the Python judge", e))?;
    let mut verdict = j.check(&rule, code.as_deref(), &mainline, &SimulationParams::default());
    if code.is_none() && verdict.judge_error.is_none() {
        // Never cached (judge_error), never scored as the model's wrong guess.
        verdict.judge_error = Some(JudgeError::NoCode);
    }
    Ok(verdict)
}

/// The rule-compiler model named by the task's `compiler` parameter.
pub fn compiler_model(params: &crate::spec::Params) -> Result<ModelConfig, StepError> {
    let c = params.get("compiler").and_then(Value::as_object).ok_or_else(|| {
        StepError::Unsupported("an API player needs a rule compiler: set `params.compiler: {provider, model, ...}` on the Eleusis task".into())
    })?;
    let text = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    let name = text("provider").unwrap_or_else(|| "openai".into());
    let provider = crate::spec::Provider::parse(&name).ok_or_else(|| StepError::Unsupported(format!("provider `{name}` makes no API calls")))?;
    // Checked when the task was resolved; a task's resolved params no longer hold it (a
    // price is in no key), and the run reads it from the pipeline's helper prices.
    let price = c.get("price").and_then(|p| crate::spec::Price::from_param(p).ok());
    Ok(ModelConfig {
        id: "rule-compiler".into(),
        provider,
        model: text("model").ok_or_else(|| StepError::Unsupported("`compiler.model` is required".into()))?,
        base_url: text("base_url"),
        api_key_env: text("api_key_env"),
        params: c.get("params").and_then(Value::as_object).map(|m| m.clone().into_iter().collect()).unwrap_or_default(),
        price,
        accept_other_model: c.get("accept_other_model").and_then(Value::as_bool).unwrap_or(false),
        headers: std::collections::BTreeMap::new(),
        api: crate::providers::OpenAiApi::Auto,
        background: crate::providers::Background::Auto,
        stream: crate::providers::StreamMode::Auto,
        batch: None,
        serve: None,
        agent: None,
    })
}

/// Plays one round of `rule`, repetition `batch`, with an API model.
pub async fn run(
    ctx: EpisodeContext<'_>,
    model: &ModelConfig,
    compiler: &ModelConfig,
    rule: SecretRule,
    batch: u32,
    config: GameConfig,
    sample: u64,
) -> Result<Value, StepError> {
    let mut round = Round::new(rule, batch, config).map_err(StepError::episode)?;
    let params: Map<String, Value> = model.params.clone().into_iter().collect();
    let mut meta = Vec::new();
    'turns: while !round.is_over() {
        let obs = round.observation();
        let mut attempts = AttemptLoop::new(&obs.hand, round.seed(), obs.turn).map_err(StepError::episode)?;
        let decision = loop {
            match attempts.step() {
                AttemptStep::Decided(d) => break d,
                AttemptStep::Ask { attempt, .. } => {
                    let prompt = render_action_prompt(&obs, &config, attempt);
                    let request = ChatRequest { messages: vec![Message::user(prompt)], params: params.clone(), ..ChatRequest::default() };
                    let site = CallSite { scope: Some(ctx.episode_key), position: format!("turn {} attempt {attempt}", obs.turn), sample };
                    // Transport failures (after the client's own retries) fail the
                    // cell instead of being scored: errors are never wrong answers.
                    let reply = ctx.chat(model, &request, &site).await?;
                    // The prompt no longer fits the model's context, and later prompts only grow:
                    // the round ends here, scored as one without a correct guess (the retries of
                    // the turn would be refused alike, and a random fallback is not the model's play).
                    if reply.finish_reason == FinishReason::ContextExceeded {
                        round.end_context_exceeded();
                        break 'turns;
                    }
                    let tokens = TokenCounts {
                        output_tokens: reply.usage.output,
                        reasoning_tokens: reply.usage.reasoning,
                        answer_tokens: reply.usage.output.saturating_sub(reply.usage.reasoning),
                    };
                    attempts.on_reply(&reply.text, reply.finish_reason == FinishReason::Length, tokens);
                }
            }
        };
        let prepared = round.prepare(decision.action.clone()).map_err(StepError::episode)?;
        let (verdict, compile_attempts, judge_error) = match prepared.judge_request() {
            None => (None, None, None),
            Some(request) => {
                let (code, used) = compile(ctx, compiler, request.guess).await?;
                let v = cached_verdict(ctx, rule, code, request.mainline.to_vec()).await?;
                (Some(v.verdict), Some(used), v.judge_error.map(|e| e.to_string()))
            }
        };
        meta.push(TurnMeta {
            turn: obs.turn,
            fallback: decision.fallback,
            retry_count: decision.retry_count,
            failures: decision.failures.clone(),
            tokens: decision.tokens_parsed,
            tokens_all_calls: decision.tokens_all,
            compile_attempts,
            judge_error,
        });
        round.commit(prepared, verdict).map_err(StepError::episode)?;
    }
    let mut out = serde_json::to_value(round.finish()).map_err(StepError::episode)?;
    let output_tokens: u64 = meta.iter().map(|m| m.tokens_all_calls.output_tokens).sum();
    out["llm"] = json!({"prompt_version": PROMPT_VERSION, "turns": meta, "output_tokens": output_tokens});
    Ok(out)
}

/// Compiles a guess with bounded attempts; `None` code after exhaustion.
async fn compile(ctx: EpisodeContext<'_>, compiler: &ModelConfig, guess: &str) -> Result<(Option<String>, u32), StepError> {
    let mut attempts = CompileAttempts::new(COMPILE_ATTEMPTS);
    let params: Map<String, Value> = compiler.params.clone().into_iter().collect();
    loop {
        match attempts.step() {
            CompileStep::Compiled { code, attempt } => return Ok((Some(code), attempt)),
            CompileStep::Exhausted => return Ok((None, COMPILE_ATTEMPTS)),
            CompileStep::Ask { attempt } => {
                let request = ChatRequest { messages: vec![Message::user(render_compile_prompt(guess))], params: params.clone(), ..ChatRequest::default() };
                // Compiled code is shared by guess text: no episode scope.
                let site = CallSite { scope: None, position: format!("compile attempt {attempt}"), sample: 0 };
                match ctx.chat(compiler, &request, &site).await {
                    Ok(reply) => {
                        let text = reply.text;
                        let valid = tokio::task::spawn_blocking(move || validate(&text).map(|r| (text, r))).await.map_err(StepError::worker)??;
                        let (text, result) = valid;
                        attempts.on_reply(&text, |_| result);
                    }
                    // A transport failure fails the cell like any other (retryable with
                    // `--retry-errors`); it is never a guess without code.
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// Byte-compiles the code a reply contains, on a judge worker.
fn validate(reply: &str) -> Result<Result<(), String>, StepError> {
    let Some(code) = super::compiler::extract_code(reply) else { return Ok(Err("no code".into())) };
    let mut j = PyJudge::new(PyJudgeConfig::default()).map_err(|e| StepError::episode_in("cannot start the Python judge", e))?;
    Ok(j.validate(&code).map_err(|e| e.to_string()))
}

/// Key components of a verdict: the secret rule, the guessed code, the
/// starting cards and the simulation parameters.
#[must_use]
pub fn verdict_components(rule: SecretRule, code: Option<&str>, mainline: &[game::card::Card]) -> Value {
    let mut fields = Map::new();
    fields.insert("rule".into(), json!(rule.name()));
    fields.insert("code".into(), json!(code));
    fields.insert("mainline".into(), json!(mainline.iter().map(ToString::to_string).collect::<Vec<_>>()));
    fields.insert("simulation".into(), json!({"walks": 100, "turns": 40, "seed": 42}));
    key_components(StepKind::Verdict, "eleusis.judge", VERDICT_VERSION, fields)
}

/// A verdict from the cache, or judged now and stored.
async fn cached_verdict(ctx: EpisodeContext<'_>, rule: SecretRule, code: Option<String>, mainline: Vec<game::card::Card>) -> Result<PyVerdict, StepError> {
    let step = SubStep::new(ctx.episode_key, StepKind::Verdict, verdict_components(rule, code.as_deref(), &mainline));
    let done = step
        .run(ctx.calls.store(), || async move {
            let verdict = tokio::task::spawn_blocking(move || judge(rule, code, mainline)).await.map_err(StepError::worker)??;
            // Verdicts decided by a limit or a judge failure are not cached: a
            // rerun on a quieter machine may judge them cleanly.
            Ok(if verdict.judge_error.is_none() { Fresh::cacheable(verdict) } else { Fresh::uncached(verdict) })
        })
        .await?;
    Ok(done.value)
}

/// Runs an API-model round for a resolved Eleusis task instance.
pub async fn run_task(ctx: EpisodeContext<'_>, model: &ModelConfig, task: &crate::spec::TaskInstance, seed: u64) -> Result<Value, StepError> {
    let rule = SecretRule::from_name(&task.task).ok_or_else(|| StepError::Unsupported(format!("unknown rule `{}`", task.task)))?;
    let batch = u32::try_from(seed).map_err(|_| StepError::Unsupported(format!("Eleusis seeds are repetition indices and must fit in 32 bits, got {seed}")))?;
    let number = |k: &str| task.params.get(k).and_then(Value::as_i64);
    let defaults = GameConfig::default();
    let config = GameConfig {
        hand_size: number("hand_size").and_then(|v| usize::try_from(v).ok()).unwrap_or(defaults.hand_size),
        max_turns: number("max_turns").and_then(|v| u32::try_from(v).ok()).unwrap_or(defaults.max_turns),
        wrong_guess_penalty: number("wrong_guess_penalty").unwrap_or(defaults.wrong_guess_penalty),
    };
    let compiler = compiler_model(&task.params)?;
    run(ctx, model, &compiler, rule, batch, config, seed).await
}
