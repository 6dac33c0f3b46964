//! Exact Rust port of the official BBEH scorer (`bbeh/evaluate.py` at `80d12ca`).
//!
//! The official code is not shipped; this module follows the prose of `specs/bbeh.md` §3
//! step by step and emulates the CPython 3.11 string primitives it relies on: `str.strip()`
//! (Python's `isspace` set, which includes U+001C–U+001F), `str.split`, `str.lower()`
//! (Unicode 14), code-point `len`/indexing and `float()` parsing (whitespace, `+`, exponents,
//! `inf`/`nan`, digit underscores, Unicode decimal digits). It is a pure function of its two inputs; its
//! identity for caches is [`SCORER_VERSION`].

use super::pystr::{py_float, py_lower, py_strip};

/// Version tag of the scoring semantics; put it in the scoring-step cache key so a scorer fix
/// re-scores cached responses without re-calling models.
pub const SCORER_VERSION: &str = "bbeh-official-80d12ca";

/// The official answer prefixes, in the order the official code applies them (case-sensitive;
/// note the trailing spaces on three of them and the missing one on the first).
pub const ANSWER_PREFIXES: [&str; 4] = ["The answer is:", "The final answer is ", "The final answer is: ", "The answer is "];

/// Full diagnostic result of scoring one response, as stored in score rows (spec §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreDetail {
    /// Verdict of the official `evaluate_correctness`.
    pub correct: bool,
    /// Prediction string handed to the matcher (official `preprocess_sample` output).
    pub prediction_after_preprocess: String,
    /// Reference string handed to the matcher (official `preprocess_reference` output).
    pub reference_after_preprocess: String,
    /// Whether any of the four answer prefixes occurred (see [`extract_answer`]).
    pub extraction_found_prefix: bool,
}

/// Python `s.split(sep)[-1]`: the text after the last non-overlapping occurrence of `sep`
/// (occurrences found left to right, exactly like CPython), or `None` if `sep` does not occur.
fn after_last_split<'a>(s: &'a str, sep: &str) -> Option<&'a str> {
    s.match_indices(sep).last().map(|(i, m)| &s[i + m.len()..])
}

/// Python `s.split(sep)[1]` on a string known to contain `sep`: the segment between the first
/// and the second occurrence (or the end).
fn second_split_segment<'a>(s: &'a str, sep: &str) -> &'a str {
    s.split(sep).nth(1).unwrap_or("")
}

/// Official `strip_latex`: each step at most once, in order; every brace step requires the
/// string to end with `}` and keeps the segment after the first `<cmd>{` up to the next one.
fn strip_latex(response: &str) -> String {
    let mut r: &str = response;
    if r.starts_with('$') && r.ends_with('$') {
        // Python `r[1:-1]`; a lone "$" becomes "" (slicing never fails in Python).
        r = if r.len() >= 2 { &r[1..r.len() - 1] } else { "" };
    }
    for cmd in ["boxed{", "text{", "texttt{"] {
        if r.contains(cmd) && r.ends_with('}') {
            r = second_split_segment(&r[..r.len() - 1], cmd);
        }
    }
    r.to_string()
}

/// Official `extract_answer` applied to an already stripped response, plus whether any prefix
/// occurred. Each prefix that occurs cuts the string after its last occurrence and re-strips.
fn official_extract(stripped: &str) -> (String, bool) {
    let mut answer: &str = stripped;
    let mut found = false;
    for prefix in ANSWER_PREFIXES {
        if let Some(rest) = after_last_split(answer, prefix) {
            answer = py_strip(rest);
            found = true;
        }
    }
    let answer = answer.strip_suffix('.').unwrap_or(answer);
    (strip_latex(answer), found)
}

/// The answer text the official code extracts, or `None` when no answer marker occurs.
///
/// Definition relative to the official code: `Some(x)` iff at least one of the four
/// [`ANSWER_PREFIXES`] occurs (case-sensitively) anywhere in the stripped response, and then
/// `x` is exactly the official `extract_answer(response.strip())` output (text after the last
/// prefix occurrence, stripped, one trailing "." removed, LaTeX wrappers stripped; not yet
/// lower-cased). `None` means the official code fell back to the whole response; such a
/// response may still score correct (e.g. a bare "Yes" or "\boxed{5}"), so use this only to
/// count extraction failures, never to decide correctness.
pub fn extract_answer(response: &str) -> Option<String> {
    let (answer, found) = official_extract(py_strip(response));
    found.then_some(answer)
}

/// Official `preprocess_sample`: the prediction string the matcher compares.
/// Extract, lower-case, normalise `", "`, drop `**`, keep the first LF line, drop one more ".".
pub fn preprocess_prediction(response: &str) -> String {
    preprocess_prediction_with_flag(response).0
}

fn preprocess_prediction_with_flag(response: &str) -> (String, bool) {
    let (answer, found) = official_extract(py_strip(response));
    let lowered = py_lower(&answer).replace(", ", ",").replace("**", "");
    let first_line = lowered.split('\n').next().unwrap_or("");
    let out = first_line.strip_suffix('.').unwrap_or(first_line);
    (out.to_string(), found)
}

/// Official `preprocess_reference`: strip, lower-case, normalise `", "` to `","`.
/// Nothing else: a trailing "." or `**` in a target is kept.
pub fn preprocess_reference(reference: &str) -> String {
    py_lower(py_strip(reference)).replace(", ", ",")
}

/// If `s` is exactly three code points `(`, x, `)`, returns x as a string slice.
fn paren_middle(s: &str) -> Option<&str> {
    let mut it = s.char_indices();
    let (_, open) = it.next()?;
    let (mid_start, _) = it.next()?;
    let (close_start, close) = it.next()?;
    if it.next().is_some() || open != '(' || close != ')' {
        return None;
    }
    Some(&s[mid_start..close_start])
}

/// Official `fuzzy_match` on already preprocessed strings; the first applicable rule decides
/// (exact, 3-char parenthesis early returns, Python-float equality, quotes, brackets, "?").
pub fn fuzzy_match(prediction: &str, reference: &str) -> bool {
    if prediction == reference {
        return true;
    }
    if let Some(mid) = paren_middle(prediction) {
        return mid == reference;
    }
    if let Some(mid) = paren_middle(reference) {
        return mid == prediction;
    }
    if let (Some(p), Some(r)) = (py_float(prediction), py_float(reference))
        && p == r
    {
        return true;
    }
    if prediction.replace('\'', "") == reference.replace('\'', "") {
        return true;
    }
    if format!("[{reference}]") == prediction || format!("[{prediction}]") == reference {
        return true;
    }
    if prediction.strip_suffix('?') == Some(reference) {
        return true;
    }
    false
}

/// Official `evaluate_correctness(sample, reference)`: the BBEH verdict for one response.
pub fn evaluate_correctness(response: &str, reference: &str) -> bool {
    fuzzy_match(&preprocess_prediction(response), &preprocess_reference(reference))
}

/// Scores one response and keeps the diagnostics spec §6 asks score rows to carry.
pub fn score(response: &str, reference: &str) -> ScoreDetail {
    let (prediction, found) = preprocess_prediction_with_flag(response);
    let reference = preprocess_reference(reference);
    ScoreDetail {
        correct: fuzzy_match(&prediction, &reference),
        prediction_after_preprocess: prediction,
        reference_after_preprocess: reference,
        extraction_found_prefix: found,
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::{TASKS, load_task};
    use super::super::testdata::data_dir;
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vector {
        id: String,
        response: String,
        reference: String,
        expected: bool,
        prediction_after_preprocess: String,
        reference_after_preprocess: String,
    }

    #[derive(Deserialize)]
    struct VectorFile {
        count: usize,
        vectors: Vec<Vector>,
    }

    fn vectors() -> VectorFile {
        let text = std::fs::read_to_string(data_dir().join("scorer_vectors.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn official_vectors_reproduce_all_three_fields() {
        let file = vectors();
        assert_eq!(file.vectors.len(), file.count);
        let mut ok = 0;
        let mut failures = Vec::new();
        for v in &file.vectors {
            let d = score(&v.response, &v.reference);
            let good = d.correct == v.expected
                && d.prediction_after_preprocess == v.prediction_after_preprocess
                && d.reference_after_preprocess == v.reference_after_preprocess
                && evaluate_correctness(&v.response, &v.reference) == v.expected
                && preprocess_prediction(&v.response) == v.prediction_after_preprocess
                && preprocess_reference(&v.reference) == v.reference_after_preprocess;
            if good {
                ok += 1;
            } else {
                failures.push(format!("{}: got {:?}", v.id, d));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
        assert_eq!(ok, 66, "66/66 vectors");
    }

    #[test]
    fn gold_echo_scores_4509_of_4520() {
        let dir = data_dir();
        let mut total = 0;
        let mut correct = 0;
        let mut failures = Vec::new();
        for task in TASKS {
            for item in load_task(&dir, task).unwrap() {
                total += 1;
                let bare = evaluate_correctness(&item.target, &item.target);
                let prefixed = evaluate_correctness(&format!("The answer is: {}", item.target), &item.target);
                let boxed = evaluate_correctness(&format!("The final answer is: \\boxed{{{}}}", item.target), &item.target);
                assert_eq!(bare, prefixed, "{task}/{}", item.index);
                assert_eq!(boxed, prefixed, "{task}/{}", item.index);
                if prefixed {
                    correct += 1;
                } else {
                    failures.push((item.task.clone(), item.index));
                }
            }
        }
        assert_eq!(total, 4520);
        assert_eq!(correct, 4509, "gold echo 4509/4520");
        let linguini: Vec<(String, usize)> = [2, 11, 36, 71, 78, 87, 100, 148, 155, 168, 172].iter().map(|&i| ("bbeh_linguini".to_string(), i)).collect();
        assert_eq!(failures, linguini);
    }

    #[test]
    fn extract_answer_distinguishes_missing_marker() {
        assert_eq!(extract_answer("The answer is: (B)."), Some("(B)".to_string()));
        assert_eq!(extract_answer("Yes\n\nbecause"), None);
        assert_eq!(extract_answer("\\boxed{5}"), None);
        assert_eq!(extract_answer("The final answer is \\boxed{7}"), Some("7".to_string()));
        assert!(score("Yes", "Yes").correct);
        assert!(!score("Yes", "Yes").extraction_found_prefix);
    }

    #[test]
    fn odd_inputs_never_panic() {
        let cases = [
            "",
            "$",
            "}",
            "boxed{",
            "boxed{}",
            "$boxed{$",
            "The answer is:",
            "(",
            "()",
            "(é)",
            "\u{1c}\u{1f}",
            ".",
            "..",
            "?",
            "'",
            "[",
            "\u{130}\u{3a3}",
            "The answer is: $",
            "text{texttt{}",
            "\0",
            "\u{85}5\u{85}",
        ];
        for a in cases {
            for b in cases {
                let _ = score(a, b);
                let _ = extract_answer(a);
            }
        }
        assert!(evaluate_correctness("The answer is: $", ""));
        assert!(evaluate_correctness("(é)", "é"));
    }

    #[test]
    fn python_strip_includes_ascii_separators() {
        assert_eq!(preprocess_reference("\u{1c}Yes\u{1f}"), "yes");
        assert_eq!(preprocess_prediction("\u{1d}The answer is: no\u{1e}"), "no");
        // U+200B ZERO WIDTH SPACE is not whitespace for Python either.
        assert_eq!(preprocess_reference("\u{200b}x"), "\u{200b}x");
    }

    /// Differential check against an external oracle (the official code run under CPython),
    /// enabled only when `BBEH_ORACLE_VECTORS` names a JSON file in the vectors format.
    #[test]
    fn external_oracle_vectors_if_provided() {
        let Ok(path) = std::env::var("BBEH_ORACLE_VECTORS") else {
            return;
        };
        let text = std::fs::read_to_string(path).unwrap();
        let vs: Vec<Vector> = serde_json::from_str(&text).unwrap();
        let mut bad = Vec::new();
        for v in &vs {
            let d = score(&v.response, &v.reference);
            if d.correct != v.expected
                || d.prediction_after_preprocess != v.prediction_after_preprocess
                || d.reference_after_preprocess != v.reference_after_preprocess
            {
                bad.push(format!("{} {:?} {:?} -> {:?}", v.id, v.response, v.reference, d));
            }
        }
        assert!(bad.is_empty(), "{} of {} differ: {:#?}", bad.len(), vs.len(), &bad[..bad.len().min(20)]);
    }
}
