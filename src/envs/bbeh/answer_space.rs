//! Per-item answer spaces for the built-in `random` baseline.
//!
//! A space is `Finite` when the question itself fixes a small set of admissible answers, and
//! `Open` otherwise. Every finite option is formatted like the task's targets, so the official
//! scorer accepts it exactly when it is the gold answer. Decisions per task (spec §1 table plus
//! inspection of the inputs at `80d12ca`):
//!
//! | task | space |
//! |---|---|
//! | boardgame_qa | `proved` / `disproved` / `unknown` (instruction in every input) |
//! | boolean_expressions, disambiguation_qa, geometric_shapes, movie_recommendation, nycc, shuffled_objects | `(X)` for every distinct option line `(X) …` in the input (A–E, 3–9 options, A–P, A–J, A–J, A–G) |
//! | hyperbaton | every non-empty concatenation, in letter order, of the sentence options (A–J), plus the bare `None of the above` letter (K): 1,024 answers. Source: each input's instruction "Select all that apply … Provide your final answer as a concatenation of all the correct choices" (paper Table 2 Random = 0.0; every target happens to be one letter) |
//! | causal_understanding | `Yes`/`No`/`Ambiguous` if the input offers "Ambiguous" (142 items), else `Yes`/`No` (58 "logician" items) |
//! | dyck_languages, word_sorting (mistake-finding items) | `No` plus every thought number 1..=N shown |
//! | sarc_triples | the 8 triples `a,b,c` over `0`/`1` (no spaces, like the targets) |
//! | web_of_lies | the 27 triples over yes/no/unknown (160 items whose instruction mentions unknown) or the 8 over yes/no (40 items), `", "`-separated |
//! | zebra_puzzles | positions `1`..=N from "There are N people" (N = 5–8) |
//! | buggy_tables, multistep_arithmetic, object_counting, object_properties, temporal_sequence | open: numbers |
//! | spatial_reasoning (map/ring items, 171) | every object the input says you see or find (`see a X`, `find an X`, the ring's `elements on the path are a X, a Y, and a Z`) plus `unknown`. Source: each input's instruction "Your final answer must be only the object name … If you have not previously seen the object at the vertex, your final answer must be \"unknown\"" |
//! | spatial_reasoning (tree/cousin items, 29) | open: an alphabetical list of cousins over 100–1,000 nodes |
//! | linguini, time_arithmetic | open: free text / dates and lists |
//! | sportqa | open: multi-select over 2–3 sub-questions with inconsistent option layout |
//! | word_sorting (sorting items) | open: a permutation of the given words |
//!
//! Expected random accuracy under these spaces reproduces the paper's Random column (spec
//! `bbeh.md` §5.2, Table 2) on all 23 tasks within sampling error: dyck gives 2.2 vs 1.4,
//! spatial_reasoning 5.7 vs 5.2, causal 38.2 vs 38.0, hyperbaton 0.1 vs 0.0.

use super::dataset::Item;
use super::scorer::evaluate_correctness;

/// Bump when any task's space changes: it is in the built-in random model's key (version 2:
/// hyperbaton concatenations, spatial-reasoning seen objects).
pub const ANSWER_SPACE_VERSION: u32 = 2;

/// The admissible answers of one item, for sampling a random baseline answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerSpace {
    /// Answers formatted like the targets; the gold answer is one of them for every item.
    Finite(Vec<String>),
    /// No small finite space; the random baseline abstains (scored as incorrect).
    Open {
        /// Why the space is open, for reports.
        reason: &'static str,
    },
}

impl AnswerSpace {
    /// Number of options, `None` for open spaces.
    pub fn len(&self) -> Option<usize> {
        match self {
            AnswerSpace::Finite(v) => Some(v.len()),
            AnswerSpace::Open { .. } => None,
        }
    }

    /// Whether the space is finite but empty (never produced by [`answer_space`]).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

fn owned(options: &[&str]) -> AnswerSpace {
    AnswerSpace::Finite(options.iter().map(|s| s.to_string()).collect())
}

/// Distinct letters of lines shaped `(X) …` with X in A–Z, in first-appearance order.
fn option_letters(input: &str) -> Vec<char> {
    let mut letters = Vec::new();
    for line in input.lines() {
        let b = line.as_bytes();
        if b.len() >= 4 && b[0] == b'(' && b[1].is_ascii_uppercase() && b[2] == b')' && b[3] == b' ' {
            let c = char::from(b[1]);
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
    }
    letters
}

fn lettered(input: &str, parenthesised: bool) -> AnswerSpace {
    let letters = option_letters(input);
    if letters.is_empty() {
        return AnswerSpace::Open { reason: "no (X) option lines found in the input" };
    }
    AnswerSpace::Finite(letters.into_iter().map(|c| if parenthesised { format!("({c})") } else { c.to_string() }).collect())
}

/// Sanity bound on hyperbaton sentence options: 2^16 answers at most.
const MAX_SUBSET_LETTERS: usize = 16;

/// Hyperbaton: "select all that apply", answered as the concatenation of the chosen letters.
/// The option whose text is `None of the above` stands alone; the others form every non-empty
/// subset, letters in option order (the order the input's example "BC" uses).
fn concatenation_space(input: &str) -> AnswerSpace {
    let letters = option_letters(input);
    let none: Vec<char> = letters.iter().copied().filter(|c| input.lines().any(|l| l == format!("({c}) None of the above"))).collect();
    let sentences: Vec<char> = letters.iter().copied().filter(|c| !none.contains(c)).collect();
    if sentences.is_empty() || sentences.len() > MAX_SUBSET_LETTERS {
        return AnswerSpace::Open { reason: "no plausible sentence options found in the input" };
    }
    let mut v: Vec<String> =
        (1u32..(1 << sentences.len())).map(|mask| sentences.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, c)| *c).collect()).collect();
    v.extend(none.iter().map(char::to_string));
    AnswerSpace::Finite(v)
}

/// Text after `at` up to the end of its sentence (`. `, `, where` or a final `.`).
fn object_phrase(rest: &str) -> Option<&str> {
    let end = [". ", ", where", ".\n"].iter().filter_map(|t| rest.find(t)).min().or_else(|| rest.strip_suffix('.').map(str::len))?;
    let name = rest[..end].trim();
    (!name.is_empty()).then_some(name)
}

/// Strips a leading `and `, then an article `a ` / `an `.
fn without_article(s: &str) -> &str {
    let s = s.trim();
    let s = s.strip_prefix("and ").unwrap_or(s);
    s.strip_prefix("an ").or_else(|| s.strip_prefix("a ")).unwrap_or(s)
}

/// Spatial reasoning: the objects the walk shows, plus `unknown` (see the module table).
fn seen_objects_space(item: &Item) -> AnswerSpace {
    let input = item.input.as_str();
    if item.subtask.is_some() || input.starts_with("You have been given a tree structure") {
        return AnswerSpace::Open { reason: "alphabetical list of cousins over hundreds of tree nodes" };
    }
    let mut objects: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        if !name.is_empty() && !objects.iter().any(|o| o == name) {
            objects.push(name.to_owned());
        }
    };
    for marker in ["see a ", "see an ", "find a ", "find an "] {
        for (at, _) in input.match_indices(marker) {
            if let Some(name) = object_phrase(&input[at + marker.len()..]) {
                push(name);
            }
        }
    }
    if let Some((_, rest)) = input.split_once("the elements on the path are ") {
        let list = rest.split_once(". ").map_or(rest, |(l, _)| l);
        for part in list.split(", ") {
            push(without_article(part));
        }
    }
    if objects.is_empty() {
        return AnswerSpace::Open { reason: "no seen objects found in the input" };
    }
    objects.push("unknown".to_owned());
    AnswerSpace::Finite(objects)
}

/// Largest N among lines `Thought N: …`.
fn max_thought(input: &str) -> Option<usize> {
    input.lines().filter_map(|l| l.strip_prefix("Thought ")?.split_once(':')?.0.parse::<usize>().ok()).max()
}

/// Sanity bound on thought numbers (real inputs have at most 78) so odd input cannot make
/// the space allocate unboundedly.
const MAX_THOUGHTS: usize = 10_000;

fn mistake_space(input: &str) -> AnswerSpace {
    match max_thought(input) {
        Some(n) if (1..=MAX_THOUGHTS).contains(&n) => {
            let mut v = Vec::with_capacity(n + 1);
            v.push("No".to_string());
            v.extend((1..=n).map(|i| i.to_string()));
            AnswerSpace::Finite(v)
        }
        _ => AnswerSpace::Open { reason: "no plausible numbered thoughts found in the input" },
    }
}

fn triples(values: &[&str], sep: &str) -> AnswerSpace {
    let mut v = Vec::with_capacity(values.len().pow(3));
    for a in values {
        for b in values {
            for c in values {
                v.push(format!("{a}{sep}{b}{sep}{c}"));
            }
        }
    }
    AnswerSpace::Finite(v)
}

fn zebra_space(input: &str) -> AnswerSpace {
    let n = input.split_once("There are ").and_then(|(_, rest)| rest.split_once(" people")).and_then(|(num, _)| num.trim().parse::<usize>().ok());
    match n {
        Some(n) if (1..=100).contains(&n) => AnswerSpace::Finite((1..=n).map(|i| i.to_string()).collect()),
        _ => AnswerSpace::Open { reason: "number of people not found in the input" },
    }
}

/// The answer space of one item (see the module table for every task's decision).
pub fn answer_space(item: &Item) -> AnswerSpace {
    let input = item.input.as_str();
    match item.task.as_str() {
        "bbeh_boardgame_qa" => owned(&["proved", "disproved", "unknown"]),
        "bbeh_boolean_expressions"
        | "bbeh_disambiguation_qa"
        | "bbeh_geometric_shapes"
        | "bbeh_movie_recommendation"
        | "bbeh_nycc"
        | "bbeh_shuffled_objects" => lettered(input, true),
        "bbeh_hyperbaton" => concatenation_space(input),
        "bbeh_causal_understanding" => {
            if input.contains("Ambiguous") {
                owned(&["Yes", "No", "Ambiguous"])
            } else {
                owned(&["Yes", "No"])
            }
        }
        "bbeh_dyck_languages" => mistake_space(input),
        "bbeh_word_sorting" => {
            if input.contains("Is there a mistake in this sequence?") {
                mistake_space(input)
            } else {
                AnswerSpace::Open { reason: "sorting item: answer is a permutation of the given words" }
            }
        }
        "bbeh_sarc_triples" => triples(&["0", "1"], ","),
        "bbeh_web_of_lies" => {
            let instruction = input.rsplit_once("Your answer should be").map_or(input, |(_, i)| i);
            if instruction.contains("unknown") { triples(&["yes", "no", "unknown"], ", ") } else { triples(&["yes", "no"], ", ") }
        }
        "bbeh_zebra_puzzles" => zebra_space(input),
        "bbeh_buggy_tables" => AnswerSpace::Open { reason: "decimal number computed from a table" },
        "bbeh_multistep_arithmetic" => AnswerSpace::Open { reason: "unbounded signed integer" },
        "bbeh_object_counting" => AnswerSpace::Open { reason: "unbounded count" },
        "bbeh_object_properties" => AnswerSpace::Open { reason: "count (or \"unknown\") without a stated bound" },
        "bbeh_temporal_sequence" => AnswerSpace::Open { reason: "pair of integers (length, count)" },
        "bbeh_linguini" => AnswerSpace::Open { reason: "free-text word or phrase in an unfamiliar language" },
        "bbeh_spatial_reasoning" => seen_objects_space(item),
        "bbeh_time_arithmetic" => AnswerSpace::Open { reason: "dates, times, lists or \"unanswerable\"" },
        "bbeh_sportqa" => AnswerSpace::Open { reason: "multi-select over several sub-questions" },
        _ => AnswerSpace::Open { reason: "unknown task" },
    }
}

use crate::envs::splitmix::SplitMix64;

/// A uniformly drawn answer for `item`, deterministic in `rng_u64` (the splitmix64 seed);
/// `None` for open spaces. The string is scored like a response (the bare answer suffices).
pub fn random_answer(item: &Item, rng_u64: u64) -> Option<String> {
    match answer_space(item) {
        AnswerSpace::Finite(options) if !options.is_empty() => {
            let mut rng = SplitMix64::new(rng_u64);
            let i = usize::try_from(rng.below(options.len() as u64)).ok()?;
            options.into_iter().nth(i)
        }
        _ => None,
    }
}

/// Expected accuracy (0–1) of [`random_answer`] on `item`: the share of options the official
/// scorer accepts for the item's target; `None` for open spaces.
pub fn expected_random_accuracy(item: &Item) -> Option<f64> {
    match answer_space(item) {
        AnswerSpace::Finite(options) if !options.is_empty() => {
            let hits = options.iter().filter(|o| evaluate_correctness(o, &item.target)).count();
            Some(hits as f64 / options.len() as f64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
