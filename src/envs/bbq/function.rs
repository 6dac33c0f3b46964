//! The 20 hidden functions in native Rust (spec §1, §4.1–4.3) and prediction matching (§4.8),
//! over the input/output values of [`super::value`] (re-exported here). Backs both episodes and
//! the CLI command `evalgrid bbq call <task_id> '<input>'`.

use super::parse::{InputError, parse_input};
use super::task::{GapComparison, IndexRule, TaskId, TaskParams};
pub use super::value::{Input, Output};

/// Evaluates the CLI command `evalgrid bbq call <task_id> '<input>'`: the output exactly as
/// the model would see it, or the validation error it would get.
pub fn call(task_id: &str, input_text: &str) -> Result<String, InputError> {
    let task: TaskId = task_id.parse()?;
    let input = parse_input(task, input_text)?;
    Ok(evaluate(task, &input).to_string())
}

/// Letter value a = 1 … z = 26 (§4.1); other bytes get their offset from `a` (total extension).
pub(super) fn value(b: u8) -> i64 {
    i64::from(b) - i64::from(b'a') + 1
}

/// Shifts a lower-case letter forward by `k` (mod 26); other bytes are left unchanged.
pub(super) fn shift(b: u8, k: i64) -> u8 {
    if b.is_ascii_lowercase() {
        let v = (i64::from(b - b'a') + k).rem_euclid(26);
        b'a' + u8::try_from(v).expect("rem_euclid(26) is in 0..26")
    } else {
        b
    }
}

/// Largest magnitude of an integer component seen by the functions: every query domain lies
/// well inside it, and clamping to it keeps all arithmetic free of overflow (total evaluation).
pub(super) const CLAMP: i128 = 1 << 30;

/// Integer components of an input, clamped to ±[`CLAMP`] (a scalar is a 1-tuple; a string
/// has none).
pub(super) fn ints(input: &Input) -> Vec<i128> {
    let c = |x: i64| i128::from(x).clamp(-CLAMP, CLAMP);
    match input {
        Input::Int(x) => vec![c(*x)],
        Input::Tuple(xs) => xs.iter().map(|&x| c(x)).collect(),
        Input::Str(_) => Vec::new(),
    }
}

/// Component `i` of `xs`, 0 when missing (keeps evaluation total on malformed inputs).
pub(super) fn at(xs: &[i128], i: usize) -> i128 {
    xs.get(i).copied().unwrap_or(0)
}

/// The bytes of a string input (empty for numeric inputs).
pub(super) fn bytes(input: &Input) -> &[u8] {
    match input {
        Input::Str(s) => s.as_bytes(),
        Input::Int(_) | Input::Tuple(_) => &[],
    }
}

fn class(b: bool) -> Output {
    Output::Int(i128::from(b))
}

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    u64::try_from(u128::from(a) * u128::from(b) % u128::from(m)).expect("remainder below m")
}

fn pow_mod(mut a: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    a %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, a, m);
        }
        a = mul_mod(a, a, m);
        e >>= 1;
    }
    r
}

/// Primality (x < 2 → false), deterministic Miller–Rabin valid for all 64-bit values.
pub(super) fn is_prime(x: i128) -> bool {
    let Ok(n) = u64::try_from(x) else {
        return false;
    };
    if n < 2 {
        return false;
    }
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    for p in BASES {
        if n % p == 0 {
            return n == p;
        }
    }
    let (mut d, mut s) = (n - 1, 0);
    while d % 2 == 0 {
        d /= 2;
        s += 1;
    }
    'outer: for a in BASES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// Decimal digits of |x|, most significant first (`[0]` for 0).
pub(super) fn digits(x: i128) -> Vec<u32> {
    x.unsigned_abs().to_string().bytes().map(|b| u32::from(b - b'0')).collect()
}

/// gcd of |a| and |b| (gcd(0, 0) = 0).
pub(super) fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// lcm of |a| and |b| (0 when either is 0).
pub(super) fn lcm(a: i128, b: i128) -> i128 {
    let g = gcd(a, b);
    if g == 0 { 0 } else { (a / g * b).abs() }
}

/// Values f(1), f(2), … of the recursion plus the start and length of its eventual cycle.
fn recursion_table() -> &'static (Vec<u8>, usize, usize) {
    static TABLE: std::sync::OnceLock<(Vec<u8>, usize, usize)> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut f: Vec<u8> = vec![1, 1, 1];
        let mut seen = vec![usize::MAX; 100 * 100];
        loop {
            let n = f.len();
            let state = usize::from(f[n - 2]) * 100 + usize::from(f[n - 1]);
            if seen[state] != usize::MAX {
                let mu = seen[state];
                return (f, mu, n - mu);
            }
            seen[state] = n;
            let next = (2 * u32::from(f[n - 2]) + u32::from(f[n - 1])) % 100;
            f.push(u8::try_from(next).expect("value mod 100 fits u8"));
        }
    })
}

/// f(x) of `func_recursion_2fx2_fx1_mod100` (§4.3); x ≤ 3 (including x ≤ 0) gives 1.
pub fn recursion(x: i128) -> i128 {
    let (f, mu, lambda) = recursion_table();
    if x <= 3 {
        return 1;
    }
    let idx = match usize::try_from(x) {
        Ok(n) if n <= f.len() => n,
        _ => {
            let mu_i = i128::try_from(*mu).expect("table index fits i128");
            let lam = i128::try_from(*lambda).expect("table index fits i128");
            usize::try_from(mu_i + (x - mu_i).rem_euclid(lam)).expect("reduced index fits usize")
        }
    };
    i128::from(f[idx - 1])
}

/// Class of the triangle A(a,b), B(c,d), C(e,f) by squared sides: 0 obtuse, 1 acute, 2 right.
pub(super) fn triangle_class(p: &[i128]) -> i128 {
    let sq = |i: usize, j: usize| {
        let (dx, dy) = (at(p, 2 * i) - at(p, 2 * j), at(p, 2 * i + 1) - at(p, 2 * j + 1));
        dx * dx + dy * dy
    };
    let mut s = [sq(0, 1), sq(0, 2), sq(1, 2)];
    s.sort_unstable();
    match (s[0] + s[1]).cmp(&s[2]) {
        std::cmp::Ordering::Equal => 2,
        std::cmp::Ordering::Greater => 1,
        std::cmp::Ordering::Less => 0,
    }
}

/// Z-function: z[i] = longest common prefix of s and s[i..] (z[0] = 0 by convention).
pub(super) fn z_function(s: &[u8]) -> Vec<usize> {
    let n = s.len();
    let mut z = vec![0; n];
    let (mut l, mut r) = (0, 0);
    for i in 1..n {
        if i < r {
            z[i] = (r - i).min(z[i - l]);
        }
        while i + z[i] < n && s[z[i]] == s[i + z[i]] {
            z[i] += 1;
        }
        if i + z[i] > r {
            (l, r) = (i, i + z[i]);
        }
    }
    z
}

/// Length of the longest palindromic subsequence (O(n²) time, O(n) memory).
pub(super) fn lps(s: &[u8]) -> usize {
    let n = s.len();
    let mut dp = vec![0usize; n];
    for i in (0..n).rev() {
        let mut prev_diag = 0; // dp[i+1][j-1]
        dp[i] = 1;
        for j in i + 1..n {
            let old = dp[j]; // dp[i+1][j]
            dp[j] = if s[i] == s[j] { prev_diag + 2 } else { dp[j].max(dp[j - 1]) };
            prev_diag = old;
        }
    }
    dp.get(n.wrapping_sub(1)).copied().unwrap_or(0)
}

/// Shifts the k-th character of the (char, position) order forward by k (§4.3).
pub(super) fn add_k_to_kth(s: &[u8]) -> Vec<u8> {
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by_key(|&i| (s[i], i));
    let mut out = s.to_vec();
    for (k, &pos) in order.iter().enumerate() {
        out[pos] = shift(s[pos], i64::try_from(k + 1).unwrap_or(0));
    }
    out
}

/// Strict local maxima; a length-1 string counts `single` (§4.3 parameter).
pub(super) fn local_maxima(s: &[u8], single: u8) -> i128 {
    if s.len() == 1 {
        return i128::from(single);
    }
    let n = s.len();
    (0..n).filter(|&i| (i == 0 || s[i] > s[i - 1]) && (i + 1 == n || s[i] > s[i + 1])).count() as i128
}

fn count(n: usize) -> Output {
    Output::Int(i128::try_from(n).unwrap_or(i128::MAX))
}

fn text(b: Vec<u8>) -> Output {
    Output::Str(String::from_utf8_lossy(&b).into_owned())
}

/// The hidden function under default parameters; see [`evaluate_with`].
pub fn evaluate(task: TaskId, input: &Input) -> Output {
    evaluate_with(task, input, &TaskParams::default())
}

/// The hidden function of `task` (§1, §4.3) under `params`. Exact for validated inputs; total
/// (never panics) on anything else, where the value is an unspecified natural extension.
pub fn evaluate_with(task: TaskId, input: &Input, params: &TaskParams) -> Output {
    let x = ints(input);
    let s = bytes(input);
    let (a, b, c) = (at(&x, 0), at(&x, 1), at(&x, 2));
    match task {
        TaskId::IsPrime => class(is_prime(a)),
        TaskId::IsPythagoreanTriple => class(a > 0 && b > 0 && c > 0 && a * a + b * b == c * c),
        TaskId::IsGreaterThan58 => class(a > 58),
        TaskId::DigitSum => Output::Int(digits(a).iter().map(|&d| i128::from(d)).sum()),
        TaskId::Func6x3 => Output::Int(6 * a * a * a - 9 * a * a + 2 * a + 3),
        TaskId::Func3a10b5c => Output::Int(3 * a - 10 * b + 5 * c),
        TaskId::FuncRecursion => Output::Int(recursion(a)),
        TaskId::FuncAbPlusCSq => Output::Int(a * b + c * c),
        TaskId::FuncGcdPlusLcm => Output::Int(gcd(a, b) + lcm(a, b)),
        TaskId::TriangleType => Output::Int(triangle_class(&x)),
        TaskId::ContainsAb => class(s.windows(2).any(|w| w == b"ab")),
        TaskId::ParitySum => Output::Int(i128::from(s.iter().map(|&b| value(b)).sum::<i64>().rem_euclid(2))),
        TaskId::MaxZFunction => count(z_function(s).into_iter().max().unwrap_or(0)),
        TaskId::AddKToKth => text(add_k_to_kth(s)),
        TaskId::CaesarCipher => text(s.iter().map(|&b| shift(b, 10)).collect()),
        TaskId::NumLessThanDiag => count(
            s.iter()
                .enumerate()
                .filter(|&(i, &b)| {
                    let pos = i64::try_from(i + 1).unwrap_or(i64::MAX);
                    match params.index_rule {
                        IndexRule::Le1Based => value(b) <= pos,
                        IndexRule::Lt1Based => value(b) < pos,
                    }
                })
                .count(),
        ),
        TaskId::LongestPalSubseq => count(lps(s)),
        TaskId::IsBigGap => {
            let t = i64::from(params.big_gap_threshold);
            class(s.windows(2).any(|w| {
                let gap = (value(w[0]) - value(w[1])).abs();
                match params.big_gap_comparison {
                    GapComparison::Ge => gap >= t,
                    GapComparison::Gt => gap > t,
                }
            }))
        }
        TaskId::NumLocalMaxima => Output::Int(local_maxima(s, params.local_maxima_single_char)),
        TaskId::LessThanTarget => class(s < b"jwz".as_slice()),
    }
}

/// Parses a prediction text as an integer: optional sign and ASCII digits, whitespace trimmed.
fn parse_int_prediction(p: &str) -> Option<i128> {
    let t = p.trim_ascii();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<i128>().ok()
}

impl Output {
    /// Whether a prediction submitted as text matches this output (§4.8): integers need an
    /// optional sign and digits, strings compare after trimming ASCII whitespace.
    pub fn matches_text(&self, prediction: &str) -> bool {
        match self {
            Output::Int(v) => parse_int_prediction(prediction) == Some(*v),
            Output::Str(s) => prediction.trim_ascii() == s,
        }
    }

    /// Whether a JSON prediction matches (§4.8): also accepts JSON integers and integral
    /// floats for integer outputs.
    pub fn matches_json(&self, prediction: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (self, prediction) {
            (_, Value::String(p)) => self.matches_text(p),
            (Output::Int(v), Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    i128::from(i) == *v
                } else if let Some(u) = n.as_u64() {
                    i128::from(u) == *v
                } else {
                    // Integral float: exact when |f| < 2^63; compare via i128 conversion.
                    n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.2e18 && (f as i128) == *v)
                }
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
