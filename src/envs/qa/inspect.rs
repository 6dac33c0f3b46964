//! Ports of Inspect AI's built-in scorers (`inspect_ai` 0.3.285, `scorer/_common.py`,
//! `_match.py`, `_classification.py`, `_pattern.py`, `_answer.py`, `_choice.py` and
//! `solver/_multiple_choice.py`), so a user who knows `match(numeric=True)` or `choice()`
//! gets the same verdict here. Python's string and float semantics come from
//! [`crate::envs::pystr`]; the deliberate differences are listed in `docs/tasks.md`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::envs::pystr::{py_float, py_isspace, py_strip};

/// Where `match` looks for the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// The answer starts with the target.
    Begin,
    /// The answer ends with the target (Inspect's default).
    End,
    /// The target is anywhere in the answer.
    Any,
    /// The answer is the target.
    Exact,
}

/// What `answer` extracts after `ANSWER:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerPattern {
    /// One letter (multiple choice).
    Letter,
    /// One word.
    Word,
    /// The rest of the line.
    Line,
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a fixed pattern compiles")
}

/// Python's `str.casefold`, close enough for answers: lower case, with `ß` folded to `ss`.
#[must_use]
pub fn casefold(s: &str) -> String {
    let lower = s.to_lowercase();
    if lower.contains('ß') { lower.replace('ß', "ss") } else { lower }
}

const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// `inspect_ai._util.text.strip_punctuation`: strip ASCII whitespace and punctuation at both ends.
fn strip_punctuation(s: &str) -> &str {
    s.trim_matches(|c: char| PUNCTUATION.contains(c) || " \t\n\r\x0b\x0c".contains(c))
}

/// `strip_numeric_punctuation`: unescape `\$`, drop currency symbols, thousands separators
/// and `*`/`_`, and drop a `.` not followed by a digit.
fn strip_numeric_punctuation(s: &str) -> String {
    static ESCAPED: LazyLock<Regex> = LazyLock::new(|| re(r"\\([$,£€*_])"));
    let s = ESCAPED.replace_all(s, "$1");
    let kept: Vec<char> = s.chars().filter(|c| !"$,£€*_".contains(*c)).collect();
    let mut out = String::with_capacity(kept.len());
    for (i, c) in kept.iter().enumerate() {
        if *c == '.' && kept.get(i + 1).is_none_or(|n| crate::envs::pystr::decimal_value(*n).is_none()) {
            continue;
        }
        out.push(*c);
    }
    out
}

/// `_parse_number`: a finite float after trimming sentence punctuation.
fn parse_number(s: &str, trim_punctuation: bool) -> Option<f64> {
    let s = if trim_punctuation { s.trim_matches(|c: char| "!?:;()[]{}'\"`".contains(c)) } else { s };
    py_float(s).filter(|x| x.is_finite())
}

/// Python's `format(x, ".{precision}g")`.
#[must_use]
pub fn format_g(x: f64, precision: usize) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let p = i32::try_from(precision).unwrap_or(i32::MAX);
    if exp < -4 || exp >= p {
        let mantissa = if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = usize::try_from(p - 1 - exp).unwrap_or(0);
        let fixed = format!("{x:.decimals$}");
        if fixed.contains('.') { fixed.trim_end_matches('0').trim_end_matches('.').to_owned() } else { fixed }
    }
}

/// Python's `repr(float)` (`str(float(x))`).
#[must_use]
pub fn float_repr(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..16).contains(&exp) {
        return format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let text = format!("{x}");
    if text.contains('.') { text } else { format!("{text}.0") }
}

fn normalize_number(s: &str, trim_punctuation: bool) -> String {
    parse_number(s, trim_punctuation).map_or_else(|| s.to_owned(), |x| format_g(x, 5))
}

fn first_number_normalized<'a>(mut words: impl Iterator<Item = &'a str>) -> String {
    words.find(|w| parse_number(w, true).is_some()).map(|w| normalize_number(w, true)).unwrap_or_default()
}

fn split_ws(s: &str) -> Vec<&str> {
    // `re.split(r"\s+", s)`: empty pieces only at the ends.
    s.split(py_isspace).filter(|w| !w.is_empty()).collect()
}

/// `match_str`: whether `value` matches `target` at `location` (whitespace stripped, case
/// folded, punctuation stripped, or numbers compared after normalising).
#[must_use]
pub fn match_str(value: &str, target: &str, location: Location, ignore_case: bool, numeric: bool) -> bool {
    let mut v = py_strip(value).to_owned();
    let mut t = py_strip(target).to_owned();
    if ignore_case {
        v = casefold(&v);
        t = casefold(&t);
    }
    if numeric {
        t = strip_numeric_punctuation(&t);
    }
    if numeric && parse_number(&t, true).is_some() {
        let v = strip_numeric_punctuation(&v);
        let t = normalize_number(&t, true);
        let words = split_ws(&v);
        return match location {
            Location::Begin => first_number_normalized(words.into_iter()) == t,
            Location::End => first_number_normalized(words.into_iter().rev()) == t,
            Location::Exact => normalize_number(&v, false) == t,
            Location::Any => words.iter().filter(|w| parse_number(w, true).is_some()).any(|w| normalize_number(w, true) == t),
        };
    }
    let (v, t) = (strip_punctuation(&v), strip_punctuation(&t));
    match location {
        Location::Begin => v.starts_with(t),
        Location::End => v.ends_with(t),
        Location::Exact => v == t,
        Location::Any => v.contains(t),
    }
}

/// `match`: any target matches.
#[must_use]
pub fn match_any(completion: &str, targets: &[String], location: Location, ignore_case: bool, numeric: bool) -> bool {
    targets.iter().any(|t| match_str(completion, t, location, ignore_case, numeric))
}

/// `includes`: some target is a substring of the answer.
#[must_use]
pub fn includes(completion: &str, targets: &[String], ignore_case: bool) -> bool {
    if ignore_case {
        let v = casefold(completion);
        targets.iter().any(|t| v.contains(&casefold(t)))
    } else {
        targets.iter().any(|t| completion.contains(t.as_str()))
    }
}

fn is_finite_number(s: &str) -> bool {
    py_float(s).is_some_and(f64::is_finite)
}

fn remove_punc(text: &str) -> String {
    if is_finite_number(text) {
        return text.to_owned();
    }
    let stripped = strip_punctuation(text);
    if is_finite_number(stripped) {
        return stripped.to_owned();
    }
    text.chars().filter(|c| !PUNCTUATION.contains(*c)).collect()
}

fn normalize_token(token: &str) -> String {
    static ARTICLES: LazyLock<Regex> = LazyLock::new(|| re(r"\b(a|an|the)\b"));
    let token = remove_punc(&casefold(token));
    let token = match py_float(&token).filter(|x| x.is_finite()) {
        Some(x) => float_repr(x),
        None => token,
    };
    let token = ARTICLES.replace_all(&token, " ");
    split_ws(&token).join(" ")
}

/// `_normalize` of the `exact` and `f1` scorers.
#[must_use]
pub fn normalize(text: &str, stop_words: &[String]) -> String {
    let stops: Vec<String> = stop_words.iter().map(|w| normalize_token(w)).collect();
    let tokens: Vec<String> = text.split([' ', '-']).map(normalize_token).filter(|t| !stops.contains(t)).filter(|t| !py_strip(t).is_empty()).collect();
    py_strip(&tokens.join(" ")).to_owned()
}

/// `exact`: the normalised answer equals a (non-empty) normalised target.
#[must_use]
pub fn exact(completion: &str, targets: &[String]) -> bool {
    let answer = normalize(completion, &[]);
    targets.iter().map(|t| normalize(t, &[])).any(|t| !t.is_empty() && t == answer)
}

fn word_counts(text: &str, stop_words: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for w in split_ws(&normalize(text, stop_words)) {
        *counts.entry(w.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// `f1`: the best token F1 over targets, rounded to two decimals.
#[must_use]
pub fn f1(completion: &str, targets: &[String], stop_words: &[String]) -> f64 {
    let answer = word_counts(completion, stop_words);
    let mut best = 0.0f64;
    for t in targets {
        let target = word_counts(t, stop_words);
        if target.is_empty() {
            continue;
        }
        let common: usize = answer.iter().map(|(w, n)| (*n).min(target.get(w).copied().unwrap_or(0))).sum();
        let total = |c: &BTreeMap<String, usize>| c.values().sum::<usize>() as f64;
        let precision = if answer.is_empty() { 1.0 } else { common as f64 / total(&answer) };
        let recall = common as f64 / total(&target);
        let score = if precision == 0.0 && recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        best = best.max(score);
    }
    format!("{best:.2}").parse().unwrap_or(best)
}

/// `pattern`: the regex's groups (or whole match) compared with the targets.
#[must_use]
pub fn pattern(regex: &Regex, completion: &str, targets: &[String], ignore_case: bool, match_all: bool) -> bool {
    let Some(caps) = regex.captures(completion) else { return false };
    let groups: Vec<Option<&str>> =
        if caps.len() > 1 { caps.iter().skip(1).map(|m| m.map(|m| m.as_str())).collect() } else { vec![caps.get(0).map(|m| m.as_str())] };
    let lower = |s: &str| if ignore_case { crate::envs::pystr::py_lower(s) } else { s.to_owned() };
    let targets: Vec<String> = targets.iter().map(|t| lower(t)).collect();
    let hit = |m: &str| targets.contains(&lower(m));
    if match_all {
        let present: Vec<&str> = groups.iter().flatten().copied().collect();
        // Inspect answers `target.text` (the targets joined): truthy unless it is empty.
        !present.is_empty() && present.iter().all(|m| hit(m)) && !targets.concat().is_empty()
    } else {
        groups.iter().flatten().find(|m| hit(m)).is_some_and(|m| !m.is_empty())
    }
}

fn no_later_answer(rest: &str) -> bool {
    static LATER: LazyLock<Regex> = LazyLock::new(|| re(r"(?is)ANSWER\s*:"));
    !LATER.is_match(rest)
}

/// What Inspect's `AnswerPattern` regex captures: the value after the last `ANSWER:`.
/// (Its lookarounds are evaluated by hand: the `regex` crate has none.)
#[must_use]
pub fn extract_answer(kind: AnswerPattern, completion: &str) -> Option<&str> {
    static LETTER: LazyLock<Regex> = LazyLock::new(|| re(r"(?is)^ANSWER\s*:\s*([A-Za-z])(?:[^\w]|$)"));
    static WORD_HEAD: LazyLock<Regex> = LazyLock::new(|| re(r"(?is)^ANSWER\s*:\s*"));
    static WORD_TAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^[.,;:!?]?\s*(?:\n|\z)"));
    static LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)ANSWER\s*:\s*([^\n]+)\s*\z"));
    if kind == AnswerPattern::Line {
        return LINE.captures(completion).and_then(|c| c.get(1)).map(|m| m.as_str());
    }
    let lower = completion.to_ascii_lowercase();
    for (start, _) in lower.match_indices("answer") {
        let text = &completion[start..];
        match kind {
            AnswerPattern::Letter => {
                if let Some(c) = LETTER.captures(text)
                    && no_later_answer(&text[c.get(0).map_or(0, |m| m.end())..])
                {
                    return c.get(1).map(|m| m.as_str());
                }
            }
            AnswerPattern::Word => {
                let Some(head) = WORD_HEAD.find(text) else { continue };
                let body = &text[head.end()..];
                for (end, c) in body.char_indices() {
                    if py_isspace(c) {
                        break;
                    }
                    let end = end + c.len_utf8();
                    let rest = &body[end..];
                    if WORD_TAIL.is_match(rest) && no_later_answer(rest) {
                        return Some(&body[..end]);
                    }
                }
            }
            AnswerPattern::Line => {}
        }
    }
    None
}

/// `answer`: the extracted value equals a target (case-insensitive).
#[must_use]
pub fn answer(kind: AnswerPattern, completion: &str, targets: &[String]) -> bool {
    extract_answer(kind, completion)
        .is_some_and(|m| !m.is_empty() && targets.iter().any(|t| crate::envs::pystr::py_lower(t) == crate::envs::pystr::py_lower(m)))
}

/// `answer_character`: `A`…`Z`, then `1`, `2`, ….
#[must_use]
pub fn letter(index: usize) -> String {
    if index < 26 { char::from(b'A' + u8::try_from(index).unwrap_or(0)).to_string() } else { (index - 25).to_string() }
}

/// `answer_index`: the position a letter (or number past `Z`) names.
#[must_use]
pub fn letter_index(token: &str) -> Option<usize> {
    let mut chars = token.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_alphabetic() => (c.to_uppercase().next()? as usize).checked_sub('A' as usize),
        _ if !token.is_empty() && token.chars().all(|c| c.is_ascii_digit()) => token.parse::<usize>().ok().filter(|n| *n > 0).map(|n| n + 25),
        _ => None,
    }
}

/// `parse_answers` of the `multiple_choice` solver: the letters the model chose.
#[must_use]
pub fn parse_choice_answers(completion: &str, n_choices: usize, multiple_correct: bool) -> Vec<String> {
    static DOLLARS: LazyLock<Regex> = LazyLock::new(|| re(r"\$\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\$"));
    static BOLD: LazyLock<Regex> = LazyLock::new(|| re(r"\*\*\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\*\*"));
    static PAREN: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)(^|[:,])(\s*)\(([A-Za-z\d])\)"));
    static PAREN_AFTER: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(?:,|\.|\n|\z)"));
    static STRICT: LazyLock<Regex> = LazyLock::new(|| re(r"(?im)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)"));
    static LOOSE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)"));
    let text = DOLLARS.replace_all(completion, "$1");
    let text = BOLD.replace_all(&text, "$1");
    // `(?=\s*(?:,|\.|\n|\Z))` after the parenthesised letter, checked by hand.
    let mut out = String::with_capacity(text.len());
    let (mut pos, mut copied) = (0, 0);
    while pos <= text.len() {
        let Some(c) = PAREN.captures_at(&text, pos) else { break };
        let whole = c.get(0).map_or(0..0, |m| m.range());
        if PAREN_AFTER.is_match(&text[whole.end..]) {
            out.push_str(&text[copied..whole.start]);
            for g in 1..=3 {
                out.push_str(c.get(g).map_or("", |m| m.as_str()));
            }
            copied = whole.end;
            pos = whole.end.max(whole.start + 1);
        } else {
            pos = whole.start + text[whole.start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out.push_str(&text[copied..]);
    let mut found: Vec<&str> = STRICT.captures_iter(&out).filter_map(|c| c.get(1)).map(|m| m.as_str()).collect();
    if found.is_empty() {
        found = LOOSE.captures_iter(&out).filter_map(|c| c.get(1)).map(|m| m.as_str()).collect();
    }
    let Some(last) = found.last() else { return Vec::new() };
    let matched = py_strip(last).trim_end_matches('.').to_uppercase();
    let allowed: Vec<String> = (0..n_choices).map(letter).collect();
    let set = |tokens: Vec<String>| -> Option<Vec<String>> {
        let mut tokens = tokens;
        tokens.sort();
        tokens.dedup();
        tokens.iter().all(|t| allowed.contains(t)).then_some(tokens)
    };
    if multiple_correct {
        let joined = matched.replace(" AND ", ",").replace(' ', "");
        if let Some(s) = set(joined.split(',').filter(|t| !t.is_empty()).map(str::to_owned).collect()) {
            return s;
        }
        if let Some(s) = set(joined.chars().map(String::from).collect()) {
            return s;
        }
    } else {
        let tokens: Vec<&str> = matched.split(',').filter(|t| !t.is_empty()).collect();
        if tokens.len() == 1 && allowed.iter().any(|a| a == tokens[0]) {
            return vec![tokens[0].to_owned()];
        }
    }
    Vec::new()
}

/// The positions a `choice` target names (`"A"`, `"A,C"`, `"AC"`, `"27"`), in target order;
/// `Err` names a token that is not a letter.
pub fn target_positions(targets: &[String]) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for t in targets {
        for token in t.replace(',', " ").split(py_isspace).filter(|s| !s.is_empty()) {
            if token.chars().all(|c| c.is_numeric()) {
                out.push(letter_index(token).ok_or_else(|| token.to_owned())?);
            } else {
                for c in token.chars() {
                    out.push(letter_index(&c.to_string()).ok_or_else(|| c.to_string())?);
                }
            }
        }
    }
    Ok(out)
}

/// `choice`: the choices the model marked (mapped back through `order`, the shuffle: the
/// model saw original choice `order[i]` at position `i`) are exactly the target's.
#[must_use]
pub fn choice(completion: &str, targets: &[usize], order: &[usize], multiple_correct: bool) -> bool {
    let chosen = parse_choice_answers(completion, order.len(), multiple_correct);
    let mut selected: Vec<usize> = chosen.iter().filter_map(|l| letter_index(l)).filter_map(|i| order.get(i).copied()).collect();
    selected.sort_unstable();
    selected.dedup();
    let mut want = targets.to_vec();
    want.sort_unstable();
    selected == want
}

/// The grade a judge's reply gives, parsed as `model_graded_qa` does (the last `GRADE: X`,
/// spelled-out grades accepted), or `None` when it gives none of `offered`.
#[must_use]
pub fn parse_grade(reply: &str, offered: &[String]) -> Option<String> {
    static GRADE: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)GRADE[\s\x{200b}\x{200c}\x{200d}\x{200e}\x{200f}\x{2060}\x{2063}\x{feff}]*:[\s\x{200b}\x{200c}\x{200d}\x{200e}\x{200f}\x{2060}\x{2063}\x{feff}]*(\w*)",
        )
    });
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut last = None;
    for c in GRADE.captures_iter(reply) {
        let (Some(whole), Some(word)) = (c.get(0), c.get(1)) else { continue };
        // `(?<!\w)GRADE(?!\w)`: the word stands alone.
        let before = reply[..whole.start()].chars().next_back();
        let after = reply[whole.start() + 5..].chars().next();
        if !is_word(before) && !is_word(after) {
            last = Some(word.as_str());
        }
    }
    let value = last?;
    let value = match value.trim().to_lowercase().as_str() {
        "c" | "correct" => "C".to_owned(),
        "i" | "incorrect" => "I".to_owned(),
        "p" | "partial" => "P".to_owned(),
        v if v.chars().count() == 1 => v.to_uppercase(),
        _ => return None,
    };
    offered.contains(&value).then_some(value)
}

#[cfg(test)]
mod tests;
