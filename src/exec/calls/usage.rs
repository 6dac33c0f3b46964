//! What a run's calls cost and how they went: one counter set, filled from each call's
//! record in one place ([`Usage::record`]), and the progress line built from it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::providers::{AttemptClass, CallRecord, ProviderClient};
use crate::spec::Price;

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
    /// Calls answered through a batch API.
    pub batched_calls: AtomicU64,
    /// What those would have cost at the normal price minus what they cost (micro-dollars).
    pub batch_saved_micro_usd: AtomicU64,
    /// Answers billed more output tokens than their request's cap (`max_tokens`): their cost
    /// counts what the provider billed, and the run log says so once.
    pub overbilled_calls: AtomicU64,
}

/// Adds `n`, saturating: a provider's absurd usage (2^63 tokens) pins a counter at
/// `u64::MAX` instead of wrapping it to a small, plausible-looking number.
fn add(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| Some(now.saturating_add(n)));
}

impl Usage {
    /// Counts one call sent over HTTP, answered or failed: attempts, 429s, stalls, tokens
    /// and, for a priced model, its cost. Returns the stalls, which the run log names.
    pub fn record(&self, record: &CallRecord, price: Option<&Price>) -> u64 {
        let failed = |class: AttemptClass| record.failed_attempts.iter().filter(|c| **c == class).count() as u64;
        add(&self.attempts, u64::from(record.attempts));
        add(&self.rate_limited, failed(AttemptClass::RateLimited));
        let stalls = failed(AttemptClass::StreamStalled);
        add(&self.stream_stalls, stalls);
        let Ok(response) = &record.result else {
            add(&self.failed_calls, 1);
            return stalls;
        };
        add(&self.live_calls, 1);
        add(&self.input_tokens, response.usage.input);
        add(&self.output_tokens, response.usage.output);
        if let Some(price) = price {
            add(&self.cost_micro_usd, super::budget::micro(price.cost(response.usage.input, response.usage.cached, response.usage.output)));
        }
        stalls
    }

    /// Counts one call answered through a batch API and what the batch price saved on it
    /// (`price` is the model's normal price).
    pub fn record_batched(&self, record: &CallRecord, price: Option<&Price>) {
        let Ok(response) = &record.result else { return };
        add(&self.batched_calls, 1);
        if let Some(price) = price {
            let (input, cached, output) = (response.usage.input, response.usage.cached, response.usage.output);
            let saved = price.cost(input, cached, output) - price.batched().cost(input, cached, output);
            add(&self.batch_saved_micro_usd, super::budget::micro(saved));
        }
    }

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
        // Batched calls are sent too (counted in `live_calls`), but shown apart.
        let batched = get(&self.batched_calls);
        let (live, by_batch, saved) = if batched > 0 {
            (
                live.saturating_sub(batched),
                format!(" + {batched} by batch API"),
                format!(" (the batch price saved ${:.4})", get(&self.batch_saved_micro_usd) as f64 / 1e6),
            )
        } else {
            (live, String::new(), String::new())
        };
        format!(
            "calls {live} live{by_batch} + {cached} cached{shared} · tokens {} in / {} out · ${:.4}{saved}",
            get(&self.input_tokens),
            get(&self.output_tokens),
            get(&self.cost_micro_usd) as f64 / 1e6
        )
    }

    /// Call counters plus, for every lane the provider has rate-limited, how it is
    /// being paced: `paced openai m: 12 429s, 3 in flight (limit 9), 37.5 req/s`.
    #[must_use]
    pub fn progress_line(&self, client: &ProviderClient) -> String {
        let mut parts = vec![self.summary()];
        for lane in client.lane_snapshots() {
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
}

/// The run-log line for a call whose stream stalled `stalls` times.
pub(super) fn stall_note(model: &str, stalls: u64, record: &CallRecord, idle: Duration) -> String {
    let outcome = match &record.result {
        Ok(_) => format!("retried, answered on attempt {}", record.attempts),
        Err(error) => format!("the call failed after {} attempt(s): {error}", record.attempts),
    };
    format!("warning: model `{model}`: the response stream stalled {stalls} time(s) (no data for {idle:?}, transport.stream_idle_timeout_s); {outcome}")
}
