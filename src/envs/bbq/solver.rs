//! The [`SolverAgent`]: an offline hypothesis-elimination player. It keeps the hypotheses of
//! its task family that fit every known pair, queries inputs that split them best (after a few
//! structured probes for polynomial fits), and predicts with the first surviving hypothesis.
//! Its space deliberately contains the benchmark's own functions of the same signature next to
//! near-misses and parametric families, so it is a plumbing/upper-bound agent that exercises
//! query strategy and elimination, not a measure of rule discovery.

use std::collections::{HashMap, HashSet};

use super::agents::{Agent, Observation, nearest_prediction, plain};
use super::function::{Input, Output};
use super::generator::SplitMix64;
use super::hypotheses::{Hypothesis, Sig, lex_interval, lex_rank, lex_unrank, library, sig};
use super::parse::validate;
use super::task::{InputKind, Task};

/// Deterministic hypothesis-search agent (seeded SplitMix64 for its random candidates).
#[derive(Debug, Clone)]
pub struct SolverAgent {
    rng: SplitMix64,
}

impl SolverAgent {
    /// A solver whose random candidate inputs are fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        SolverAgent { rng: SplitMix64::new(seed) }
    }
}

/// Structured first queries for the fitted families: enough points to pin a polynomial.
fn probes(task: &Task) -> Vec<Input> {
    match (sig(task), task.input) {
        (Sig::IntInt, _) => [1, 2, 3, 4, 0, -1, 5].map(Input::Int).to_vec(),
        (Sig::TupleInt(n), InputKind::Tuple { positive, .. }) => {
            let base = i64::from(positive);
            let unit = |i: usize, k: i64| {
                let mut v = vec![base; n];
                v[i] += k;
                v
            };
            let mut out = vec![vec![base; n]];
            out.extend((0..n).map(|i| unit(i, 1)));
            out.extend((0..n).map(|i| unit(i, 2)));
            for i in 0..n {
                for j in i + 1..n {
                    let mut v = unit(i, 1);
                    v[j] += 1;
                    out.push(v);
                }
            }
            out.into_iter().map(Input::Tuple).collect()
        }
        _ => Vec::new(),
    }
}

fn random_string(rng: &mut SplitMix64, max_len: u64) -> String {
    let len = 1 + rng.below(max_len);
    (0..len).map(|_| char::from(b'a' + u8::try_from(rng.below(26)).unwrap_or(0))).collect()
}

/// Candidate query inputs: random domain draws plus inputs derived from the known pairs.
fn candidates(task: &Task, obs: &Observation<'_>, rng: &mut SplitMix64, n_batch: usize) -> Vec<Input> {
    let known = obs.known();
    let mut out: Vec<Input> = Vec::new();
    match task.input {
        InputKind::Int { .. } => {
            out.extend((-60..=250).map(Input::Int));
            out.extend((0..20).map(|_| Input::Int(rng.randint(-1_000_000, 1_000_000))));
        }
        InputKind::Tuple { arity, positive, triangle } => {
            let (lo, hi) = if positive {
                (1, 60)
            } else if triangle {
                (-10, 10)
            } else {
                (-12, 12)
            };
            for _ in 0..150 {
                out.push(Input::Tuple((0..arity).map(|_| rng.randint(lo, hi)).collect()));
            }
            for (x, y) in &known {
                if let (Input::Tuple(v), Output::Int(c)) = (x, y) {
                    if *c == 0 {
                        continue;
                    }
                    for i in 0..v.len() {
                        for j in 0..v.len() {
                            let mut w = v.clone();
                            w.swap(i, j);
                            out.push(Input::Tuple(w.clone()));
                            w[0] = -w[0];
                            out.push(Input::Tuple(w.clone()));
                            w[0] = 0;
                            out.push(Input::Tuple(w));
                        }
                    }
                    out.push(Input::Tuple(v.iter().map(|a| a * 2).collect()));
                }
            }
        }
        InputKind::Str => {
            out.extend((b'a'..=b'z').map(|c| Input::Str(char::from(c).to_string())));
            for _ in 0..60 {
                out.push(Input::Str(random_string(rng, 12)));
            }
            for _ in 0..40 {
                out.push(Input::Str(random_string(rng, 2)));
            }
            for _ in 0..20 {
                let u = random_string(rng, 3);
                let mid = random_string(rng, 1);
                out.push(Input::Str(format!("{u}{u}")));
                out.push(Input::Str(format!("{u}{mid}{u}")));
                out.push(Input::Str(format!("{u}{u}{mid}")));
            }
            for (x, y) in &known {
                if let (Input::Str(s), Output::Int(c)) = (x, y) {
                    if *c == 0 {
                        continue;
                    }
                    let b = s.as_bytes();
                    for len in 1..=3.min(b.len()) {
                        for w in b.windows(len) {
                            let sub = String::from_utf8_lossy(w).into_owned();
                            let rev: String = sub.chars().rev().collect();
                            let mid = random_string(rng, 1);
                            let (h, t) = sub.split_at(sub.len() / 2);
                            out.push(Input::Str(format!("{h}{mid}{t}")));
                            out.push(Input::Str(sub));
                            out.push(Input::Str(rev));
                        }
                    }
                }
            }
            if sig(task) == Sig::StrClass
                && let Some((Some(lo), Some(hi))) = lex_interval(&known)
            {
                let (a, b) = (lex_rank(lo.as_bytes()), lex_rank(hi.as_bytes()));
                let k = u64::try_from(n_batch).unwrap_or(1);
                if b > a + 1 {
                    for i in 1..=k {
                        out.push(Input::Str(lex_unrank(a + (b - a) * i / (k + 1))));
                    }
                }
            }
        }
    }
    let seen: HashSet<&Input> = known.iter().map(|(x, _)| *x).collect();
    let mut uniq = HashSet::new();
    out.retain(|x| !seen.contains(x) && validate(task.id, x).is_ok() && uniq.insert(x.clone()));
    out
}

/// Greedily picks up to `n` candidates that refine the partition of `hyps` by their answers
/// most (smallest sum of squared group sizes); stops when no candidate splits further.
fn split_queries(hyps: &[&Hypothesis], cands: &[Input], n: usize) -> Vec<Input> {
    if hyps.len() <= 1 {
        return Vec::new();
    }
    let codes: Vec<Vec<u32>> = cands
        .iter()
        .map(|x| {
            let mut dict: HashMap<Option<Output>, u32> = HashMap::new();
            hyps.iter()
                .map(|h| {
                    let next = u32::try_from(dict.len()).unwrap_or(u32::MAX);
                    *dict.entry((h.f)(x)).or_insert(next)
                })
                .collect()
        })
        .collect();
    let mut groups = vec![0u32; hyps.len()];
    let cost = |g: &[u32]| -> u64 {
        let mut m: HashMap<u32, u64> = HashMap::new();
        for &k in g {
            *m.entry(k).or_default() += 1;
        }
        m.values().map(|v| v * v).sum()
    };
    let mut current = cost(&groups);
    let mut picked: Vec<usize> = Vec::new();
    for _ in 0..n {
        let mut best: Option<(u64, usize, Vec<u32>)> = None;
        for (ci, code) in codes.iter().enumerate() {
            if picked.contains(&ci) {
                continue;
            }
            let mut ids: HashMap<(u32, u32), u32> = HashMap::new();
            let refined: Vec<u32> = groups
                .iter()
                .zip(code)
                .map(|(&g, &c)| {
                    let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
                    *ids.entry((g, c)).or_insert(next)
                })
                .collect();
            let c = cost(&refined);
            if c < current && best.as_ref().is_none_or(|b| c < b.0) {
                best = Some((c, ci, refined));
            }
        }
        let Some((c, ci, refined)) = best else { break };
        current = c;
        groups = refined;
        picked.push(ci);
    }
    picked.into_iter().map(|i| cands[i].clone()).collect()
}

impl SolverAgent {
    fn consistent<'h>(lib: &'h [Hypothesis], obs: &Observation<'_>) -> Vec<&'h Hypothesis> {
        let known = obs.known();
        lib.iter().filter(|h| h.fits(&known)).collect()
    }
}

impl Agent for SolverAgent {
    fn queries(&mut self, obs: &Observation<'_>) -> Vec<String> {
        let task = obs.task;
        let n = usize::try_from(task.query_batch_size.min(obs.remaining_budget).max(1)).unwrap_or(1);
        let known = obs.known();
        let seen: HashSet<&Input> = known.iter().map(|(x, _)| *x).collect();
        let mut picks: Vec<Input> = probes(task).into_iter().filter(|x| !seen.contains(x) && validate(task.id, x).is_ok()).take(n).collect();
        if picks.len() < n {
            let lib = library(task, &known);
            let hyps = Self::consistent(&lib, obs);
            let cands = candidates(task, obs, &mut self.rng, n);
            let fresh: Vec<Input> = cands.into_iter().filter(|c| !picks.contains(c)).collect();
            picks.extend(split_queries(&hyps, &fresh, n - picks.len()));
            // Nothing left to split: verify the leading hypothesis on random fresh inputs.
            while picks.len() < n && !fresh.is_empty() {
                let c = fresh[self.rng.index(fresh.len())].clone();
                if !picks.contains(&c) {
                    picks.push(c);
                } else if fresh.iter().all(|f| picks.contains(f)) {
                    break;
                }
            }
        }
        picks.iter().map(ToString::to_string).collect()
    }

    fn scratchpad(&mut self, obs: &Observation<'_>) -> String {
        let known = obs.known();
        let lib = library(obs.task, &known);
        let hyps = Self::consistent(&lib, obs);
        match hyps.first() {
            Some(h) => format!("{} hypotheses fit; leading: {}", hyps.len(), h.name),
            None => "no hypothesis fits; falling back to nearest neighbour".to_string(),
        }
    }

    fn predictions(&mut self, obs: &Observation<'_>) -> Vec<String> {
        let known = obs.known();
        let lib = library(obs.task, &known);
        let hyps = Self::consistent(&lib, obs);
        obs.test_inputs
            .iter()
            .map(|x| {
                if let Some((_, y)) = known.iter().find(|(k, _)| k == x) {
                    return plain(y);
                }
                hyps.iter().find_map(|h| (h.f)(x)).map_or_else(|| nearest_prediction(obs.task, &known, x), |y| plain(&y))
            })
            .collect()
    }
}
