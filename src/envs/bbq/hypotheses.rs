//! Hypothesis spaces of the solver agent, one per task family (input/output signature):
//! parametric families (thresholds, shifts, substrings, gaps, counts), data-driven fits
//! (exact rational polynomial fits, linear recurrences, lexicographic thresholds), the §4.5
//! near-miss alternatives and the benchmark's functions of the same signature.

use super::alternatives::{alternatives, recursion_variant};
use super::function::{Input, Output, at, bytes, evaluate, gcd, ints, lcm, shift, value};
use super::task::{InputKind, OutputKind, Task, TaskId};

/// A boxed rule (closures capture parameters such as thresholds or fitted coefficients).
pub(super) type RuleBox = Box<dyn Fn(&Input) -> Option<Output>>;

/// A candidate rule; `None` means it makes no (integral) prediction for that input.
pub(super) struct Hypothesis {
    /// Human-readable name, shown in the solver's scratchpad.
    pub(super) name: String,
    /// The rule.
    pub(super) f: RuleBox,
}

impl Hypothesis {
    fn new(name: impl Into<String>, f: impl Fn(&Input) -> Option<Output> + 'static) -> Self {
        Hypothesis { name: name.into(), f: Box::new(f) }
    }

    /// Whether the rule reproduces every known pair.
    pub(super) fn fits(&self, known: &[(&Input, &Output)]) -> bool {
        known.iter().all(|(x, y)| (self.f)(x).as_ref() == Some(*y))
    }
}

/// Input/output signature; tasks sharing one share a hypothesis space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sig {
    IntClass,
    IntInt,
    TupleClass(usize),
    TupleInt(usize),
    StrClass,
    StrInt,
    StrStr,
}

/// The signature of `task`, from what the prompt's Input/Output lines state.
pub(super) fn sig(task: &Task) -> Sig {
    let class = matches!(task.output, OutputKind::Class { .. });
    match task.input {
        InputKind::Int { .. } if class => Sig::IntClass,
        InputKind::Int { .. } => Sig::IntInt,
        InputKind::Tuple { arity, .. } if class => Sig::TupleClass(arity),
        InputKind::Tuple { arity, .. } => Sig::TupleInt(arity),
        InputKind::Str if class => Sig::StrClass,
        InputKind::Str if task.output == OutputKind::Str => Sig::StrStr,
        InputKind::Str => Sig::StrInt,
    }
}

fn bin(v: bool) -> Option<Output> {
    Some(Output::Int(i128::from(v)))
}

fn num(v: i128) -> Option<Output> {
    Some(Output::Int(v))
}

/// An exact rational (checked i128 arithmetic; `None` on overflow or zero denominators).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Frac {
    n: i128,
    d: i128,
}

impl Frac {
    fn int(n: i128) -> Frac {
        Frac { n, d: 1 }
    }

    fn make(n: i128, d: i128) -> Option<Frac> {
        if d == 0 {
            return None;
        }
        let g = gcd(n, d).max(1);
        let s = if d < 0 { -1 } else { 1 };
        Some(Frac { n: s * (n / g), d: s * (d / g) })
    }

    fn add(self, o: Frac) -> Option<Frac> {
        Frac::make(self.n.checked_mul(o.d)?.checked_add(o.n.checked_mul(self.d)?)?, self.d.checked_mul(o.d)?)
    }

    fn sub(self, o: Frac) -> Option<Frac> {
        self.add(Frac { n: -o.n, d: o.d })
    }

    fn mul(self, o: Frac) -> Option<Frac> {
        Frac::make(self.n.checked_mul(o.n)?, self.d.checked_mul(o.d)?)
    }

    fn div(self, o: Frac) -> Option<Frac> {
        Frac::make(self.n.checked_mul(o.d)?, self.d.checked_mul(o.n)?)
    }
}

/// Exponent vectors of all monomials of total degree ≤ `degree` in `vars` variables.
fn monomials(vars: usize, degree: u32) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new()];
    for _ in 0..vars {
        out = out
            .into_iter()
            .flat_map(|e: Vec<u32>| {
                let used: u32 = e.iter().sum();
                (0..=degree - used).map(move |k| {
                    let mut e2 = e.clone();
                    e2.push(k);
                    e2
                })
            })
            .collect();
    }
    out
}

fn monomial(x: &[i128], e: &[u32]) -> Option<i128> {
    x.iter().zip(e).try_fold(1i128, |acc, (&v, &k)| acc.checked_mul(v.checked_pow(k)?))
}

/// Exact least-degree-agnostic fit: the unique polynomial of degree ≤ `degree` through all
/// `points`, or `None` if the points underdetermine it or contradict every such polynomial.
pub(super) fn fit_poly(points: &[(Vec<i128>, i128)], vars: usize, degree: u32) -> Option<Vec<(Vec<u32>, Frac)>> {
    let mons = monomials(vars, degree);
    let m = mons.len();
    let mut rows: Vec<Vec<Frac>> = Vec::with_capacity(points.len());
    for (x, y) in points {
        let mut row = Vec::with_capacity(m + 1);
        for e in &mons {
            row.push(Frac::int(monomial(x, e)?));
        }
        row.push(Frac::int(*y));
        rows.push(row);
    }
    let mut rank = 0;
    for col in 0..m {
        let pivot = (rank..rows.len()).find(|&r| rows[r][col].n != 0)?;
        rows.swap(rank, pivot);
        let p = rows[rank][col];
        for v in rows[rank].iter_mut() {
            *v = v.div(p)?;
        }
        let pivot_row = rows[rank].clone();
        for (r, row) in rows.iter_mut().enumerate() {
            if r != rank && row[col].n != 0 {
                let factor = row[col];
                for (v, &pv) in row.iter_mut().zip(&pivot_row) {
                    *v = v.sub(factor.mul(pv)?)?;
                }
            }
        }
        rank += 1;
    }
    if rows[rank..].iter().any(|r| r[m].n != 0) {
        return None;
    }
    Some(mons.into_iter().zip(rows.iter().map(|r| r[m])).collect())
}

fn poly_eval(coeffs: &[(Vec<u32>, Frac)], x: &[i128]) -> Option<i128> {
    let mut acc = Frac::int(0);
    for (e, c) in coeffs {
        acc = acc.add(c.mul(Frac::int(monomial(x, e)?))?)?;
    }
    (acc.d == 1).then_some(acc.n)
}

fn int_points(known: &[(&Input, &Output)]) -> Vec<(Vec<i128>, i128)> {
    known
        .iter()
        .filter_map(|(x, y)| match y {
            Output::Int(v) => Some((ints(x), *v)),
            Output::Str(_) => None,
        })
        .collect()
}

/// Rank of a string among all strings of length ≤ `LEX_LEN` in lexicographic order (longer
/// strings are truncated); used to place threshold-splitting queries.
pub(super) const LEX_LEN: usize = 5;

fn lex_block(k: usize) -> u64 {
    (0..=k).map(|j| 26u64.pow(u32::try_from(j).unwrap_or(0))).sum()
}

/// Lexicographic rank (see [`LEX_LEN`]).
pub(super) fn lex_rank(s: &[u8]) -> u64 {
    s.iter().take(LEX_LEN).enumerate().map(|(i, &c)| u64::from(c.saturating_sub(b'a')) * lex_block(LEX_LEN - i - 1) + 1).sum()
}

/// Inverse of [`lex_rank`].
pub(super) fn lex_unrank(mut r: u64) -> String {
    let mut s = String::new();
    for i in 0..LEX_LEN {
        if r == 0 {
            break;
        }
        r -= 1;
        let block = lex_block(LEX_LEN - i - 1);
        let c = u8::try_from((r / block).min(25)).unwrap_or(0);
        s.push(char::from(b'a' + c));
        r %= block;
    }
    s
}

/// Largest string labelled 1 and smallest labelled 0, when every 1 sorts below every 0.
pub(super) fn lex_interval(known: &[(&Input, &Output)]) -> Option<(Option<String>, Option<String>)> {
    let mut ones: Option<&str> = None;
    let mut zeros: Option<&str> = None;
    for (x, y) in known {
        if let (Input::Str(s), Output::Int(v)) = (x, y) {
            if *v == 1 {
                ones = Some(ones.map_or(s.as_str(), |o| o.max(s.as_str())));
            } else {
                zeros = Some(zeros.map_or(s.as_str(), |z| z.min(s.as_str())));
            }
        }
    }
    match (ones, zeros) {
        (Some(o), Some(z)) if o >= z => None,
        _ => Some((ones.map(str::to_string), zeros.map(str::to_string))),
    }
}

/// Data-driven hypotheses: polynomial fits, recurrences and lexicographic thresholds.
fn dynamic(task: &Task, known: &[(&Input, &Output)]) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    match sig(task) {
        Sig::IntInt | Sig::TupleInt(_) => {
            let (vars, degree) = match sig(task) {
                Sig::TupleInt(n) => (n, 2),
                _ => (1, 3),
            };
            if let Some(coeffs) = fit_poly(&int_points(known), vars, degree) {
                out.push(Hypothesis::new(format!("polynomial fit (degree <= {degree})"), move |x| poly_eval(&coeffs, &ints(x)).map(Output::Int)));
            }
        }
        Sig::StrClass => {
            if let Some((ones, zeros)) = lex_interval(known) {
                if let Some(z) = zeros {
                    out.push(Hypothesis::new(format!("s < '{z}'"), move |x| bin(bytes(x) < z.as_bytes())));
                }
                if let Some(o) = ones {
                    out.push(Hypothesis::new(format!("s <= '{o}'"), move |x| bin(bytes(x) <= o.as_bytes())));
                }
            }
        }
        _ => {}
    }
    if sig(task) == Sig::IntInt {
        let init: Vec<Option<i128>> = (1..=3)
            .map(|k| {
                known.iter().find_map(|(x, y)| match (x, y) {
                    (Input::Int(v), Output::Int(o)) if i128::from(*v) == k => Some(*o),
                    _ => None,
                })
            })
            .collect();
        if let [Some(f1), Some(f2), Some(f3)] = init[..] {
            for base in [2i128, 3] {
                for p in 0..=3i128 {
                    for q in 0..=3i128 {
                        for m in [Some(10i128), Some(100), Some(1000), None] {
                            let name = format!("f(x) = {p} f(x-2) + {q} f(x-1) mod {m:?}, f(1..{base}) given");
                            out.push(Hypothesis::new(name, move |x| {
                                let x = at(&ints(x), 0);
                                recurrence(x, [f1, f2, f3], base, p, q, m).map(Output::Int)
                            }));
                        }
                    }
                }
            }
        }
    }
    out
}

fn recurrence(x: i128, init: [i128; 3], base: i128, p: i128, q: i128, m: Option<i128>) -> Option<i128> {
    if !(1..=100_000).contains(&x) {
        return None;
    }
    if x <= base {
        return usize::try_from(x - 1).ok().map(|i| init[i]);
    }
    let (mut f2, mut f1) = if base == 3 { (init[1], init[2]) } else { (init[0], init[1]) };
    for _ in base + 1..=x {
        let mut cur = p.checked_mul(f2)?.checked_add(q.checked_mul(f1)?)?;
        if let Some(m) = m {
            cur = cur.rem_euclid(m);
        }
        (f2, f1) = (f1, cur);
    }
    Some(f1)
}

/// Parametric families that do not depend on the data.
fn parametric(task: &Task) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    let x0 = |x: &Input| at(&ints(x), 0);
    match sig(task) {
        Sig::IntClass => {
            for t in -61..=250i128 {
                out.push(Hypothesis::new(format!("x > {t}"), move |x| bin(x0(x) > t)));
            }
            out.push(Hypothesis::new("x even", move |x| bin(x0(x).rem_euclid(2) == 0)));
        }
        Sig::IntInt => {
            for m in 2..=12i128 {
                out.push(Hypothesis::new(format!("x mod {m}"), move |x| num(x0(x).rem_euclid(m))));
            }
            // The monotone recursion alternatives double as a fixed family.
            out.push(Hypothesis::new("fibonacci-like mod 100", move |x| recursion_variant(x0(x), 1, 1, Some(100), 2).map(Output::Int)));
        }
        Sig::TupleClass(n) => {
            let classes = if n == 6 { 3 } else { 2 };
            for c in 0..classes {
                out.push(Hypothesis::new(format!("constant {c}"), move |_| num(c)));
            }
        }
        Sig::TupleInt(2) => {
            let pair = |x: &Input| {
                let v = ints(x);
                (at(&v, 0), at(&v, 1))
            };
            out.push(Hypothesis::new("gcd", move |x| num(gcd(pair(x).0, pair(x).1))));
            out.push(Hypothesis::new("gcd * lcm", move |x| {
                let (a, b) = pair(x);
                num(gcd(a, b) * lcm(a, b))
            }));
            out.push(Hypothesis::new("max", move |x| num(pair(x).0.max(pair(x).1))));
            out.push(Hypothesis::new("gcd + lcm", move |x| {
                let (a, b) = pair(x);
                num(gcd(a, b) + lcm(a, b))
            }));
        }
        Sig::TupleInt(_) => {}
        Sig::StrClass => {
            for a in b'a'..=b'z' {
                out.push(Hypothesis::new(format!("contains '{}'", char::from(a)), move |x| bin(bytes(x).contains(&a))));
            }
            for a in b'a'..=b'z' {
                for b in b'a'..=b'z' {
                    let pat = [a, b];
                    out.push(Hypothesis::new(format!("contains '{}'", String::from_utf8_lossy(&pat)), move |x| bin(bytes(x).windows(2).any(|w| w == pat))));
                }
            }
            for t in 1..=25i64 {
                out.push(Hypothesis::new(format!("adjacent gap >= {t}"), move |x| bin(bytes(x).windows(2).any(|w| (value(w[0]) - value(w[1])).abs() >= t))));
            }
            out.push(Hypothesis::new("odd length", |x| bin(bytes(x).len() % 2 == 1)));
        }
        Sig::StrInt => {
            out.push(Hypothesis::new("length", |x| num(i128::try_from(bytes(x).len()).unwrap_or(0))));
            out.push(Hypothesis::new("distinct letters", |x| {
                let mut v = bytes(x).to_vec();
                v.sort_unstable();
                v.dedup();
                num(i128::try_from(v.len()).unwrap_or(0))
            }));
            for a in b'a'..=b'e' {
                out.push(Hypothesis::new(format!("count of '{}'", char::from(a)), move |x| {
                    num(i128::try_from(bytes(x).iter().filter(|&&c| c == a).count()).unwrap_or(0))
                }));
            }
        }
        Sig::StrStr => {
            for k in 0..26i64 {
                out.push(Hypothesis::new(format!("shift every letter by {k}"), move |x| {
                    String::from_utf8(bytes(x).iter().map(|&c| shift(c, k)).collect()).ok().map(Output::Str)
                }));
            }
            out.push(Hypothesis::new("reverse", |x| String::from_utf8(bytes(x).iter().rev().copied().collect()).ok().map(Output::Str)));
        }
    }
    out
}

/// The full hypothesis list for `task` given the known pairs, simplest first: data-driven
/// fits, parametric families, §4.5 near-misses, then the benchmark's functions of the same
/// signature. The solver predicts with the first consistent one.
pub(super) fn library(task: &Task, known: &[(&Input, &Output)]) -> Vec<Hypothesis> {
    let s = sig(task);
    let mut out = dynamic(task, known);
    out.extend(parametric(task));
    let same: Vec<TaskId> = TaskId::ALL.into_iter().filter(|t| sig(&t.task()) == s).collect();
    for &t in &same {
        for a in alternatives(t) {
            let f = a.f;
            out.push(Hypothesis::new(a.name, f));
        }
    }
    for &t in &same {
        out.push(Hypothesis::new(t.task().rule, move |x| Some(evaluate(t, x))));
    }
    out
}
