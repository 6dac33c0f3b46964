//! [`PyGuessRule`]: a compiled Python guess behind the [`RuleFn`] trait, so the unchanged
//! [`check`](crate::envs::eleusis::game::equivalence::check) can judge it with one worker
//! round trip per walk step.

use std::cell::RefCell;
use std::time::Instant;

use serde_json::{Value, json};

use super::{JudgeError, PyJudge, indices, ms};
use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::deck::universe_index;
use crate::envs::eleusis::game::equivalence::{RuleEvalError, RuleFn};

/// A compiled Python guess as a [`RuleFn`], so the unchanged
/// [`check`](crate::envs::eleusis::game::equivalence::check)
/// can judge it: `acceptance_mask` evaluates a whole state in one round trip (all 52 cards,
/// no early exit, so call order differs from the reference only in calls after the first
/// mismatch); `eval` answers from that state's cached results. After a judge failure every
/// call fails fast with [`RuleEvalError::Timeout`], so the check ends on the exception path.
#[derive(Debug)]
pub struct PyGuessRule<'j> {
    judge: RefCell<&'j mut PyJudge>,
    deadline: Instant,
    cache: RefCell<Option<(Vec<Card>, Vec<u8>)>>,
    error: RefCell<Option<JudgeError>>,
}

impl<'j> PyGuessRule<'j> {
    /// Wraps a judge whose worker holds the compiled guess; the check budget ends at
    /// `deadline`.
    pub(super) fn new(judge: &'j mut PyJudge, deadline: Instant) -> Self {
        PyGuessRule { judge: RefCell::new(judge), deadline, cache: RefCell::new(None), error: RefCell::new(None) }
    }

    /// The judge failure that poisoned this rule, if any (the spec's `judge_error`).
    pub fn judge_error(&self) -> Option<JudgeError> {
        self.error.borrow().clone()
    }

    fn state_results(&self, mainline: &[Card]) -> Option<Vec<u8>> {
        if let Some((m, r)) = self.cache.borrow().as_ref()
            && m == mainline
        {
            return Some(r.clone());
        }
        if self.error.borrow().is_some() {
            return None;
        }
        let mut judge = self.judge.borrow_mut();
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let request = json!({
            "op": "eval",
            "time_limit_s": remaining.as_secs_f64(),
            "call_cpu_s": judge.config.call_cpu_limit.as_secs_f64(),
            "states": [{"m": indices(mainline)}],
        });
        let deadline = self.deadline + judge.config.kill_grace;
        let reply = judge.call(request, deadline);
        let limit_ms = ms(judge.config.check_time_limit);
        let row = match reply {
            Ok(r) if r.get("deadline").and_then(Value::as_bool) == Some(true) => Err(JudgeError::CheckTimeout { limit_ms }),
            Ok(r) => r
                .get("results")
                .and_then(|x| x.get(0))
                .and_then(Value::as_str)
                .filter(|s| s.len() == 52)
                .map(|s| s.as_bytes().to_vec())
                .ok_or(JudgeError::WorkerFailed { detail: "malformed eval reply".to_owned() }),
            Err(e) => Err(e),
        };
        match row {
            Ok(row) => {
                *self.cache.borrow_mut() = Some((mainline.to_vec(), row.clone()));
                Some(row)
            }
            Err(e) => {
                *self.error.borrow_mut() = Some(e);
                None
            }
        }
    }

    fn timeout(&self) -> RuleEvalError {
        let limit_ms = ms(self.judge.borrow().config.check_time_limit);
        RuleEvalError::Timeout { limit_ms }
    }
}

impl RuleFn for PyGuessRule<'_> {
    fn eval(&self, card: &Card, mainline: &[Card]) -> Result<bool, RuleEvalError> {
        let row = self.state_results(mainline).ok_or_else(|| self.timeout())?;
        let i = universe_index(*card).ok_or_else(|| RuleEvalError::Exception(format!("card {card} is not in the universe")))?;
        match row[i] {
            b'1' => Ok(true),
            b'0' => Ok(false),
            b'T' => Err(self.timeout()),
            other => Err(RuleEvalError::Exception(format!("guess raised (worker code {})", char::from(other)))),
        }
    }

    fn acceptance_mask(&self, mainline: &[Card]) -> Option<u64> {
        let row = self.state_results(mainline)?;
        let mut mask = 0u64;
        for (i, b) in row.iter().enumerate() {
            match b {
                b'1' => mask |= 1u64 << i,
                b'0' => {}
                _ => return None,
            }
        }
        Some(mask)
    }
}
