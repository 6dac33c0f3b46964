//! Cached model calls: every call an episode makes is a step of its own.
//!
//! The key covers the provider, exact model id, base URL and the exact
//! request body (via [`request_fingerprint`]), the sample index, and the
//! call's position in its episode, so k samples are k entries and a resumed
//! episode replays finished calls for free. Errors are never stored; empty,
//! refused, filtered and truncated answers are the model's answers and are. An
//! answer from a model other than the one asked for fails the call (never
//! scored, never cached) unless the model entry says `accept_other_model`; a
//! dated snapshot of the requested alias is the same model. API keys are read
//! from the environment at call time and never enter a key, an entry, a log
//! line or an error message.
//!
//! Single-flight: identical calls (same call key) in flight at the same time
//! make one HTTP request. The first caller makes it; the others wait for it and
//! then read the cache entry it wrote (recorded under their own episodes). An error is shared
//! too: the first caller already spent the whole retry and time budget, and N
//! waiters retrying would multiply the requests against a failing provider; the
//! error is never cached, so the next run (or `--retry-errors`) calls again.
//! Transport knobs (concurrency, retries, timeouts, pacing) never enter a key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::progress::Progress;
use super::step_error::StepError;
use super::substep::{Fresh, SubStep};
use crate::cache::{PendingResponses, Store};
use crate::plan::key::key_components;
use crate::plan::{StepKey, StepKind};
use crate::providers::route;
use crate::providers::scripted::ScriptError;
use crate::providers::{
    Answered, AttemptClass, CallError, ChatRequest, ChatResponse, ConcurrencyMode, Endpoint, FinishReason, ProviderClient, ResponseLedger, answered_at,
    request_fingerprint,
};
use crate::spec::ModelConfig;

/// Version of the call-step record; bump when `ChatResponse`'s stored shape changes.
pub const CALL_VERSION: u32 = 1;

/// Where a call sits, so repeated identical prompts in different places stay
/// distinct when they must (multi-turn games) and shared when they may.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CallSite {
    /// Episode the call belongs to, for calls whose answer depends on the
    /// episode's history; `None` for independent single-shot questions.
    pub scope: Option<StepKey>,
    /// Position inside the episode, e.g. `turn 3 attempt 1`.
    pub position: String,
    /// Sample (seed / epoch) index: k samples are k cache entries.
    pub sample: u64,
}

/// Token and call counters for progress and reports.
#[derive(Debug, Default)]
pub struct Usage {
    /// Calls answered from the cache.
    pub cached_calls: AtomicU64,
    /// Calls sent over HTTP (successful).
    pub live_calls: AtomicU64,
    /// HTTP attempts including retries.
    pub attempts: AtomicU64,
    /// Failed calls.
    pub failed_calls: AtomicU64,
    /// Input tokens of live calls.
    pub input_tokens: AtomicU64,
    /// Output tokens of live calls.
    pub output_tokens: AtomicU64,
    /// Cost of live calls in micro-dollars, for models with a `price`.
    pub cost_micro_usd: AtomicU64,
    /// Answers from a model other than the one requested (all of them).
    pub other_model: AtomicU64,
    /// Of those, the ones cached and scored because the model entry accepts other models.
    pub other_model_cached: AtomicU64,
    /// Calls answered by an identical call in flight at the same time (no HTTP).
    pub shared_calls: AtomicU64,
    /// HTTP 429 responses: pacing, not failures.
    pub rate_limited: AtomicU64,
    /// Streamed attempts abandoned because the stream went silent (each was retried while
    /// the retry policy allowed).
    pub stream_stalls: AtomicU64,
    /// Answers of this run (live or cached) whose prompt did not fit the model's context.
    pub context_exceeded: AtomicU64,
    /// Cached answers asked again because their outcome was named by `--retry-outcome`.
    pub reasked: AtomicU64,
}

impl Usage {
    /// One-line summary for progress bars and run summaries.
    #[must_use]
    pub fn summary(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let live = get(&self.live_calls);
        let cached = get(&self.cached_calls);
        let shared = get(&self.shared_calls);
        if live + cached + shared + get(&self.failed_calls) == 0 {
            return String::new();
        }
        let shared = if shared > 0 { format!(" + {shared} shared") } else { String::new() };
        format!(
            "calls {live} live + {cached} cached{shared} · tokens {} in / {} out · ${:.4}",
            get(&self.input_tokens),
            get(&self.output_tokens),
            get(&self.cost_micro_usd) as f64 / 1e6
        )
    }
}

/// What a failed in-flight call leaves for identical calls that waited on it: they fail
/// with the same error, kept whole (its typed cause included) behind an `Arc`.
#[derive(Debug, Clone)]
struct SharedError(Arc<StepError>);

impl SharedError {
    /// The error a waiter gets: the shared one itself, except that a cache failure (the
    /// first caller's own write) reads as the waiter's failed episode, as it always has.
    fn to_error(&self) -> StepError {
        match &*self.0 {
            StepError::Cache(_) => StepError::Episode { message: self.0.to_string(), source: Some(Box::new(Arc::clone(&self.0))) },
            _ => StepError::Shared(Arc::clone(&self.0)),
        }
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<SharedError>>>;

/// Calls in flight by key; an entry lives while someone holds or waits on it.
#[derive(Debug, Default)]
struct InFlight(Mutex<HashMap<StepKey, Slot>>);

/// Membership in one key's entry; leaving removes the entry when nobody else
/// is in it, also when the call is cancelled (dropped mid-await).
struct Joined<'a> {
    map: &'a InFlight,
    key: StepKey,
    slot: Slot,
}

impl InFlight {
    fn join(&self, key: StepKey) -> Joined<'_> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = Arc::clone(map.entry(key).or_default());
        Joined { map: self, key, slot }
    }
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        let mut map = self.map.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Only the map and this membership hold it: nobody else waits.
        if map.get(&self.key).is_some_and(|slot| Arc::ptr_eq(slot, &self.slot)) && Arc::strong_count(&self.slot) == 2 {
            map.remove(&self.key);
        }
    }
}

/// Requests rejected in a row with the same message, before a model's first answer, that stop
/// its calls: one could be the prompt's fault, three alike with nothing answered are the
/// endpoint's (a parameter or a template the server refuses).
pub const LANE_BAD_REQUESTS: u32 = 3;

/// What a run knows of one model's calls, to stop sending them at a failure they all share.
#[derive(Debug, Default)]
struct LaneState {
    answered: bool,
    bad_requests: u32,
    last_rejection: Option<String>,
    stopped: Option<String>,
}

/// Shared state for making model calls during a run.
#[derive(Debug)]
pub struct CallContext {
    store: Store,
    client: Arc<ProviderClient>,
    offline: bool,
    in_flight: InFlight,
    /// Per model id: the calls being prepared or sent, bounded (see [`CallContext::gate`]).
    gates: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
    /// Where run-log lines go while cells run: above the progress bar once attached.
    log: Mutex<Option<Progress>>,
    /// Set at the first cache write that failed for lack of space: from then on no call is
    /// sent, so the answers lost are at most those already in flight.
    disk_full: AtomicBool,
    /// Finish classes (`context_exceeded`, `length`, …) whose cached answers are asked again
    /// (`run --retry-outcome`); empty: every cached answer is used.
    retry_outcomes: Vec<String>,
    /// Per model id: whether it has answered, and why its calls stopped being sent.
    lanes: Mutex<HashMap<String, LaneState>>,
    /// The `scripted` provider's replies files, each read once per run.
    scripts: crate::providers::scripted::Scripts,
    /// Counters.
    pub usage: Usage,
}

impl CallContext {
    /// Creates the context; `offline` serves only from the cache.
    #[must_use]
    pub fn new(store: Store, client: Arc<ProviderClient>, offline: bool) -> Self {
        Self {
            store,
            client,
            offline,
            in_flight: InFlight::default(),
            gates: Mutex::default(),
            log: Mutex::new(None),
            disk_full: AtomicBool::new(false),
            retry_outcomes: Vec::new(),
            lanes: Mutex::default(),
            scripts: crate::providers::scripted::Scripts::default(),
            usage: Usage::default(),
        }
    }

    /// Asks again the calls whose cached answer has one of these finish classes
    /// (`run --retry-outcome`), and stores the new answer over the old.
    #[must_use]
    pub fn with_retry_outcomes(mut self, classes: Vec<String>) -> Self {
        self.retry_outcomes = classes;
        self
    }

    /// Why `model`'s calls are no longer sent, once one failed in a way every call would.
    fn stopped(&self, model: &str) -> Option<String> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner).get(model).and_then(|lane| lane.stopped.clone())
    }

    /// Notes that `model` answered: from then on a failure is the call's, not the lane's.
    fn lane_answered(&self, model: &str) {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner).entry(model.to_owned()).or_default().answered = true;
    }

    /// Stops `model`'s unsent calls when `error` is one every call of it would hit: the key
    /// refused (401/403), the quota used up, an unusable endpoint, an unknown model or route
    /// (404), and, before the model has answered at all, a server that cannot be reached or
    /// [`LANE_BAD_REQUESTS`] requests rejected alike (a parameter the server refuses).
    fn lane_failed(&self, model: &str, endpoint: &Endpoint, error: &StepError) {
        let StepError::Call { error: call, .. } = error else { return };
        let reason = {
            let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = lanes.entry(model.to_owned()).or_default();
            let lane_wide = match call {
                CallError::Auth { .. } | CallError::Quota { .. } | CallError::Config { .. } | CallError::BadRequest { status: 404, .. } => true,
                CallError::Connect { .. } => !lane.answered,
                CallError::BadRequest { message, .. } => {
                    if lane.last_rejection.as_deref() == Some(message.as_str()) {
                        lane.bad_requests += 1;
                    } else {
                        (lane.bad_requests, lane.last_rejection) = (1, Some(message.clone()));
                    }
                    !lane.answered && lane.bad_requests >= LANE_BAD_REQUESTS
                }
                _ => false,
            };
            if !lane_wide || lane.stopped.is_some() {
                return;
            }
            error.to_string()
        };
        self.stop(model, endpoint, &reason);
    }

    /// Stops sending `model`'s calls (its cells fail with `reason`; other models go on), and
    /// says so once in the run log.
    fn stop(&self, model: &str, endpoint: &Endpoint, reason: &str) {
        {
            let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = lanes.entry(model.to_owned()).or_default();
            if lane.stopped.is_some() {
                return;
            }
            lane.stopped = Some(reason.to_owned());
        }
        // Also the calls already waiting for a slot of the lane.
        self.client.halt_lane(endpoint, &format!("model `{model}` stopped at a failure every call of it would hit: {}", crate::text::one_line(reason)));
        self.note(&format!(
            "error: model `{model}`: {}\n  every call of it would fail the same way, so its calls not yet sent are not sent (other models go on); `evalgrid check <pipeline>` tries each endpoint with one small request",
            crate::text::one_line(reason)
        ));
    }

    /// Whether the cached answer of `key` is one `--retry-outcome` asks to re-ask.
    fn reask(&self, key: StepKey) -> bool {
        if self.retry_outcomes.is_empty() || self.offline {
            return false;
        }
        matches!(self.store.get_output::<ChatResponse>(key), Ok(Some(cached)) if self.retry_outcomes.iter().any(|class| class == cached.finish_reason.class()))
    }

    /// The gate a model's calls pass, first come first served: twice the lane's concurrency
    /// may be keyed, looked up and built at once. A benchmark that asks all its items at once
    /// (BBEH: 200 per cell, a cell per task and seed) would otherwise prepare thousands of
    /// requests before the first is sent, and prepare each long before a slot is free.
    fn gate(&self, model: &str) -> Arc<tokio::sync::Semaphore> {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        let gate = gates.entry(model.to_owned()).or_insert_with(|| {
            let cap = match self.client.config().concurrency {
                ConcurrencyMode::Static { max_concurrency } => max_concurrency,
                ConcurrencyMode::Adaptive(config) => config.cap,
            };
            Arc::new(tokio::sync::Semaphore::new(cap.saturating_mul(2).clamp(16, tokio::sync::Semaphore::MAX_PERMITS)))
        });
        Arc::clone(gate)
    }

    /// Sends later run-log lines above `progress` (which hides itself off a terminal), so
    /// they never garble the bar.
    pub fn attach_progress(&self, progress: Progress) {
        *self.log.lock().unwrap_or_else(PoisonError::into_inner) = Some(progress);
    }

    /// Writes one line to the run log (stderr): above the progress bar when one is attached,
    /// else as a `tracing` warning.
    pub fn note(&self, line: &str) {
        match self.log.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            Some(progress) => progress.println(line),
            None => tracing::warn!("{line}"),
        }
    }

    /// Call counters plus, for every lane the provider has rate-limited, how it is
    /// being paced: `paced openai m: 12 429s, 3 in flight (limit 9), 37.5 req/s`.
    #[must_use]
    pub fn progress_line(&self) -> String {
        let mut parts = vec![self.usage.summary()];
        for lane in self.client.lane_snapshots() {
            if lane.pacer.rate_limited == 0 && lane.pacer.rate.is_none() {
                continue;
            }
            let rate = lane.pacer.rate.map_or_else(|| "unpaced".to_owned(), |rate| format!("{rate:.1} req/s"));
            let paused = if lane.pacer.paused { ", paused (Retry-After)" } else { "" };
            parts.push(format!(
                "paced {}: {} 429s, {} in flight (limit {}), {rate}{paused}",
                lane.name, lane.pacer.rate_limited, lane.limiter.in_flight, lane.limiter.limit
            ));
        }
        parts.retain(|part| !part.is_empty());
        parts.join(" · ")
    }

    /// The cache, for the other sub-steps of an episode (verdicts, submissions).
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sends (or replays) one chat call for `model` at `site`, as a sub-step
    /// of `episode` (recorded under it for `cache gc --keep`).
    pub async fn chat(&self, episode: StepKey, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<ChatResponse, StepError> {
        if model.provider.is_scripted() {
            self.usage.live_calls.fetch_add(1, Ordering::Relaxed);
            return self.scripted_reply(model, request);
        }
        // Never closed, so acquiring cannot fail; the ticket is held until the call is done.
        let _ticket = self.gate(&model.id).acquire_owned().await.ok();
        let endpoint = endpoint(model, request)?;
        let reasoning_tag = cached_reasoning_tag(&endpoint, request);
        let step = SubStep::new(episode, StepKind::Call, call_components(&endpoint, request, site));
        // Declared before the lock guard so it is dropped after it.
        let joined = self.in_flight.join(step.key());
        let mut shared = joined.slot.lock().await;
        if let Some(error) = shared.as_ref() {
            self.usage.shared_calls.fetch_add(1, Ordering::Relaxed);
            return Err(error.to_error());
        }
        // Checked under the in-flight slot: a call asked twice at once is re-asked once, and
        // the second finds the new answer.
        let reask = self.reask(step.key());
        let step = step.refreshed(reask);
        // Another evalgrid process on this cache may be sending the same call: wait for its
        // claim to end, and the lookup below finds its answer. Not needed for a hit.
        let claim = if self.offline || (!reask && self.store.contains(step.key())) { None } else { Some(self.claim(step.key()).await?) };
        // A background response this call started, recorded until its answer is cached.
        let ledger = endpoint.background.then(|| CallLedger { pending: PendingResponses::of(&self.store), key: step.key() });
        let answered = AtomicBool::new(false);
        let lane_endpoint = endpoint.clone();
        let base_url = endpoint.base_url.clone();
        let done = step
            .run(&self.store, || async {
                if self.offline {
                    return Err(StepError::episode_msg(format!("--offline: call {} to `{}` is not in the cache", step.key().short(), model.model)));
                }
                if self.disk_full.load(Ordering::SeqCst) {
                    return Err(StepError::DiskFull);
                }
                if let Some(reason) = self.stopped(&model.id) {
                    return Err(StepError::episode_msg(format!("not sent: model `{}` stopped at a failure every call of it would hit: {reason}", model.id)));
                }
                let response = match self.send(endpoint, model, request, ledger.as_ref()).await {
                    Ok(response) => response,
                    Err(error) => {
                        self.lane_failed(&model.id, &lane_endpoint, &error);
                        return Err(error);
                    }
                };
                answered.store(true, Ordering::Relaxed);
                match answered_at(&base_url, &model.model, &response.answered_model) {
                    // A dated snapshot of the alias is the model asked for (noted in the
                    // report's provenance); a local server's model file is the model it serves.
                    Answered::Same | Answered::Snapshot | Answered::ServedFile => {
                        self.lane_answered(&model.id);
                        Ok(Fresh::cacheable(response))
                    }
                    Answered::Other if model.accept_other_model => {
                        self.usage.other_model.fetch_add(1, Ordering::Relaxed);
                        self.usage.other_model_cached.fetch_add(1, Ordering::Relaxed);
                        Ok(Fresh::cacheable(response))
                    }
                    // Never scored silently, never cached.
                    // Every later call would be answered by it too: the model's calls stop here.
                    Answered::Other => {
                        self.usage.other_model.fetch_add(1, Ordering::Relaxed);
                        let reason = format!(
                            "the server answered with model `{}` when `{}` was asked for; set `accept_other_model: true` on model `{}` to score its answers",
                            response.answered_model, model.model, model.id
                        );
                        self.stop(&model.id, &lane_endpoint, &reason);
                        Err(StepError::episode_msg(reason))
                    }
                }
            })
            .await;
        // The answer is cached (or refused, and a rerun should ask again): the response is
        // no longer needed. Kept when the cache write failed, so a rerun fetches it unpaid.
        if let Some(ledger) = &ledger
            && answered.load(Ordering::Relaxed)
            && !matches!(done, Err(StepError::Cache(_)))
        {
            ledger.forget();
        }
        if let Err(StepError::Cache(error)) = &done
            && error.is_storage_full()
            && !self.disk_full.swap(true, Ordering::SeqCst)
        {
            self.client.halt("the cache disk is full (free space, then run again)");
            self.note(&format!(
                "error: the cache disk is full ({error}): no new model calls are sent; the answers of calls already in flight are lost, every answer stored before is kept. Free space, then run again."
            ));
        }
        drop(claim);
        // Waiters read a cached answer from the cache (recorded under their own
        // episodes); anything else they get from here.
        let done = done.map_err(|error| {
            let error = Arc::new(error);
            *shared = Some(SharedError(Arc::clone(&error)));
            StepError::Shared(error)
        });
        drop(shared);
        drop(joined);
        let mut done = done?;
        if done.hit {
            self.usage.cached_calls.fetch_add(1, Ordering::Relaxed);
            if let Some(tag) = &reasoning_tag {
                done.value = settle_cached_reasoning(done.value, tag);
            }
        } else if reask {
            self.usage.reasked.fetch_add(1, Ordering::Relaxed);
        }
        if done.value.finish_reason == FinishReason::ContextExceeded {
            self.usage.context_exceeded.fetch_add(1, Ordering::Relaxed);
        }
        Ok(done.value)
    }

    /// Answers a call from the model's replies file (deterministic, no HTTP), read once per run.
    fn scripted_reply(&self, model: &ModelConfig, request: &ChatRequest) -> Result<ChatResponse, StepError> {
        let path = model.params.get("file").and_then(Value::as_str).ok_or_else(|| StepError::episode_msg("scripted model without `params.file`"))?;
        let path = std::path::Path::new(path);
        let failed = |error: ScriptError| match error {
            // The I/O or JSON error stays the failed episode's source.
            ScriptError::Read { path, source } => StepError::episode_in(format!("cannot read replies file `{}`", path.display()), source),
            ScriptError::Parse { path, source } => StepError::episode_in(format!("replies file `{}`", path.display()), source),
            other @ ScriptError::NoReply(_) => StepError::episode_msg(other.to_string()),
        };
        let script = self.scripts.get(path).map_err(failed)?;
        script.reply(path, &model.model, request).map_err(failed)
    }

    /// Waits until this process holds the claim on call `key` (see [`Store::try_claim`]);
    /// another process holding it is sending the same call.
    async fn claim(&self, key: StepKey) -> Result<crate::cache::KeyLock, StepError> {
        let mut wait = std::time::Duration::from_millis(10);
        loop {
            let store = self.store.clone();
            let claimed = if store.quick_io() {
                store.try_claim(key)?
            } else {
                tokio::task::spawn_blocking(move || store.try_claim(key)).await.map_err(StepError::worker)??
            };
            if let Some(claim) = claimed {
                return Ok(claim);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(std::time::Duration::from_millis(250));
        }
    }

    /// Sends one call over HTTP and counts it; a background call keeps its response id in
    /// `ledger`.
    async fn send(&self, endpoint: Endpoint, model: &ModelConfig, request: &ChatRequest, ledger: Option<&CallLedger>) -> Result<ChatResponse, StepError> {
        let endpoint = with_key(endpoint, model)?;
        let record = self.client.call_resumable(&endpoint, request, ledger.map(|ledger| ledger as &dyn ResponseLedger)).await;
        self.usage.attempts.fetch_add(u64::from(record.attempts), Ordering::Relaxed);
        let rate_limited = record.failed_attempts.iter().filter(|class| **class == AttemptClass::RateLimited).count();
        self.usage.rate_limited.fetch_add(rate_limited as u64, Ordering::Relaxed);
        let stalls = record.failed_attempts.iter().filter(|class| **class == AttemptClass::StreamStalled).count();
        if stalls > 0 {
            self.usage.stream_stalls.fetch_add(stalls as u64, Ordering::Relaxed);
            let outcome = match &record.result {
                Ok(_) => format!("retried, answered on attempt {}", record.attempts),
                Err(error) => format!("the call failed after {} attempt(s): {error}", record.attempts),
            };
            self.note(&format!(
                "warning: model `{}`: the response stream stalled {stalls} time(s) (no data for {:?}, transport.stream_idle_timeout_s); {outcome}",
                model.id,
                self.client.config().stream_idle_timeout
            ));
        }
        let response = match record.result {
            Ok(response) => response,
            Err(error) => {
                self.usage.failed_calls.fetch_add(1, Ordering::Relaxed);
                return Err(StepError::Call { error, attempts: record.attempts });
            }
        };
        self.usage.live_calls.fetch_add(1, Ordering::Relaxed);
        self.usage.input_tokens.fetch_add(response.usage.input, Ordering::Relaxed);
        self.usage.output_tokens.fetch_add(response.usage.output, Ordering::Relaxed);
        if let Some(price) = model.price {
            let usd = price.cost(response.usage.input, response.usage.cached, response.usage.output);
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "cost is small and non-negative")]
            self.usage.cost_micro_usd.fetch_add((usd * 1e6).round() as u64, Ordering::Relaxed);
        }
        Ok(response)
    }
}

/// The cache's record of the background response one call started ([`PendingResponses`]
/// under the call's key), so an interrupted call is polled, not paid for again, next run.
struct CallLedger {
    pending: PendingResponses,
    key: StepKey,
}

impl ResponseLedger for CallLedger {
    fn recorded(&self) -> Option<String> {
        self.pending.get(self.key).map(|record| record.response_id)
    }

    fn record(&self, response_id: &str) {
        // Without the record the call still runs; only an interrupted run would send it again.
        if let Err(error) = self.pending.record(self.key, response_id) {
            tracing::warn!(response = response_id, call = %self.key.short(), "cannot record a background response for resuming: {error}");
        }
    }

    fn forget(&self) {
        if let Err(error) = self.pending.remove(self.key) {
            tracing::warn!(call = %self.key.short(), "cannot remove the record of a finished background response: {error}");
        }
    }
}

/// The tag whose leading block the provider layer moves to `reasoning` for this call
/// (OpenAI-compatible servers), so a cached answer can be held to the same rule.
fn cached_reasoning_tag(endpoint: &Endpoint, request: &ChatRequest) -> Option<String> {
    endpoint.kind.protocol().reasoning_tag(request, &endpoint.base_url)
}

/// A cached answer stored before the provider layer split reasoning off (its key is the
/// same: the default split sends nothing new) still starts with the `<think>` block; it
/// is split now, so no benchmark scores or executes a draft written while thinking. An
/// answer split when it arrived already has its reasoning and is left exactly as stored.
fn settle_cached_reasoning(response: ChatResponse, tag: &str) -> ChatResponse {
    if response.reasoning.as_deref().is_some_and(|r| !r.is_empty()) {
        return response;
    }
    crate::providers::openai::split_reasoning(response, tag)
}

/// The cache key a call would have; `None` for built-in models.
#[must_use]
pub fn call_key(model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Option<StepKey> {
    endpoint(model, request).ok().map(|e| StepKey::compute(&call_components(&e, request, site)))
}

/// Key components of a call: model identity and exact body, site, versions.
#[must_use]
pub fn call_components(endpoint: &Endpoint, request: &ChatRequest, site: &CallSite) -> Value {
    let mut fields = Map::new();
    fields.insert("request".into(), request_fingerprint(endpoint, request));
    fields.insert("site".into(), json!(site));
    key_components(StepKind::Call, "providers", CALL_VERSION, fields)
}

/// The endpoint a model's calls go to (see [`crate::providers::route::endpoint`]); a model
/// that makes no API calls is `Unsupported`.
pub(crate) fn endpoint(model: &ModelConfig, request: &ChatRequest) -> Result<Endpoint, StepError> {
    route::endpoint(model, request).map_err(|e| StepError::Unsupported(e.to_string()))
}

/// Adds the key and secret headers, read from the environment now.
pub(crate) fn with_key(endpoint: Endpoint, model: &ModelConfig) -> Result<Endpoint, StepError> {
    route::with_secrets(endpoint, model).map_err(|e| StepError::episode_msg(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::answered_as;
    use crate::providers::mock::{Fault, FaultPlan, MockConfig, MockServer};
    use crate::providers::{ClientConfig, Message};
    use crate::spec::Provider;
    use std::time::Duration;

    fn model(server: &MockServer, answered: &str) -> ModelConfig {
        ModelConfig { base_url: Some(format!("{}/v1", server.base_url().trim_end_matches('/'))), ..config("m", Provider::OpenAi, answered) }
    }

    /// A model entry with every setting at its default.
    fn config(id: &str, provider: Provider, model: &str) -> ModelConfig {
        ModelConfig {
            id: id.into(),
            provider,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            params: crate::spec::Params::new(),
            price: None,
            accept_other_model: false,
            headers: std::collections::BTreeMap::new(),
            api: crate::providers::OpenAiApi::Auto,
            background: crate::providers::Background::Auto,
            stream: crate::providers::StreamMode::Auto,
            serve: None,
        }
    }

    fn context(dir: &std::path::Path) -> CallContext {
        let polling = crate::providers::PollConfig { first: Duration::from_millis(5), max: Duration::from_millis(20) };
        let config = ClientConfig { use_system_proxy: false, retry: crate::providers::RetryPolicy::no_retries(), polling, ..ClientConfig::default() };
        CallContext::new(Store::open(dir).unwrap(), Arc::new(ProviderClient::new(config).unwrap()), false)
    }

    fn ask(text: &str) -> ChatRequest {
        ChatRequest { messages: vec![Message::user(text)], ..ChatRequest::default() }
    }

    /// Two identical calls from two episodes in flight together: one HTTP request, both
    /// answered, the cache entry recorded under both episodes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_calls_in_flight_make_one_request() {
        let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), ..MockConfig::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let model = model(&server, "mock-1");
        let (e1, e2) = (StepKey::compute(&json!("e1")), StepKey::compute(&json!("e2")));
        let site = CallSite::default();
        let request = ask("same question");
        let (a, b) = tokio::join!(ctx.chat(e1, &model, &request, &site), ctx.chat(e2, &model, &request, &site));
        assert_eq!(a.unwrap().text, b.unwrap().text);
        assert_eq!(server.calls(), 1, "one HTTP request for two identical calls in flight");
        assert_eq!(ctx.usage.live_calls.load(Ordering::Relaxed), 1);
        let key = call_key(&model, &request, &site).unwrap();
        assert_eq!(ctx.store().substeps(e2).unwrap(), vec![key], "the waiter's episode records the entry too");
        // A different call is not held back by, nor merged with, the first.
        let other = ctx.chat(e1, &model, &ask("other question"), &site).await.unwrap();
        assert!(other.text.contains("other question"));
        assert_eq!(server.calls(), 2);
        assert!(ctx.in_flight.0.lock().unwrap().is_empty(), "finished calls leave no entry");
    }

    /// Calls past a model's gate are at most twice its concurrency: the rest wait, unkeyed
    /// and unbuilt, in the order they came, and every call is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_wait_at_the_gate_beyond_twice_the_concurrency() {
        // Watched at 200 ms, well inside the first answers' 500 ms: slow machines included.
        let server = MockServer::start(MockConfig { latency: Duration::from_millis(500), ..MockConfig::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = ClientConfig {
            use_system_proxy: false,
            concurrency: ConcurrencyMode::Static { max_concurrency: 10 },
            retry: crate::providers::RetryPolicy::no_retries(),
            ..ClientConfig::default()
        };
        let ctx = CallContext::new(Store::open(dir.path()).unwrap(), Arc::new(ProviderClient::new(config).unwrap()), false);
        let model = model(&server, "mock-1");
        let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
        let requests: Vec<ChatRequest> = (0..50).map(|i| ask(&format!("question {i}"))).collect();
        let all = futures::future::join_all(requests.iter().map(|r| ctx.chat(episode, &model, r, &site)));
        let watch = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            (ctx.gate("m").available_permits(), server.calls())
        };
        let (answers, (free, sent)) = tokio::join!(all, watch);
        assert_eq!((free, sent), (0, 10), "20 past the gate (10 sent, 10 waiting for a slot), 30 waiting at it");
        assert_eq!(ctx.gate("m").available_permits(), 20, "every ticket is returned");
        for (i, answer) in answers.into_iter().enumerate() {
            assert!(answer.unwrap().text.contains(&format!("question {i}")));
        }
        assert_eq!(server.calls(), 50);
    }

    /// The error of the one request is shared, not retried by each waiter, and not cached:
    /// the same call later makes a request again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_share_the_error_which_is_not_cached() {
        let faults = FaultPlan::sequence([Fault::Status { status: 400, message: "no".into() }]);
        let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), faults, ..MockConfig::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let model = model(&server, "mock-1");
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        let calls = futures::future::join_all((0..3).map(|_| ctx.chat(episode, &model, &request, &site))).await;
        assert_eq!(server.calls(), 1);
        for result in calls {
            let error = result.unwrap_err().to_string();
            assert!(error.contains("bad_request"), "{error}");
        }
        assert_eq!(ctx.usage.shared_calls.load(Ordering::Relaxed), 2);
        let again = ctx.chat(episode, &model, &request, &site).await.unwrap();
        assert!(again.text.contains('q'));
        assert_eq!(server.calls(), 2, "the error was not cached");
    }

    /// A failed cache write is shared with the waiters whole (issue 22 item 5c): each of
    /// them reads the same text as before and still reaches the I/O error as a source.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_keep_the_cause_of_a_shared_cache_error() {
        let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), ..MockConfig::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let model = model(&server, "mock-1");
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        // A file where the entry's shard directory belongs: the answer cannot be written.
        let shard = ctx.store().entry_path(call_key(&model, &request, &site).unwrap()).parent().unwrap().to_owned();
        std::fs::create_dir_all(shard.parent().unwrap()).unwrap();
        std::fs::write(&shard, "not a directory").unwrap();
        let calls = futures::future::join_all((0..3).map(|_| ctx.chat(episode, &model, &request, &site))).await;
        assert_eq!(server.calls(), 1);
        let texts: Vec<String> = calls.iter().map(|result| result.as_ref().unwrap_err().to_string()).collect();
        assert!(texts[0].starts_with("cache: "), "{texts:?}");
        for (text, result) in texts.iter().zip(&calls) {
            let error = result.as_ref().unwrap_err();
            let io = std::iter::successors(std::error::Error::source(error), |cause| cause.source()).find_map(|cause| cause.downcast_ref::<std::io::Error>());
            assert!(io.is_some(), "{text}: the I/O error is not in the source chain");
        }
        assert_eq!(&texts[1], &format!("episode failed: {}", texts[0]), "waiters read as before");
        assert_eq!(texts[1], texts[2]);
    }

    /// Another model's answer fails the call (one request, shared by the waiters) and is
    /// not cached; with `accept_other_model` it is an answer like any other.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_models_answer_fails_unless_accepted() {
        let config = MockConfig { latency: Duration::from_millis(300), answered_model: Some("other".into()), ..MockConfig::default() };
        let server = MockServer::start(config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let mut model = model(&server, "mock-1");
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        let (a, b) = tokio::join!(ctx.chat(episode, &model, &request, &site), ctx.chat(episode, &model, &request, &site));
        for result in [a, b] {
            let error = result.unwrap_err().to_string();
            assert!(error.contains("`other`") && error.contains("accept_other_model"), "{error}");
        }
        assert_eq!(server.calls(), 1);
        assert!(!ctx.store().contains(call_key(&model, &request, &site).unwrap()));
        // The model's calls stopped in this run (every one would be answered by `other`).
        assert!(ctx.chat(episode, &model, &ask("another question"), &site).await.is_err());
        assert_eq!(server.calls(), 1, "not sent");
        // The next run, accepting other models.
        let ctx = context(dir.path());
        model.accept_other_model = true;
        assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().answered_model, "other");
        assert!(ctx.store().contains(call_key(&model, &request, &site).unwrap()), "accepted: cached");
    }

    /// An answer cached before the provider layer split `<think>` off (same key: the
    /// default split sends nothing) is split when served; one split on arrival is served
    /// exactly as stored, even if its answer starts with another tagged block.
    #[tokio::test]
    async fn a_cached_answer_from_before_the_think_split_is_split_when_served() {
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let model = model(&server, "mock-1");
        let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
        let stored = |request: &ChatRequest, text: &str, reasoning: Option<&str>| {
            let step = SubStep::new(episode, StepKind::Call, call_components(&endpoint(&model, request).unwrap(), request, &site));
            let response = ChatResponse {
                text: text.into(),
                reasoning: reasoning.map(str::to_owned),
                tool_calls: Vec::new(),
                usage: crate::providers::Usage::default(),
                answered_model: "mock-1".into(),
                finish_reason: crate::providers::FinishReason::Stop,
                latency_ms: 0,
                refusal: None,
                usage_reported: true,
                items: Vec::new(),
            };
            step.store_blocking(ctx.store(), response, 0).unwrap();
        };
        let old = ask("old");
        stored(&old, "<think>draft <TOOL>{}</TOOL></think>\nfinal", None);
        let served = ctx.chat(episode, &model, &old, &site).await.unwrap();
        assert_eq!((served.text.as_str(), served.reasoning.as_deref()), ("final", Some("draft <TOOL>{}</TOOL>")));
        let new = ask("new");
        stored(&new, "<think>quoted</think> answer", Some("thought"));
        let served = ctx.chat(episode, &model, &new, &site).await.unwrap();
        assert_eq!((served.text.as_str(), served.reasoning.as_deref()), ("<think>quoted</think> answer", Some("thought")));
        assert_eq!(server.calls(), 0, "both were served from the cache");
    }

    /// A dated snapshot of the alias is the model asked for: cached, so a resume is free.
    #[tokio::test]
    async fn a_dated_snapshot_of_the_alias_is_cached() {
        let config = MockConfig { answered_model: Some("gpt-4.1-2025-04-14".into()), ..MockConfig::default() };
        let server = MockServer::start(config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let model = model(&server, "gpt-4.1");
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().answered_model, "gpt-4.1-2025-04-14");
        ctx.chat(episode, &model, &request, &site).await.unwrap();
        assert_eq!(server.calls(), 1, "the second call was served from the cache");
    }

    /// Background mode is transport: a call answered in the background is the same cache
    /// entry as one answered in the foreground, on the real API's `auto` routing too.
    #[tokio::test]
    async fn background_mode_keys_and_caches_like_a_foreground_call() {
        use crate::providers::{Background, OpenAiApi};
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let mut model = ModelConfig { api: OpenAiApi::Responses, background: Background::On, ..model(&server, "o3-pro") };
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().text, "echo: q");
        let log = server.request_log();
        assert_eq!((log[0].body["background"].clone(), log.iter().filter(|r| r.method == "GET").count()), (json!(true), 3));
        let key = call_key(&model, &request, &site).unwrap();
        for background in [Background::Off, Background::Auto] {
            model.background = background;
            assert_eq!(call_key(&model, &request, &site).unwrap(), key, "{background}");
            assert_eq!(model.key_value(), ModelConfig { background: Background::On, ..model.clone() }.key_value());
        }
        model.background = Background::Off;
        ctx.chat(episode, &model, &request, &site).await.unwrap();
        assert_eq!(server.calls(), 4, "served from the entry the background call wrote");
        let openai = ModelConfig { base_url: None, api: OpenAiApi::Auto, ..model.clone() };
        let auto = ModelConfig { background: Background::Auto, ..openai.clone() };
        assert_eq!(call_key(&openai, &request, &site), call_key(&auto, &request, &site), "o3-pro on api.openai.com: auto is on");
    }

    /// A run interrupted while a background response runs leaves its id recorded under the
    /// call's key; the next run polls that response instead of POSTing, caches the answer
    /// and removes the record.
    #[tokio::test]
    async fn an_interrupted_background_call_is_recorded_resumed_then_forgotten() {
        use crate::providers::{Background, OpenAiApi};
        let server = MockServer::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let model = ModelConfig { api: OpenAiApi::Responses, background: Background::On, ..model(&server, "o3-pro") };
        let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
        let key = call_key(&model, &request, &site).unwrap();
        let pending = PendingResponses::of(&Store::open(dir.path()).unwrap());
        {
            let ctx = context(dir.path());
            let polled = async {
                while server.request_log().iter().all(|r| r.method != "GET") {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            };
            tokio::select! {
                _ = ctx.chat(episode, &model, &request, &site) => panic!("the response was still in progress"),
                () = polled => {}
            }
        }
        assert_eq!(pending.get(key).map(|r| r.response_id), Some("resp_bg_0".to_owned()), "recorded under the call key before the first poll");
        server.set_background_polls(1);
        let ctx = context(dir.path());
        assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().text, "echo: q");
        let posts = server.request_log().iter().filter(|r| r.method == "POST").count();
        assert_eq!(posts, 1, "resumed by polling, not sent again");
        assert!(ctx.store().contains(key), "the answer is cached");
        assert_eq!(pending.get(key), None, "and the record is gone");
        assert!(pending.list().is_empty());
    }

    #[test]
    fn answered_ids_are_classified() {
        for (requested, answered, expected) in [
            ("gpt-4.1", "gpt-4.1", Answered::Same),
            ("gpt-4.1", "", Answered::Same),
            ("gemini-2.5-pro", "models/gemini-2.5-pro", Answered::Same),
            ("gpt-4.1", "gpt-4.1-2025-04-14", Answered::Snapshot),
            ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", Answered::Snapshot),
            ("gemini-2.0-flash", "gemini-2.0-flash-001", Answered::Snapshot),
            ("gpt-4.1", "gpt-4.1-mini", Answered::Other),
            ("gpt-4.1", "gpt-4.1-mini-2025-04-14", Answered::Other),
            ("gpt-4.1", "gpt-4o", Answered::Other),
            ("gpt-4.1", "gpt-4.1-", Answered::Other),
        ] {
            assert_eq!(answered_as(requested, answered), expected, "{requested} → {answered}");
        }
    }

    /// Issue 22: the replies file is read once per run, at its first call; later calls answer
    /// from it even when the file is gone.
    #[tokio::test]
    async fn a_replies_file_is_read_once_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("replies.json");
        std::fs::write(&file, r#"{"replies": [{"contains": "two", "reply": "2"}], "default": "?"}"#).unwrap();
        let model = ModelConfig { params: [("file".to_owned(), json!(file))].into_iter().collect(), ..config("s", Provider::Scripted, "canned") };
        let ctx = context(dir.path());
        let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
        assert_eq!(ctx.chat(episode, &model, &ask("one plus one is two?"), &site).await.unwrap().text, "2");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(ctx.chat(episode, &model, &ask("three"), &site).await.unwrap().text, "?");
        assert_eq!(ctx.scripts.loaded(), 1);
        // A new run reads it again (and finds it gone).
        assert!(context(dir.path()).chat(episode, &model, &ask("three"), &site).await.is_err());
    }

    /// A replies file that cannot be read or parsed fails the episode with the same text
    /// as before, and keeps the I/O or JSON error as the source.
    /// Issue 36: a served model's calls are keyed by its weights and settings, never by the
    /// port its server got this run; other weights are other keys.
    #[test]
    fn a_served_models_call_key_holds_its_weights_not_its_port() {
        let identity = |weights: &str| crate::spec::ServedIdentity { engine_version: "v".into(), weights: Some(weights.into()), arg_files: Vec::new() };
        let serve = crate::spec::ServeConfig {
            engine: crate::spec::Engine::LlamaCpp,
            weights: crate::spec::Weights::Local("/w/m.gguf".into()),
            written: "m.gguf".into(),
            position: crate::spec::Position::default(),
            slots: 2,
            context: Some(1024),
            gpus: 0,
            args: Vec::new(),
            pinned: None,
            start_timeout_s: 1,
            identity: Some(identity("w1")),
        };
        let served = |url: Option<&str>, weights: &str| ModelConfig {
            base_url: url.map(str::to_owned),
            serve: Some(crate::spec::ServeConfig { identity: Some(identity(weights)), ..serve.clone() }),
            ..config("m", Provider::OpenAi, "ft")
        };
        let (request, site) = (ask("q"), CallSite::default());
        let before_start = call_key(&served(None, "w1"), &request, &site).unwrap();
        assert_eq!(call_key(&served(Some("http://127.0.0.1:4001/v1"), "w1"), &request, &site).unwrap(), before_start);
        assert_eq!(call_key(&served(Some("http://127.0.0.1:4002/v1"), "w1"), &request, &site).unwrap(), before_start);
        assert_ne!(call_key(&served(None, "w2"), &request, &site).unwrap(), before_start, "other weights");
        let plain = ModelConfig { base_url: Some("http://127.0.0.1:4001/v1".into()), ..config("m", Provider::OpenAi, "ft") };
        assert_ne!(call_key(&plain, &request, &site).unwrap(), before_start, "an endpoint someone else runs is keyed by its URL");
    }

    #[test]
    fn a_bad_replies_file_keeps_its_cause() {
        use std::error::Error as _;
        let dir = tempfile::tempdir().unwrap();
        let scripted = |path: &std::path::Path| ModelConfig {
            params: [("file".to_owned(), json!(path))].into_iter().collect(),
            ..config("s", Provider::Scripted, "canned")
        };
        let missing = dir.path().join("missing.json");
        let ctx = context(dir.path());
        let err = ctx.scripted_reply(&scripted(&missing), &ask("q")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("episode failed: cannot read replies file `{}`: {}", missing.display(), std::fs::read("/no/such/file").unwrap_err())
        );
        assert_eq!(err.source().and_then(|s| s.downcast_ref::<std::io::Error>()).map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "not json").unwrap();
        let err = ctx.scripted_reply(&scripted(&bad), &ask("q")).unwrap_err();
        assert!(err.to_string().starts_with(&format!("episode failed: replies file `{}`: expected", bad.display())), "{err}");
        assert!(err.source().is_some_and(|s| s.is::<serde_json::Error>()), "{err:?}");
    }
}
