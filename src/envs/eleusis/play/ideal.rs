//! The ideal-observer agent `ideal`: a Bayesian scientist over the grammar-generated
//! hypothesis space of `ideal/grammar.rs`. It conditions exactly on what a player sees
//! (the starter and every play's accept/reject; a failed formal guess rules out every
//! hypothesis the judge would have accepted), plays the hand card whose outcome it is least
//! sure of (maximal expected information), and reports the posterior probability that its
//! best guess passes the judge as its confidence, guessing formally at ≥ 2/3 (the scoring's
//! break-even). Its scores are a reference: what a calibrated scientist with that prior
//! achieves on each rule.

mod grammar;

use std::collections::HashMap;
use std::sync::OnceLock;

use grammar::{Atoms, EMPTY, Expr, FULL, STATES, state_of};

use super::agents::{Agent, AgentAction};
use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::deck::universe_index;
use crate::envs::eleusis::game::equivalence::{RuleEvalError, RuleFn};
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{self, Action, Observation};

/// Formal guesses are made at or above this posterior (score break-even: guessing now
/// gains `3p − 2` points over waiting a turn for certainty).
pub const GUESS_THRESHOLD: f64 = 2.0 / 3.0;
/// Below this expected information (bits) a play teaches next to nothing, so waiting only
/// costs a point: the agent then guesses whenever the guess has a positive expected score.
pub const STUCK_BITS: f64 = 0.05;
/// Classes (by posterior mass) examined as guess candidates each turn.
const CANDIDATES: usize = 12;

/// One hypothesis: a distinct acceptance table.
struct Hypothesis {
    /// The most probable expression with this table (its rendering names the hypothesis).
    expr: Expr,
    /// Prior: sum over all expressions with this table.
    prior: f64,
    /// The library rule with exactly this table, if any (guessed as itself).
    library: Option<SecretRule>,
    /// Class id: hypotheses agreeing on every non-empty state share it.
    class: u32,
}

/// The hypothesis space: grammar expressions merged by table, plus the library rules.
struct Space {
    atoms: Atoms,
    /// `tables[h * STATES .. (h + 1) * STATES]` is hypothesis h's table.
    tables: Vec<u64>,
    hyps: Vec<Hypothesis>,
    classes: usize,
    expressions: usize,
    /// Library rules that needed an extra hypothesis (no identical grammar expression).
    library_extras: Vec<SecretRule>,
}

/// The process-wide hypothesis space (built on first use: ~0.1 s in a debug build).
fn space() -> &'static Space {
    static SPACE: OnceLock<Space> = OnceLock::new();
    SPACE.get_or_init(Space::build)
}

/// A cheap digest of (part of) a table, for bucketing equal tables.
fn digest(t: &[u64]) -> u64 {
    t.iter().fold(0x9e37_79b9_7f4a_7c15, |h, x| (h.rotate_left(23) ^ x).wrapping_mul(0x2545_f491_4f6c_dd1d))
}

impl Space {
    /// Hypothesis `h`'s table.
    #[inline]
    fn table(&self, h: u32) -> &[u64] {
        let i = h as usize * STATES;
        &self.tables[i..i + STATES]
    }

    /// Name of hypothesis `h`: the library description or the grammar rendering.
    fn text(&self, h: u32) -> String {
        let hyp = &self.hyps[h as usize];
        match hyp.library {
            Some(rule) => rule.description().to_owned(),
            None => self.atoms.render(hyp.expr),
        }
    }

    /// The hypothesis with exactly table `t`, if any.
    fn find(&self, index: &HashMap<u64, Vec<u32>>, t: &[u64]) -> Option<u32> {
        index.get(&digest(t))?.iter().copied().find(|h| self.table(*h) == t)
    }

    /// Adds expression `e`: a new hypothesis, or prior mass for the one with its table.
    fn add(&mut self, index: &mut HashMap<u64, Vec<u32>>, best: &mut Vec<f64>, e: Expr, prior: f64) {
        let mut t = [0u64; STATES];
        self.atoms.table(e, &mut t);
        self.expressions += 1;
        if let Some(h) = self.find(index, &t) {
            let h = h as usize;
            // The hypothesis is named after its most probable expression.
            if prior > best[h] {
                best[h] = prior;
                self.hyps[h].expr = e;
            }
            self.hyps[h].prior += prior;
            return;
        }
        let id = u32::try_from(self.hyps.len()).expect("fewer than 2^32 hypotheses");
        index.entry(digest(&t)).or_default().push(id);
        self.tables.extend_from_slice(&t);
        self.hyps.push(Hypothesis { expr: e, prior, library: None, class: 0 });
        best.push(prior);
    }

    fn build() -> Self {
        let mut sp = Space { atoms: Atoms::new(), tables: Vec::new(), hyps: Vec::new(), classes: 0, expressions: 0, library_extras: Vec::new() };
        let (mut index, mut best) = (HashMap::new(), Vec::new());
        let mut all = Vec::new();
        grammar::expressions(&sp.atoms, &mut |e, p| all.push((e, p)));
        for (e, p) in all {
            sp.add(&mut index, &mut best, e, p);
        }
        // Library rules: label their grammar twin, or add them with the prior of their
        // class times the probability of their starter constraint.
        let mut t = [0u64; STATES];
        for rule in SecretRule::ALL {
            sp.atoms.table(Expr::Library(rule), &mut t);
            if let Some(h) = sp.find(&index, &t) {
                sp.hyps[h as usize].library = Some(rule);
                continue;
            }
            let n = sp.hyps.len() as u32;
            let class: f64 = (0..n).filter(|h| sp.table(*h)[..EMPTY] == t[..EMPTY]).map(|h| sp.hyps[h as usize].prior).sum();
            let start = sp.atoms.start_prior(t[EMPTY]);
            sp.tables.extend_from_slice(&t);
            let prior = if class > 0.0 { class * start } else { start * start };
            sp.hyps.push(Hypothesis { expr: Expr::Library(rule), prior, library: Some(rule), class: 0 });
            sp.library_extras.push(rule);
        }
        // Classes: equal tables on every non-empty state (digest → (representative, class)).
        let mut class_of: HashMap<u64, Vec<(u32, u32)>> = HashMap::new();
        for h in 0..sp.hyps.len() as u32 {
            let key = &sp.table(h)[..EMPTY];
            let bucket = class_of.entry(digest(key)).or_default();
            let class = match bucket.iter().find(|(r, _)| sp.table(*r)[..EMPTY] == *key) {
                Some((_, c)) => *c,
                None => {
                    let c = u32::try_from(sp.classes).expect("fewer than 2^32 classes");
                    bucket.push((h, c));
                    sp.classes += 1;
                    c
                }
            };
            sp.hyps[h as usize].class = class;
        }
        sp
    }
}

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
        order.sort_by(|a, b| self.class_mass[*b as usize].total_cmp(&self.class_mass[*a as usize]).then(a.cmp(b)));
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
        let decision =
            Decision { hypothesis, rule_text: sp.text(hypothesis), probability: (p / total).clamp(0.0, 1.0), entropy_bits, live_hypotheses: self.live.len() };
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

/// Formal guess at p ≥ 2/3 (break-even when the next play would settle the question), or,
/// when no play is informative, whenever `p·G − 2·(1 − p) > 0` with G the score a correct
/// guess earns now (`max_turns + 1 − turn − penalty·F`).
fn should_guess(p: f64, bits: f64, obs: &Observation) -> bool {
    let gain = obs.potential_score as f64 + 1.0;
    let penalty = if obs.failed_guess_count > 0 { obs.penalty_so_far as f64 / f64::from(obs.failed_guess_count) } else { 2.0 };
    p >= GUESS_THRESHOLD || (bits < STUCK_BITS && p * gain > penalty * (1.0 - p))
}

/// Binary entropy in bits.
fn entropy(p: f64) -> f64 {
    let h = |x: f64| if x <= 0.0 { 0.0 } else { -x * x.log2() };
    h(p) + h(1.0 - p)
}

impl Agent for IdealAgent {
    fn act(&mut self, obs: &Observation) -> AgentAction {
        let sp = space();
        if obs.history.is_empty() || self.starter != obs.mainline.first().copied() || obs.history.len() < self.processed {
            self.start(obs, sp);
        }
        self.update(obs, sp);
        let Some((card, d)) = self.decide(obs, sp) else {
            self.last = None;
            let card = obs.hand.first().copied().unwrap_or(game::deck::universe()[0]);
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
        let guess = should_guess(d.probability, d.entropy_bits, obs);
        if guess {
            self.pending = Some((d.hypothesis, obs.turn));
        }
        let hyp = &sp.hyps[d.hypothesis as usize];
        let guessed_rule: Box<dyn RuleFn + Send + Sync> = match hyp.library {
            Some(rule) => Box::new(rule),
            None => Box::new(HypothesisRule { table: sp.table(d.hypothesis).into() }),
        };
        let mut reasoning = format!(
            "{card} has the most uncertain outcome ({:.2} bits); {} hypotheses remain and the best has posterior {:.3}.",
            d.entropy_bits, d.live_hypotheses, d.probability
        );
        if guess && d.probability < GUESS_THRESHOLD {
            reasoning.push_str(" As no play is informative, a guess is worth its risk.");
        }
        let action = Action {
            card,
            reasoning,
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
mod tests;
