//! The 20 BBQ-Bench tasks (spec `shared/specs/bbq.md` §1): ids, input and output types,
//! budgets, batch sizes and rounds, plus [`TaskParams`], every "evalgrid default" of §4 as a
//! named, serialisable field so that it can enter cache keys and provenance.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Benchmark id used in configs and caches ("BBQ" alone collides with the Bias Benchmark).
pub const BENCHMARK_ID: &str = "bbq_bench";

/// Default `bbq.test_seed` (§4.4): test sets and samples are fixed across trials and models.
/// It is passed explicitly to the generator and [`super::Episode::new`], not via [`TaskParams`].
pub const DEFAULT_TEST_SEED: u64 = 0;

/// Identifies one of the 20 hidden functions; the string form is the published task id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskId {
    /// 1 if x is prime.
    IsPrime,
    /// 1 if (a, b, c) is an ordered positive Pythagorean triple.
    IsPythagoreanTriple,
    /// 1 if x > 58.
    IsGreaterThan58,
    /// Decimal digit sum of |x|.
    DigitSum,
    /// 6x³ − 9x² + 2x + 3.
    Func6x3,
    /// 3a − 10b + 5c.
    Func3a10b5c,
    /// f(x) = (2·f(x−2) + f(x−1)) mod 100, f(1) = f(2) = f(3) = 1.
    FuncRecursion,
    /// a·b + c².
    FuncAbPlusCSq,
    /// gcd(a, b) + lcm(a, b).
    FuncGcdPlusLcm,
    /// Triangle type: 0 obtuse, 1 acute, 2 right.
    TriangleType,
    /// 1 if "ab" is a substring.
    ContainsAb,
    /// Parity of the sum of letter values.
    ParitySum,
    /// Maximum of the Z-function.
    MaxZFunction,
    /// Shift the k-th lowest character forward by k.
    AddKToKth,
    /// Shift every character forward by 10.
    CaesarCipher,
    /// Number of 1-based indices i with value(s_i) ≤ i.
    NumLessThanDiag,
    /// Length of the longest palindromic subsequence.
    LongestPalSubseq,
    /// 1 if some adjacent pair has an alphabetic gap of at least 18.
    IsBigGap,
    /// Number of strict local maxima.
    NumLocalMaxima,
    /// 1 if s < "jwz".
    LessThanTarget,
}

impl TaskId {
    /// All tasks in the spec's order (numerical first), the order of reports and curves.
    pub const ALL: [TaskId; 20] = [
        TaskId::IsPrime,
        TaskId::IsPythagoreanTriple,
        TaskId::IsGreaterThan58,
        TaskId::DigitSum,
        TaskId::Func6x3,
        TaskId::Func3a10b5c,
        TaskId::FuncRecursion,
        TaskId::FuncAbPlusCSq,
        TaskId::FuncGcdPlusLcm,
        TaskId::TriangleType,
        TaskId::ContainsAb,
        TaskId::ParitySum,
        TaskId::MaxZFunction,
        TaskId::AddKToKth,
        TaskId::CaesarCipher,
        TaskId::NumLessThanDiag,
        TaskId::LongestPalSubseq,
        TaskId::IsBigGap,
        TaskId::NumLocalMaxima,
        TaskId::LessThanTarget,
    ];

    /// The published task id, used in configs, caches, the CLI and the fixture.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskId::IsPrime => "is_prime",
            TaskId::IsPythagoreanTriple => "is_pythagorean_triple",
            TaskId::IsGreaterThan58 => "is_greater_than_58",
            TaskId::DigitSum => "digit_sum",
            TaskId::Func6x3 => "func_6x3_9x2_2x_3",
            TaskId::Func3a10b5c => "func_3a_10b_5c",
            TaskId::FuncRecursion => "func_recursion_2fx2_fx1_mod100",
            TaskId::FuncAbPlusCSq => "func_ab_plus_c_sq",
            TaskId::FuncGcdPlusLcm => "func_gcd_plus_lcm",
            TaskId::TriangleType => "triangle_type_six_ints",
            TaskId::ContainsAb => "contains_ab",
            TaskId::ParitySum => "parity_sum",
            TaskId::MaxZFunction => "max_z_function",
            TaskId::AddKToKth => "add_k_to_kth",
            TaskId::CaesarCipher => "caesar_cipher",
            TaskId::NumLessThanDiag => "num_less_than_diag",
            TaskId::LongestPalSubseq => "length_of_longest_palindromic_subsequence",
            TaskId::IsBigGap => "is_big_gap",
            TaskId::NumLocalMaxima => "num_local_maxima",
            TaskId::LessThanTarget => "less_than_target",
        }
    }

    /// The task's static configuration (budget, batch size, input kind, ...).
    pub fn task(self) -> Task {
        task(self)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task id that is not one of the 20 published ids (CLI and config input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown bbq_bench task id '{0}'")]
pub struct UnknownTask(pub String);

impl FromStr for TaskId {
    type Err = UnknownTask;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskId::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| UnknownTask(s.to_string()))
    }
}

impl Serialize for TaskId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The two halves of the benchmark, each with its own sub-score (§3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// The ten integer tasks (§1.1).
    Numeric,
    /// The ten string tasks (§1.2).
    String,
}

/// Shape of a task's valid query inputs (§4.2); the domain bounds come from [`TaskParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// One integer; `positive` restricts it to 1 ≤ x (recursion).
    Int {
        /// Whether the lower bound is 1 instead of −bound.
        positive: bool,
    },
    /// A fixed-arity tuple of integers.
    Tuple {
        /// Number of components.
        arity: usize,
        /// Whether every component must be ≥ 1 (gcd + lcm).
        positive: bool,
        /// Whether the six ints must form a non-degenerate triangle.
        triangle: bool,
    },
    /// A string of `a`–`z` of published length 1–20.
    Str,
}

/// Type of a task's outputs, which decides prediction matching and class balancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// Integer classes `0..classes`.
    Class {
        /// Number of classes (2, or 3 for triangles).
        classes: u8,
    },
    /// Any integer.
    Int,
    /// A string.
    Str,
}

/// Static, published configuration of one task (§1 and `tasks.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Which function.
    pub id: TaskId,
    /// The `tasks.json` spec type name, kept for provenance.
    pub spec_type: &'static str,
    /// Numerical or string half.
    pub family: Family,
    /// Query input shape.
    pub input: InputKind,
    /// Output type.
    pub output: OutputKind,
    /// Query budget (`total_queries`).
    pub total_queries: u32,
    /// Maximum inputs per `query` call.
    pub query_batch_size: u32,
    /// Published `samples_per_category` (0 when the task gets no generated samples).
    pub samples_per_category: u32,
    /// One-line statement of the hidden rule, for reports and docs; never shown to the model.
    pub rule: &'static str,
}

/// Published minimum string length (`tasks.json` `min_length`).
pub const MIN_STRING_LEN: usize = 1;
/// Published maximum string length (`tasks.json` `max_length`).
pub const MAX_STRING_LEN: usize = 20;

impl Task {
    /// Rounds after round 0: `total_queries / query_batch_size` (30 numerical, 20 string).
    pub fn rounds(&self) -> u32 {
        self.total_queries / self.query_batch_size.max(1)
    }

    /// Arity of an input (1 for scalars and strings), used in validation messages.
    pub fn arity(&self) -> usize {
        match self.input {
            InputKind::Tuple { arity, .. } => arity,
            InputKind::Int { .. } | InputKind::Str => 1,
        }
    }

    /// Whether outputs are classes (these tasks get class balancing and samples).
    pub fn is_classification(&self) -> bool {
        matches!(self.output, OutputKind::Class { .. })
    }

    /// The `Input:` line of the system prompt: the type and the valid domain (§4.7).
    pub fn input_description(&self, params: &TaskParams) -> String {
        let b = params.int_bound;
        match self.input {
            InputKind::Int { positive: false } => {
                format!("Input: an integer x with -{b} <= x <= {b}")
            }
            InputKind::Int { positive: true } => format!("Input: an integer x with 1 <= x <= {b}"),
            InputKind::Tuple { arity, positive, triangle } => {
                let lo = if positive { "1".to_string() } else { format!("-{b}") };
                let example = if arity == 2 { "(1, 2)" } else { "(1, 2, 3)" };
                let mut s = format!(
                    "Input: a tuple of {arity} integers, each between {lo} and {b} inclusive, \
                     written in parentheses, e.g. {example}"
                );
                if triangle {
                    s = format!(
                        "Input: a tuple of 6 integers (a, b, c, d, e, f), each between {lo} and \
                         {b} inclusive; the points (a, b), (c, d), (e, f) must be distinct and \
                         not collinear"
                    );
                }
                s
            }
            InputKind::Str => format!("Input: a string of {MIN_STRING_LEN} to {MAX_STRING_LEN} lower-case letters a-z"),
        }
    }

    /// The `Output:` line of the system prompt (type of the output).
    pub fn output_description(&self) -> &'static str {
        match self.output {
            OutputKind::Class { classes: 3 } => "Output: 0, 1 or 2",
            OutputKind::Class { .. } => "Output: 0 or 1",
            OutputKind::Int => "Output: an integer",
            OutputKind::Str => "Output: a string",
        }
    }
}

const fn numeric(id: TaskId, spec_type: &'static str, input: InputKind, output: OutputKind, samples_per_category: u32, rule: &'static str) -> Task {
    Task { id, spec_type, family: Family::Numeric, input, output, total_queries: 30, query_batch_size: 1, samples_per_category, rule }
}

const fn string(id: TaskId, spec_type: &'static str, output: OutputKind, total_queries: u32, query_batch_size: u32, rule: &'static str) -> Task {
    Task { id, spec_type, family: Family::String, input: InputKind::Str, output, total_queries, query_batch_size, samples_per_category: 0, rule }
}

const INT: InputKind = InputKind::Int { positive: false };
const BIN: OutputKind = OutputKind::Class { classes: 2 };
const fn tuple(arity: usize) -> InputKind {
    InputKind::Tuple { arity, positive: false, triangle: false }
}

/// The published configuration of `id` (§1.1, §1.2).
pub fn task(id: TaskId) -> Task {
    use OutputKind::{Int as OInt, Str as OStr};
    use TaskId as T;
    match id {
        T::IsPrime => numeric(id, "IntegerClassificationSpec", INT, BIN, 2, "1 if x is prime else 0"),
        T::IsPythagoreanTriple => numeric(id, "IntegerTupleClassificationSpec", tuple(3), BIN, 2, "1 if a, b, c > 0 and a^2 + b^2 = c^2 else 0"),
        T::IsGreaterThan58 => numeric(id, "IntegerClassificationSpec", INT, BIN, 2, "1 if x > 58 else 0"),
        T::DigitSum => numeric(id, "IntegerIntegerSpec", INT, OInt, 0, "sum of the digits of |x|"),
        T::Func6x3 => numeric(id, "IntegerIntegerSpec", INT, OInt, 0, "6x^3 - 9x^2 + 2x + 3"),
        T::Func3a10b5c => numeric(id, "IntegerTupleIntegerSpec", tuple(3), OInt, 0, "3a - 10b + 5c"),
        T::FuncRecursion => {
            numeric(id, "IntegerIntegerSpec", InputKind::Int { positive: true }, OInt, 0, "f(x) = (2 f(x-2) + f(x-1)) mod 100, f(1) = f(2) = f(3) = 1")
        }
        T::FuncAbPlusCSq => numeric(id, "IntegerTupleIntegerSpec", tuple(3), OInt, 0, "a*b + c^2"),
        T::FuncGcdPlusLcm => {
            numeric(id, "IntegerTupleIntegerSpec", InputKind::Tuple { arity: 2, positive: true, triangle: false }, OInt, 0, "gcd(a, b) + lcm(a, b)")
        }
        T::TriangleType => numeric(
            id,
            "IntegerTupleClassificationSpec",
            InputKind::Tuple { arity: 6, positive: false, triangle: true },
            OutputKind::Class { classes: 3 },
            2,
            "triangle (a,b),(c,d),(e,f): 0 obtuse, 1 acute, 2 right",
        ),
        T::ContainsAb => string(id, "StringClassificationSpec", BIN, 20, 1, "1 if 'ab' is a substring"),
        T::ParitySum => string(id, "StringClassificationSpec", BIN, 20, 1, "parity of the sum of letter values (a = 1 ... z = 26)"),
        T::MaxZFunction => string(id, "StringIntegerSpec", OInt, 100, 5, "longest prefix of s occurring again later in s (max of the Z-function)"),
        T::AddKToKth => string(id, "StringStringSpec", OStr, 20, 1, "shift the k-th lowest character (ties left to right) forward by k"),
        T::CaesarCipher => string(id, "StringStringSpec", OStr, 20, 1, "shift every character forward by 10"),
        T::NumLessThanDiag => string(id, "StringIntegerSpec", OInt, 200, 10, "number of 1-based indices i with value(s_i) <= i"),
        T::LongestPalSubseq => string(id, "StringIntegerSpec", OInt, 100, 5, "length of the longest palindromic subsequence"),
        T::IsBigGap => string(id, "StringClassificationSpec", BIN, 100, 5, "1 if some adjacent pair has an alphabetic gap >= 18"),
        T::NumLocalMaxima => string(id, "StringIntegerSpec", OInt, 100, 5, "number of characters strictly greater than all their neighbours"),
        T::LessThanTarget => string(id, "StringClassificationSpec", BIN, 100, 5, "1 if s < 'jwz' lexicographically"),
    }
}

/// `num_less_than_diag` index rule (§4.3): the write-up's 1-based ≤, or the strict variant
/// that the app's wording gives under a 0-based reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IndexRule {
    /// value(s_i) ≤ i, i 1-based (default).
    #[serde(rename = "le_1based")]
    Le1Based,
    /// value(s_i) < i, i 1-based (the app text read with 0-based i).
    #[serde(rename = "lt_1based")]
    Lt1Based,
}

/// `is_big_gap` comparison against the threshold (§4.3: write-up "at least" vs app "exceeds").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapComparison {
    /// gap ≥ threshold (default).
    Ge,
    /// gap > threshold.
    Gt,
}

/// Every evalgrid default of spec §4 that the sources leave open, as one serialisable value
/// that enters the cache key; `Default` is exactly the spec's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskParams {
    /// §4.2: integer inputs lie in [−bound, bound] ([1, bound] for positive domains).
    pub int_bound: i64,
    /// §4.5 step 2: random sampler draws appended to the anchors.
    pub n_random: usize,
    /// §4.5 step 3: minimum members per class in a classification test set.
    pub min_per_class: usize,
    /// §4.5 step 3 (and §4.6): draws before giving up with an error.
    pub max_balance_draws: usize,
    /// §4.6: generated samples per class for the numerical classification tasks.
    pub samples_per_class: usize,
    /// §4.3 `index_rule` of `num_less_than_diag`.
    pub index_rule: IndexRule,
    /// §4.3 `big_gap_threshold`.
    pub big_gap_threshold: u8,
    /// §4.3 `big_gap_comparison`.
    pub big_gap_comparison: GapComparison,
    /// §4.3 `local_maxima_single_char`: the count for a length-1 string.
    pub local_maxima_single_char: u8,
    /// §4.10 / §2: scratchpads are truncated to this many words.
    pub scratchpad_max_words: usize,
    /// §4.9: attempts per tool and phase before the phase is forfeited.
    pub max_attempts: u32,
    /// §4.10: whether round 0 (evaluation on samples only) is played.
    pub round_zero: bool,
    /// §4.7: version of the system prompt asset.
    pub system_prompt_version: String,
    /// §4.8: `execute_python` wall-clock limit in seconds.
    pub python_timeout_s: u32,
    /// §4.8: `execute_python` memory limit in MiB.
    pub python_memory_mib: u32,
    /// §4.8: cap on each of stdout and stderr, in characters (head + tail halves).
    pub python_output_cap_chars: usize,
    /// §4.8: whether numpy is available in the sandbox.
    pub python_numpy: bool,
}

impl Default for TaskParams {
    fn default() -> Self {
        TaskParams {
            int_bound: 1_000_000,
            n_random: 6,
            min_per_class: 3,
            max_balance_draws: 10_000,
            samples_per_class: 2,
            index_rule: IndexRule::Le1Based,
            big_gap_threshold: 18,
            big_gap_comparison: GapComparison::Ge,
            local_maxima_single_char: 1,
            scratchpad_max_words: 300,
            max_attempts: 3,
            round_zero: true,
            system_prompt_version: "bbq-system-v1".to_string(),
            python_timeout_s: 10,
            python_memory_mib: 1024,
            python_output_cap_chars: 10_000,
            python_numpy: false,
        }
    }
}

#[cfg(test)]
mod tests;
