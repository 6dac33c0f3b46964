//! The ideal-observer agent `ideal`: a Bayesian scientist over the grammar-generated
//! hypothesis space of `ideal_grammar.rs`. It conditions exactly on what a player sees
//! (the starter and every play's accept/reject; a failed formal guess rules out every
//! hypothesis the judge would have accepted), plays the hand card whose outcome it is least
//! sure of (maximal expected information), and reports the posterior probability that its
//! best guess passes the judge as its confidence, guessing formally at ≥ 2/3 (the scoring's
//! break-even). Its scores are a reference: what a calibrated scientist with that prior
//! achieves on each rule.

#[path = "ideal_grammar.rs"]
mod grammar;

use grammar::{EMPTY, FULL, Space, space, state_of};

use super::agents::{Agent, AgentAction};
use super::card::Card;
use super::deck::universe_index;
use super::equivalence::{RuleEvalError, RuleFn};
use super::game::{Action, Observation};

/// Formal guesses are made at or above this posterior (score break-even: guessing now
/// gains `3p − 2` points over waiting a turn for certainty).
pub const GUESS_THRESHOLD: f64 = 2.0 / 3.0;
/// Classes (by posterior mass) examined as guess candidates each turn.
const CANDIDATES: usize = 12;

/// Sizes of the hypothesis space, for reports and docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarSummary {
    /// Grammar expressions generated (before merging identical tables).
    pub expressions: usize,
    /// Distinct hypotheses (distinct acceptance tables, library rules included).
    pub hypotheses: usize,
    /// Classes of hypotheses that agree on every non-empty mainline state.
    pub classes: usize,
    /// Library rules added on top of the grammar (no identical expression).
    pub library_extras: Vec<String>,
}

/// Describes the hypothesis space (builds it on first call).
pub fn grammar_summary() -> GrammarSummary {
    let s = space();
    GrammarSummary {
        expressions: s.expressions,
        hypotheses: s.hyps.len(),
        classes: s.classes,
        library_extras: s.library_extras.iter().map(|r| r.name().to_owned()).collect(),
    }
}

/// A hypothesis as a rule the judge can run: its acceptance table.
#[derive(Debug, Clone)]
pub struct HypothesisRule {
    table: Box<[u64]>,
}

impl RuleFn for HypothesisRule {
    fn eval(&self, card: &Card, mainline: &[Card]) -> Result<bool, RuleEvalError> {
        let mask = RuleFn::acceptance_mask(self, mainline);
        match (mask, universe_index(*card)) {
            (Some(m), Some(i)) => Ok(m >> i & 1 == 1),
            _ => Err(RuleEvalError::Exception("card outside the 52-card universe".to_owned())),
        }
    }

    fn acceptance_mask(&self, mainline: &[Card]) -> Option<u64> {
        state_of(mainline).and_then(|s| self.table.get(s).copied())
    }
}

/// What the agent decided on its last turn (for inspection and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Hypothesis id of the best guess (index into the hypothesis space).
    pub hypothesis: u32,
    /// Its text (the tentative rule).
    pub rule_text: String,
    /// Posterior probability that the judge accepts it after this turn's play.
    pub probability: f64,
    /// Expected information of the played card, in bits.
    pub entropy_bits: f64,
    /// Hypotheses still consistent with the observations.
    pub live_hypotheses: usize,
}

/// The Bayesian ideal observer (deterministic, no parameters). Keep one per round; it
/// restarts by itself when it sees a new round.
#[derive(Debug, Clone, Default)]
pub struct IdealAgent {
    /// Live hypotheses and their unnormalised posterior weights, by increasing id.
    live: Vec<(u32, f64)>,
    /// The starter this state belongs to (`None` before the first turn).
    starter: Option<Card>,
    /// History entries already conditioned on.
    processed: usize,
    /// Current state index (previous card × mainline parity).
    state: usize,
    /// Failed formal guesses already conditioned on.
    failed_seen: u32,
    /// A formal guess awaiting its verdict: (hypothesis, turn).
    pending: Option<(u32, u32)>,
    /// Scratch per class: posterior mass and best member.
    class_mass: Vec<f64>,
    class_best: Vec<(u32, f64)>,
    last: Option<Decision>,
}

impl IdealAgent {
    /// A fresh agent.
    pub fn new() -> Self {
        IdealAgent::default()
    }

    /// The decision of the last [`Agent::act`] call, if any.
    pub fn last_decision(&self) -> Option<&Decision> {
        self.last.as_ref()
    }

    /// Restarts from the starter: prior × probability that the starter is the first card
    /// of the undealt deck the rule accepts on an empty mainline (exact for a uniformly
    /// shuffled double deck when the initial hand is known, else 0/1).
    fn start(&mut self, obs: &Observation, sp: &Space) {
        self.live.clear();
        self.starter = obs.mainline.first().copied();
        self.processed = 0;
        self.failed_seen = obs.failed_guess_count;
        self.pending = None;
        let Some(si) = self.starter.and_then(universe_index) else { return };
        self.state = 2 * si + 1;
        // Copies left outside the hand: ≥ 1 (m1) and 2 (m2).
        let counts = obs.history.is_empty().then(|| {
            let mut n = [2u8; 52];
            for c in &obs.hand {
                if let Some(i) = universe_index(*c) {
                    n[i] = n[i].saturating_sub(1);
                }
            }
            let bits = |k: u8| (0..52).filter(|i| n[*i] >= k).fold(0u64, |m, i| m | 1 << i);
            (bits(1), bits(2), f64::from(n[si]))
        });
        for (h, hyp) in sp.hyps.iter().enumerate() {
            let e = sp.table(h as u32)[EMPTY];
            if e >> si & 1 == 0 {
                continue;
            }
            let lik = match counts {
                Some((m1, m2, nx)) => nx / f64::from((e & m1).count_ones() + (e & m2).count_ones()),
                None => 1.0,
            };
            self.live.push((h as u32, hyp.prior * lik));
        }
    }

    /// Conditions on new plays and on the verdict of a pending formal guess.
    fn update(&mut self, obs: &Observation, sp: &Space) {
        for play in obs.history.iter().skip(self.processed) {
            self.processed += 1;
            let Some(i) = universe_index(play.card) else { continue };
            let s = self.state;
            self.live.retain(|(h, _)| (sp.table(*h)[s] >> i & 1 == 1) == play.accepted);
            if play.accepted {
                self.state = 2 * i + (1 - s % 2);
            }
        }
        if let Some((h, turn)) = self.pending.take()
            && obs.failed_guess_count > self.failed_seen
            && turn + 1 == obs.turn
        {
            // The judge rejected `h` from the current state: the truth is none of the
            // hypotheses `h` agrees with on everything they can reach from here.
            let (g, s) = (sp.table(h), self.state);
            self.live.retain(|(t, _)| !agree_on_reach(g, sp.table(*t), s));
        }
        self.failed_seen = obs.failed_guess_count;
    }

    /// Picks the card, the best guess and its probability.
    fn decide(&mut self, obs: &Observation, sp: &Space) -> Option<(Card, Decision)> {
        let total: f64 = self.live.iter().map(|(_, w)| w).sum();
        if self.live.is_empty() || total <= 0.0 {
            return None;
        }
        let s = self.state;
        // Expected information of each hand card = entropy of its predicted outcome.
        let bits: Vec<Option<usize>> = obs.hand.iter().map(|c| universe_index(*c)).collect();
        let mut p_acc = vec![0.0f64; obs.hand.len()];
        for (h, w) in &self.live {
            let m = sp.table(*h)[s];
            for (p, b) in p_acc.iter_mut().zip(&bits) {
                if b.is_some_and(|i| m >> i & 1 == 1) {
                    *p += w;
                }
            }
        }
        let mut best: Option<(usize, f64)> = None;
        for (i, p) in p_acc.iter().enumerate() {
            if bits[i].is_none() {
                continue;
            }
            let e = entropy(p / total);
            if best.is_none_or(|(_, b)| e > b + 1e-12) {
                best = Some((i, e));
            }
        }
        let (ci, entropy_bits) = best?;
        let card = obs.hand[ci];
        let c = bits[ci]?;

        // Posterior mass per class, and each class's most probable member.
        if self.class_mass.len() != sp.classes {
            self.class_mass = vec![0.0; sp.classes];
            self.class_best = vec![(u32::MAX, 0.0); sp.classes];
        }
        let mut touched: Vec<u32> = Vec::new();
        for (h, w) in &self.live {
            let k = sp.hyps[*h as usize].class as usize;
            if self.class_best[k].0 == u32::MAX {
                touched.push(k as u32);
                self.class_best[k] = (*h, *w);
            } else if *w > self.class_best[k].1 {
                self.class_best[k] = (*h, *w);
            }
            self.class_mass[k] += w;
        }
        let mut order = touched.clone();
        order.sort_by(|a, b| {
            self.class_mass[*b as usize]
                .total_cmp(&self.class_mass[*a as usize])
                .then(a.cmp(b))
        });
        // The guess is judged from the mainline after this play: for each possible truth,
        // that is the current state or the played card's, depending on its verdict.
        let mut guess: Option<(u32, f64)> = None;
        for &k in order.iter().take(CANDIDATES) {
            let g = sp.table(self.class_best[k as usize].0);
            let mut p = 0.0;
            for &t in &touched {
                let tt = sp.table(self.class_best[t as usize].0);
                let s0 = if tt[s] >> c & 1 == 1 { 2 * c + (1 - s % 2) } else { s };
                if t == k || agree_on_reach(g, tt, s0) {
                    p += self.class_mass[t as usize];
                }
            }
            if guess.is_none_or(|(_, q)| p > q + 1e-12) {
                guess = Some((k, p));
            }
        }
        let (k, p) = guess?;
        let hypothesis = self.class_best[k as usize].0;
        for &t in &touched {
            self.class_mass[t as usize] = 0.0;
            self.class_best[t as usize] = (u32::MAX, 0.0);
        }
        let decision = Decision {
            hypothesis,
            rule_text: sp.text(hypothesis),
            probability: (p / total).clamp(0.0, 1.0),
            entropy_bits,
            live_hypotheses: self.live.len(),
        };
        Some((card, decision))
    }
}

/// Whether `guess` and `truth` agree on every state a walk under `truth` can reach from
/// `s0` (what the judge's random walks from the mainline after the turn explore).
fn agree_on_reach(guess: &[u64], truth: &[u64], s0: usize) -> bool {
    let mut seen = [0u64; 2];
    let mut stack = [0u8; EMPTY];
    let mut top = 0usize;
    if s0 >= EMPTY {
        return guess.get(s0) == truth.get(s0);
    }
    seen[s0 % 2] |= 1 << (s0 / 2);
    stack[0] = s0 as u8;
    top += 1;
    while top > 0 {
        top -= 1;
        let x = usize::from(stack[top]);
        if guess[x] != truth[x] {
            return false;
        }
        let parity = 1 - x % 2;
        let mut next = truth[x] & FULL & !seen[parity];
        seen[parity] |= next;
        while next != 0 {
            let j = next.trailing_zeros() as usize;
            next &= next - 1;
            // Each state is pushed once, so the stack never exceeds the 104 states.
            stack[top] = (2 * j + parity) as u8;
            top += 1;
        }
    }
    true
}

/// Binary entropy in bits.
fn entropy(p: f64) -> f64 {
    let h = |x: f64| if x <= 0.0 { 0.0 } else { -x * x.log2() };
    h(p) + h(1.0 - p)
}

impl Agent for IdealAgent {
    fn act(&mut self, obs: &Observation) -> AgentAction {
        let sp = space();
        if obs.history.is_empty()
            || self.starter != obs.mainline.first().copied()
            || obs.history.len() < self.processed
        {
            self.start(obs, sp);
        }
        self.update(obs, sp);
        let Some((card, d)) = self.decide(obs, sp) else {
            self.last = None;
            let card = obs.hand.first().copied().unwrap_or(super::deck::universe()[0]);
            return AgentAction {
                action: Action {
                    card,
                    reasoning: "No hypothesis of my grammar fits the observations.".to_owned(),
                    tentative_rule: None,
                    confidence: Some(0),
                    guess: false,
                },
                guessed_rule: None,
            };
        };
        let guess = d.probability >= GUESS_THRESHOLD;
        if guess {
            self.pending = Some((d.hypothesis, obs.turn));
        }
        let hyp = &sp.hyps[d.hypothesis as usize];
        let guessed_rule: Box<dyn RuleFn + Send + Sync> = match hyp.library {
            Some(rule) => Box::new(rule),
            None => Box::new(HypothesisRule { table: sp.table(d.hypothesis).into() }),
        };
        let action = Action {
            card,
            reasoning: format!(
                "{card} has the most uncertain outcome ({:.2} bits); {} hypotheses remain and the best has posterior {:.3}.",
                d.entropy_bits, d.live_hypotheses, d.probability
            ),
            tentative_rule: Some(d.rule_text.clone()),
            // round(10·p) of a probability is in 0..=10.
            confidence: Some((10.0 * d.probability).round() as i64),
            guess,
        };
        self.last = Some(d);
        AgentAction { action, guessed_rule: Some(guessed_rule) }
    }
}

#[cfg(test)]
#[path = "ideal_tests.rs"]
mod tests;
