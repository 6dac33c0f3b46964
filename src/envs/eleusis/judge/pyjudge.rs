//! The Python judge (spec §3.2–§3.3, §8 Q7/Q8): runs LLM-compiled guess code in a fresh
//! process per check, forked by a persistent, sandboxed `python3` zygote, so that verdicts follow real Python semantics
//! (truthiness, `%` on negatives, Enum-vs-string comparisons, exceptions …), while the
//! secret rule stays native Rust.
//!
//! The Rust side drives the §3.3 walk: for each visited state it computes the secret rule's
//! verdicts on the 52 universe cards, asks the worker for the guess's outputs on that state
//! and compares them here. The worker is never sent the secret verdicts, so guess code that
//! escapes the restricted builtins finds no answer key to copy (issue 21). To save round
//! trips, states are sent in batches along the walk (1, 2, 4 … up to
//! [`PyJudgeConfig::max_batch_states`]; `1` = one round trip per walk step). Verdicts are
//! exact: the walk depends only on the secret rule and the RNG, and the comparison follows
//! reference order (skip cards where the actual rule raised; stop at the first direct
//! mismatch; stop after a state with an exception). The guess may be called on cards past the
//! check's end within the last batch; those outputs are discarded.
//!
//! Deviations from the reference (evalgrid behaviour): the guess gets a fresh *copy* of the
//! mainline for every call (the reference passes the live simulated list, so a mutating guess
//! corrupts its walk, §3.3 "mutation hazard", §8 Q8); per-call CPU limit (a timeout counts as
//! an exception for that card, §8 Q7), per-check wall-clock limit, memory limit, and worker
//! kill + restart on hangs or crashes, all reported through [`JudgeError`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::deck::{universe, universe_index};
use crate::envs::eleusis::game::equivalence::{RuleFn, SimulationParams, Verdict};
use crate::envs::eleusis::game::pyrandom::PyRandom;
use crate::envs::eleusis::game::{Judge, JudgeRequest};

mod pool;
mod process;
mod rulefn;

use process::Worker;
pub use process::{WORKER_SOURCE, WorkerFailure, WorkerInfo};
pub use rulefn::PyGuessRule;

/// Limits and batching of the Python judge; part of a verdict's provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyJudgeConfig {
    /// Interpreter to start (looked up on `PATH` unless it contains a `/`).
    pub python: PathBuf,
    /// Wall-clock budget of one whole check (§8 Q7 default 10 s).
    pub check_time_limit: Duration,
    /// CPU budget of one guess call; exceeding it is an exception for that card (§8 Q7).
    pub call_cpu_limit: Duration,
    /// `RLIMIT_AS` of the worker; an allocation beyond it raises `MemoryError` in the guess.
    pub memory_limit_bytes: u64,
    /// Most walk states per round trip (1 = one request per walk step).
    pub max_batch_states: usize,
    /// Extra wall time granted after the check deadline before the worker is killed.
    pub kill_grace: Duration,
}

impl Default for PyJudgeConfig {
    fn default() -> Self {
        PyJudgeConfig {
            python: PathBuf::from("python3"),
            check_time_limit: Duration::from_secs(10),
            call_cpu_limit: Duration::from_millis(250),
            memory_limit_bytes: 512 << 20,
            max_batch_states: 256,
            kill_grace: Duration::from_millis(1500),
        }
    }
}

/// Why a verdict is not a clean judgement of the guess (the spec's `judge_error` flag):
/// the guess or the judge ran into a limit, so the verdict is "not equivalent" by policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JudgeError {
    /// The worker could not be started (no `python3`, handshake failure).
    #[error("python judge unavailable: {detail}")]
    Unavailable {
        /// What went wrong.
        detail: String,
    },
    /// Some guess calls exceeded the per-call CPU limit (counted on the exception path).
    #[error("{count} guess call(s) exceeded the per-call CPU limit")]
    CallTimeouts {
        /// Number of timed-out calls.
        count: u64,
    },
    /// Some guess calls raised `MemoryError` under the worker's memory limit.
    #[error("{count} guess call(s) hit the memory limit")]
    MemoryLimit {
        /// Number of calls that raised `MemoryError`.
        count: u64,
    },
    /// The whole check ran past its wall-clock budget and was aborted.
    #[error("check exceeded its {limit_ms} ms time limit")]
    CheckTimeout {
        /// The budget, in milliseconds.
        limit_ms: u64,
    },
    /// The rule compiler answered every attempt without usable code (spec Q6): the verdict
    /// is the reference's "No code provided", flagged so it is never taken for a wrong guess.
    #[error("the rule compiler produced no usable code")]
    NoCode,
    /// The worker died, hung past the grace period or broke the protocol; it was killed
    /// and is restarted on the next check.
    #[error("python judge worker failed: {detail}")]
    WorkerFailed {
        /// The failure.
        detail: String,
    },
}

/// A verdict of the Python judge with evalgrid's extra diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyVerdict {
    /// The verdict; `message` is byte-identical to the reference when `judge_error` is none.
    pub verdict: Verdict,
    /// Set when a limit or judge failure decided (or may have decided) the verdict.
    pub judge_error: Option<JudgeError>,
    /// First exception raised by the guess (`NameError: name 'getattr' is not defined`).
    pub first_exception: Option<String>,
    /// Worker round trips used (compile included).
    pub round_trips: u32,
}

impl PyVerdict {
    fn plain(verdict: Verdict) -> Self {
        PyVerdict { verdict, judge_error: None, first_exception: None, round_trips: 0 }
    }
}

/// Why a guess could not be loaded for evaluation (see [`PyJudge::guess_rule`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuessLoadError {
    /// Empty or missing code: the reference "no code" verdict applies.
    #[error("no code provided for guessed rule")]
    NoCode,
    /// The wrapped body does not compile; the Python error text.
    #[error("guessed rule code has syntax errors: {0}")]
    Syntax(String),
    /// The judge itself failed.
    #[error(transparent)]
    Judge(#[from] JudgeError),
}

/// One walk state queued for the worker: its position, mainline and the actual verdicts
/// (`b'1'` accept, `b'0'` reject, `b'E'` the actual rule raised).
struct PendingState {
    sim: u32,
    turn: u32,
    mainline: Vec<Card>,
    actual: [u8; 52],
}

/// The §3.3 walk generator: advances along the actual rule's accepted cards.
struct Walk<'a> {
    start: &'a [Card],
    params: SimulationParams,
    rng: PyRandom,
    sim: u32,
    turn: u32,
    mainline: Vec<Card>,
    done: bool,
}

impl<'a> Walk<'a> {
    fn new(start: &'a [Card], params: &SimulationParams) -> Self {
        Walk {
            start,
            params: *params,
            rng: PyRandom::new(params.seed),
            sim: 1,
            turn: 1,
            mainline: start.to_vec(),
            done: params.num_simulations == 0 || params.turns_per_simulation == 0,
        }
    }

    fn next_sim(&mut self) {
        self.sim += 1;
        self.turn = 1;
        self.mainline.clear();
        self.mainline.extend_from_slice(self.start);
        if self.sim > self.params.num_simulations {
            self.done = true;
        }
    }

    /// The current state with the actual rule's verdicts, then a step forward.
    fn next_state(&mut self, actual: &dyn RuleFn) -> Option<PendingState> {
        if self.done {
            return None;
        }
        const UNIVERSE: [Card; 52] = universe();
        let mut verdicts = [b'0'; 52];
        let mut accepted: Vec<usize> = Vec::with_capacity(52);
        let mut raised = false;
        let mask = actual.acceptance_mask(&self.mainline);
        for (i, card) in UNIVERSE.iter().enumerate() {
            let outcome = match mask {
                Some(m) => Ok(m & (1u64 << i) != 0),
                None => actual.eval(card, &self.mainline),
            };
            match outcome {
                Ok(true) => {
                    verdicts[i] = b'1';
                    accepted.push(i);
                }
                Ok(false) => {}
                Err(_) => {
                    verdicts[i] = b'E';
                    raised = true;
                }
            }
        }
        let state = PendingState { sim: self.sim, turn: self.turn, mainline: self.mainline.clone(), actual: verdicts };
        if raised {
            // The check necessarily ends at this state.
            self.done = true;
        } else if accepted.is_empty() {
            self.next_sim();
        } else {
            let k = self.rng.randbelow_usize(accepted.len());
            self.mainline.push(UNIVERSE[accepted[k]]);
            self.turn += 1;
            if self.turn > self.params.turns_per_simulation {
                self.next_sim();
            }
        }
        Some(state)
    }
}

fn indices(mainline: &[Card]) -> Vec<usize> {
    // Cards with an invalid rank cannot come from the game; map them to A♥ rather than panic.
    mainline.iter().map(|c| universe_index(*c).unwrap_or(0)).collect()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A persistent Python judge: one sandboxed worker, restarted after any failure.
#[derive(Debug)]
pub struct PyJudge {
    config: PyJudgeConfig,
    worker: Option<Worker>,
    /// The worker came warm from the process-wide pool (it may have died since).
    reused: bool,
    restarts: u64,
    last_info: Option<WorkerInfo>,
}

impl PyJudge {
    /// Starts the worker now, so a missing `python3` is reported up front.
    pub fn new(config: PyJudgeConfig) -> Result<Self, JudgeError> {
        let mut judge = PyJudge { config, worker: None, reused: false, restarts: 0, last_info: None };
        judge.ensure_worker()?;
        Ok(judge)
    }

    /// The configuration in use.
    pub fn config(&self) -> &PyJudgeConfig {
        &self.config
    }

    /// Interpreter provenance of the most recent worker.
    pub fn worker_info(&self) -> Option<&WorkerInfo> {
        self.last_info.as_ref()
    }

    /// Workers started after the first one (each follows a kill or crash).
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    fn ensure_worker(&mut self) -> Result<&mut Worker, JudgeError> {
        if self.worker.is_none() {
            let startup = self.config.check_time_limit.max(Duration::from_secs(10));
            let (worker, reused) =
                pool::take(&self.config.python, self.config.memory_limit_bytes, startup).map_err(|e| JudgeError::Unavailable { detail: e.to_string() })?;
            self.reused = reused;
            if self.last_info.is_some() {
                self.restarts += 1;
            }
            self.last_info = Some(worker.info().clone());
            self.worker = Some(worker);
        }
        // Just ensured above.
        self.worker.as_mut().ok_or(JudgeError::Unavailable { detail: "worker vanished".to_owned() })
    }

    /// One request; on failure the worker is dropped (killed) and the error returned.
    fn call(&mut self, request: Value, deadline: Instant) -> Result<Value, JudgeError> {
        let budget = self.config.check_time_limit;
        let worker = self.ensure_worker()?;
        match worker.request(request, deadline, budget) {
            Ok(reply) => Ok(reply),
            Err(failure) => {
                self.worker = None;
                Err(JudgeError::WorkerFailed { detail: failure.to_string() })
            }
        }
    }

    /// Compiles `code` in a fresh child process (ending the previous check's child). A
    /// pooled zygote found dead is replaced once, transparently.
    fn compile(&mut self, code: &str, load: bool) -> Result<(), GuessLoadError> {
        let deadline = Instant::now() + self.config.check_time_limit + self.config.kill_grace;
        let request = json!({"op": "compile", "code": code, "load": load});
        let reply = match self.fork_child().and_then(|()| self.call(request.clone(), deadline)) {
            Err(JudgeError::WorkerFailed { .. }) if std::mem::take(&mut self.reused) => {
                self.fork_child()?;
                self.call(request, deadline)?
            }
            other => other?,
        };
        if reply.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let error = reply.get("error").and_then(Value::as_str).unwrap_or("");
        Err(GuessLoadError::Syntax(error.to_owned()))
    }

    fn fork_child(&mut self) -> Result<(), JudgeError> {
        let forked = self.ensure_worker()?.fork_child();
        forked.map_err(|failure| {
            self.worker = None;
            JudgeError::WorkerFailed { detail: failure.to_string() }
        })
    }

    /// Ends the current check's child process; a failure drops the worker (restarted later).
    fn end_child(&mut self) {
        if let Some(worker) = self.worker.as_mut()
            && worker.end_child().is_err()
        {
            self.worker = None;
        }
    }

    /// Byte-compiles a guess body as the reference validation does (§3.2); `Err` carries
    /// Python's error text. Used by the rule compiler to decide whether to retry.
    pub fn validate(&mut self, code: &str) -> Result<(), GuessLoadError> {
        if code.is_empty() {
            return Err(GuessLoadError::NoCode);
        }
        let compiled = self.compile(code, false);
        self.end_child();
        compiled
    }

    /// Judges a game request with already compiled code (`None` = the compiler gave up).
    pub fn judge_request(&mut self, request: &JudgeRequest<'_>, code: Option<&str>, params: &SimulationParams) -> PyVerdict {
        self.check(&request.secret, code, request.mainline, params)
    }

    /// The §3.3 equivalence check of `actual` against the Python guess `code` from `start`,
    /// in a fresh process. Never panics and never blocks longer than the configured limits.
    pub fn check(&mut self, actual: &dyn RuleFn, code: Option<&str>, start: &[Card], params: &SimulationParams) -> PyVerdict {
        let verdict = self.check_in_child(actual, code, start, params);
        self.end_child();
        verdict
    }

    fn check_in_child(&mut self, actual: &dyn RuleFn, code: Option<&str>, start: &[Card], params: &SimulationParams) -> PyVerdict {
        let code = match code {
            Some(c) if !c.is_empty() => c,
            _ => return PyVerdict::plain(Verdict::no_code()),
        };
        let began = Instant::now();
        let mut out = PyVerdict::plain(Verdict { equivalent: false, message: String::new(), comparisons: 0, mismatches: 0 });
        out.round_trips = 1;
        match self.compile(code, true) {
            Ok(()) => {}
            Err(GuessLoadError::Syntax(e)) => {
                out.verdict = Verdict::syntax_error(&e);
                return out;
            }
            Err(GuessLoadError::NoCode) => return PyVerdict::plain(Verdict::no_code()),
            Err(GuessLoadError::Judge(e)) => return self.failed(out, e),
        }
        let mut walk = Walk::new(start, params);
        let mut batch_size = 1usize;
        let (mut timeouts, mut memory_errors) = (0u64, 0u64);
        loop {
            let mut batch = Vec::with_capacity(batch_size);
            while batch.len() < batch_size {
                match walk.next_state(actual) {
                    Some(state) => batch.push(state),
                    None => break,
                }
            }
            if batch.is_empty() {
                let n = out.verdict.comparisons;
                out.verdict.equivalent = true;
                out.verdict.message = format!("Rules appear equivalent: {n} comparisons, all matched");
                return out;
            }
            let remaining = self.config.check_time_limit.saturating_sub(began.elapsed());
            let request = json!({
                "op": "eval",
                "time_limit_s": remaining.as_secs_f64(),
                "call_cpu_s": self.config.call_cpu_limit.as_secs_f64(),
                // The mainline only: the secret verdicts never leave this process.
                "states": batch.iter().map(|s| json!({"m": indices(&s.mainline)})).collect::<Vec<_>>(),
            });
            let deadline = began + self.config.check_time_limit + self.config.kill_grace;
            out.round_trips += 1;
            let reply = match self.call(request, deadline) {
                Ok(r) => r,
                Err(e) => return self.failed(out, e),
            };
            if reply.get("ok").and_then(Value::as_bool) != Some(true) {
                let error = reply.get("error").and_then(Value::as_str).unwrap_or("?");
                let e = JudgeError::WorkerFailed { detail: format!("eval request refused: {error}") };
                return self.failed(out, e);
            }
            let errors: Vec<(usize, usize, String)> = reply.get("errors").and_then(|e| serde_json::from_value(e.clone()).ok()).unwrap_or_default();
            let results: Vec<String> = reply.get("results").and_then(|r| serde_json::from_value(r.clone()).ok()).unwrap_or_default();
            let aborted = reply.get("deadline").and_then(Value::as_bool) == Some(true);
            for (s, (state, result)) in batch.iter().zip(&results).enumerate() {
                let r = result.as_bytes();
                let v = &mut out.verdict;
                for i in 0..52 {
                    if i >= r.len() {
                        if aborted {
                            break;
                        }
                        let e = JudgeError::WorkerFailed { detail: "truncated eval reply".to_owned() };
                        return self.failed(out, e);
                    }
                    v.comparisons += 1;
                    let a = state.actual[i];
                    if a == b'E' {
                        // The actual rule raised: the reference does not evaluate the guess.
                        v.mismatches += 1;
                        continue;
                    }
                    if matches!(r[i], b'E' | b'T' | b'M') && out.first_exception.is_none() {
                        out.first_exception = errors.iter().find(|(es, ei, _)| (*es, *ei) == (s, i)).map(|e| e.2.clone());
                    }
                    match r[i] {
                        b'0' | b'1' => {
                            let g = r[i] == b'1';
                            if g != (a == b'1') {
                                v.mismatches += 1;
                                v.message = mismatch_message(state, i, a == b'1', g);
                                return with_flags(out, timeouts, memory_errors);
                            }
                        }
                        b'T' => {
                            timeouts += 1;
                            v.mismatches += 1;
                        }
                        b'M' => {
                            memory_errors += 1;
                            v.mismatches += 1;
                        }
                        _ => v.mismatches += 1,
                    }
                }
                if aborted && r.len() < 52 {
                    break;
                }
                if v.mismatches > 0 {
                    v.message = format!(
                        "Rules differ: {}/{} comparisons mismatched. Stopped at simulation {}, turn {}.",
                        v.mismatches, v.comparisons, state.sim, state.turn
                    );
                    return with_flags(out, timeouts, memory_errors);
                }
            }
            if aborted {
                let limit_ms = ms(self.config.check_time_limit);
                out.verdict.equivalent = false;
                out.verdict.message = format!(
                    "Judge error: the guessed rule exceeded the {limit_ms} ms time limit of \
                     the check (aborted after {} comparisons)",
                    out.verdict.comparisons
                );
                out.judge_error = Some(JudgeError::CheckTimeout { limit_ms });
                return out;
            }
            if results.len() < batch.len() {
                let e = JudgeError::WorkerFailed { detail: "eval reply has fewer states than requested".to_owned() };
                return self.failed(out, e);
            }
            batch_size = (batch_size * 2).min(self.config.max_batch_states.max(1));
        }
    }

    fn failed(&mut self, mut out: PyVerdict, error: JudgeError) -> PyVerdict {
        out.verdict.equivalent = false;
        out.verdict.message = format!("Judge error: {error}");
        out.judge_error = Some(error);
        out
    }

    /// Loads `code` as a [`RuleFn`] for [`check`](crate::envs::eleusis::game::equivalence::check)
    /// (one round trip per walk step through `acceptance_mask`); meant for one check, whose
    /// wall-clock budget starts now.
    pub fn guess_rule(&mut self, code: Option<&str>) -> Result<PyGuessRule<'_>, GuessLoadError> {
        let code = match code {
            Some(c) if !c.is_empty() => c,
            _ => return Err(GuessLoadError::NoCode),
        };
        self.compile(code, true)?;
        let deadline = Instant::now() + self.config.check_time_limit;
        Ok(PyGuessRule::new(self, deadline))
    }
}

impl Drop for PyJudge {
    fn drop(&mut self) {
        self.end_child();
        if let Some(worker) = self.worker.take() {
            pool::give_back(&self.config.python, self.config.memory_limit_bytes, worker);
        }
    }
}

/// A synchronous [`Judge`] for [`Round::apply`](crate::envs::eleusis::game::Round::apply):
/// `code_for` maps a guess text to compiled code (a compile cache, recorded `guessed_code`, …;
/// `None` = no code), and the Python judge decides. The full [`PyVerdict`] of the latest check
/// is kept.
pub struct CodeJudge<'a, F: FnMut(&str) -> Option<String>> {
    /// The Python judge.
    pub py: &'a mut PyJudge,
    /// Guess text → function body.
    pub code_for: F,
    /// Simulation parameters of the checks.
    pub params: SimulationParams,
    /// The latest verdict with its diagnostics (`judge_error` …).
    pub last: Option<PyVerdict>,
}

impl<F: FnMut(&str) -> Option<String>> Judge for CodeJudge<'_, F> {
    fn judge(&mut self, request: &JudgeRequest<'_>) -> Verdict {
        let code = (self.code_for)(request.guess);
        let verdict = self.py.judge_request(request, code.as_deref(), &self.params);
        let plain = verdict.verdict.clone();
        self.last = Some(verdict);
        plain
    }
}

fn mismatch_message(state: &PendingState, i: usize, actual: bool, guessed: bool) -> String {
    let card = universe()[i];
    let py = |b: bool| if b { "True" } else { "False" };
    format!("Mismatch at sim {}, turn {}: card={card}, actual={}, guessed={}", state.sim, state.turn, py(actual), py(guessed))
}

fn with_flags(mut out: PyVerdict, timeouts: u64, memory_errors: u64) -> PyVerdict {
    if timeouts > 0 {
        out.judge_error = Some(JudgeError::CallTimeouts { count: timeouts });
    } else if memory_errors > 0 {
        out.judge_error = Some(JudgeError::MemoryLimit { count: memory_errors });
    }
    out
}

#[cfg(test)]
mod tests;
