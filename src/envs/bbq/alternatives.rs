//! Near-miss alternatives of every hidden function (spec §4.5 table, right column): simple
//! rules a test set must tell apart from the true one, e.g. x ≥ 58 for x > 58 or shift 9 for
//! shift 10. Used to validate generated test sets and as distractors for the solver agent.

use super::function::{Input, Output, at, bytes, digits, gcd, ints, lcm, local_maxima, shift, triangle_class, value, z_function};
use super::generator::Case;
use super::task::TaskId;

/// A rule as a plain function; `None` means "undefined here" (e.g. overflow), which always
/// counts as differing from the true output.
pub type RuleFn = fn(&Input) -> Option<Output>;

/// A named near-miss of a task's true function.
#[derive(Debug, Clone, Copy)]
pub struct Alternative {
    /// The spec's wording of the alternative.
    pub name: &'static str,
    /// The alternative rule.
    pub f: RuleFn,
}

fn b(v: bool) -> Option<Output> {
    Some(Output::Int(i128::from(v)))
}

fn n(v: i128) -> Option<Output> {
    Some(Output::Int(v))
}

fn cnt(v: usize) -> Option<Output> {
    i128::try_from(v).ok().map(Output::Int)
}

fn st(v: Vec<u8>) -> Option<Output> {
    String::from_utf8(v).ok().map(Output::Str)
}

fn x0(i: &Input) -> i128 {
    at(&ints(i), 0)
}

fn abc(i: &Input) -> (i128, i128, i128) {
    let x = ints(i);
    (at(&x, 0), at(&x, 1), at(&x, 2))
}

/// Generalised recursion f(x) = (p·f(x−2) + q·f(x−1)) mod m for x > `base`, with f = 1 up
/// to `base` (`base` 3 is the f(3) override, 2 gives f(3) = 3 for p = 2, q = 1). `m = None`
/// means no modulo; `None` on overflow or for x beyond 10⁷ (outside every query domain).
pub(super) fn recursion_variant(x: i128, p: i128, q: i128, m: Option<i128>, base: i128) -> Option<i128> {
    if x <= base {
        return Some(1);
    }
    if x > 10_000_000 {
        return None;
    }
    let (mut f2, mut f1) = (1i128, 1i128);
    for _ in base + 1..=x {
        let mut cur = p.checked_mul(f2)?.checked_add(q.checked_mul(f1)?)?;
        if let Some(m) = m {
            cur = cur.rem_euclid(m);
        }
        (f2, f1) = (f1, cur);
    }
    Some(f1)
}

fn squared_sides(i: &Input) -> [i128; 3] {
    let p = ints(i);
    let sq = |a: usize, c: usize| {
        let (dx, dy) = (at(&p, 2 * a) - at(&p, 2 * c), at(&p, 2 * a + 1) - at(&p, 2 * c + 1));
        dx * dx + dy * dy
    };
    let mut s = [sq(0, 1), sq(0, 2), sq(1, 2)];
    s.sort_unstable();
    s
}

/// Classification by unsquared side lengths: compares √s1 + √s2 with √s3 exactly.
fn unsquared_class(i: &Input) -> Option<Output> {
    let [s1, s2, s3] = squared_sides(i);
    let d = s3 - s1 - s2;
    let ord = if d < 0 {
        std::cmp::Ordering::Greater
    } else {
        let lhs = s1.checked_mul(s2)?.checked_mul(4)?;
        lhs.cmp(&d.checked_mul(d)?)
    };
    n(match ord {
        std::cmp::Ordering::Equal => 2,
        std::cmp::Ordering::Greater => 1,
        std::cmp::Ordering::Less => 0,
    })
}

/// Angle type at the first vertex only (dot product of AB and AC).
fn first_vertex_class(i: &Input) -> Option<Output> {
    let p = ints(i);
    let (ux, uy) = (at(&p, 2) - at(&p, 0), at(&p, 3) - at(&p, 1));
    let (vx, vy) = (at(&p, 4) - at(&p, 0), at(&p, 5) - at(&p, 1));
    let dot = ux * vx + uy * vy;
    n(match dot.signum() {
        0 => 2,
        1 => 1,
        _ => 0,
    })
}

fn contains(s: &[u8], pat: &[u8]) -> bool {
    s.windows(pat.len()).any(|w| w == pat)
}

/// Longest substring occurring at least twice (overlap allowed).
pub(super) fn longest_repeat(s: &[u8]) -> usize {
    (1..s.len()).rev().find(|&len| (0..=s.len() - len).any(|i| (i + 1..=s.len() - len).any(|j| s[i..i + len] == s[j..j + len]))).unwrap_or(0)
}

/// Longest proper border (prefix that is also a suffix).
pub(super) fn longest_border(s: &[u8]) -> usize {
    (1..s.len()).rev().find(|&k| s[..k] == s[s.len() - k..]).unwrap_or(0)
}

/// Longest palindromic substring.
pub(super) fn longest_pal_substring(s: &[u8]) -> usize {
    let mut best = 0;
    for i in 0..s.len() {
        for j in i..s.len() {
            let w = &s[i..=j];
            if w.iter().eq(w.iter().rev()) {
                best = best.max(j - i + 1);
            }
        }
    }
    best
}

/// Longest palindrome buildable from the letter multiset.
pub(super) fn multiset_palindrome(s: &[u8]) -> usize {
    let mut counts = [0usize; 256];
    for &c in s {
        counts[usize::from(c)] += 1;
    }
    let pairs: usize = counts.iter().map(|c| c / 2 * 2).sum();
    pairs + usize::from(counts.iter().any(|c| c % 2 == 1))
}

/// Longest run of equal characters.
pub(super) fn longest_run(s: &[u8]) -> usize {
    s.chunk_by(|a, b| a == b).map(<[u8]>::len).max().unwrap_or(0)
}

fn shift_all(s: &[u8], k: i64) -> Vec<u8> {
    s.iter().map(|&c| shift(c, k)).collect()
}

/// Shift the k-th character of a custom order forward (or backward) by k.
fn shift_by_order(s: &[u8], order: &[usize], sign: i64) -> Vec<u8> {
    let mut out = s.to_vec();
    for (k, &pos) in order.iter().enumerate() {
        out[pos] = shift(s[pos], sign * i64::try_from(k + 1).unwrap_or(0));
    }
    out
}

fn diag_count(s: &[u8], pred: fn(i64, i64) -> bool) -> usize {
    s.iter().enumerate().filter(|&(i, &c)| pred(value(c), i64::try_from(i + 1).unwrap_or(i64::MAX))).count()
}

fn alt(name: &'static str, f: RuleFn) -> Alternative {
    Alternative { name, f }
}

/// The §4.5 alternatives of `task`, in the spec's order.
pub fn alternatives(task: TaskId) -> Vec<Alternative> {
    match task {
        TaskId::IsPrime => vec![
            alt("x odd", |i| b(x0(i).rem_euclid(2) == 1)),
            alt("x in {2,3} or x mod 6 in {1,5} (x > 1)", |i| {
                let x = x0(i);
                b(x == 2 || x == 3 || (x > 1 && matches!(x.rem_euclid(6), 1 | 5)))
            }),
            alt("odd and not divisible by 3 or 5, or x in {2,3,5}", |i| {
                let x = x0(i);
                b(matches!(x, 2 | 3 | 5) || (x.rem_euclid(2) == 1 && x % 3 != 0 && x % 5 != 0))
            }),
            alt("constant 0", |_| n(0)),
        ],
        TaskId::IsPythagoreanTriple => vec![
            alt("any permutation counts", |i| {
                let (a, bb, c) = abc(i);
                let mut v = [a, bb, c];
                v.sort_unstable();
                b(v[0] > 0 && v[0] * v[0] + v[1] * v[1] == v[2] * v[2])
            }),
            alt("primitive triples only", |i| {
                let (a, bb, c) = abc(i);
                b(a > 0 && bb > 0 && c > 0 && a * a + bb * bb == c * c && gcd(gcd(a, bb), c) == 1)
            }),
            alt("a^2 + b^2 = c^2 without positivity", |i| {
                let (a, bb, c) = abc(i);
                b(a * a + bb * bb == c * c)
            }),
            alt("constant 0", |_| n(0)),
        ],
        TaskId::IsGreaterThan58 => {
            vec![alt("x >= 58", |i| b(x0(i) >= 58)), alt("x > 59", |i| b(x0(i) > 59)), alt("x > 50", |i| b(x0(i) > 50)), alt("x >= 60", |i| b(x0(i) >= 60))]
        }
        TaskId::DigitSum => vec![
            alt("x mod 9", |i| n(x0(i).rem_euclid(9))),
            alt("digital root", |i| {
                let x = x0(i).abs();
                n(if x == 0 { 0 } else { 1 + (x - 1) % 9 })
            }),
            alt("number of digits", |i| cnt(digits(x0(i)).len())),
            alt("largest digit", |i| n(i128::from(digits(x0(i)).into_iter().max().unwrap_or(0)))),
        ],
        TaskId::Func6x3 => vec![
            alt("without +3", |i| {
                let x = x0(i);
                n(6 * x * x * x - 9 * x * x + 2 * x)
            }),
            alt("+9x^2", |i| {
                let x = x0(i);
                n(6 * x * x * x + 9 * x * x + 2 * x + 3)
            }),
            alt("-2x", |i| {
                let x = x0(i);
                n(6 * x * x * x - 9 * x * x - 2 * x + 3)
            }),
            alt("-9x^2 + 2x + 3", |i| {
                let x = x0(i);
                n(-9 * x * x + 2 * x + 3)
            }),
        ],
        TaskId::Func3a10b5c => vec![
            alt("3a + 10b + 5c", |i| {
                let (a, bb, c) = abc(i);
                n(3 * a + 10 * bb + 5 * c)
            }),
            alt("3a - 10b", |i| {
                let (a, bb, _) = abc(i);
                n(3 * a - 10 * bb)
            }),
            alt("3a - 10b + 5c + 1", |i| {
                let (a, bb, c) = abc(i);
                n(3 * a - 10 * bb + 5 * c + 1)
            }),
            alt("a - 10b + 5c", |i| {
                let (a, bb, c) = abc(i);
                n(a - 10 * bb + 5 * c)
            }),
        ],
        TaskId::FuncRecursion => vec![
            alt("no f(3) override", |i| recursion_variant(x0(i), 2, 1, Some(100), 2).map(Output::Int)),
            alt("(f(x-2) + 2 f(x-1)) mod 100", |i| recursion_variant(x0(i), 1, 2, Some(100), 3).map(Output::Int)),
            alt("no modulo", |i| recursion_variant(x0(i), 2, 1, None, 3).map(Output::Int)),
            alt("modulo 10", |i| recursion_variant(x0(i), 2, 1, Some(10), 3).map(Output::Int)),
        ],
        TaskId::FuncAbPlusCSq => vec![
            alt("ab + c", |i| {
                let (a, bb, c) = abc(i);
                n(a * bb + c)
            }),
            alt("a + b + c^2", |i| {
                let (a, bb, c) = abc(i);
                n(a + bb + c * c)
            }),
            alt("(a + b)c", |i| {
                let (a, bb, c) = abc(i);
                n((a + bb) * c)
            }),
            alt("ab - c^2", |i| {
                let (a, bb, c) = abc(i);
                n(a * bb - c * c)
            }),
            alt("ac + b^2", |i| {
                let (a, bb, c) = abc(i);
                n(a * c + bb * bb)
            }),
        ],
        TaskId::FuncGcdPlusLcm => vec![
            alt("a + b", |i| {
                let (a, bb, _) = abc(i);
                n(a + bb)
            }),
            alt("ab + 1", |i| {
                let (a, bb, _) = abc(i);
                n(a * bb + 1)
            }),
            alt("lcm", |i| {
                let (a, bb, _) = abc(i);
                n(lcm(a, bb))
            }),
            alt("ab", |i| {
                let (a, bb, _) = abc(i);
                n(a * bb)
            }),
        ],
        TaskId::TriangleType => vec![
            alt("angle type at the first vertex only", first_vertex_class),
            alt("comparison with unsquared lengths", unsquared_class),
            alt("labels 0 and 1 swapped", |i| {
                let c = triangle_class(&ints(i));
                n(match c {
                    0 => 1,
                    1 => 0,
                    other => other,
                })
            }),
            alt("constant 1", |_| n(1)),
        ],
        _ => string_alternatives(task),
    }
}

fn string_alternatives(task: TaskId) -> Vec<Alternative> {
    match task {
        TaskId::ContainsAb => vec![
            alt("contains both a and b", |i| {
                let s = bytes(i);
                b(s.contains(&b'a') && s.contains(&b'b'))
            }),
            alt("contains 'ba'", |i| b(contains(bytes(i), b"ba"))),
            alt("an a followed later by a b", |i| {
                let s = bytes(i);
                b(s.iter().position(|&c| c == b'a').is_some_and(|p| s[p..].contains(&b'b')))
            }),
            alt("starts with 'ab'", |i| b(bytes(i).starts_with(b"ab"))),
            alt("contains 'ab' or 'ba'", |i| {
                let s = bytes(i);
                b(contains(s, b"ab") || contains(s, b"ba"))
            }),
        ],
        TaskId::ParitySum => vec![
            alt("parity of length", |i| n(i128::try_from(bytes(i).len() % 2).unwrap_or(0))),
            alt("parity of last letter", |i| n(i128::from(bytes(i).last().map_or(0, |&c| value(c).rem_euclid(2))))),
            alt("parity of first letter", |i| n(i128::from(bytes(i).first().map_or(0, |&c| value(c).rem_euclid(2))))),
            alt("parity with a = 0 ... z = 25", |i| n(i128::from(bytes(i).iter().map(|&c| value(c) - 1).sum::<i64>().rem_euclid(2)))),
        ],
        TaskId::MaxZFunction => vec![
            alt("longest border", |i| cnt(longest_border(bytes(i)))),
            alt("longest repeated substring", |i| cnt(longest_repeat(bytes(i)))),
            alt("later occurrences of the first letter", |i| {
                let s = bytes(i);
                cnt(s.iter().skip(1).filter(|&&c| Some(&c) == s.first()).count())
            }),
            alt("non-overlapping occurrences only", |i| {
                let z = z_function(bytes(i));
                cnt(z.iter().enumerate().skip(1).map(|(k, &v)| v.min(k)).max().unwrap_or(0))
            }),
        ],
        TaskId::AddKToKth => vec![
            alt("shift the i-th character from the left by i", |i| {
                let s = bytes(i);
                st(shift_by_order(s, &(0..s.len()).collect::<Vec<_>>(), 1))
            }),
            alt("ties broken right to left", |i| {
                let s = bytes(i);
                let mut order: Vec<usize> = (0..s.len()).collect();
                order.sort_by_key(|&k| (s[k], std::cmp::Reverse(k)));
                st(shift_by_order(s, &order, 1))
            }),
            alt("shift backwards", |i| {
                let s = bytes(i);
                let mut order: Vec<usize> = (0..s.len()).collect();
                order.sort_by_key(|&k| (s[k], k));
                st(shift_by_order(s, &order, -1))
            }),
            alt("k-th highest character", |i| {
                let s = bytes(i);
                let mut order: Vec<usize> = (0..s.len()).collect();
                order.sort_by_key(|&k| (std::cmp::Reverse(s[k]), k));
                st(shift_by_order(s, &order, 1))
            }),
        ],
        TaskId::CaesarCipher => vec![
            alt("shift 9", |i| st(shift_all(bytes(i), 9))),
            alt("shift -10", |i| st(shift_all(bytes(i), -10))),
            alt("ROT13", |i| st(shift_all(bytes(i), 13))),
            alt("Atbash", |i| st(bytes(i).iter().map(|&c| if c.is_ascii_lowercase() { b'z' - (c - b'a') } else { c }).collect())),
        ],
        TaskId::NumLessThanDiag => vec![
            alt("strict < (0-based reading of the app text)", |i| cnt(diag_count(bytes(i), |v, k| v < k))),
            alt(">=", |i| cnt(diag_count(bytes(i), |v, k| v >= k))),
            alt("=", |i| cnt(diag_count(bytes(i), |v, k| v == k))),
            alt("length", |i| cnt(bytes(i).len())),
        ],
        TaskId::LongestPalSubseq => vec![
            alt("longest palindromic substring", |i| cnt(longest_pal_substring(bytes(i)))),
            alt("longest palindrome from the letter multiset", |i| cnt(multiset_palindrome(bytes(i)))),
            alt("length", |i| cnt(bytes(i).len())),
            alt("longest run", |i| cnt(longest_run(bytes(i)))),
        ],
        TaskId::IsBigGap => vec![
            alt("gap > 18", |i| b(bytes(i).windows(2).any(|w| (value(w[0]) - value(w[1])).abs() > 18))),
            alt("cyclic gap", |i| {
                b(bytes(i).windows(2).any(|w| {
                    let d = (value(w[0]) - value(w[1])).abs();
                    d.min(26 - d) >= 18
                }))
            }),
            alt("ascending gaps only", |i| b(bytes(i).windows(2).any(|w| value(w[1]) - value(w[0]) >= 18))),
            alt("first vs last letter only", |i| {
                let s = bytes(i);
                b(s.len() >= 2 && (value(s[0]) - value(s[s.len() - 1])).abs() >= 18)
            }),
            alt("gap >= 17", |i| b(bytes(i).windows(2).any(|w| (value(w[0]) - value(w[1])).abs() >= 17))),
        ],
        TaskId::NumLocalMaxima => vec![
            alt("interior positions only", |i| {
                let s = bytes(i);
                cnt((1..s.len().saturating_sub(1)).filter(|&k| s[k] > s[k - 1] && s[k] > s[k + 1]).count())
            }),
            alt("non-strict (>=)", |i| {
                let s = bytes(i);
                let m = s.len();
                cnt((0..m).filter(|&k| (k == 0 || s[k] >= s[k - 1]) && (k + 1 == m || s[k] >= s[k + 1])).count())
            }),
            alt("number of ascents", |i| cnt(bytes(i).windows(2).filter(|w| w[0] < w[1]).count())),
            alt("single character counts 0", |i| {
                let s = bytes(i);
                if s.len() == 1 { n(0) } else { n(local_maxima(s, 0)) }
            }),
        ],
        TaskId::LessThanTarget => vec![
            alt("<= 'jwz'", |i| b(bytes(i) <= b"jwz".as_slice())),
            alt("first letter <= j", |i| b(bytes(i).first().is_some_and(|&c| c <= b'j'))),
            alt("shortlex order", |i| {
                let s = bytes(i);
                b((s.len(), s) < (3, b"jwz".as_slice()))
            }),
            alt("< 'jw'", |i| b(bytes(i) < b"jw".as_slice())),
        ],
        _ => Vec::new(),
    }
}

/// Names of the alternatives that agree with the true outputs on every case of `tests`,
/// i.e. that the test set fails to separate (empty for a valid test set, §4.5 step 5).
pub fn unseparated(task: TaskId, tests: &[Case]) -> Vec<&'static str> {
    alternatives(task).into_iter().filter(|a| tests.iter().all(|c| (a.f)(&c.input).as_ref() == Some(&c.output))).map(|a| a.name).collect()
}
