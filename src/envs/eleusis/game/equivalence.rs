//! The judge (spec §3.3): decides whether a guessed rule is equivalent to the secret rule by
//! comparing both on every card of the 52-card universe along 100 seeded random walks of 40
//! steps from the current mainline. Verdict messages are byte-identical to the reference so
//! that recorded verdicts can be replayed and compared.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::card::Card;
use super::deck::universe;
use super::pyrandom::PyRandom;
use super::rule::SecretRule;

/// Why a rule could not be evaluated on one (card, mainline); the checker counts it as a
/// mismatch and carries on (the reference's exception path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleEvalError {
    /// The rule raised (e.g. a Python `NameError` in LLM-written guess code).
    #[error("rule raised an exception: {0}")]
    Exception(String),
    /// The rule exceeded its evaluation time limit (evalgrid behaviour, §8 Q7).
    #[error("rule evaluation timed out after {limit_ms} ms")]
    Timeout {
        /// The limit that was exceeded, in milliseconds.
        limit_ms: u64,
    },
}

/// Anything that can decide whether a card is accepted after a mainline: the native secret
/// rules, and (later) compiled guess code. The judge only talks to rules through this.
pub trait RuleFn {
    /// Accept (`true`) or reject `card` given the mainline (the Python result coerced to
    /// bool); an error is the reference's "exception raised by the rule".
    fn eval(&self, card: &Card, mainline: &[Card]) -> Result<bool, RuleEvalError>;

    /// Optional fast path for pure, total rules: the acceptance bitmask over the 52-card
    /// universe (bit i = `universe()[i]`) after `mainline`. `None` (the default) makes the
    /// checker call [`RuleFn::eval`] card by card, in the reference order.
    fn acceptance_mask(&self, mainline: &[Card]) -> Option<u64> {
        let _ = mainline;
        None
    }
}

impl RuleFn for SecretRule {
    #[inline]
    fn eval(&self, card: &Card, mainline: &[Card]) -> Result<bool, RuleEvalError> {
        Ok(self.accepts(card, mainline))
    }

    #[inline]
    fn acceptance_mask(&self, mainline: &[Card]) -> Option<u64> {
        Some(SecretRule::acceptance_mask(self, mainline))
    }
}

/// Ad-hoc rules (tests, native guess translations) as plain closures.
impl<F> RuleFn for F
where
    F: Fn(&Card, &[Card]) -> Result<bool, RuleEvalError>,
{
    #[inline]
    fn eval(&self, card: &Card, mainline: &[Card]) -> Result<bool, RuleEvalError> {
        self(card, mainline)
    }
}

/// Simulation parameters of the check (reference: 100 walks × 40 turns, seed 42); part of
/// any verdict cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SimulationParams {
    /// Number of random walks.
    pub num_simulations: u32,
    /// Steps (turns) per walk.
    pub turns_per_simulation: u32,
    /// Seed of the fresh `PyRandom` created for each check.
    pub seed: u64,
}

impl Default for SimulationParams {
    fn default() -> Self {
        SimulationParams { num_simulations: 100, turns_per_simulation: 40, seed: 42 }
    }
}

/// Outcome of one equivalence check. `message` is the reference's `reasoning` string;
/// the counters are evalgrid extras (not persisted by the reference).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// True iff the rules agreed on every comparison.
    pub equivalent: bool,
    /// Reference message, byte-exact (e.g. `Mismatch at sim 1, turn 1: card=A♥, …`).
    pub message: String,
    /// Comparisons performed (exception-path cards included).
    pub comparisons: u64,
    /// Mismatches counted (exception-path cards included).
    pub mismatches: u64,
}

impl Verdict {
    /// The reference verdict when the compiler produced no code for the guess.
    pub fn no_code() -> Self {
        Verdict { equivalent: false, message: "No code provided for guessed rule".to_owned(), comparisons: 0, mismatches: 0 }
    }

    /// The reference verdict when the guess code fails to compile (`error` = Python's
    /// error text).
    pub fn syntax_error(error: &str) -> Self {
        Verdict { equivalent: false, message: format!("Guessed rule code has syntax errors: {error}"), comparisons: 0, mismatches: 0 }
    }
}

/// Python's `repr(bool)`.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The reference's direct-mismatch message.
fn mismatch_message(sim: u32, turn: u32, card: &Card, actual: bool, guessed: bool) -> String {
    let mut message = String::with_capacity(72);
    // Writing to a String cannot fail.
    let _ = write!(message, "Mismatch at sim {sim}, turn {turn}: card={card}, actual={}, guessed={}", py_bool(actual), py_bool(guessed));
    message
}

/// Index of the `k`-th (0-based) set bit of `mask`, scanning from bit 0; `k` must be below
/// `mask.count_ones()`.
#[inline]
fn nth_set_bit(mut mask: u64, k: u32) -> usize {
    for _ in 0..k {
        mask &= mask - 1;
    }
    mask.trailing_zeros() as usize
}

/// Runs the §3.3 simulation: fresh `PyRandom(params.seed)`; per walk start from a copy of
/// `start_mainline`; per step evaluate actual then guessed on the 52 universe cards in
/// rank-major order; stop at the first direct mismatch, or at the end of a step with
/// exception-path mismatches; else extend the walk with `choice` over the cards the
/// *actual* rule accepted (a walk ends early when none is accepted). Rules offering
/// [`RuleFn::acceptance_mask`] are evaluated a whole step at a time, with identical results.
pub fn check(actual: &dyn RuleFn, guessed: &dyn RuleFn, start_mainline: &[Card], params: &SimulationParams) -> Verdict {
    const UNIVERSE: [Card; 52] = universe();
    // Bits 52..64 of a foreign mask are ignored, so indexing UNIVERSE never goes out of range.
    const FULL: u64 = (1u64 << 52) - 1;
    let mut rng = PyRandom::new(params.seed);
    let mut comparisons: u64 = 0;
    let mut mismatches: u64 = 0;
    let turns = params.turns_per_simulation as usize;
    let mut mainline: Vec<Card> = Vec::with_capacity(start_mainline.len() + turns);

    for sim in 1..=params.num_simulations {
        mainline.clear();
        mainline.extend_from_slice(start_mainline);
        for turn in 1..=params.turns_per_simulation {
            let mask_a = actual.acceptance_mask(&mainline).map(|m| m & FULL);
            let mask_g = guessed.acceptance_mask(&mainline).map(|m| m & FULL);
            let accepted: u64 = if let (Some(a), Some(g)) = (mask_a, mask_g) {
                let diff = a ^ g;
                if diff != 0 {
                    let i = diff.trailing_zeros();
                    comparisons += u64::from(i) + 1;
                    mismatches += 1;
                    let bit = 1u64 << i;
                    let message = mismatch_message(sim, turn, &UNIVERSE[i as usize], a & bit != 0, g & bit != 0);
                    return Verdict { equivalent: false, message, comparisons, mismatches };
                }
                comparisons += 52;
                a
            } else {
                let mut acc = 0u64;
                for (i, card) in UNIVERSE.iter().enumerate() {
                    let bit = 1u64 << i;
                    let outcome = match mask_a {
                        Some(m) => Ok(m & bit != 0),
                        None => actual.eval(card, &mainline),
                    }
                    .and_then(|a| {
                        match mask_g {
                            Some(m) => Ok(m & bit != 0),
                            None => guessed.eval(card, &mainline),
                        }
                        .map(|g| (a, g))
                    });
                    comparisons += 1;
                    match outcome {
                        Ok((a, g)) if a != g => {
                            mismatches += 1;
                            let message = mismatch_message(sim, turn, card, a, g);
                            return Verdict { equivalent: false, message, comparisons, mismatches };
                        }
                        Ok((true, _)) => acc |= bit,
                        Ok(_) => {}
                        Err(_) => mismatches += 1,
                    }
                }
                if mismatches > 0 {
                    return Verdict {
                        equivalent: false,
                        message: format!(
                            "Rules differ: {mismatches}/{comparisons} comparisons mismatched. \
                             Stopped at simulation {sim}, turn {turn}."
                        ),
                        comparisons,
                        mismatches,
                    };
                }
                acc
            };
            let n = accepted.count_ones();
            if n == 0 {
                break;
            }
            // n ≤ 52, so the draw is < 52 and fits in u32.
            let k = rng.randbelow(u64::from(n)) as u32;
            mainline.push(UNIVERSE[nth_set_bit(accepted, k)]);
        }
    }
    Verdict { equivalent: true, message: format!("Rules appear equivalent: {comparisons} comparisons, all matched"), comparisons, mismatches }
}

#[cfg(test)]
mod tests;
