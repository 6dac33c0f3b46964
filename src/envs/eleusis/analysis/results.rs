//! Typed model of the reference `results.json` (spec §6) and a tolerant reader for it: plain
//! or gzip input (detected by magic bytes), unknown fields ignored, optional fields may be
//! missing or null, and every schema error names its JSON path (`rounds[3].turns[5].tokens`).
//! Nothing here trusts the stale `statistics` block (§8 Q12); it is kept only as raw JSON.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Upper bound on a decompressed results file; the published ones are ≈ 2.5 MB, so this only
/// stops a gzip bomb from exhausting memory.
pub const MAX_RESULTS_BYTES: u64 = 1 << 30;

/// Why a results file could not be read; schema errors carry the JSON path of the culprit.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The file could not be opened or read (the cause follows in the error chain).
    #[error("cannot read {path}")]
    Io {
        /// File path.
        path: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The input starts with the gzip magic bytes but does not decompress.
    #[error("corrupt gzip stream")]
    Gzip(#[source] std::io::Error),
    /// The (decompressed) input exceeds [`MAX_RESULTS_BYTES`].
    #[error("decompressed input exceeds {limit} bytes")]
    TooLarge {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// The input is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Parser message.
        message: String,
    },
    /// The JSON does not match the results schema at `path`.
    #[error("at {path}: {message}")]
    Schema {
        /// JSON path of the offending value, e.g. `rounds[3].turns[5].tokens.output_tokens`.
        path: String,
        /// What was wrong there.
        message: String,
    },
}

/// Null or missing → `T::default()`; lets list/object fields be `null` without failing.
fn null_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// A whole results file: run configuration, the played rounds and the rule library.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    /// Run timestamp string.
    pub timestamp: Option<String>,
    /// Run folder name (`solo_evaluation_<date>_<tag>`).
    pub folder_name: Option<String>,
    /// Flat run configuration (key sets vary between runs, §6.2).
    pub config: RunConfig,
    /// The rounds, in file order.
    pub rounds: Vec<RoundRecord>,
    /// Run-time aggregates; stale in published files, never used (§8 Q12).
    pub statistics: Option<Value>,
    /// Resume state; only `rules_library` is used (rule complexity lookup).
    pub checkpoint: Option<Checkpoint>,
}

/// The `config` object; unnamed keys are kept in `other`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Display name of the model, the `model` key of every analysis output.
    pub player: Option<String>,
    /// models.yaml key of the model.
    pub player_model: Option<String>,
    /// Cards in hand (12).
    pub hand_size: Option<usize>,
    /// Turns per round (30).
    pub max_turns: Option<u32>,
    /// Points per wrong formal guess (2).
    pub wrong_guess_penalty: Option<i64>,
    /// Game seed (42).
    pub seed: Option<u64>,
    /// Nested game settings of later reference versions (`config.game.max_turns`).
    pub game: Option<GameSection>,
    /// Every other key, verbatim.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `config.game` of later reference versions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameSection {
    /// Cards in hand.
    pub hand_size: Option<usize>,
    /// Turns per round.
    pub max_turns: Option<u32>,
    /// Points per wrong formal guess.
    pub wrong_guess_penalty: Option<i64>,
}

impl RunConfig {
    /// `max_turns` as the reference analysis reads it (`config.game` first), default 30.
    pub fn max_turns(&self) -> u32 {
        self.game.as_ref().and_then(|g| g.max_turns).or(self.max_turns).unwrap_or(30)
    }

    /// Wrong-guess penalty (`config.game` first), default 2 (the reference's constant).
    pub fn wrong_guess_penalty(&self) -> i64 {
        self.game.as_ref().and_then(|g| g.wrong_guess_penalty).or(self.wrong_guess_penalty).unwrap_or(2)
    }

    /// Hand size (`config.game` first), default 12.
    pub fn hand_size(&self) -> usize {
        self.game.as_ref().and_then(|g| g.hand_size).or(self.hand_size).unwrap_or(12)
    }
}

/// The `checkpoint` object (resume state); `rule_factory_state` may be stale and is ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Rounds completed when the file was written.
    pub completed_rounds: Option<u32>,
    /// Rounds planned.
    pub total_rounds: Option<u32>,
    /// Full copies of the library rules: the analysis takes rule complexity from here.
    #[serde(default, deserialize_with = "null_default")]
    pub rules_library: Vec<LibraryRule>,
}

/// One `checkpoint.rules_library` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LibraryRule {
    /// Rule name.
    pub name: Option<String>,
    /// Verbatim description (join key with `rounds[].rule_description`).
    pub description: Option<String>,
    /// Python body of the rule.
    pub code: Option<String>,
    /// Unseeded simulation estimate; informational only.
    pub avg_acceptance_rate: Option<f64>,
    /// CPython AST node count of `code`.
    pub node_count: Option<u32>,
    /// Cyclomatic complexity of `code`.
    pub cyclomatic_complexity: Option<u32>,
}

/// One round (§6.3). `score`/`turn_count` carry the published quirks (§8 Q1/Q2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// 1-based round number.
    pub round_number: u32,
    /// Library rule name.
    #[serde(default)]
    pub rule_name: String,
    /// Repetition index 0–2 (part of the seed); needed for replay.
    pub batch_round_index: Option<u32>,
    /// Stored turn count: W − 1 or W on success, 30 (or 31) otherwise.
    pub turn_count: i64,
    /// Verbatim rule description; the analysis join key.
    pub rule_description: String,
    /// Python body of the secret rule.
    pub rule_code: Option<String>,
    /// A correct formal guess happened.
    pub success: bool,
    /// Stored (patched) score; the published tables use it verbatim.
    pub score: i64,
    /// Stored `max(0, score)`.
    pub floored_score: Option<i64>,
    /// Stored first turn with any correct check.
    pub first_correct_turn: Option<u32>,
    /// Stored no-stakes score.
    pub no_stakes_score: Option<i64>,
    /// Stored F (all wrong formal guesses).
    pub failed_guesses: Option<u32>,
    /// `correct_guess` or `max_turns`.
    pub game_over_reason: Option<String>,
    /// Token usage of the player and the rule compiler.
    pub llm_usage: Option<LlmUsage>,
    /// Turns 1..n in order.
    #[serde(default, deserialize_with = "null_default")]
    pub turns: Vec<TurnEntry>,
    /// Wall-clock duration of the round.
    pub wall_clock_seconds: Option<f64>,
}

/// `llm_usage` of a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmUsage {
    /// Rule-compiler calls of the round.
    pub rule_compiler: Option<Usage>,
    /// Player calls of the round (failed calls included).
    pub player: Option<Usage>,
}

/// Token and timing counters of one LLM role in a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Output tokens (reasoning included); what the token metrics use.
    pub output_tokens: Option<u64>,
    /// Older files' name for `output_tokens`.
    pub total_tokens: Option<u64>,
    /// Reasoning tokens (estimated for some providers).
    pub reasoning_tokens: Option<u64>,
    /// Answer tokens.
    pub answer_tokens: Option<u64>,
    /// Cost (null in published files).
    pub cost_usd: Option<f64>,
    /// Summed call durations.
    pub duration_seconds: Option<f64>,
    /// Output throughput.
    pub throughput_tokens_per_sec: Option<f64>,
    /// Number of API calls.
    pub call_count: Option<u64>,
    /// Continuation calls.
    pub continuation_calls: Option<u64>,
    /// Calls that needed a continuation.
    pub calls_requiring_continuation: Option<u64>,
    /// Provider name.
    pub provider: Option<String>,
}

impl Usage {
    /// Output tokens as the reference analysis reads them (`output_tokens`, else
    /// `total_tokens`, else 0).
    pub fn output(&self) -> u64 {
        self.output_tokens.or(self.total_tokens).unwrap_or(0)
    }
}

/// One turn (§6.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnEntry {
    /// 1-based turn number.
    pub turn_number: u32,
    /// Display name of the player.
    pub player: Option<String>,
    /// Board string before the play.
    pub mainline_state: Option<String>,
    /// Hand before the play, as card strings.
    #[serde(default, deserialize_with = "null_default")]
    pub hand: Vec<String>,
    /// The parsed (possibly stale, §4.4) model response; `{}` if none.
    #[serde(default, deserialize_with = "null_default")]
    pub llm_response: LlmResponse,
    /// The card actually played and its verdict.
    pub action_result: Option<ActionResult>,
    /// The formal or shadow check of this turn.
    pub guess_attempt: Option<GuessAttempt>,
    /// Output tokens of the turn's parsed attempts.
    pub tokens: Option<TurnTokens>,
    /// Attempt number of the last failed attempt (3 = random fallback card).
    pub retry_count: Option<u32>,
    /// Causes of failed attempts.
    #[serde(default, deserialize_with = "null_default")]
    pub retry_causes: Vec<RetryCause>,
}

/// The model's parsed response. Values are unvalidated (§4.2), so loosely typed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// One-sentence rationale (normally a string).
    pub reasoning_summary: Option<Value>,
    /// Requested card (normally a string).
    pub card: Option<Value>,
    /// Current hypothesis (normally a string).
    pub tentative_rule: Option<Value>,
    /// Confidence 0–10; may be an int, a float or a bool.
    pub confidence_level: Option<Confidence>,
    /// Formal-guess flag, read with Python truthiness (§8 Q13).
    pub guess_rule: Option<Value>,
}

impl LlmResponse {
    /// `guess_rule` under Python truthiness (missing/null → false).
    pub fn guess_flag(&self) -> bool {
        self.guess_rule.as_ref().is_some_and(truthy)
    }

    /// The tentative rule when it is a string.
    pub fn tentative_text(&self) -> Option<&str> {
        self.tentative_rule.as_ref().and_then(Value::as_str)
    }

    /// The reasoning summary when it is a string.
    pub fn reasoning_text(&self) -> Option<&str> {
        self.reasoning_summary.as_ref().and_then(Value::as_str)
    }
}

/// Python truthiness of a JSON value (`"false"` is truthy, `0`, `""`, `[]`, `{}` are not).
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A `confidence_level` as found in the data: the reference only validates it implicitly
/// (shadow checks need an `int`, the analysis casts numbers), so all JSON types are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Confidence {
    /// A JSON boolean (an `int` for Python's type test, value 0/1).
    Bool(bool),
    /// A JSON integer.
    Int(i64),
    /// A JSON float (e.g. 9.5); never triggers a shadow check.
    Float(f64),
    /// Anything else (string, list, huge integer …); ignored by every metric.
    Other(Value),
}

impl Confidence {
    /// Value for the shadow-check test `isinstance(c, int) and c >= 5` (bool → 0/1).
    pub fn as_python_int(&self) -> Option<i64> {
        match self {
            Confidence::Bool(b) => Some(i64::from(*b)),
            Confidence::Int(i) => Some(*i),
            Confidence::Float(_) | Confidence::Other(_) => None,
        }
    }

    /// Numeric value as pandas sees it (bool → 0/1, NaN and non-numbers → none).
    pub fn numeric(&self) -> Option<f64> {
        match self {
            Confidence::Bool(b) => Some(f64::from(u8::from(*b))),
            // Confidence values are tiny; the cast is exact for |i| < 2^53.
            Confidence::Int(i) => Some(*i as f64),
            Confidence::Float(f) if !f.is_nan() => Some(*f),
            Confidence::Float(_) | Confidence::Other(_) => None,
        }
    }

    /// The level after pandas `astype(int)` (truncation toward zero); none if not finite.
    pub fn truncated(&self) -> Option<i64> {
        match self {
            Confidence::Int(i) => Some(*i),
            _ => self
                .numeric()
                .filter(|f| f.is_finite())
                // Saturating float→int cast; only 5..=10 is ever used.
                .map(|f| f.trunc() as i64),
        }
    }
}

/// `action_result` of a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    /// Always `PlayCardAction`.
    pub action: Option<String>,
    /// Card string actually played (possibly the random fallback).
    pub card: Option<String>,
    /// Secret-rule verdict.
    pub accepted: Option<bool>,
    /// Always true.
    pub success: Option<bool>,
}

/// `guess_attempt` of a turn: a formal guess, or a shadow check (`shadow: true`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuessAttempt {
    /// Judged text.
    pub guess: Option<String>,
    /// Equivalence verdict.
    pub correct: Option<bool>,
    /// Verdict message of the judge.
    pub reasoning: Option<String>,
    /// Compiled Python body of the guess.
    pub guessed_code: Option<String>,
    /// AST node count of the guessed code (null without code).
    pub node_count: Option<u32>,
    /// Cyclomatic complexity of the guessed code (null without code).
    pub cyclomatic_complexity: Option<u32>,
    /// `true` for shadow checks; absent for formal guesses.
    pub shadow: Option<bool>,
}

impl GuessAttempt {
    /// True for a shadow check (no game consequence).
    pub fn is_shadow(&self) -> bool {
        self.shadow.unwrap_or(false)
    }

    /// True iff the verdict is exactly `true` (the reference's `correct is True`).
    pub fn is_correct(&self) -> bool {
        self.correct == Some(true)
    }
}

/// `tokens` of a turn (parsed attempts only, §4.5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnTokens {
    /// Output tokens (reasoning included).
    pub output_tokens: Option<u64>,
    /// Reasoning tokens.
    pub reasoning_tokens: Option<u64>,
    /// Answer tokens.
    pub answer_tokens: Option<u64>,
}

/// One `retry_causes` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryCause {
    /// Attempt number 1–3.
    pub attempt: Option<u32>,
    /// `max_token_reached`, `card_parse_error` or `other_error`.
    pub cause: Option<String>,
}

impl TurnEntry {
    /// Output tokens of the turn (0 when missing, like the reference's `.get(…, 0)`).
    pub fn output_tokens(&self) -> u64 {
        self.tokens.as_ref().and_then(|t| t.output_tokens).unwrap_or(0)
    }
}

impl ResultsFile {
    /// The model's display name: `config.player`, else `player_model`, else the folder name.
    pub fn model_name(&self) -> &str {
        self.config.player.as_deref().or(self.config.player_model.as_deref()).or(self.folder_name.as_deref()).unwrap_or("unknown")
    }

    /// The rules library of the checkpoint (empty when absent).
    pub fn rules_library(&self) -> &[LibraryRule] {
        self.checkpoint.as_ref().map_or(&[][..], |c| c.rules_library.as_slice())
    }
}

/// Reads and parses a results file (plain or gzip JSON).
pub fn read_results(path: &Path) -> Result<ResultsFile, ResultsError> {
    let io = |source| ResultsError::Io { path: path.display().to_string(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut raw = Vec::new();
    file.take(MAX_RESULTS_BYTES + 1).read_to_end(&mut raw).map_err(io)?;
    if raw.len() as u64 > MAX_RESULTS_BYTES {
        return Err(ResultsError::TooLarge { limit: MAX_RESULTS_BYTES });
    }
    parse_results(&raw)
}

/// Parses results bytes; gzip is recognised by its magic bytes `1f 8b`.
pub fn parse_results(bytes: &[u8]) -> Result<ResultsFile, ResultsError> {
    let value: Value = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes).take(MAX_RESULTS_BYTES + 1).read_to_end(&mut text).map_err(ResultsError::Gzip)?;
        if text.len() as u64 > MAX_RESULTS_BYTES {
            return Err(ResultsError::TooLarge { limit: MAX_RESULTS_BYTES });
        }
        serde_json::from_slice(&text).map_err(json_error)?
    } else {
        serde_json::from_slice(bytes).map_err(json_error)?
    };
    from_value(&value)
}

fn json_error(e: serde_json::Error) -> ResultsError {
    ResultsError::Json { line: e.line(), column: e.column(), message: e.to_string() }
}

/// Converts an already parsed JSON document into a [`ResultsFile`].
pub fn from_value(value: &Value) -> Result<ResultsFile, ResultsError> {
    let Value::Object(top) = value else {
        return Err(schema("$", "the top level must be a JSON object"));
    };
    let field = |key: &str| top.get(key).filter(|v| !v.is_null());
    let rounds = match field("rounds") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().enumerate().map(|(i, r)| decode::<RoundRecord>(r, &format!("rounds[{i}]"))).collect::<Result<_, _>>()?,
        Some(_) => return Err(schema("rounds", "expected an array of rounds")),
    };
    Ok(ResultsFile {
        timestamp: field("timestamp").map(|v| decode(v, "timestamp")).transpose()?,
        folder_name: field("folder_name").map(|v| decode(v, "folder_name")).transpose()?,
        config: field("config").map(|v| decode(v, "config")).transpose()?.unwrap_or_default(),
        rounds,
        statistics: field("statistics").cloned(),
        checkpoint: field("checkpoint").map(|v| decode(v, "checkpoint")).transpose()?,
    })
}

fn schema(path: &str, message: &str) -> ResultsError {
    ResultsError::Schema { path: path.to_owned(), message: message.to_owned() }
}

/// A type whose deserialisation errors can be narrowed to a child path.
trait Located: DeserializeOwned {
    /// Narrows an error found under `key` (whose value is `child`) to a deeper path.
    fn descend(_key: &str, _child: &Value, _path: &str) -> Option<ResultsError> {
        None
    }
}

impl Located for String {}
impl Located for RunConfig {}
impl Located for Checkpoint {}
impl Located for GuessAttempt {}
impl Located for LlmResponse {}
impl Located for ActionResult {}
impl Located for TurnTokens {}
impl Located for Usage {}
impl Located for RetryCause {}

impl Located for LlmUsage {
    fn descend(key: &str, child: &Value, path: &str) -> Option<ResultsError> {
        if matches!(key, "player" | "rule_compiler") { first_error::<Usage>(child, path) } else { None }
    }
}

impl Located for RoundRecord {
    fn descend(key: &str, child: &Value, path: &str) -> Option<ResultsError> {
        match key {
            "turns" => first_error::<TurnEntry>(child, path),
            "llm_usage" => first_error::<LlmUsage>(child, path),
            _ => None,
        }
    }
}

impl Located for TurnEntry {
    fn descend(key: &str, child: &Value, path: &str) -> Option<ResultsError> {
        match key {
            "guess_attempt" => first_error::<GuessAttempt>(child, path),
            "llm_response" => first_error::<LlmResponse>(child, path),
            "action_result" => first_error::<ActionResult>(child, path),
            "tokens" => first_error::<TurnTokens>(child, path),
            "retry_causes" => first_error::<RetryCause>(child, path),
            _ => None,
        }
    }
}

/// The first error of `child` decoded as `T` (or, for an array, as a list of `T`).
fn first_error<T: Located>(child: &Value, path: &str) -> Option<ResultsError> {
    match child {
        Value::Null => None,
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| decode::<T>(item, &format!("{path}[{i}]")).err()),
        _ => decode::<T>(child, path).err(),
    }
}

/// Deserialises `value` as `T`, locating the failing field on error.
fn decode<T: Located>(value: &Value, path: &str) -> Result<T, ResultsError> {
    T::deserialize(value).map_err(|e| locate::<T>(value, path, e.to_string()))
}

/// Finds the key responsible for `message`: a missing field is named by serde; otherwise
/// the key whose removal changes the error (serde reports a bad value as soon as it visits
/// it, before any missing-field check) is the culprit.
fn locate<T: Located>(value: &Value, path: &str, message: String) -> ResultsError {
    if let Some(name) = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next()) {
        return ResultsError::Schema { path: format!("{path}.{name}"), message };
    }
    if let Value::Object(map) = value {
        for (key, child) in map {
            let mut probe: Map<String, Value> = map.clone();
            probe.remove(key);
            let changed = match T::deserialize(&Value::Object(probe)) {
                Ok(_) => true,
                Err(e) => e.to_string() != message,
            };
            if changed {
                let child_path = format!("{path}.{key}");
                return T::descend(key, child, &child_path).unwrap_or(ResultsError::Schema { path: child_path, message });
            }
        }
    }
    ResultsError::Schema { path: path.to_owned(), message }
}

#[cfg(test)]
mod tests;
