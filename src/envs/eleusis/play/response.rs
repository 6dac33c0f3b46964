//! Reading the player's reply (spec §4.2–§4.4): tag extraction shared with the rule compiler
//! (§3.2), Python-compatible JSON and card parsing, the failure causes of the published
//! `retry_causes`, and the per-turn attempt loop as a pure state machine (up to 3 attempts,
//! then a deterministic fallback card).

use serde::{Deserialize, Serialize};

use crate::envs::eleusis::analysis::results::{Confidence, LlmResponse};
use crate::envs::eleusis::game::Action;
use crate::envs::eleusis::game::card::{Card, Suit};
use crate::envs::eleusis::game::pyrandom::PyRandom;

pub mod pyjson;

pub use pyjson::{PyInt, PyJsonError, PyValue, loads, py_int, py_strip};

/// Attempts per turn in the reference (`llm_max_retries` = 3).
pub const MAX_ATTEMPTS: u32 = 3;

/// The three published failure causes of an attempt (`retry_causes[].cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCause {
    /// Unparsable reply, non-object JSON, non-string `card`, transport error.
    OtherError,
    /// JSON parsed but the card is missing, unparsable or not in the hand.
    CardParseError,
    /// The provider reported `finish_reason = length` (truncated reply).
    MaxTokenReached,
}

impl FailureCause {
    /// The string stored in results files.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureCause::OtherError => "other_error",
            FailureCause::CardParseError => "card_parse_error",
            FailureCause::MaxTokenReached => "max_token_reached",
        }
    }
}

/// Python `re.IGNORECASE` equivalents of an ASCII letter beyond its two cases.
fn extra_case(c: char) -> &'static [char] {
    match c.to_ascii_uppercase() {
        'I' => &['\u{130}', '\u{131}'],
        'K' => &['\u{212a}'],
        'S' => &['\u{17f}'],
        _ => &[],
    }
}

/// Length in bytes of `pat` matched case-insensitively (Python rules) at the start of `s`.
fn match_ci(s: &str, pat: &str) -> Option<usize> {
    let mut it = s.char_indices();
    for p in pat.chars() {
        let (_, c) = it.next()?;
        let ok = c == p || c.eq_ignore_ascii_case(&p) || extra_case(p).contains(&c);
        if !ok {
            return None;
        }
    }
    Some(it.next().map_or(s.len(), |(i, _)| i))
}

/// Finds `pat` (case-insensitive) in `s` at or after byte `from`: (start, end).
fn find_ci(s: &str, pat: &str, from: usize) -> Option<(usize, usize)> {
    let tail = s.get(from..)?;
    tail.char_indices().find_map(|(i, _)| match_ci(&tail[i..], pat).map(|n| (from + i, from + i + n)))
}

/// The last non-greedy `<tag>(.*?)</tag>` match (case-insensitive, dot matches newline).
fn last_tagged<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut pos = 0;
    let mut last = None;
    while let Some((_, content_start)) = find_ci(text, &open, pos) {
        let Some((content_end, next)) = find_ci(text, &close, content_start) else {
            break;
        };
        last = Some(&text[content_start..content_end]);
        pos = next;
    }
    last
}

/// Python `text[start:end]` where a missing closing fence gives `end = -1` (the reference
/// bug that drops the last character, §3.2).
fn fenced(text: &str, start: usize) -> &str {
    match text[start..].find("```") {
        Some(j) => &text[start..start + j],
        None => {
            let end = text.char_indices().next_back().map_or(0, |(i, _)| i);
            if end > start { &text[start..end] } else { "" }
        }
    }
}

/// The reference extraction of §3.2 (tag `ACTION` for the player, `CODE` for the compiler):
/// text after the first `</think>`; else-chain of the last non-empty tag match, a ```` ```json ````
/// fence, any fence, the whole text; always stripped (Python `str.strip`).
pub fn extract_tagged(reply: &str, tag: &str) -> String {
    let text = match reply.find("</think>") {
        Some(i) => &reply[i + "</think>".len()..],
        None => reply,
    };
    if let Some(content) = last_tagged(text, tag) {
        let content = py_strip(content);
        if !content.is_empty() {
            return content.to_owned();
        }
    }
    if let Some(i) = text.find("```json") {
        return py_strip(fenced(text, i + 7)).to_owned();
    }
    if let Some(i) = text.find("```") {
        return py_strip(fenced(text, i + 3)).to_owned();
    }
    py_strip(text).to_owned()
}

/// Why a card string does not name a hand card (all map to `card_parse_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardChoiceError {
    /// None of ♥ ♦ ♣ ♠ hearts diamonds clubs spades occurs in the string.
    #[error("no suit in card string {0:?}")]
    NoSuit(String),
    /// What is left after removing the suit is not A/J/Q/K or a Python `int`.
    #[error("invalid rank in card string {0:?}")]
    BadRank(String),
    /// A valid card, but not in the hand.
    #[error("card {0:?} is not in the hand")]
    NotInHand(String),
}

/// Parses the `card` field as the reference does (§4.3) and returns the first matching hand
/// card: suit marker search in fixed order, all occurrences removed, upper-cased rank,
/// `A J Q K` or Python `int()` (so `+7`, `0_7`, `٧` and `1` for an Ace all work).
pub fn parse_card_choice(raw: &str, hand: &[Card]) -> Result<Card, CardChoiceError> {
    const MARKERS: [(&str, Suit); 8] = [
        ("\u{2665}", Suit::Hearts),
        ("\u{2666}", Suit::Diamonds),
        ("\u{2663}", Suit::Clubs),
        ("\u{2660}", Suit::Spades),
        ("hearts", Suit::Hearts),
        ("diamonds", Suit::Diamonds),
        ("clubs", Suit::Clubs),
        ("spades", Suit::Spades),
    ];
    let s = py_strip(raw);
    let (marker, suit) = MARKERS.iter().find(|(m, _)| s.contains(m)).ok_or_else(|| CardChoiceError::NoSuit(raw.to_owned()))?;
    let rest = py_strip(&s.replace(marker, "")).to_uppercase();
    let rank: i64 = match rest.as_str() {
        "A" => 1,
        "J" => 11,
        "Q" => 12,
        "K" => 13,
        other => py_int(other).ok_or_else(|| CardChoiceError::BadRank(raw.to_owned()))?.saturating_i64(),
    };
    hand.iter().find(|c| c.suit == *suit && i64::from(c.rank) == rank).copied().ok_or_else(|| CardChoiceError::NotInHand(raw.to_owned()))
}

/// A response field that does not have the requested type (§8 Q13/Q14): accepted with the
/// reference semantics, but logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaViolation {
    /// A requested field is absent.
    MissingField(String),
    /// `guess_rule` is not a JSON boolean (Python truthiness applied).
    GuessRuleNotBool,
    /// `confidence_level` is not an integer (floats never trigger shadow checks).
    ConfidenceNotInt,
    /// `confidence_level` is an integer outside 0–10 (e.g. a percent value).
    ConfidenceOutOfRange,
    /// `tentative_rule` is present but not a string (no check is run).
    TentativeRuleNotString,
    /// `reasoning_summary` is present but not a string (its Python `str()` is used).
    ReasoningNotString,
}

/// A JSON-parsed reply object with the reference's reading of each field.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedResponse {
    /// The decoded object (key order and last-duplicate-wins as in Python).
    pub object: PyValue,
    /// Type deviations from the requested schema.
    pub violations: Vec<SchemaViolation>,
}

impl ParsedResponse {
    fn new(object: PyValue) -> Self {
        let mut violations = Vec::new();
        for key in ["reasoning_summary", "card", "tentative_rule", "confidence_level", "guess_rule"] {
            if object.get(key).is_none() {
                violations.push(SchemaViolation::MissingField(key.to_owned()));
            }
        }
        match object.get("guess_rule") {
            Some(PyValue::Bool(_)) | None => {}
            Some(_) => violations.push(SchemaViolation::GuessRuleNotBool),
        }
        match object.get("confidence_level") {
            Some(PyValue::Int(i)) if !(0..=10).contains(&i.saturating_i64()) => {
                violations.push(SchemaViolation::ConfidenceOutOfRange);
            }
            Some(PyValue::Int(_)) | None => {}
            Some(_) => violations.push(SchemaViolation::ConfidenceNotInt),
        }
        if matches!(object.get("tentative_rule"), Some(v) if !matches!(v, PyValue::Str(_))) {
            violations.push(SchemaViolation::TentativeRuleNotString);
        }
        if matches!(object.get("reasoning_summary"), Some(v) if !matches!(v, PyValue::Str(_))) {
            violations.push(SchemaViolation::ReasoningNotString);
        }
        ParsedResponse { object, violations }
    }

    /// The history text: `str(reasoning_summary)` when truthy, else empty.
    pub fn reasoning(&self) -> String {
        self.object.get("reasoning_summary").filter(|v| v.truthy()).map(PyValue::py_str).unwrap_or_default()
    }

    /// The guess text, only when `tentative_rule` is a string (§1.6 needs a non-empty one).
    pub fn tentative_rule(&self) -> Option<String> {
        match self.object.get("tentative_rule") {
            Some(PyValue::Str(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// `confidence_level` if it passes Python's `isinstance(c, int)` (bools → 0/1; big
    /// integers clamped to `i64`, which keeps `>= 5`); floats and others → none.
    pub fn confidence(&self) -> Option<i64> {
        match self.object.get("confidence_level") {
            Some(PyValue::Int(i)) => Some(i.saturating_i64()),
            Some(PyValue::Bool(b)) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// `guess_rule` under Python truthiness (`"false"` is truthy, missing is false).
    pub fn guess(&self) -> bool {
        self.object.get("guess_rule").is_some_and(PyValue::truthy)
    }

    /// The game action for `card`.
    pub fn to_action(&self, card: Card) -> Action {
        Action { card, reasoning: self.reasoning(), tentative_rule: self.tentative_rule(), confidence: self.confidence(), guess: self.guess() }
    }

    /// The `llm_response` record in the published format (lossy: NaN/Infinity → null, big
    /// integers → float, except `confidence_level`, whose big integers are clamped).
    pub fn to_llm_response(&self) -> LlmResponse {
        let field = |k: &str| self.object.get(k).map(PyValue::to_json);
        let confidence_level = self.object.get("confidence_level").map(|v| match v {
            PyValue::Bool(b) => Confidence::Bool(*b),
            PyValue::Int(i) => Confidence::Int(i.saturating_i64()),
            PyValue::Float(f) => Confidence::Float(*f),
            other => Confidence::Other(other.to_json()),
        });
        LlmResponse {
            reasoning_summary: field("reasoning_summary"),
            card: field("card"),
            tentative_rule: field("tentative_rule"),
            confidence_level,
            guess_rule: field("guess_rule"),
        }
    }
}

/// A failed attempt: its cause, a diagnostic, and the parsed object if JSON was decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseFailure {
    /// Published cause.
    pub cause: FailureCause,
    /// Human-readable reason.
    pub detail: String,
    /// The decoded reply, for `card_parse_error` (its tokens count in `turn.tokens`).
    pub parsed: Option<ParsedResponse>,
}

/// Parses one reply (§4.3): truncation, extraction, `json.loads`, object check, card.
pub fn parse_action(reply: &str, truncated: bool, hand: &[Card]) -> Result<(ParsedResponse, Card), ParseFailure> {
    let fail = |cause, detail: String, parsed| ParseFailure { cause, detail, parsed };
    if truncated {
        let detail = "reply truncated (finish_reason = length)".to_owned();
        return Err(fail(FailureCause::MaxTokenReached, detail, None));
    }
    let json = extract_tagged(reply, "ACTION");
    let value = loads(&json).map_err(|e| fail(FailureCause::OtherError, format!("invalid JSON: {e}"), None))?;
    if !matches!(value, PyValue::Dict(_)) {
        let detail = format!("'{}' object has no attribute 'get'", value.type_name());
        return Err(fail(FailureCause::OtherError, detail, None));
    }
    let parsed = ParsedResponse::new(value);
    let card_text = match parsed.object.get("card") {
        None => String::new(),
        Some(PyValue::Str(s)) => s.clone(),
        Some(other) => {
            let detail = format!("'{}' object has no attribute 'strip'", other.type_name());
            return Err(fail(FailureCause::OtherError, detail, None));
        }
    };
    match parse_card_choice(&card_text, hand) {
        Ok(card) => Ok((parsed, card)),
        Err(e) => Err(fail(FailureCause::CardParseError, e.to_string(), Some(parsed))),
    }
}

/// Token counts of one call or a sum of calls (§4.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Output tokens (reasoning included); what the metrics use.
    pub output_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// Answer tokens.
    pub answer_tokens: u64,
}

impl TokenCounts {
    fn add(&mut self, other: TokenCounts) {
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        self.answer_tokens = self.answer_tokens.saturating_add(other.answer_tokens);
    }
}

/// One failed attempt as recorded in `retry_causes` (plus a diagnostic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Attempt number, 1-based.
    pub attempt: u32,
    /// Published cause.
    pub cause: FailureCause,
    /// Why it failed.
    pub detail: String,
}

/// The outcome of a turn's attempts: the action to play and its bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnDecision {
    /// The action; after all attempts failed: the fallback card with no reasoning, no
    /// tentative rule, no confidence and no guess.
    pub action: Action,
    /// True when the card is the deterministic fallback.
    pub fallback: bool,
    /// Attempt number of the last failed attempt (0 if the first succeeded).
    pub retry_count: u32,
    /// The failed attempts.
    pub failures: Vec<AttemptRecord>,
    /// The accepted response (none on fallback).
    pub response: Option<ParsedResponse>,
    /// On fallback, the last JSON-parsed response of this turn (provenance only; unused).
    pub last_parsed: Option<ParsedResponse>,
    /// Tokens of attempts whose reply was JSON-parsed (`turn.tokens`).
    pub tokens_parsed: TokenCounts,
    /// Tokens of every call of the turn (`llm_usage.player`).
    pub tokens_all: TokenCounts,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptStep {
    /// Send the prompt for `attempt` (1-based); `retry` = append the retry suffix.
    Ask {
        /// Attempt number.
        attempt: u32,
        /// True for attempts ≥ 2.
        retry: bool,
    },
    /// The turn is decided.
    Decided(Box<TurnDecision>),
}

/// Why an attempt loop cannot be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttemptLoopError {
    /// No card to fall back on (cannot happen in a real round).
    #[error("the hand is empty")]
    EmptyHand,
}

/// The deterministic fallback of §8 Q5: `hand[randbelow(len(hand))]` with CPython's MT19937
/// seeded by `round_seed + 2^32 · turn` (a two-limb key).
pub fn fallback_card(hand: &[Card], round_seed: u64, turn: u32) -> Option<Card> {
    if hand.is_empty() {
        return None;
    }
    let seed = round_seed.wrapping_add(u64::from(turn) << 32);
    let i = PyRandom::new(seed).randbelow_usize(hand.len());
    hand.get(i).copied()
}

/// The per-turn attempt loop (§4.4) as a pure state machine: feed it replies, it says whether
/// to ask again or what to play.
///
/// **Difference from the reference (§4.4, §8 Q4):** the reference keeps the last parsed
/// response across turns and, when all attempts fail, reuses it (stale guesses re-submitted,
/// stale reasoning in the history); its fallback card comes from Python's unseeded global
/// RNG (§8 Q5). Here a turn whose attempts all fail plays [`fallback_card`] and produces no
/// guess, no shadow check and no reasoning (`llm_response = {}` in records), even when one
/// of its attempts was JSON-parsed but named a bad card.
#[derive(Debug, Clone)]
pub struct AttemptLoop {
    hand: Vec<Card>,
    fallback: Card,
    max_attempts: u32,
    attempts: u32,
    failures: Vec<AttemptRecord>,
    last_parsed: Option<ParsedResponse>,
    tokens_parsed: TokenCounts,
    tokens_all: TokenCounts,
    decided: Option<TurnDecision>,
}

impl AttemptLoop {
    /// A loop for `turn` of the round seeded `round_seed`, with [`MAX_ATTEMPTS`] attempts.
    pub fn new(hand: &[Card], round_seed: u64, turn: u32) -> Result<Self, AttemptLoopError> {
        let fallback = fallback_card(hand, round_seed, turn).ok_or(AttemptLoopError::EmptyHand)?;
        Ok(AttemptLoop {
            hand: hand.to_vec(),
            fallback,
            max_attempts: MAX_ATTEMPTS,
            attempts: 0,
            failures: Vec::new(),
            last_parsed: None,
            tokens_parsed: TokenCounts::default(),
            tokens_all: TokenCounts::default(),
            decided: None,
        })
    }

    /// Overrides the number of attempts (at least 1).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The next step without feeding anything (the first `Ask`, or the decision).
    pub fn step(&self) -> AttemptStep {
        match &self.decided {
            Some(d) => AttemptStep::Decided(Box::new(d.clone())),
            None => AttemptStep::Ask { attempt: self.attempts + 1, retry: self.attempts > 0 },
        }
    }

    /// Feeds the model's reply to the pending attempt.
    pub fn on_reply(&mut self, text: &str, truncated: bool, tokens: TokenCounts) -> AttemptStep {
        if self.decided.is_some() {
            return self.step();
        }
        self.attempts += 1;
        self.tokens_all.add(tokens);
        match parse_action(text, truncated, &self.hand) {
            Ok((parsed, card)) => {
                self.tokens_parsed.add(tokens);
                self.decide(parsed.to_action(card), false, Some(parsed))
            }
            Err(failure) => {
                if failure.parsed.is_some() {
                    self.tokens_parsed.add(tokens);
                    self.last_parsed = failure.parsed;
                }
                self.fail(failure.cause, failure.detail)
            }
        }
    }

    /// Records a call that produced no reply (provider error after its own retries).
    pub fn on_transport_error(&mut self, detail: &str, tokens: TokenCounts) -> AttemptStep {
        if self.decided.is_some() {
            return self.step();
        }
        self.attempts += 1;
        self.tokens_all.add(tokens);
        self.fail(FailureCause::OtherError, format!("call failed: {detail}"))
    }

    fn fail(&mut self, cause: FailureCause, detail: String) -> AttemptStep {
        self.failures.push(AttemptRecord { attempt: self.attempts, cause, detail });
        if self.attempts < self.max_attempts {
            return self.step();
        }
        let action = Action { card: self.fallback, reasoning: String::new(), tentative_rule: None, confidence: None, guess: false };
        self.decide(action, true, None)
    }

    fn decide(&mut self, action: Action, fallback: bool, response: Option<ParsedResponse>) -> AttemptStep {
        let decision = TurnDecision {
            action,
            fallback,
            retry_count: self.failures.last().map_or(0, |f| f.attempt),
            failures: self.failures.clone(),
            response,
            last_parsed: if fallback { self.last_parsed.clone() } else { None },
            tokens_parsed: self.tokens_parsed,
            tokens_all: self.tokens_all,
        };
        self.decided = Some(decision);
        self.step()
    }
}

#[cfg(test)]
mod tests;
