//! Cached model calls: every call an episode makes is a step of its own.
//!
//! The key covers the provider, exact model id, base URL and the exact request body, the
//! sample index, and the call's position in its episode ([`key`]), so k samples are k entries
//! and a resumed episode replays finished calls for free. Errors are never stored; empty,
//! refused, filtered and truncated answers are the model's answers and are. An answer from a
//! model other than the one asked for fails the call (never scored, never cached) unless the
//! model entry says `accept_other_model`; a dated snapshot of the requested alias is the same
//! model. API keys are read from the environment at call time and never enter a key, an
//! entry, a log line or an error message. Identical calls in flight make one request
//! ([`crate::exec::flight`]). Transport knobs (concurrency, retries, timeouts, pacing) never
//! enter a key.
//!
//! One call is a pipeline: scripted → lane ticket → route → key → run once → settle.

pub mod batch;
pub mod budget;
mod key;
mod lanes;
mod ledger;
mod scripted;
mod send;
#[cfg(test)]
mod tests;
mod usage;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

pub use key::{CALL_VERSION, CallSite, call_components, call_key};
pub(crate) use key::{endpoint, with_key};
pub use lanes::LANE_BAD_REQUESTS;
pub use usage::Usage;

use self::ledger::CallLedger;
use super::flight::{Flights, Once};
use super::progress::Progress;
use super::step_error::StepError;
use super::substep::{Done, SubStep};
use crate::cache::Store;
use crate::plan::{StepKey, StepKind};
use crate::providers::{ChatRequest, ChatResponse, Endpoint, FinishReason, ProviderClient, Shaping, request_body};
use crate::spec::ModelConfig;

/// Shared state for making model calls during a run.
#[derive(Debug)]
pub struct CallContext {
    store: Store,
    client: Arc<ProviderClient>,
    offline: bool,
    flights: Flights,
    lanes: lanes::Lanes,
    /// Where run-log lines go while cells run: above the progress bar once attached.
    log: Mutex<Option<Progress>>,
    /// Finish classes (`context_exceeded`, `length`, …) whose cached answers are asked again
    /// (`run --retry-outcome`); empty: every cached answer is used.
    retry_outcomes: Vec<String>,
    /// The `scripted` provider's replies files, each read once per run.
    scripts: crate::providers::scripted::Scripts,
    /// `budget.usd`: calls that would not fit are not sent ([`budget`]).
    budget: Option<budget::Budget>,
    /// Prices of the helper models (a `qa` judge, the Eleusis rule compiler) by the id
    /// their calls are counted under, for a helper whose entry carries none.
    helper_prices: std::collections::BTreeMap<String, crate::spec::Price>,
    /// The collectors of models in batch mode ([`batch`]).
    batcher: batch::Batcher,
    /// Counters.
    pub usage: Usage,
}

/// One live call on its way: what it asks of which model, under which key.
struct Call<'a> {
    model: &'a ModelConfig,
    request: &'a ChatRequest,
    endpoint: Endpoint,
    key: StepKey,
    /// The episode (cell) that asks it, so a rejection can be told apart from the lane's.
    episode: StepKey,
    /// Whether it goes through the model's batch API (`batch:`, a single-turn call).
    batched: bool,
}

impl CallContext {
    /// Creates the context; `offline` serves only from the cache.
    #[must_use]
    pub fn new(store: Store, client: Arc<ProviderClient>, offline: bool) -> Self {
        Self {
            store,
            client,
            offline,
            flights: Flights::default(),
            lanes: lanes::Lanes::default(),
            log: Mutex::new(None),
            retry_outcomes: Vec::new(),
            scripts: crate::providers::scripted::Scripts::default(),
            budget: None,
            helper_prices: std::collections::BTreeMap::new(),
            batcher: batch::Batcher::default(),
            usage: Usage::default(),
        }
    }

    /// Holds every call sent to `budget` ([`budget::Budget`]).
    #[must_use]
    pub fn with_budget(mut self, budget: budget::Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Batch output lines this run ignored because an earlier line of their batch answered
    /// the same `custom_id` (the first line answers).
    #[must_use]
    pub fn batch_duplicate_lines(&self) -> u64 {
        self.batcher.duplicate_lines()
    }

    /// Prices the calls of helper models (a `qa` judge, the Eleusis rule compiler) whose
    /// entry has no `price` at `prices`, by their id: the pipeline's `report.prices`.
    #[must_use]
    pub fn with_helper_prices(mut self, prices: std::collections::BTreeMap<String, crate::spec::Price>) -> Self {
        self.helper_prices = prices;
        self
    }

    /// The price of `model`'s calls: its own, else its helper price.
    fn price_of(&self, model: &ModelConfig) -> Option<crate::spec::Price> {
        model.price.or_else(|| self.helper_prices.get(&model.id).copied())
    }

    /// The run's budget, if it has one.
    #[must_use]
    pub fn budget(&self) -> Option<&budget::Budget> {
        self.budget.as_ref()
    }

    /// The run stops for `reason` (Ctrl-C, a cache it cannot write): no call is sent from
    /// now on, also none waiting for a slot or a retry; the calls already sent may still
    /// answer, and their answers are stored.
    pub fn stop_sending(&self, reason: &str) {
        self.lanes.stop_all(reason);
        self.client.halt(reason);
    }

    /// Whether the budget held a call back: no new cell should start.
    #[must_use]
    pub fn budget_reached(&self) -> bool {
        self.budget.as_ref().is_some_and(budget::Budget::reached)
    }

    /// Asks again the calls whose cached answer has one of these finish classes
    /// (`run --retry-outcome`), and stores the new answer over the old.
    #[must_use]
    pub fn with_retry_outcomes(mut self, classes: Vec<String>) -> Self {
        self.retry_outcomes = classes;
        self
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

    /// Calls sent so far (answered or failed), which the progress ETA measures against the
    /// calls expected.
    #[must_use]
    pub fn calls_made(&self) -> u64 {
        self.usage.live_calls.load(Ordering::Relaxed) + self.usage.failed_calls.load(Ordering::Relaxed)
    }

    /// Call counters plus how every rate-limited lane is being paced ([`Usage::progress_line`]).
    #[must_use]
    pub fn progress_line(&self) -> String {
        self.usage.progress_line(&self.client)
    }

    /// The cache, for the other sub-steps of an episode (verdicts, submissions).
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sends (or replays) one chat call for `model` at `site`, as a sub-step
    /// of `episode` (recorded under it for `cache gc --keep`).
    pub async fn chat(&self, episode: StepKey, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<ChatResponse, StepError> {
        self.chat_traced(episode, model, request, site).await.map(|(answer, _)| answer)
    }

    /// [`Self::chat`], also saying whether the answer was read from the cache (an agent's
    /// replay shows where it stopped replaying).
    ///
    /// # Errors
    /// As [`Self::chat`].
    pub async fn chat_traced(&self, episode: StepKey, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<(ChatResponse, bool), StepError> {
        if model.provider.is_scripted() {
            self.usage.live_calls.fetch_add(1, Ordering::Relaxed);
            return scripted::scripted_reply(&self.scripts, model, request).map(|answer| (answer, false));
        }
        let endpoint = endpoint(model, request)?;
        // A batched call waits for its batch, not for a slot: the batch is one request.
        let batched = model.batch.is_some() && site.scope.is_none() && endpoint.kind.protocol().batch_kind().is_some();
        // Never closed, so acquiring cannot fail; the ticket is held until the call is done.
        let _ticket = if batched { None } else { self.lanes.gate(&model.id, self.client.config()).acquire_owned().await.ok() };
        // An episode asks all its calls in one task: let the requests already handed to
        // their connections go out before this one is prepared, so a run's first calls do
        // not wait for a whole cell's prompts to be encoded and keyed.
        tokio::task::yield_now().await;
        let body = request_body(&endpoint, request);
        let (step, encoded) = SubStep::new_with_part(episode, StepKind::Call, key::components_of(&endpoint, request, &body, site), key::BODY);
        let call = Call { model, request, endpoint, key: step.key(), episode, batched };
        let ledger = call.endpoint.background.then(|| CallLedger::new(&self.store, call.key));
        let stale = |cached: &ChatResponse| self.reask(cached);
        let once = Once { claim: !self.offline, stale: &stale, shared: &self.usage.shared_calls };
        let answer = || self.answer(&call, (body, encoded), ledger.as_ref());
        let done = step
            .run_once(&self.store, &self.flights, once, answer, |done| {
                // An answer the cache could not take stays in its batch's record for the rerun.
                if call.batched && !matches!(done, Err(StepError::Cache(_))) {
                    self.batcher.settled(&call.endpoint, call.key);
                }
                self.settled(done, ledger.as_ref());
            })
            .await?;
        let hit = done.hit;
        Ok((self.served(done, &call), hit))
    }

    /// Whether a cached answer is one `--retry-outcome` asks to re-ask.
    fn reask(&self, cached: &ChatResponse) -> bool {
        !self.offline && self.retry_outcomes.iter().any(|class| class == cached.finish_reason.class())
    }

    /// Before any waiter sees the outcome: the background record is settled, and a cache
    /// write that failed for lack of space stops every later call of the run.
    fn settled(&self, done: &Result<Done<ChatResponse>, StepError>, ledger: Option<&CallLedger>) {
        if let Some(ledger) = ledger {
            ledger.settle(done);
        }
        if let Err(StepError::Cache(error)) = done
            && error.is_storage_full()
            && self.lanes.mark_disk_full()
        {
            self.client.halt("the cache disk is full (free space, then run again)");
            self.note(&format!(
                "error: the cache disk is full ({error}): no new model calls are sent; the answers of calls already in flight go to the run's journal (room reserved when it started), which the next run moves into the cache, and every answer stored before is kept. Free space, then run again."
            ));
        }
    }

    /// The answer as served, counted: a cached one is held to the server's shaping.
    fn served(&self, done: Done<ChatResponse>, call: &Call<'_>) -> ChatResponse {
        let mut value = done.value;
        if done.hit {
            self.usage.cached_calls.fetch_add(1, Ordering::Relaxed);
            value = call.endpoint.kind.protocol().settle_cached(value, &Shaping::for_call(call.request, &call.endpoint.base_url));
        } else if done.refreshed {
            self.usage.reasked.fetch_add(1, Ordering::Relaxed);
        }
        if value.finish_reason == FinishReason::ContextExceeded {
            self.usage.context_exceeded.fetch_add(1, Ordering::Relaxed);
        }
        value
    }
}
