//! Per model: the gate its calls pass, what the run knows of its calls, and its one stop
//! switch; and the run-wide disk-full switch. The fail-fast rule ([`lane_wide`]) is a pure
//! function of a lane's state and one failure.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::exec::step_error::StepError;
use crate::plan::StepKey;
use crate::providers::{CallError, ClientConfig, ConcurrencyMode, StopSwitch};

/// Requests rejected in a row with the same message, before a model's first answer, that stop
/// its calls: one could be the prompt's fault, three alike with nothing answered are the
/// endpoint's (a parameter or a template the server refuses), unless they all came from one
/// episode while others had calls out (a task whose every prompt the server refuses).
pub const LANE_BAD_REQUESTS: u32 = 3;

/// The episodes (cells) some calls came from: one, or more than one.
#[derive(Debug, Default, Clone, Copy)]
struct Spread {
    first: Option<StepKey>,
    several: bool,
}

impl Spread {
    fn add(&mut self, episode: StepKey) {
        match self.first {
            None => self.first = Some(episode),
            Some(first) => self.several |= first != episode,
        }
    }
}

/// What a run knows of one model's calls, to stop sending them at a failure they all share.
#[derive(Debug, Default)]
pub(super) struct LaneState {
    answered: bool,
    bad_requests: u32,
    last_rejection: Option<String>,
    /// The episodes whose calls were sent before the first answer.
    sent: Spread,
    /// The episodes of the rejections counted in `bad_requests`.
    rejected_from: Spread,
}

impl LaneState {
    /// Notes a call of `episode` sent (only until the model first answers: after that, no
    /// rejection is the lane's).
    fn sent(&mut self, episode: StepKey) {
        if !self.answered {
            self.sent.add(episode);
        }
    }

    /// Counts a rejected request of `episode`: the same message again adds one, another
    /// starts over.
    fn rejected(&mut self, message: &str, episode: StepKey) {
        if self.last_rejection.as_deref() == Some(message) {
            self.bad_requests += 1;
        } else {
            (self.bad_requests, self.last_rejection, self.rejected_from) = (1, Some(message.to_owned()), Spread::default());
        }
        self.rejected_from.add(episode);
    }
}

/// Whether `error` is one every call of the lane would hit: the key refused (401/403), the
/// quota used up, an unusable endpoint, an unknown model or route (404), and, before the model
/// has answered at all, a server that cannot be reached or [`LANE_BAD_REQUESTS`] requests
/// rejected alike (a parameter the server refuses) from more than one episode, or from the
/// only episode that has sent calls. Rejections of one episode while others wait for their
/// answers are that episode's prompts' fault: whichever answers first must not decide it.
pub(super) fn lane_wide(lane: &LaneState, error: &CallError) -> bool {
    match error {
        CallError::Auth { .. } | CallError::Quota { .. } | CallError::Config { .. } | CallError::BadRequest { status: 404, .. } => true,
        CallError::Connect { .. } => !lane.answered,
        CallError::BadRequest { .. } => !lane.answered && lane.bad_requests >= LANE_BAD_REQUESTS && (lane.rejected_from.several || !lane.sent.several),
        _ => false,
    }
}

/// The lanes of a run, by model id.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    /// Per model id: the calls being prepared or sent, bounded (see [`Lanes::gate`]).
    gates: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
    /// Per model id: whether it has answered, and its stop switch.
    states: Mutex<HashMap<String, (LaneState, Arc<StopSwitch>)>>,
    /// Set at the first cache write that failed for lack of space: from then on no call is
    /// sent, so the answers lost are at most those already in flight.
    disk_full: AtomicBool,
    /// Why the run stopped sending (the first Ctrl-C, a cache that cannot be written): no
    /// call is sent from then on; those in flight may answer.
    stopped: std::sync::OnceLock<String>,
}

impl Lanes {
    /// The gate a model's calls pass, first come first served: twice the lane's concurrency
    /// may be keyed, looked up and built at once. A benchmark that asks all its items at once
    /// (BBEH: 200 per cell, a cell per task and seed) would otherwise prepare thousands of
    /// requests before the first is sent, and prepare each long before a slot is free.
    pub(super) fn gate(&self, model: &str, config: &ClientConfig) -> Arc<tokio::sync::Semaphore> {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        let gate = gates.entry(model.to_owned()).or_insert_with(|| {
            let cap = match config.concurrency {
                ConcurrencyMode::Static { max_concurrency } => max_concurrency,
                ConcurrencyMode::Adaptive(config) => config.cap,
            };
            Arc::new(tokio::sync::Semaphore::new(cap.saturating_mul(2).clamp(16, tokio::sync::Semaphore::MAX_PERMITS)))
        });
        Arc::clone(gate)
    }

    fn with<T>(&self, model: &str, f: impl FnOnce(&mut LaneState, &Arc<StopSwitch>) -> T) -> T {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, switch) = states.entry(model.to_owned()).or_insert_with(|| (LaneState::default(), Arc::new(StopSwitch::new(model))));
        f(state, switch)
    }

    /// The model's stop switch, which the transport also checks before each attempt.
    pub(super) fn switch(&self, model: &str) -> Arc<StopSwitch> {
        self.with(model, |_, switch| Arc::clone(switch))
    }

    /// Notes that `model` answered: from then on a failure is the call's, not the lane's.
    pub(super) fn answered(&self, model: &str) {
        self.with(model, |lane, _| lane.answered = true);
    }

    /// Why `model`'s calls must stop now that `error` failed one of them ([`lane_wide`]);
    /// `None` when it is the call's own failure or the lane has stopped already.
    pub(super) fn failed(&self, model: &str, episode: StepKey, error: &StepError) -> Option<String> {
        let StepError::Call { error: call, .. } = error else { return None };
        self.with(model, |lane, switch| {
            if let CallError::BadRequest { message, .. } = call {
                lane.rejected(message, episode);
            }
            (lane_wide(lane, call) && switch.reason().is_none()).then(|| error.to_string())
        })
    }

    /// Why no call of `model` may be sent now: the cache disk is full, or its lane stopped;
    /// when none, the call of `episode` is noted as sent.
    pub(super) fn refusal(&self, model: &str, episode: StepKey) -> Option<StepError> {
        if self.disk_full.load(Ordering::SeqCst) {
            return Some(StepError::DiskFull);
        }
        if let Some(reason) = self.stopped.get() {
            return Some(StepError::episode_msg(format!("not sent: {reason}")));
        }
        let reason = self.with(model, |lane, switch| {
            let reason = switch.reason().map(str::to_owned);
            if reason.is_none() {
                lane.sent(episode);
            }
            reason
        })?;
        Some(StepError::episode_msg(format!("not sent: model `{model}` stopped at a failure every call of it would hit: {reason}")))
    }

    /// Stops the run's calls for `reason`: none is sent from then on.
    pub(super) fn stop_all(&self, reason: &str) {
        let _ = self.stopped.set(reason.to_owned());
    }

    /// Marks the cache disk full; `true` only the first time.
    pub(super) fn mark_disk_full(&self) -> bool {
        !self.disk_full.swap(true, Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected() -> CallError {
        CallError::BadRequest { status: 400, message: "Unsupported parameter: 'temperature'".into() }
    }

    fn episode(n: u8) -> StepKey {
        StepKey::of_canonical(&[n])
    }

    /// Feeds `rejections` (the episode of each) to a lane whose calls were sent from `sent`;
    /// whether the last rejection stops the lane.
    fn stops(sent: &[u8], rejections: &[u8]) -> bool {
        let mut lane = LaneState::default();
        for &e in sent {
            lane.sent(episode(e));
        }
        let CallError::BadRequest { message, .. } = rejected() else { unreachable!() };
        for &e in rejections {
            lane.rejected(&message, episode(e));
        }
        lane_wide(&lane, &rejected())
    }

    #[test]
    fn rejections_alike_stop_the_lane_unless_one_episode_alone_drew_them_while_others_wait() {
        assert!(!stops(&[1], &[1, 1]), "two are not yet the endpoint's");
        assert!(stops(&[1], &[1, 1, 1]), "the only episode sending: every call of it is refused");
        assert!(stops(&[1, 2, 3], &[1, 2, 1]), "refused across episodes: a parameter the server refuses");
        assert!(!stops(&[1, 2, 3], &[3, 3, 3, 3, 3]), "one task's prompts refused while the others wait for answers");
        assert!(stops(&[1, 2, 3], &[3, 3, 3, 1]), "until another episode is refused alike");
    }

    #[test]
    fn a_first_answer_or_another_message_resets_what_the_rejections_say() {
        let mut lane = LaneState::default();
        lane.sent(episode(1));
        lane.rejected("a", episode(1));
        lane.rejected("a", episode(2));
        lane.rejected("b", episode(1));
        lane.rejected("b", episode(1));
        lane.sent(episode(2));
        lane.rejected("b", episode(1));
        assert!(!lane_wide(&lane, &rejected()), "the streak of `b` came from episode 1 alone while 2 had calls out");
        lane.rejected("b", episode(2));
        assert!(lane_wide(&lane, &rejected()));
        lane.answered = true;
        assert!(!lane_wide(&lane, &rejected()), "once answered, a rejection is the call's");
        assert!(lane_wide(&lane, &CallError::BadRequest { status: 404, message: "no such model".into() }), "an unknown model always is the lane's");
    }
}
