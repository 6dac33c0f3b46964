//! Per-lane request-rate pacer: rate limits are pacing, never failure (issue 12, lessons §6).
//!
//! A lane (provider, base URL, model) starts unpaced. The first HTTP 429 of a stream of
//! requests turns pacing on at a rate estimated from the requests sent in the last second;
//! from then on the pacer spaces request starts `1 / rate` apart, FIFO, measured from the
//! previous request's *actual* start (no burst credit, so a late wake-up never produces two
//! requests closer together than the rate allows). Once a 429 has shown the server's rate
//! (the *ceiling*), starts follow a GCRA schedule instead: each start is due one interval
//! after the previous one's *scheduled* time, so a late wake-up (timers tick in whole
//! milliseconds) is made up by the next start, but never by starting closer to the previous
//! one than the server's own interval (`1 / ceiling`): no burst above the server's.
//!
//! Learning, TCP-like, one congestion event per burst (a 429 only counts if its request was
//! sent after the previous cut):
//! - *slow start* after the first event: ×[`PacerConfig::slow_start_factor`] per round in which
//!   the pacer actually held requests back, until the next 429, which drops the rate back
//!   to the last rate that drew none;
//! - *congestion avoidance* afterwards: a 429 at send rate `s` remembers `s` as a ceiling and
//!   paces just under it (`ceiling_margin · s`; a storm cuts to the accepted share of `s`); after a
//!   cooldown the rate grows by a small fraction per binding round, never above
//!   `ceiling_margin · ceiling` while the ceiling is fresh.
//!
//! A congestion event close under a fresh ceiling (misses from a cap a hair too high) lowers
//! the ceiling by [`PacerConfig::ceiling_step`] and paces at the new cap, without the cut; a
//! lane at its cap with no 429 in twice [`PacerConfig::miss_spacing`] sends raises it a step.
//!
//! In congestion avoidance, a lone 429 (none in the last [`PacerConfig::miss_spacing`] sends)
//! is a *miss*: one request landed a little early, the rate is right. It is retried and
//! counted, but cuts nothing; a second one within that many sends is a congestion event.
//!
//! `Retry-After` (and an exhausted `x-ratelimit-*` / `anthropic-ratelimit-*` budget) pauses
//! the whole lane, not just one request, while the lane is unpaced (the server's rate is not
//! known yet) or when a paced lane draws a storm (429s for half of the last second's sends).
//! A 429 on a paced lane otherwise delays only its own request: the pacer's cut is the lane's
//! answer, and a one-second pause per miss would cost a second's worth of requests.
//! Rate-limit headers that say the budget is nearly spent pace the lane at the rate the
//! budget refills.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::retry::RateLimitHeaders;

/// Tuning of the pacer; the defaults are what `evalgrid run` uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    /// Fewer sends than this in the last second say nothing about a rate: a lone 429 pauses
    /// the lane (`Retry-After`) but does not turn pacing on.
    pub min_stream: usize,
    /// First rate after the first 429, as a fraction of the send rate over the last second
    /// (counted over at least one round, so a burst does not look infinitely fast).
    pub initial_fraction: f64,
    /// Rate multiplier per binding round during slow start.
    pub slow_start_factor: f64,
    /// A storm of 429s sets the rate to the share of sends the server accepted, at most this
    /// fraction of the send rate.
    pub decrease_factor: f64,
    /// Additive growth per binding round in congestion avoidance, as a fraction of the rate.
    pub growth_fraction: f64,
    /// Length of a growth round.
    pub round: Duration,
    /// No growth for this long after a cut.
    pub cooldown: Duration,
    /// Growth stops at this fraction of the lowest send rate that drew a 429 ...
    pub ceiling_margin: f64,
    /// ... until that ceiling is this old (then the pacer may probe above it again).
    pub ceiling_ttl: Duration,
    /// A congestion event at a send rate of at least this fraction of the ceiling lowers the
    /// ceiling by [`PacerConfig::ceiling_step`] only; one below it (or a storm) lowers the
    /// ceiling to that rate and paces under it (a storm cuts to the share the server accepted).
    pub ceiling_hold: f64,
    /// The ceiling's factor after a congestion event close under it.
    pub ceiling_step: f64,
    /// Lowest rate ever paced at (requests per second), so a lane never stops.
    pub min_rate: f64,
    /// Above this rate the pacer switches itself off (requests per second).
    pub max_rate: f64,
    /// In congestion avoidance, a 429 with none in this many sends before it is a miss,
    /// not a congestion event (so at most about one request in this many draws a 429).
    pub miss_spacing: u64,
    /// The last stretch of a wait is slept on a blocking thread (precise to tens of
    /// microseconds): tokio's timers tick in whole milliseconds and wake up to two late,
    /// which at 40 requests/s is 5 % of the rate. Zero: tokio's timer only (paused-clock tests).
    pub fine_wait: Duration,
}

impl Default for PacerConfig {
    /// Tuned against nginx `limit_req` (BENCHMARKS.md, "rate-limited server").
    fn default() -> Self {
        Self {
            min_stream: 4,
            initial_fraction: 0.4,
            slow_start_factor: 1.25,
            decrease_factor: 0.95,
            growth_fraction: 0.02,
            round: Duration::from_millis(250),
            cooldown: Duration::from_secs(2),
            ceiling_margin: 0.985,
            ceiling_ttl: Duration::from_mins(1),
            ceiling_hold: 0.9,
            ceiling_step: 0.995,
            min_rate: 1.0 / 60.0,
            max_rate: 10_000.0,
            miss_spacing: 100,
            fine_wait: Duration::from_millis(2),
        }
    }
}

/// Where the pacer is in its learning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacerPhase {
    /// No 429 seen: requests start as soon as the concurrency limiter allows.
    Unpaced,
    /// Doubling-like growth after the first 429 until the next one.
    SlowStart,
    /// Small additive growth under a remembered ceiling.
    Steady,
}

/// A snapshot of a pacer, for progress lines and tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerSnapshot {
    /// Learning phase.
    pub phase: PacerPhase,
    /// Current rate in requests per second; `None` while unpaced.
    pub rate: Option<f64>,
    /// Rate-limit responses (HTTP 429) seen on this lane.
    pub rate_limited: u64,
    /// Requests started on this lane.
    pub sent: u64,
    /// Congestion events that cut the rate.
    pub cuts: u64,
    /// Whether the lane is paused (`Retry-After` or an exhausted budget) right now.
    pub paused: bool,
}

/// Handed out by [`Pacer::acquire`]; given back with the outcome so the pacer can tell
/// which congestion event a 429 belongs to and how fast the lane was sending.
#[derive(Debug, Clone, Copy)]
pub struct PaceTicket {
    generation: u64,
    rate_at_send: Option<f64>,
    sent_at: Instant,
}

impl PaceTicket {
    /// Whether the lane was paced when this request was let through: its 429 is then the
    /// pacer's to learn from, and the concurrency limiter need not cut as well.
    #[must_use]
    pub fn paced(&self) -> bool {
        self.rate_at_send.is_some()
    }

    /// When the request was let through, for latency and spacing measurements.
    #[must_use]
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }
}

#[derive(Debug)]
struct State {
    phase: PacerPhase,
    rate: f64,
    last_start: Option<Instant>,
    /// When the next start is due on the GCRA schedule (only once a ceiling is known).
    due: Option<Instant>,
    /// `sent` at the last 429 of a paced lane, to tell a miss from congestion.
    last_miss: Option<u64>,
    /// `sent` when the ceiling was last raised a step after a clean stretch.
    last_raise: u64,
    /// The send rate that last drew a congestion event: steps back up never pass it.
    ceiling_top: f64,
    /// When a storm last cut the rate to the accepted share.
    last_share_cut: Option<Instant>,
    /// When this lane's recent 429s arrived (the last second), to see a storm.
    recent_limited: VecDeque<Instant>,
    paused_until: Option<Instant>,
    generation: u64,
    last_cut: Option<Instant>,
    ceiling: Option<(f64, Instant)>,
    round_start: Instant,
    round_binding: bool,
    recent: VecDeque<Instant>,
    rate_limited: u64,
    sent: u64,
}

/// The request-rate pacer of one lane; see the module docs for the algorithm.
#[derive(Debug)]
pub struct Pacer {
    config: PacerConfig,
    state: Mutex<State>,
    /// FIFO gate: one waiter at a time sleeps on the clock, the rest queue here.
    gate: tokio::sync::Mutex<()>,
}

impl Pacer {
    /// A pacer that starts unpaced.
    #[must_use]
    pub fn new(config: PacerConfig) -> Self {
        let now = Instant::now();
        Self {
            config,
            state: Mutex::new(State {
                phase: PacerPhase::Unpaced,
                rate: f64::INFINITY,
                last_raise: 0,
                ceiling_top: f64::INFINITY,
                last_share_cut: None,
                last_start: None,
                due: None,
                last_miss: None,
                recent_limited: VecDeque::new(),
                paused_until: None,
                generation: 0,
                last_cut: None,
                ceiling: None,
                round_start: now,
                round_binding: false,
                recent: VecDeque::new(),
                rate_limited: 0,
                sent: 0,
            }),
            gate: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the lane may start one more request (pause over, spacing kept).
    /// Cancellation-safe: a dropped waiter takes no slot.
    pub async fn acquire(&self) -> PaceTicket {
        let _gate = self.gate.lock().await;
        let mut waited = false;
        loop {
            let earliest = {
                let mut state = self.lock();
                let now = Instant::now();
                let spacing = state.next_start();
                let earliest = [spacing, state.paused_until].into_iter().flatten().max();
                match earliest {
                    Some(at) if at > now => at,
                    _ => {
                        if waited && state.phase != PacerPhase::Unpaced {
                            state.round_binding = true;
                        }
                        return self.start(&mut state, now);
                    }
                }
            };
            waited = true;
            self.wait_until(earliest).await;
        }
    }

    /// Sleeps until `at`: on tokio's timer to within [`PacerConfig::fine_wait`], the rest on
    /// a blocking thread. Dropped meanwhile, it takes no slot (the thread only sleeps).
    async fn wait_until(&self, at: Instant) {
        let fine = self.config.fine_wait;
        if fine.is_zero() {
            sleep_until(at).await;
            return;
        }
        if let Some(coarse) = at.checked_sub(fine)
            && coarse > Instant::now()
        {
            sleep_until(coarse).await;
        }
        let rest = at.saturating_duration_since(Instant::now());
        if !rest.is_zero() {
            // A failed join only means the runtime is shutting down; the loop checks the clock.
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
        }
    }

    fn start(&self, state: &mut State, now: Instant) -> PaceTicket {
        state.schedule_next(now);
        state.last_start = Some(now);
        state.sent += 1;
        state.recent.push_back(now);
        while state.recent.front().is_some_and(|at| now.duration_since(*at) > Duration::from_secs(1)) {
            state.recent.pop_front();
        }
        self.grow(state, now);
        PaceTicket { generation: state.generation, rate_at_send: (state.phase != PacerPhase::Unpaced).then_some(state.rate), sent_at: now }
    }

    /// Round bookkeeping: grow the rate once per round in which the pacer held requests back.
    fn grow(&self, state: &mut State, now: Instant) {
        if now.duration_since(state.round_start) < self.config.round {
            return;
        }
        let binding = std::mem::take(&mut state.round_binding);
        state.round_start = now;
        let cooling = state.last_cut.is_some_and(|cut| now.duration_since(cut) < self.config.cooldown);
        if !binding || cooling {
            return;
        }
        if state.ceiling.is_some_and(|(_, at)| now.duration_since(at) > self.config.ceiling_ttl) {
            state.ceiling = None;
        }
        let grown = match state.phase {
            PacerPhase::Unpaced => return,
            PacerPhase::SlowStart => state.rate * self.config.slow_start_factor,
            PacerPhase::Steady => state.rate * (1.0 + self.config.growth_fraction),
        };
        self.raise_after_a_clean_stretch(state);
        let cap = state.ceiling.map_or(f64::INFINITY, |(ceiling, _)| ceiling * self.config.ceiling_margin);
        if state.phase == PacerPhase::SlowStart && grown >= cap {
            state.phase = PacerPhase::Steady;
        }
        state.rate = grown.min(cap).max(state.rate);
        if state.rate > self.config.max_rate {
            state.phase = PacerPhase::Unpaced;
            state.rate = f64::INFINITY;
        }
    }

    /// Steps the ceiling back up once a lane paced at its cap went twice
    /// [`PacerConfig::miss_spacing`] sends without a 429: steps down after misses can overshoot
    /// (a cluster of misses steps several times), and nothing else would raise the cap again
    /// before the ceiling expires. At most one step per clean stretch, never above the send
    /// rate that last drew a congestion event, so the cap settles where misses are rarer than
    /// one in that many sends.
    fn raise_after_a_clean_stretch(&self, state: &mut State) {
        let Some((ceiling, at)) = state.ceiling else { return };
        let at_cap = state.rate >= ceiling * self.config.ceiling_margin * (1.0 - 1e-9);
        let clean_since = state.last_miss.unwrap_or(0).max(state.last_raise);
        let raised = (ceiling / self.config.ceiling_step).min(state.ceiling_top);
        if state.phase == PacerPhase::Steady && at_cap && raised > ceiling && state.sent.saturating_sub(clean_since) >= 2 * self.config.miss_spacing {
            state.ceiling = Some((raised, at));
            state.last_raise = state.sent;
        }
    }

    /// An HTTP 429 answered the request of `ticket`: pause the lane for `retry_after` and,
    /// once per congestion event, cut the rate.
    pub fn rate_limited(&self, ticket: PaceTicket, retry_after: Option<Duration>) {
        let mut state = self.lock();
        let now = Instant::now();
        state.rate_limited += 1;
        let paced = ticket.rate_at_send.is_some() && state.phase != PacerPhase::Unpaced;
        let storm = state.storm(now, self.config.min_stream);
        if let Some(wait) = retry_after
            && (!paced || storm)
        {
            state.pause_until(now + wait);
        }
        if ticket.generation != state.generation {
            return;
        }
        if state.phase == PacerPhase::Steady && paced && !storm {
            let lone = state.last_miss.is_none_or(|at| state.sent.saturating_sub(at) >= self.config.miss_spacing);
            state.last_miss = Some(state.sent);
            if lone {
                return;
            }
        }
        let config = self.config;
        let new_rate = match (state.phase, ticket.rate_at_send) {
            (PacerPhase::Unpaced, _) | (_, None) => {
                let in_window: Vec<&Instant> = state.recent.iter().filter(|at| now.duration_since(**at) <= Duration::from_secs(1)).collect();
                if in_window.len() < config.min_stream {
                    return;
                }
                // Sends per second over the window actually covered, at least one round.
                let span = in_window.first().map_or(Duration::ZERO, |first| now.duration_since(**first)).max(config.round);
                #[expect(clippy::cast_precision_loss, reason = "at most a few thousand sends per second")]
                let sent = in_window.len() as f64 / span.as_secs_f64();
                state.phase = PacerPhase::SlowStart;
                sent * config.initial_fraction
            }
            (PacerPhase::SlowStart, Some(sent_at_rate)) => {
                state.phase = PacerPhase::Steady;
                state.ceiling = Some((sent_at_rate, now));
                state.ceiling_top = sent_at_rate;
                // A storm at the first paced rate: no rate drew none yet, so "one step back"
                // would still be far too fast.
                if storm { sent_at_rate * state.cut_to_accepted_share(now, config) } else { sent_at_rate / config.slow_start_factor }
            }
            (PacerPhase::Steady, Some(sent_at_rate)) => match state.ceiling {
                // Misses close under a known ceiling: the cap is a hair above what the server
                // takes (its clock and ours jitter by a millisecond). The ceiling comes down one
                // small step and the lane is paced at the new cap: a 5 % cut and the climb back
                // made a sawtooth that lost 2-3 % of the rate and drew a pair of 429s every few
                // seconds. Steps stop once the misses do (a lower rate leaves more slack), so
                // jitter cannot ratchet the rate far down; a real drop keeps drawing misses and
                // keeps stepping, and a storm or a miss far under the ceiling cuts at once.
                Some((ceiling, _)) if !storm && sent_at_rate >= config.ceiling_hold * ceiling => {
                    let lowered = ceiling * config.ceiling_step;
                    state.ceiling = Some((lowered, now));
                    lowered * config.ceiling_margin
                }
                // Less than a second after a cut to the accepted share, 429s are that storm's
                // tail (its window still holds its 429s; the first sends at the new rate can
                // land close to the last ones at the old rate): a storm cuts by the fixed
                // factor, a miss by nothing, and the ceiling stays where the storm put it
                // (pinning it at the already-cut rate would keep the lane under the server's
                // rate for good).
                _ if state.last_share_cut.is_some_and(|cut| now.duration_since(cut) < Duration::from_secs(1)) => {
                    if storm {
                        sent_at_rate * config.decrease_factor
                    } else {
                        state.rate
                    }
                }
                // A storm, or misses far under the ceiling (or with none known): the server's
                // limit is at or under this send rate. Misses say it is just under (pace at
                // the cap under it); a storm says the limit dropped: cut harder.
                _ => {
                    state.ceiling = Some((sent_at_rate, now));
                    state.ceiling_top = sent_at_rate;
                    sent_at_rate * if storm { state.cut_to_accepted_share(now, config) } else { config.ceiling_margin }
                }
            },
        };
        state.rate = new_rate.min(state.rate).max(config.min_rate);
        state.last_miss = Some(state.sent);
        state.generation += 1;
        state.last_cut = Some(now);
    }

    /// Applies the provider's rate-limit headers from any response: an exhausted budget
    /// pauses the lane until one request is available again; a nearly spent one (under a
    /// tenth left) paces the lane at the rate the budget refills.
    pub fn observe_headers(&self, headers: &RateLimitHeaders) {
        let (Some(remaining), Some(reset)) = (headers.remaining, headers.reset) else { return };
        if reset.is_zero() {
            return;
        }
        let mut state = self.lock();
        let now = Instant::now();
        if remaining == 0 {
            let one = headers.limit.filter(|limit| *limit > 0).map_or(reset, |limit| reset / u32::try_from(limit).unwrap_or(u32::MAX));
            state.pause_until(now + one);
            return;
        }
        let Some(limit) = headers.limit else { return };
        if remaining.saturating_mul(10) > limit {
            return;
        }
        #[expect(clippy::cast_precision_loss, reason = "request budgets are far below 2^52")]
        let refill = limit.saturating_sub(remaining).max(1) as f64 / reset.as_secs_f64();
        if refill < state.rate {
            state.rate = refill.max(self.config.min_rate);
            if state.phase != PacerPhase::Steady {
                state.phase = PacerPhase::Steady;
            }
        }
    }

    /// Current phase, rate and counters.
    pub fn snapshot(&self) -> PacerSnapshot {
        let state = self.lock();
        PacerSnapshot {
            phase: state.phase,
            rate: (state.phase != PacerPhase::Unpaced).then_some(state.rate),
            rate_limited: state.rate_limited,
            sent: state.sent,
            cuts: state.generation,
            paused: state.paused_until.is_some_and(|until| until > Instant::now()),
        }
    }
}

impl State {
    /// When the next request may start: one interval after the previous start while the
    /// server's rate is unknown; on the GCRA schedule, but never closer to the previous
    /// start than the server's interval (nor 90 % of the paced one), once a ceiling is known.
    fn next_start(&self) -> Option<Instant> {
        let gap = self.interval()?;
        let last = self.last_start?;
        match (self.due, self.server_interval()) {
            // Making up lateness is for timer ticks, not for starting at a ceiling far above
            // the paced rate (after a storm's cut the ceiling is the storm's rate): never
            // closer than nine tenths of the paced interval either.
            (Some(due), Some(floor)) => Some(due.max(last + floor.max(gap.mul_f64(0.9)).min(gap))),
            _ => Some(last + gap),
        }
    }

    /// Moves the GCRA schedule past a start at `now`: due one interval after the later of
    /// its scheduled time and one interval ago (at most one interval of lateness is made up).
    fn schedule_next(&mut self, now: Instant) {
        self.due = self.interval().filter(|_| self.ceiling.is_some()).map(|gap| {
            let scheduled = self.due.unwrap_or(now);
            scheduled.max(now.checked_sub(gap).unwrap_or(now)) + gap
        });
    }

    /// The server's own spacing, as far as a 429 has shown it.
    fn server_interval(&self) -> Option<Duration> {
        self.ceiling.filter(|(rate, _)| rate.is_finite() && *rate > 0.0).map(|(rate, _)| Duration::from_secs_f64(1.0 / rate))
    }

    /// Records a 429 at `now` and says whether the last second's 429s are a storm: at least
    /// `min_stream` of them, and at least half as many as the sends.
    fn storm(&mut self, now: Instant, min_stream: usize) -> bool {
        self.recent_limited.push_back(now);
        while self.recent_limited.front().is_some_and(|at| now.duration_since(*at) > Duration::from_secs(1)) {
            self.recent_limited.pop_front();
        }
        let sends = self.recent.iter().filter(|at| now.duration_since(**at) <= Duration::from_secs(1)).count();
        self.recent_limited.len() >= min_stream && self.recent_limited.len() * 2 >= sends
    }

    /// Records a storm's cut and returns its factor: the share of the last second's sends the
    /// server accepted (at most `decrease_factor`, at least a quarter). Sending at `s`, the
    /// server's rate is about `share · s`, so a lane far above it gets there in one cut
    /// instead of 5 % a second.
    fn cut_to_accepted_share(&mut self, now: Instant, config: PacerConfig) -> f64 {
        // Records the cut: for a second the window still holds these 429s, and cutting by
        // them again would cascade (see the `last_share_cut` arm of `rate_limited`).
        self.last_share_cut = Some(now);
        let sends = self.recent.iter().filter(|at| now.duration_since(**at) <= Duration::from_secs(1)).count();
        #[expect(clippy::cast_precision_loss, reason = "at most a few thousand sends per second")]
        let share = 1.0 - self.recent_limited.len() as f64 / sends.max(1) as f64;
        share.clamp(0.25, config.decrease_factor)
    }

    fn interval(&self) -> Option<Duration> {
        (self.phase != PacerPhase::Unpaced && self.rate.is_finite() && self.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / self.rate))
    }

    fn pause_until(&mut self, until: Instant) {
        if self.paused_until.is_none_or(|current| current < until) {
            self.paused_until = Some(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A pacer on tokio's (paused) clock alone.
    fn pacer() -> Arc<Pacer> {
        Arc::new(Pacer::new(PacerConfig { fine_wait: Duration::ZERO, ..PacerConfig::default() }))
    }

    /// Sends `n` requests back to back and returns their start times relative to `t0`.
    async fn starts(pacer: &Pacer, n: usize, t0: Instant) -> Vec<Duration> {
        let mut out = Vec::new();
        for _ in 0..n {
            let ticket = pacer.acquire().await;
            out.push(ticket.sent_at.duration_since(t0));
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn unpaced_until_the_first_429() {
        let pacer = pacer();
        let t0 = Instant::now();
        let times = starts(&pacer, 50, t0).await;
        assert!(times.iter().all(Duration::is_zero), "no 429 yet, no waiting: {times:?}");
        assert_eq!(pacer.snapshot().phase, PacerPhase::Unpaced);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_429_pauses_but_does_not_pace() {
        let pacer = pacer();
        let ticket = pacer.acquire().await;
        pacer.rate_limited(ticket, Some(Duration::from_millis(300)));
        let t0 = Instant::now();
        let times = starts(&pacer, 3, t0).await;
        assert_eq!(times, [Duration::from_millis(300); 3], "after the pause, unpaced again");
        assert_eq!(pacer.snapshot().rate, None);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_the_whole_lane() {
        let pacer = pacer();
        let rejected = pacer.acquire().await;
        let t0 = Instant::now();
        pacer.rate_limited(rejected, Some(Duration::from_secs(1)));
        // Other requests of the lane, not only the rejected one, wait out the pause.
        let others: Vec<_> = futures::future::join_all((0..3).map(|_| pacer.acquire())).await;
        for ticket in others {
            assert_eq!(ticket.sent_at.duration_since(t0), Duration::from_secs(1));
        }
        let snapshot = pacer.snapshot();
        assert_eq!((snapshot.rate_limited, snapshot.paused), (1, false));
    }

    #[tokio::test(start_paused = true)]
    async fn first_burst_of_429s_turns_pacing_on_once() {
        let pacer = pacer();
        let tickets: Vec<_> = futures::future::join_all((0..20).map(|_| pacer.acquire())).await;
        for ticket in tickets {
            pacer.rate_limited(ticket, None);
        }
        let snapshot = pacer.snapshot();
        assert_eq!((snapshot.phase, snapshot.cuts, snapshot.rate_limited), (PacerPhase::SlowStart, 1, 20));
        let rate = snapshot.rate.unwrap();
        assert!((rate - 32.0).abs() < 1e-9, "0.4 × 20 sends in one 250 ms round: {rate}");
        // Paced: starts are 1/32 s apart.
        let t0 = Instant::now();
        let times = starts(&pacer, 4, t0).await;
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|gap| *gap >= Duration::from_micros(31_250)), "{gaps:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_start_grows_then_backs_off_to_the_last_good_rate() {
        let pacer = pacer();
        let tickets: Vec<_> = futures::future::join_all((0..20).map(|_| pacer.acquire())).await;
        for ticket in tickets {
            pacer.rate_limited(ticket, None);
        }
        tokio::time::advance(Duration::from_secs(3)).await;
        // Keep the pacer busy: the rate grows ×1.25 per binding round.
        let mut last = pacer.acquire().await;
        for _ in 0..60 {
            last = pacer.acquire().await;
        }
        let grown = pacer.snapshot().rate.unwrap();
        assert!(grown > 30.0, "slow start grows the rate: {grown}");
        let sent_rate = last.rate_at_send.unwrap();
        pacer.rate_limited(last, None);
        let snapshot = pacer.snapshot();
        assert_eq!(snapshot.phase, PacerPhase::Steady);
        assert!((snapshot.rate.unwrap() - sent_rate / 1.25).abs() < 1e-9, "back to the last rate that drew no 429");
        // A second 429 from a request sent before that cut is the same event.
        pacer.rate_limited(last, None);
        assert_eq!(pacer.snapshot().cuts, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn steady_growth_stays_under_the_ceiling() {
        let pacer = pacer();
        let tickets: Vec<_> = futures::future::join_all((0..40).map(|_| pacer.acquire())).await;
        for ticket in tickets {
            pacer.rate_limited(ticket, None);
        }
        let ticket = pacer.acquire().await;
        // Slow start → steady, in a storm: the ceiling is this send rate.
        let ceiling = ticket.rate_at_send.unwrap();
        pacer.rate_limited(ticket, None);
        let ticket = pacer.acquire().await;
        let sent = ticket.rate_at_send.unwrap();
        // Steady cut, still in the storm of the first 429s, which already cut to the accepted
        // share: the fixed factor, not that share again, and the ceiling stays.
        pacer.rate_limited(ticket, None);
        let config = PacerConfig::default();
        let cut = pacer.snapshot().rate.unwrap();
        assert!((cut - sent * config.decrease_factor).abs() < 1e-9, "{cut} from {sent}");
        tokio::time::advance(Duration::from_secs(3)).await;
        for _ in 0..400 {
            pacer.acquire().await;
        }
        let rate = pacer.snapshot().rate.unwrap();
        assert!(rate > cut && rate <= ceiling * config.ceiling_margin + 1e-9, "grows, capped by the ceiling: {rate} vs {ceiling}");
    }

    /// A pacer in congestion avoidance at `rate` under a ceiling of `ceiling` (as after the
    /// first 429s), idle long enough that its cooldown is over.
    async fn steady(ceiling_rate: f64) -> Arc<Pacer> {
        let pacer = pacer();
        {
            let mut state = pacer.lock();
            state.phase = PacerPhase::Steady;
            state.rate = ceiling_rate * 0.985;
            state.ceiling = Some((ceiling_rate, Instant::now()));
            state.ceiling_top = ceiling_rate;
        }
        pacer
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_429_on_a_paced_lane_delays_only_its_request_and_cuts_nothing() {
        let pacer = steady(40.0).await;
        for _ in 0..150 {
            pacer.acquire().await;
        }
        let rate = pacer.snapshot().rate.unwrap();
        let missed = pacer.acquire().await;
        pacer.rate_limited(missed, Some(Duration::from_secs(1)));
        let t0 = Instant::now();
        let next = pacer.acquire().await;
        assert!(next.sent_at.duration_since(t0) < Duration::from_millis(30), "no lane-wide pause for a miss");
        let snapshot = pacer.snapshot();
        assert_eq!((snapshot.rate, snapshot.cuts, snapshot.paused), (Some(rate), 0, false), "a miss is counted, not cut");
        // A second 429 within `miss_spacing` sends is congestion: the rate is cut.
        let again = pacer.acquire().await;
        pacer.rate_limited(again, Some(Duration::from_secs(1)));
        let snapshot = pacer.snapshot();
        assert_eq!(snapshot.cuts, 1);
        assert!(snapshot.rate.unwrap() < rate, "{snapshot:?}");
        assert!(!snapshot.paused, "still no lane-wide pause: the cut is the answer");
    }

    #[tokio::test(start_paused = true)]
    async fn misses_close_under_the_ceiling_step_it_down_without_a_cut_and_a_real_drop_is_followed() {
        let config = PacerConfig::default();
        let pacer = steady(40.0).await;
        let rate = pacer.snapshot().rate.unwrap();
        let miss = |pacer: &Arc<Pacer>| {
            let pacer = Arc::clone(pacer);
            async move {
                let ticket = pacer.acquire().await;
                pacer.rate_limited(ticket, None);
                pacer.snapshot().rate.unwrap()
            }
        };
        // A pair of misses at the cap, as a cap a hair above the server's rate draws them.
        miss(&pacer).await;
        let stepped = miss(&pacer).await;
        assert!((stepped - 40.0 * config.ceiling_step * config.ceiling_margin).abs() < 1e-9, "one step: {stepped}");
        assert!(stepped > rate * config.decrease_factor, "no 5 % cut: {stepped} vs {rate}");
        // Misses as sparse as `miss_spacing` at the new cap are jitter: nothing moves.
        for _ in 0..config.miss_spacing {
            pacer.acquire().await;
        }
        assert!((miss(&pacer).await - stepped).abs() < 1e-9, "a lone miss moves nothing");
        // Another one soon after: the cap is still high, one more step.
        let again = miss(&pacer).await;
        assert!((again - 40.0 * config.ceiling_step.powi(2) * config.ceiling_margin).abs() < 1e-9, "{again}");
        // A clean stretch at the cap (twice `miss_spacing` sends) raises the ceiling one step.
        for _ in 0..2 * config.miss_spacing + 20 {
            pacer.acquire().await;
        }
        let raised = pacer.snapshot().rate.unwrap();
        assert!((raised - stepped).abs() < 1e-9, "one step back up: {raised} vs {stepped}");
        // Clean stretches raise it up to the rate that drew the 429s, never past it.
        for _ in 0..6 * config.miss_spacing {
            pacer.acquire().await;
        }
        let top = pacer.snapshot().rate.unwrap();
        assert!((top - 40.0 * config.ceiling_margin).abs() < 1e-9, "back at the first cap, no higher: {top}");
        // A limit that really dropped by a tenth keeps drawing misses: the steps follow it
        // down (a miss far under the ceiling cuts at once).
        for _ in 0..40 {
            let ticket = pacer.acquire().await;
            pacer.rate_limited(ticket, None);
        }
        assert!(pacer.snapshot().rate.unwrap() < 36.0, "{:?}", pacer.snapshot());
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_cuts_to_the_share_the_server_accepted() {
        // Paced at 25/s against a server taking 10/s: about 6 of every 10 sends draw a 429.
        let pacer = steady(25.0).await;
        for _ in 0..25 {
            pacer.acquire().await;
        }
        for n in 0..25 {
            let ticket = pacer.acquire().await;
            if n % 10 < 6 {
                pacer.rate_limited(ticket, None);
            }
        }
        let rate = pacer.snapshot().rate.unwrap();
        let before = 25.0 * 0.985;
        assert!(rate < before * 0.5 && rate > before * 0.25 * 0.9, "one cut to about the accepted share (about 0.4), not 5 % a storm: {rate} from {before}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unpaced_lane_and_a_storm_pause_the_whole_lane() {
        let pacer = steady(40.0).await;
        let tickets: Vec<_> = futures::future::join_all((0..8).map(|_| pacer.acquire())).await;
        for ticket in tickets {
            pacer.rate_limited(ticket, Some(Duration::from_secs(1)));
        }
        assert!(pacer.snapshot().paused, "8 of 8 sends drew 429: the server means the lane");
    }

    #[tokio::test(start_paused = true)]
    async fn the_schedule_makes_up_late_starts_but_never_starts_closer_than_the_server_allows() {
        // Whole milliseconds (tokio's timer ticks in them): the server allows one request per
        // 197 ms, the lane is paced at one per 200 ms.
        let pacer = steady(1000.0 / 197.0).await;
        pacer.lock().rate = 5.0;
        let interval = Duration::from_millis(200);
        let floor = Duration::from_micros(196_999);
        let t0 = Instant::now();
        let mut last = pacer.acquire().await.sent_at;
        let mut gaps = Vec::new();
        // 200 starts, 40 s: well inside the ceiling's life (after it the pacer probes above it).
        for n in 0..200 {
            if n % 10 == 3 {
                // A late wake-up: the caller comes back 3 ms after its start was due.
                tokio::time::advance(interval + Duration::from_millis(3)).await;
            }
            let at = pacer.acquire().await.sent_at;
            gaps.push(at - last);
            last = at;
        }
        assert!(gaps.iter().all(|gap| *gap >= floor), "never closer than 1 / ceiling: {:?}", gaps.iter().min());
        assert!(gaps.iter().any(|gap| *gap < interval), "late starts are made up by starting the next one sooner");
        let elapsed = last.duration_since(t0);
        assert!(elapsed <= interval * 200 + Duration::from_millis(3), "late starts are made up: {elapsed:?} for 200 intervals of {interval:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn exhausted_budget_pauses_and_low_budget_paces() {
        let pacer = pacer();
        pacer.observe_headers(&RateLimitHeaders { limit: Some(60), remaining: Some(0), reset: Some(Duration::from_secs(60)) });
        let t0 = Instant::now();
        let ticket = pacer.acquire().await;
        assert_eq!(ticket.sent_at.duration_since(t0), Duration::from_secs(1), "one request refills in 60 s / 60");
        pacer.observe_headers(&RateLimitHeaders { limit: Some(100), remaining: Some(5), reset: Some(Duration::from_secs(19)) });
        let rate = pacer.snapshot().rate.unwrap();
        assert!((rate - 5.0).abs() < 1e-9, "95 requests refill in 19 s: {rate}");
        pacer.observe_headers(&RateLimitHeaders { limit: Some(100), remaining: Some(50), reset: Some(Duration::from_secs(1)) });
        assert!((pacer.snapshot().rate.unwrap() - 5.0).abs() < 1e-9, "a half-full budget changes nothing");
    }
}
