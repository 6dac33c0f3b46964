//! The hard budget (`budget.usd`, `run --budget-usd`): before each call is sent, what the
//! grid has spent plus the worst case of every call in flight, this one included, must fit,
//! else the call is not sent and no new cell starts. A call's worst case is its prompt tokens
//! (counted, [`crate::providers::tokens`]) plus its output cap, at the model's price; an
//! answer then adds what it really cost. So the spend never passes the budget by more than
//! the in-flight worst cases overestimate, whatever the provider bills within them.
//!
//! A provider may bill more than the worst case (usage past `max_tokens`): once the answers
//! settled so far plus the calls still held pass the limit, the budget is checked again at
//! the moment each held call would be sent, and none is ([`Hold::settle`] says so, and the
//! caller halts the transport). Every sum saturates: a usage of 2^63 tokens never wraps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::exec::step_error::StepError;
use crate::providers::tokens::{Tokenizer, body_tokens};
use crate::providers::{CallRecord, Protocol};
use crate::spec::{ModelConfig, Price, Provider};

/// The output bound assumed for a request that sets no output cap (`params.max_tokens`).
pub const UNCAPPED_OUTPUT_TOKENS: u64 = 32_768;

/// How the reason a budget passed by its answers halts the transport with begins.
pub(super) const PASSED: &str = "the budget of $";

/// Micro-dollars: what the gate adds and compares, so sums are exact.
type Micro = u64;

/// Micro-dollars of `usd`, saturating: NaN or negative is 0, a huge cost is `u64::MAX`.
#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a float-to-int cast saturates, NaN is 0")]
pub(crate) fn micro(usd: f64) -> Micro {
    (usd * 1e6).round().max(0.0) as Micro
}

/// A run's budget: the limit, what is spent, and the worst case held by calls in flight.
#[derive(Debug)]
pub struct Budget {
    limit: Micro,
    /// (spent, held by calls in flight).
    tally: Mutex<(Micro, Micro)>,
    reached: AtomicBool,
}

/// One call's hold on the budget, released when it is settled or dropped (a call cancelled
/// or failed without an answer is not billed).
#[derive(Debug)]
pub(super) struct Hold<'a> {
    budget: &'a Budget,
    worst: Micro,
}

impl Budget {
    /// A budget of `limit_usd`, of which `spent_usd` is already spent (the grid's answers
    /// cached by earlier runs).
    #[must_use]
    pub fn new(limit_usd: f64, spent_usd: f64) -> Self {
        Self { limit: micro(limit_usd), tally: Mutex::new((micro(spent_usd), 0)), reached: AtomicBool::new(false) }
    }

    /// Whether a call was held back: no new cell should start.
    #[must_use]
    pub fn reached(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }

    /// US dollars spent so far (earlier runs' cached answers included).
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars far below 2^52")]
    pub fn spent_usd(&self) -> f64 {
        self.lock().0 as f64 / 1e6
    }

    /// The limit in US dollars.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars far below 2^52")]
    pub fn limit_usd(&self) -> f64 {
        self.limit as f64 / 1e6
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Micro, Micro)> {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `worst` for a call about to be sent, or refuses it when it would not fit.
    pub(super) fn hold(&self, worst: Micro) -> Result<Hold<'_>, StepError> {
        let mut tally = self.lock();
        let (spent, held) = *tally;
        if self.reached() || spent.saturating_add(held).saturating_add(worst) > self.limit {
            self.reached.store(true, Ordering::SeqCst);
            #[expect(clippy::cast_precision_loss, reason = "micro-dollars far below 2^52")]
            let usd = |m: Micro| m as f64 / 1e6;
            return Err(StepError::Budget(format!(
                "the budget of ${:.2} is reached (${:.4} spent, ${:.4} held by calls in flight, ${:.4} this call's worst case)",
                usd(self.limit),
                usd(spent),
                usd(held),
                usd(worst)
            )));
        }
        tally.1 = tally.1.saturating_add(worst);
        Ok(Hold { budget: self, worst })
    }
}

impl Hold<'_> {
    /// The call is done: what its answer cost is spent, and its worst case given back.
    /// `Some(reason)` when the spend plus the calls still held now passes the limit (the
    /// provider billed more than a worst case): no held call may be sent any more.
    pub(super) fn settle(mut self, cost: Micro) -> Option<String> {
        let mut tally = self.budget.lock();
        tally.0 = tally.0.saturating_add(cost);
        tally.1 = tally.1.saturating_sub(self.worst);
        self.worst = 0;
        let (spent, held) = *tally;
        drop(tally);
        if spent.saturating_add(held) <= self.budget.limit {
            return None;
        }
        self.budget.reached.store(true, Ordering::SeqCst);
        #[expect(clippy::cast_precision_loss, reason = "dollars, for a message")]
        let usd = |m: Micro| m as f64 / 1e6;
        Some(format!(
            "{PASSED}{:.2} is passed: answers cost more than the worst case held for them (billed past their output cap, or a prompt counted short): ${:.4} spent, so the calls held for sending are not sent",
            usd(self.budget.limit),
            usd(spent)
        ))
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut tally = self.budget.lock();
        tally.1 = tally.1.saturating_sub(self.worst);
    }
}

/// The worst case of one request `body` to `model` under `protocol`: every prompt token
/// counted, and the output cap (or [`UNCAPPED_OUTPUT_TOKENS`]) all used, at `price`.
#[must_use]
pub fn worst_case(model: &ModelConfig, price: Option<&Price>, protocol: &dyn Protocol, body: &serde_json::Value) -> Micro {
    let Some(price) = price else { return 0 };
    let tokenizer = Tokenizer::for_model(model.provider == Provider::OpenAi, &model.model);
    let input = body_tokens(tokenizer, body);
    let output =
        protocol.output_cap_fields().iter().find_map(|field| body.pointer(field).and_then(serde_json::Value::as_u64)).unwrap_or(UNCAPPED_OUTPUT_TOKENS);
    micro(price.cost(input, 0, output))
}

/// A worst case at `share` of the price (a batched call: its batch factor).
#[must_use]
#[expect(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "micro-dollars are small and non-negative")]
pub fn scaled(worst: Micro, share: f64) -> Micro {
    (worst as f64 * share).round().max(0.0) as Micro
}

/// What a sent call's answer cost at `price` (nothing for a call that got no answer).
pub(super) fn cost(record: &CallRecord, price: Option<&Price>) -> Micro {
    match (&record.result, price) {
        (Ok(response), Some(price)) => micro(price.cost(response.usage.input, response.usage.cached, response.usage.output)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_would_pass_the_limit_is_held_back_and_stops_the_run() {
        let budget = Budget::new(1.0, 0.25);
        let first = budget.hold(500_000).expect("0.25 + 0.5 fits in 1.0");
        assert!(matches!(budget.hold(300_000), Err(StepError::Budget(_))), "0.25 + 0.5 held + 0.3 > 1.0");
        assert!(budget.reached());
        first.settle(100_000);
        assert!((budget.spent_usd() - 0.35).abs() < 1e-9);
        // Once reached, nothing more is sent even where it would now fit.
        assert!(budget.hold(1).is_err());
    }

    #[test]
    fn an_answer_billed_past_its_worst_case_stops_the_held_calls() {
        let budget = Budget::new(1.0, 0.0);
        let first = budget.hold(1_000).unwrap();
        let second = budget.hold(1_000).unwrap();
        assert!(first.settle(500).is_none(), "within its worst case");
        // Billed a thousand times its worst case: the second may no longer go out.
        assert!(budget.hold(1_000).is_ok_and(|third| third.settle(1_000_000).is_some()));
        assert!(budget.reached());
        drop(second);
        // Saturating: a cost of u64::MAX micro-dollars neither wraps nor panics.
        let huge = Budget::new(1.0, 0.0);
        assert!(huge.hold(u64::MAX).is_err());
        assert!(Budget::new(1.0, 0.0).hold(10).unwrap().settle(u64::MAX).is_some());
        assert_eq!(micro(f64::NAN), 0);
        assert_eq!(micro(f64::INFINITY), u64::MAX);
    }

    #[test]
    fn a_dropped_hold_gives_its_worst_case_back() {
        let budget = Budget::new(1.0, 0.0);
        drop(budget.hold(900_000).unwrap());
        assert!(budget.hold(900_000).is_ok());
    }
}
