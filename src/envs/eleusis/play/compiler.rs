//! The rule compiler's side of the judge (spec §3.2, §8 Q6): the versioned compile prompt
//! that asks an LLM to turn a natural-language guess into a Python function body, code
//! extraction (tag `CODE`, same rules as the action parser), the cache key of compiled code,
//! and the bounded attempt loop (validation = the body byte-compiles, checked by the Python
//! worker through [`PyJudge::validate`](crate::envs::eleusis::judge::pyjudge::PyJudge::validate)).
//!
//! The prompt text is an evalgrid reconstruction of the reference `prompts/compile.py`
//! (MIT, Copyright (c) 2026 Hugging Face) following the parts, order, whitelist and
//! response format §3.2 describes; its prose is evalgrid's own, so it is not byte-identical.

use serde::{Deserialize, Serialize};

use super::prompt::fill;
use super::response::extract_tagged;
use crate::envs::eleusis::game::equivalence::Verdict;

/// Version of [`COMPILER_TEMPLATE`]; part of the compiled-code cache key.
pub const COMPILER_PROMPT_VERSION: &str = "eleusis-compile/v1-reconstructed";

/// Compiler attempts before giving up (older reference runs: 3).
pub const DEFAULT_COMPILE_ATTEMPTS: u32 = 3;

/// The single user message sent to the rule compiler; `{{guess}}` is the guess text,
/// inserted verbatim.
pub const COMPILER_TEMPLATE: &str = "\
# Convert a card-game rule into Python code and give it a nickname

## The game
The game uses two standard decks shuffled together (104 cards). Ranks are coded as numbers: Ace = 1, 2 to 10 = their value, Jack = 11, Queen = 12, King = 13. Number cards have ranks 1 to 10, face cards have ranks 11 to 13.
Suits and colours: hearts ♥\u{fe0f} (red), diamonds ♦\u{fe0f} (red), clubs ♣\u{fe0f} (black), spades ♠\u{fe0f} (black).
Cards are played one at a time. An accepted card is appended to the mainline; a rejected card goes to a sideline. Whether a card is accepted depends only on the card and on the mainline cards before it.

## The rule to convert
{{guess}}

## Nickname
Give the rule a short nickname in snake_case: lower-case letters and underscores only.

## Code requirements
- Write ONLY the body of a function: no `def` line. The body is placed inside a function with two parameters, `card` and `mainline`.
- `card` is the candidate card. Available attributes: `card.rank` (int, 1 to 13), `card.color` (\"red\" or \"black\"), `card.suit.suit_name` (\"hearts\", \"diamonds\", \"clubs\" or \"spades\").
- `mainline` is the list of Card objects already accepted, oldest first; `mainline[-1]` is the previous card.
- Handle the empty mainline explicitly with a test such as `if not mainline:`.
- Return True if the card is accepted, False otherwise.

## Sandbox
Only these are available:
- types: bool, int, str, list, tuple, set, dict
- iteration: range, reversed, sorted, enumerate, zip
- aggregation: len, sum, min, max, abs, any, all
- arithmetic: round, divmod
- ordinary list and string methods and operators.
Do not import anything, do not access files, do not use eval or exec, do not call anything external.

## Common patterns
- A set of ranks: `card.rank in {2, 3, 5, 7, 11, 13}`
- Numbering suits: `order = {\"hearts\": 0, \"spades\": 1, \"clubs\": 2, \"diamonds\": 3}`
- Integer division: use `//` (there is no math.floor).

Note: when a rule states a property of the cards (\"only red cards\"), the first card of the mainline must satisfy it too, so do not accept everything on an empty mainline for such rules.

## Response format
<NAME>nickname_here</NAME>
<CODE>
function body here
</CODE>

## Examples

Rule: Cards must alternate between red and black colors.
<NAME>alternating_colors</NAME>
<CODE>
if not mainline:
    return True
return card.color != mainline[-1].color
</CODE>

Rule: Only cards with an even rank.
<NAME>even_ranks</NAME>
<CODE>
return card.rank % 2 == 0
</CODE>

Rule: Each card must have a rank greater than or equal to the previous card.
<NAME>non_decreasing_rank</NAME>
<CODE>
if not mainline:
    return True
return card.rank >= mainline[-1].rank
</CODE>

Reply with only the <NAME> and <CODE> tags.
";

/// The compile prompt for a guess text.
pub fn render_compile_prompt(guess: &str) -> String {
    fill(COMPILER_TEMPLATE, &[("guess", guess)])
}

/// The function body in a compiler reply (§3.2 extraction with tag `CODE`); `None` when
/// nothing is left after stripping.
pub fn extract_code(reply: &str) -> Option<String> {
    let code = extract_tagged(reply, "CODE");
    (!code.is_empty()).then_some(code)
}

/// Cache key of compiled code (§3.5, §8 Q6): compilation is stochastic, so the attempt
/// index is part of the key and a cached entry replays one specific compiler call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileKey {
    /// The guess text, verbatim.
    pub guess: String,
    /// Compiler model id.
    pub compiler_model: String,
    /// Canonical string of the sent settings (temperature, max tokens, seed, provider).
    pub settings: String,
    /// [`COMPILER_PROMPT_VERSION`] (or a future version).
    pub prompt_version: String,
    /// 1-based attempt index.
    pub attempt: u32,
}

/// Why a compiler attempt was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CompileFailure {
    /// The reply held no code.
    NoCode,
    /// The body does not byte-compile; Python's error text.
    Syntax {
        /// The error text.
        error: String,
    },
    /// The compiler call itself failed.
    CallFailed {
        /// The provider error.
        detail: String,
    },
}

/// What the driver must do next in a compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileStep {
    /// Call the compiler for this 1-based attempt.
    Ask {
        /// Attempt number (part of the [`CompileKey`]).
        attempt: u32,
    },
    /// Valid code was obtained.
    Compiled {
        /// The function body.
        code: String,
        /// The attempt that produced it.
        attempt: u32,
    },
    /// All attempts failed: judge with [`CompileAttempts::exhausted_verdict`] and set the
    /// `judge_error` flag (§8 Q6), so it is distinguishable from a wrong guess.
    Exhausted,
}

/// Bounded compiler attempts (the reference retries forever in its final version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileAttempts {
    max_attempts: u32,
    attempts: u32,
    failures: Vec<CompileFailure>,
    done: Option<CompileStep>,
}

impl CompileAttempts {
    /// A loop with `max_attempts` attempts (at least 1).
    pub fn new(max_attempts: u32) -> Self {
        CompileAttempts { max_attempts: max_attempts.max(1), attempts: 0, failures: Vec::new(), done: None }
    }

    /// The next step without feeding anything.
    pub fn step(&self) -> CompileStep {
        self.done.clone().unwrap_or(CompileStep::Ask { attempt: self.attempts + 1 })
    }

    /// The failures so far, in attempt order.
    pub fn failures(&self) -> &[CompileFailure] {
        &self.failures
    }

    /// Feeds a compiler reply; `validate` byte-compiles a body (`Err` = Python's error).
    pub fn on_reply(&mut self, reply: &str, validate: impl FnOnce(&str) -> Result<(), String>) -> CompileStep {
        if self.done.is_some() {
            return self.step();
        }
        self.attempts += 1;
        let failure = match extract_code(reply) {
            None => CompileFailure::NoCode,
            Some(code) => match validate(&code) {
                Ok(()) => {
                    self.done = Some(CompileStep::Compiled { code, attempt: self.attempts });
                    return self.step();
                }
                Err(error) => CompileFailure::Syntax { error },
            },
        };
        self.fail(failure)
    }

    /// Records a failed compiler call.
    pub fn on_call_error(&mut self, detail: &str) -> CompileStep {
        if self.done.is_some() {
            return self.step();
        }
        self.attempts += 1;
        self.fail(CompileFailure::CallFailed { detail: detail.to_owned() })
    }

    fn fail(&mut self, failure: CompileFailure) -> CompileStep {
        self.failures.push(failure);
        if self.attempts >= self.max_attempts {
            self.done = Some(CompileStep::Exhausted);
        }
        self.step()
    }

    /// The reference verdict after exhaustion (`No code provided for guessed rule`).
    pub fn exhausted_verdict() -> Verdict {
        Verdict::no_code()
    }
}

#[cfg(test)]
mod tests;
