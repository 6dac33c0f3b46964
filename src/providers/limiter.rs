//! Per-lane (provider, base URL, model) concurrency limiter with AIMD adaptation.
//!
//! Adaptive mode follows Inspect's defaults (lessons §6) except the floor: start 20, floor
//! 1 (a 40 requests/s server at 50 ms latency is saturated by 2 in flight, so a floor of 10
//! cannot back off far enough), cap 100; an
//! HTTP 429 multiplies the limit by 0.8 and starts a cooldown (15 s) during which the limit
//! does not grow; 5xx/overload/timeouts pause growth without cutting; after a window of
//! successes as large as the current limit, the limit grows additively. Static mode is a
//! plain fixed cap. Slots are handed out by a tokio `Semaphore`, which is fair: waiters get
//! slots in the order they asked, so the calls of a cell that started first finish first
//! and the next cell starts while the rest are still running (an unfair count let every
//! cell of a `--jobs` wave finish together, and the lane ran dry between waves). A cut the
//! semaphore cannot take back at once (slots in flight) is a debt, paid by not returning
//! slots as they are released.
//!
//! A 429 only cuts if its request started after the previous cut: one burst of rejections
//! from requests that were already in flight is one congestion event, not many (as in TCP).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Tuning of the adaptive (AIMD) mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AimdConfig {
    /// Concurrency at start.
    pub initial: usize,
    /// The limit never drops below this.
    pub floor: usize,
    /// The limit never grows above this.
    pub cap: usize,
    /// Multiplier applied on a rate-limit response (0 < factor < 1).
    pub decrease_factor: f64,
    /// After a cut or a server error, no growth for this long.
    pub cooldown: Duration,
    /// Slots added after each full window of successes.
    pub growth_step: usize,
}

impl Default for AimdConfig {
    /// Inspect's adaptive defaults but floor 1: 20 / 1 / 100, ×0.8, 15 s cooldown.
    fn default() -> Self {
        Self { initial: 20, floor: 1, cap: 100, decrease_factor: 0.8, cooldown: Duration::from_secs(15), growth_step: 1 }
    }
}

/// How a limiter decides its concurrency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConcurrencyMode {
    /// Additive increase, multiplicative decrease on 429.
    Adaptive(AimdConfig),
    /// A fixed `max_concurrency`; feedback is ignored.
    Static {
        /// Requests allowed in flight at once.
        max_concurrency: usize,
    },
}

impl Default for ConcurrencyMode {
    /// Adaptive with Inspect's defaults: a static cap disabling AIMD caused 429 storms
    /// elsewhere (lessons §6).
    fn default() -> Self {
        Self::Adaptive(AimdConfig::default())
    }
}

/// What happened to a request, as far as the limiter cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// A usable response: counts toward growth.
    Success,
    /// HTTP 429 or equivalent: multiplicative cut and cooldown.
    RateLimited,
    /// 5xx, overload or timeout: pause growth, keep the limit.
    ServerTrouble,
    /// Client-side or content errors that say nothing about provider capacity.
    Neutral,
}

/// A snapshot of the limiter for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterSnapshot {
    /// Current concurrency limit.
    pub limit: usize,
    /// Permits currently held.
    pub in_flight: usize,
    /// Number of multiplicative cuts so far.
    pub cuts: u64,
}

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    generation: u64,
    successes: usize,
    growth_paused_until: Option<Instant>,
    /// Slots cut from the limit while in flight: released slots pay it off first.
    debt: usize,
    /// The most the limit may be, whatever the mode says: the server's slot count.
    ceiling: usize,
}

/// A shrinkable, growable counting semaphore driven by request feedback.
#[derive(Debug)]
pub struct Limiter {
    mode: ConcurrencyMode,
    state: Mutex<State>,
    /// Free slots, handed out first come, first served.
    slots: Semaphore,
}

/// One in-flight slot; dropping it frees the slot, [`Permit::finish`] also reports feedback.
#[derive(Debug)]
pub struct Permit<'a> {
    limiter: &'a Limiter,
    generation: u64,
}

impl Limiter {
    /// Creates a limiter; limits are clamped to at least 1 so no mode can deadlock, and to
    /// what a semaphore can count (`max_concurrency: 18446744073709551615` means "no limit").
    #[must_use]
    pub fn new(mode: ConcurrencyMode) -> Self {
        let most = Semaphore::MAX_PERMITS;
        let mode = match mode {
            ConcurrencyMode::Adaptive(config) => {
                let floor = config.floor.clamp(1, most);
                let cap = config.cap.clamp(floor, most);
                ConcurrencyMode::Adaptive(AimdConfig {
                    floor,
                    cap,
                    initial: config.initial.clamp(floor, cap),
                    decrease_factor: if config.decrease_factor > 0.0 && config.decrease_factor < 1.0 {
                        config.decrease_factor
                    } else {
                        AimdConfig::default().decrease_factor
                    },
                    growth_step: config.growth_step.clamp(1, most),
                    ..config
                })
            }
            ConcurrencyMode::Static { max_concurrency } => ConcurrencyMode::Static { max_concurrency: max_concurrency.clamp(1, most) },
        };
        let limit = match mode {
            ConcurrencyMode::Adaptive(config) => config.initial,
            ConcurrencyMode::Static { max_concurrency } => max_concurrency,
        };
        let state = State { limit, in_flight: 0, generation: 0, successes: 0, growth_paused_until: None, debt: 0, ceiling: usize::MAX };
        Self { mode, state: Mutex::new(state), slots: Semaphore::new(limit) }
    }

    /// Waits for a free slot, in the order the waiters asked. Cancellation-safe: a dropped
    /// waiter leaves the queue.
    pub async fn acquire(&self) -> Permit<'_> {
        // The semaphore is never closed, so acquiring cannot fail.
        if let Ok(slot) = self.slots.acquire().await {
            slot.forget();
        }
        let mut state = self.lock();
        state.in_flight += 1;
        Permit { limiter: self, generation: state.generation }
    }

    /// Never more than `ceiling` in flight from now on (the server's slot count): the limit
    /// drops to it at once (slots in flight are owed back as they return) and never grows
    /// past it.
    pub fn cap_at(&self, ceiling: usize) {
        let mut state = self.lock();
        state.ceiling = ceiling.max(1);
        let before = state.limit;
        state.limit = state.limit.min(state.ceiling);
        self.resize(&mut state, before);
    }

    /// Current limit, in-flight count and number of cuts.
    pub fn snapshot(&self) -> LimiterSnapshot {
        let state = self.lock();
        LimiterSnapshot { limit: state.limit, in_flight: state.in_flight, cuts: state.generation }
    }

    /// Poison-tolerant lock: the state stays consistent because no code panics while
    /// holding it, so a poisoned mutex is still safe to use.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn release(&self, generation: u64, feedback: Feedback) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.debt > 0 {
            state.debt -= 1;
        } else {
            self.slots.add_permits(1);
        }
        if let ConcurrencyMode::Adaptive(config) = self.mode {
            let before = state.limit;
            Self::adapt(&mut state, &config, generation, feedback, Instant::now());
            self.resize(&mut state, before);
        }
    }

    /// Brings the free slots in line with a limit changed from `before`: growth pays off
    /// debt first, then adds slots; a cut takes free slots back and owes the rest.
    fn resize(&self, state: &mut State, before: usize) {
        if state.limit > before {
            let grown = state.limit - before;
            let paid = grown.min(state.debt);
            state.debt -= paid;
            self.slots.add_permits(grown - paid);
        } else if state.limit < before {
            let cut = before - state.limit;
            let free = cut.min(self.slots.available_permits());
            if let Ok(taken) = self.slots.try_acquire_many(u32::try_from(free).unwrap_or(u32::MAX)) {
                taken.forget();
                state.debt += cut - free;
            } else {
                state.debt += cut;
            }
        }
    }

    fn adapt(state: &mut State, config: &AimdConfig, generation: u64, feedback: Feedback, now: Instant) {
        match feedback {
            Feedback::Success => {
                if state.growth_paused_until.is_some_and(|until| now < until) {
                    return;
                }
                state.successes += 1;
                let cap = config.cap.min(state.ceiling);
                if state.successes >= state.limit && state.limit < cap {
                    state.limit = (state.limit + config.growth_step).min(cap);
                    state.successes = 0;
                }
            }
            Feedback::RateLimited => {
                state.successes = 0;
                state.growth_paused_until = Some(now + config.cooldown);
                if generation == state.generation {
                    #[expect(
                        clippy::cast_possible_truncation,
                        clippy::cast_sign_loss,
                        clippy::cast_precision_loss,
                        reason = "limits are small positive integers; floor() of a positive product"
                    )]
                    let cut = (state.limit as f64 * config.decrease_factor).floor() as usize;
                    state.limit = cut.max(config.floor).min(state.ceiling);
                    state.generation += 1;
                }
            }
            Feedback::ServerTrouble => {
                state.successes = 0;
                state.growth_paused_until = Some(now + config.cooldown);
            }
            Feedback::Neutral => {}
        }
    }
}

impl Permit<'_> {
    /// Frees the slot and tells the limiter how the request went.
    pub fn finish(self, feedback: Feedback) {
        let this = std::mem::ManuallyDrop::new(self);
        this.limiter.release(this.generation, feedback);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.generation, Feedback::Neutral);
    }
}

#[cfg(test)]
mod tests {
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockServer, RetryHeader};
    use super::super::testing::{ask, client_with, mock_endpoint, quick_config};
    use super::super::types::ProviderKind;
    use super::*;
    use std::sync::Arc;

    fn adaptive() -> Limiter {
        Limiter::new(ConcurrencyMode::Adaptive(AimdConfig::default()))
    }

    #[tokio::test(start_paused = true)]
    async fn cuts_by_factor_to_floor() {
        let limiter = adaptive();
        let expected = [16, 12, 9, 7, 5, 4, 3, 2, 1, 1];
        for want in expected {
            limiter.acquire().await.finish(Feedback::RateLimited);
            assert_eq!(limiter.snapshot().limit, want);
        }
        assert_eq!(limiter.snapshot().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn burst_of_429_from_one_generation_cuts_once() {
        let limiter = adaptive();
        let mut permits = Vec::new();
        for _ in 0..5 {
            permits.push(limiter.acquire().await);
        }
        for permit in permits {
            permit.finish(Feedback::RateLimited);
        }
        assert_eq!(limiter.snapshot(), LimiterSnapshot { limit: 16, in_flight: 0, cuts: 1 });
    }

    #[tokio::test(start_paused = true)]
    async fn cooldown_then_additive_growth() {
        let limiter = adaptive();
        limiter.acquire().await.finish(Feedback::RateLimited);
        for _ in 0..100 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 16, "no growth during cooldown");
        tokio::time::advance(Duration::from_secs(16)).await;
        for _ in 0..16 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 17, "one window of successes adds one slot");
        for _ in 0..17 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 18);
    }

    #[tokio::test(start_paused = true)]
    async fn server_trouble_pauses_without_cut() {
        let limiter = adaptive();
        limiter.acquire().await.finish(Feedback::ServerTrouble);
        for _ in 0..60 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 20);
        tokio::time::advance(Duration::from_secs(15)).await;
        for _ in 0..20 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 21);
    }

    #[tokio::test(start_paused = true)]
    async fn growth_stops_at_cap() {
        let limiter = Limiter::new(ConcurrencyMode::Adaptive(AimdConfig { initial: 3, floor: 1, cap: 4, ..AimdConfig::default() }));
        for _ in 0..50 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn static_mode_blocks_at_cap_and_ignores_feedback() {
        let limiter = Arc::new(Limiter::new(ConcurrencyMode::Static { max_concurrency: 2 }));
        let first = limiter.acquire().await;
        let second = limiter.acquire().await;
        let waiter = {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move {
                limiter.acquire().await.finish(Feedback::RateLimited);
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished(), "third acquire must wait");
        first.finish(Feedback::RateLimited);
        waiter.await.unwrap();
        drop(second);
        assert_eq!(limiter.snapshot(), LimiterSnapshot { limit: 2, in_flight: 0, cuts: 0 });
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_waiter_does_not_leak_slot() {
        let limiter = Arc::new(Limiter::new(ConcurrencyMode::Static { max_concurrency: 1 }));
        let held = limiter.acquire().await;
        let cancelled = tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await;
        assert!(cancelled.is_err());
        drop(held);
        let again = tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await;
        assert!(again.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_largest_limits_are_clamped_not_a_panic() {
        let limiter = Limiter::new(ConcurrencyMode::Static { max_concurrency: usize::MAX });
        limiter.acquire().await.finish(Feedback::Success);
        let config = AimdConfig { initial: usize::MAX, cap: usize::MAX, growth_step: usize::MAX, ..AimdConfig::default() };
        let limiter = Limiter::new(ConcurrencyMode::Adaptive(config));
        limiter.acquire().await.finish(Feedback::Success);
        assert_eq!(limiter.snapshot().limit, Semaphore::MAX_PERMITS);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_get_slots_in_the_order_they_asked() {
        let limiter = Arc::new(Limiter::new(ConcurrencyMode::Static { max_concurrency: 2 }));
        let held = [limiter.acquire().await, limiter.acquire().await];
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..6 {
            let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
            waiters.push(tokio::spawn(async move {
                let permit = limiter.acquire().await;
                order.lock().unwrap().push(i);
                // Hold the slot a moment, so a later waiter could barge in if it were allowed to.
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(permit);
            }));
            // Each waiter is queued before the next one is spawned.
            tokio::task::yield_now().await;
        }
        drop(held);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    }

    /// A freed slot goes to the waiter queued for it, even before that waiter runs: a newcomer
    /// cannot take it (the unfair count let newcomers barge, and sent the waiter to the back).
    #[tokio::test(start_paused = true)]
    async fn a_newcomer_cannot_take_a_slot_freed_for_a_waiter() {
        use futures::FutureExt;
        let limiter = Arc::new(Limiter::new(ConcurrencyMode::Static { max_concurrency: 1 }));
        let held = limiter.acquire().await;
        let waiter = {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move { limiter.acquire().await.finish(Feedback::Success) })
        };
        tokio::task::yield_now().await;
        drop(held);
        assert!(limiter.acquire().now_or_never().is_none(), "the freed slot belongs to the waiter");
        waiter.await.unwrap();
        assert!(limiter.acquire().now_or_never().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_with_slots_in_flight_is_paid_as_they_return() {
        let limiter = Arc::new(adaptive());
        let mut permits = Vec::new();
        for _ in 0..20 {
            permits.push(limiter.acquire().await);
        }
        // All 20 in flight; one 429 cuts the limit to 16 while none are free.
        permits.pop().unwrap().finish(Feedback::RateLimited);
        assert_eq!(limiter.snapshot(), LimiterSnapshot { limit: 16, in_flight: 19, cuts: 1 });
        drop(permits);
        // Exactly 16 can be held now: the 17th waits.
        let mut held = Vec::new();
        for _ in 0..16 {
            held.push(tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await.expect("within the limit"));
        }
        assert!(tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await.is_err(), "the 17th must wait");
        drop(held);
        assert_eq!(limiter.snapshot().in_flight, 0);
    }

    /// A server's slot count caps the limit at once, also with slots in flight, and growth
    /// never passes it.
    #[tokio::test(start_paused = true)]
    async fn a_ceiling_caps_the_limit_and_its_growth() {
        let limiter = adaptive();
        let held: Vec<_> = futures::future::join_all((0..5).map(|_| limiter.acquire())).await;
        limiter.cap_at(2);
        assert_eq!(limiter.snapshot(), LimiterSnapshot { limit: 2, in_flight: 5, cuts: 0 });
        drop(held);
        let mut again = Vec::new();
        for _ in 0..2 {
            again.push(tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await.expect("within the ceiling"));
        }
        assert!(tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await.is_err(), "a third must wait");
        drop(again);
        for _ in 0..50 {
            limiter.acquire().await.finish(Feedback::Success);
        }
        assert_eq!(limiter.snapshot().limit, 2, "no growth past the ceiling");
    }

    #[tokio::test]
    async fn aimd_shrinks_on_429() {
        let faults = FaultPlan::sequence((0..3).map(|_| Fault::RateLimited(RetryHeader::Millis(1))));
        let server = MockServer::start(MockConfig { faults, ..MockConfig::default() }).await.unwrap();
        let client = client_with(quick_config().retry, ConcurrencyMode::Adaptive(AimdConfig::default()));
        let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "m");
        let outcome = client.call(&endpoint, &ask("x")).await.unwrap();
        assert_eq!(outcome.attempts, 4);
        let snapshot = client.limiter_snapshot(&endpoint);
        assert_eq!((snapshot.limit, snapshot.cuts, snapshot.in_flight), (9, 3, 0), "20 → 16 → 12 → 9");
    }
}
