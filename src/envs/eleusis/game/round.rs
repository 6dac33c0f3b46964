//! One Eleusis round as a state machine (spec §1.4–§1.8). Drivers ask for an
//! [`Observation`], obtain an [`Action`] from an agent (sync built-in or async LLM), then
//! either call [`Round::apply`] with a [`Judge`], or split the turn into
//! [`Round::prepare`] → (await the judge) → [`Round::commit`] so that a slow, async judge
//! (rule compiler + equivalence check) never needs to borrow the round.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::board::{Board, BoardError};
use super::card::Card;
use super::equivalence::{RuleFn, SimulationParams, Verdict, check};
use super::rule::SecretRule;
use super::setup::{RoundSetup, SetupError, round_seed};

/// Round parameters (reference: 12 cards, 30 turns, 2 points per wrong formal guess).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GameConfig {
    /// Cards in hand (constant: one card is drawn after every play).
    pub hand_size: usize,
    /// Turns before the round ends without a correct guess.
    pub max_turns: u32,
    /// Points lost per wrong formal guess.
    pub wrong_guess_penalty: i64,
}

impl Default for GameConfig {
    fn default() -> Self {
        GameConfig { hand_size: 12, max_turns: 30, wrong_guess_penalty: 2 }
    }
}

/// One resolved play, as shown back to the player in the play history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Play {
    /// The card played.
    pub card: Card,
    /// Whether the secret rule accepted it.
    pub accepted: bool,
    /// The player's one-sentence reasoning for the play (may be empty).
    pub reasoning: String,
}

/// Everything a player may see before choosing its action (the prompt's inputs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The turn about to be played, 1-based.
    pub turn: u32,
    /// Configured number of turns.
    pub max_turns: u32,
    /// Board string (§1.5).
    pub board: String,
    /// The mainline cards (what rules see).
    pub mainline: Vec<Card>,
    /// The hand in order.
    pub hand: Vec<Card>,
    /// All plays of this round so far, oldest first (the reference prompt shows the last 3).
    pub history: Vec<Play>,
    /// Texts of the failed formal guesses, in order.
    pub failed_guesses: Vec<String>,
    /// F, the number of failed formal guesses.
    pub failed_guess_count: u32,
    /// Penalty so far (penalty × F).
    pub penalty_so_far: i64,
    /// The prompt's "potential score if you guess correctly this turn":
    /// `max_turns − turn − penalty × F` (one lower than the engine score, §8 Q3).
    pub potential_score: i64,
}

/// A player's decision for one turn (the reference `llm_response`, already validated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// Card to play; must be in the hand.
    pub card: Card,
    /// One-sentence rationale, echoed in the next turns' history.
    pub reasoning: String,
    /// Current hypothesis; the text judged by formal and shadow checks.
    pub tentative_rule: Option<String>,
    /// Confidence 0–10 when the response held an integer (callers map JSON floats to
    /// `None` and JSON booleans to 0/1, matching the reference's `int` test, §1.6).
    pub confidence: Option<i64>,
    /// Formal guess flag (callers apply Python truthiness to the raw value).
    pub guess: bool,
}

/// Whether a check is a formal guess (has consequences) or a shadow check (recorded only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuessKind {
    /// `guess` set and a non-empty tentative rule: wrong costs the penalty, right wins.
    Formal,
    /// Not formal, confidence ≥ 5 and a non-empty tentative rule: no consequence.
    Shadow,
}

impl Action {
    /// Which check (if any) this action triggers (§1.6 steps 5–6).
    pub fn check_kind(&self) -> Option<GuessKind> {
        let text = self.tentative_rule.as_deref().unwrap_or("");
        if text.is_empty() {
            None
        } else if self.guess {
            Some(GuessKind::Formal)
        } else if self.confidence.is_some_and(|c| c >= 5) {
            Some(GuessKind::Shadow)
        } else {
            None
        }
    }
}

/// What a judge must decide: is `guess` equivalent to `secret` from `mainline` (the
/// mainline after this turn's card was resolved)?
#[derive(Debug, Clone, Copy)]
pub struct JudgeRequest<'a> {
    /// Formal or shadow.
    pub kind: GuessKind,
    /// The guess text (tentative rule).
    pub guess: &'a str,
    /// The secret rule (the "actual" side of the check).
    pub secret: SecretRule,
    /// Start state of the check.
    pub mainline: &'a [Card],
    /// Turn number of the guess.
    pub turn: u32,
}

/// Turns a guess into a verdict; implementations compile the text to a [`RuleFn`] and run
/// [`check`] (native judges already hold the rule).
pub trait Judge {
    /// Judges one guess.
    fn judge(&mut self, request: &JudgeRequest<'_>) -> Verdict;
}

/// A judge for built-in agents: the guess is already a native rule; `None` yields the
/// reference "no code" verdict.
pub struct NativeJudge<'a> {
    /// The rule the guess text stands for.
    pub guessed: Option<&'a dyn RuleFn>,
    /// Simulation parameters of the check.
    pub params: SimulationParams,
}

impl Judge for NativeJudge<'_> {
    fn judge(&mut self, request: &JudgeRequest<'_>) -> Verdict {
        match self.guessed {
            Some(rule) => check(&request.secret, rule, request.mainline, &self.params),
            None => Verdict::no_code(),
        }
    }
}

/// The recorded outcome of a formal or shadow check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuessCheck {
    /// Formal or shadow.
    pub kind: GuessKind,
    /// The judged text.
    pub guess: String,
    /// Verdict: equivalent or not.
    pub correct: bool,
    /// The verdict message (reference `reasoning`).
    pub message: String,
    /// Comparisons made by the check.
    pub comparisons: u64,
    /// Mismatches counted by the check.
    pub mismatches: u64,
}

/// One played turn, everything needed to replay or score it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// 1-based turn number.
    pub turn: u32,
    /// Board string before the play (`mainline_state`).
    pub board_before: String,
    /// Hand before the play.
    pub hand_before: Vec<Card>,
    /// Card played.
    pub card: Card,
    /// Secret-rule verdict on the card.
    pub accepted: bool,
    /// The player's reasoning.
    pub reasoning: String,
    /// The player's tentative rule.
    pub tentative_rule: Option<String>,
    /// The player's confidence.
    pub confidence: Option<i64>,
    /// The formal-guess flag.
    pub guess: bool,
    /// The formal or shadow check run this turn, if any.
    pub check: Option<GuessCheck>,
}

/// Why a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GameOverReason {
    /// A formal guess was judged correct.
    CorrectGuess,
    /// All turns were played.
    MaxTurns,
    /// `finish` was called before the round was over (e.g. an aborted run).
    Incomplete,
    /// The model's prompt outgrew its context window (evalgrid's addition, issue 23): its
    /// server refused the turn's prompt, and every later prompt only grows, so the round
    /// ends there. Scored as the spec's closest end, a round without a correct guess
    /// (`−penalty·F`, as `max_turns`): the model stopped being able to play, it never won.
    ContextExceeded,
}

/// The outcome of a round (evalgrid's own, correct scoring: §1.8, §8 Q1/Q2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundResult {
    /// Secret rule name.
    pub rule: String,
    /// Batch (repetition) index.
    pub batch: u32,
    /// Round seed.
    pub seed: u64,
    /// Configuration used.
    pub config: GameConfig,
    /// The starter card.
    pub starter: Card,
    /// Played turns.
    pub turns: Vec<TurnRecord>,
    /// `len(turns)` (W on success, else the turns played).
    pub turns_played: u32,
    /// A correct formal guess happened.
    pub success: bool,
    /// W, the turn of the correct formal guess.
    pub win_turn: Option<u32>,
    /// F, all wrong formal guesses.
    pub failed_guesses: u32,
    /// `max_turns + 1 − W − penalty·F` on success, else `−penalty·F` (31 − W − 2F / −2F).
    pub score: i64,
    /// `max(0, score)`, the headline metric's per-round value.
    pub floored_score: i64,
    /// First turn whose formal or shadow check was correct.
    pub first_correct_turn: Option<u32>,
    /// `max_turns − T + 1` for that first correct turn T, else 0.
    pub no_stakes_score: i64,
    /// Why the round ended.
    pub game_over_reason: GameOverReason,
    /// Final board string.
    pub final_board: String,
}

/// Errors of the round state machine (never panics on bad input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GameError {
    /// Setup failed (no starter, hand too large).
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The board rejected a placement.
    #[error(transparent)]
    Board(#[from] BoardError),
    /// The round already ended.
    #[error("the round is over")]
    RoundOver,
    /// The action's card is not in the hand.
    #[error("card {0} is not in the hand")]
    CardNotInHand(Card),
    /// A prepared turn was committed to another round or after another commit.
    #[error("prepared turn {prepared} does not match the round's current turn {current}")]
    StalePreparedTurn {
        /// Turn the preparation was made for.
        prepared: u32,
        /// The round's current turn.
        current: u32,
    },
    /// The action needs a check but no verdict was given.
    #[error("turn {0} needs a verdict for its guess, none was given")]
    MissingVerdict(u32),
    /// A verdict was given for an action that triggers no check.
    #[error("turn {0} has no guess to judge, but a verdict was given")]
    UnexpectedVerdict(u32),
}

/// A turn resolved against the current state but not yet applied: the card's verdict, the
/// check to run (if any) and the mainline the judge must start from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTurn {
    turn: u32,
    rule: SecretRule,
    seed: u64,
    action: Action,
    accepted: bool,
    mainline_after: Vec<Card>,
    kind: Option<GuessKind>,
}

impl PreparedTurn {
    /// The turn this preparation belongs to.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// The action being played.
    pub fn action(&self) -> &Action {
        &self.action
    }

    /// Whether the secret rule accepts the played card.
    pub fn accepted(&self) -> bool {
        self.accepted
    }

    /// The check to run before committing, if any (formal or shadow).
    pub fn judge_request(&self) -> Option<JudgeRequest<'_>> {
        let kind = self.kind?;
        Some(JudgeRequest {
            kind,
            guess: self.action.tentative_rule.as_deref().unwrap_or(""),
            secret: self.rule,
            mainline: &self.mainline_after,
            turn: self.turn,
        })
    }
}

/// A round in progress: deck, hand, board, history and the guess bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    rule: SecretRule,
    batch: u32,
    seed: u64,
    config: GameConfig,
    starter: Card,
    deck: VecDeque<Card>,
    hand: Vec<Card>,
    board: Board,
    history: Vec<Play>,
    failed_guesses: Vec<String>,
    turns: Vec<TurnRecord>,
    win_turn: Option<u32>,
    first_correct_turn: Option<u32>,
    context_exceeded: bool,
}

impl Round {
    /// Sets up the round of `rule` and `batch` (seeded shuffle, deal, starter).
    pub fn new(rule: SecretRule, batch: u32, config: GameConfig) -> Result<Self, GameError> {
        let seed = round_seed(rule, batch);
        let setup = RoundSetup::from_seed(rule, seed, config.hand_size)?;
        Ok(Round {
            rule,
            batch,
            seed,
            config,
            starter: setup.starter,
            deck: setup.deck,
            hand: setup.hand,
            board: Board::with_starter(setup.starter),
            history: Vec::new(),
            failed_guesses: Vec::new(),
            turns: Vec::new(),
            win_turn: None,
            first_correct_turn: None,
            context_exceeded: false,
        })
    }

    /// The secret rule.
    pub fn rule(&self) -> SecretRule {
        self.rule
    }

    /// The batch (repetition) index.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// The round seed (deck shuffle).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The configuration.
    pub fn config(&self) -> &GameConfig {
        &self.config
    }

    /// The starter card (mainline card #1).
    pub fn starter(&self) -> Card {
        self.starter
    }

    /// The current board.
    pub fn board(&self) -> &Board {
        &self.board
    }

    /// The current hand.
    pub fn hand(&self) -> &[Card] {
        &self.hand
    }

    /// The turns played so far.
    pub fn turns(&self) -> &[TurnRecord] {
        &self.turns
    }

    /// The next turn's number (1-based).
    pub fn current_turn(&self) -> u32 {
        // At most max_turns (u32) turns are ever recorded.
        self.turns.len() as u32 + 1
    }

    /// True after a correct formal guess or `max_turns` turns.
    pub fn is_over(&self) -> bool {
        self.win_turn.is_some() || self.context_exceeded || self.turns.len() >= self.config.max_turns as usize
    }

    /// Ends the round before the current turn is played: the model's server refused the
    /// turn's prompt as longer than its context ([`GameOverReason::ContextExceeded`]).
    pub fn end_context_exceeded(&mut self) {
        self.context_exceeded = true;
    }

    fn failed_count(&self) -> u32 {
        // Bounded by the number of turns.
        self.failed_guesses.len() as u32
    }

    /// What the player sees before the next turn.
    pub fn observation(&self) -> Observation {
        let turn = self.current_turn();
        let f = self.failed_count();
        let penalty = self.config.wrong_guess_penalty.saturating_mul(i64::from(f));
        Observation {
            turn,
            max_turns: self.config.max_turns,
            board: self.board.board_string(),
            mainline: self.board.mainline.clone(),
            hand: self.hand.clone(),
            history: self.history.clone(),
            failed_guesses: self.failed_guesses.clone(),
            failed_guess_count: f,
            penalty_so_far: penalty,
            potential_score: (i64::from(self.config.max_turns) - i64::from(turn)).saturating_sub(penalty),
        }
    }

    /// Resolves `action` against the current state without changing it (step 3's verdict
    /// and the start mainline of the step 5/6 check).
    pub fn prepare(&self, action: Action) -> Result<PreparedTurn, GameError> {
        if self.is_over() {
            return Err(GameError::RoundOver);
        }
        if !self.hand.contains(&action.card) {
            return Err(GameError::CardNotInHand(action.card));
        }
        let accepted = self.rule.accepts(&action.card, &self.board.mainline);
        let mut mainline_after = self.board.mainline.clone();
        if accepted {
            mainline_after.push(action.card);
        }
        let kind = action.check_kind();
        Ok(PreparedTurn { turn: self.current_turn(), rule: self.rule, seed: self.seed, action, accepted, mainline_after, kind })
    }

    /// Applies a prepared turn with the verdict of its check (§1.6 steps 3–8).
    pub fn commit(&mut self, prepared: PreparedTurn, verdict: Option<Verdict>) -> Result<TurnRecord, GameError> {
        let turn = self.current_turn();
        if prepared.turn != turn || prepared.rule != self.rule || prepared.seed != self.seed {
            return Err(GameError::StalePreparedTurn { prepared: prepared.turn, current: turn });
        }
        if self.is_over() {
            return Err(GameError::RoundOver);
        }
        let verdict = match (prepared.kind, verdict) {
            (Some(kind), Some(v)) => Some((kind, v)),
            (Some(_), None) => return Err(GameError::MissingVerdict(turn)),
            (None, Some(_)) => return Err(GameError::UnexpectedVerdict(turn)),
            (None, None) => None,
        };
        let PreparedTurn { action, accepted, .. } = prepared;
        let pos = self.hand.iter().position(|c| *c == action.card).ok_or(GameError::CardNotInHand(action.card))?;
        let board_before = self.board.board_string();
        let hand_before = self.hand.clone();
        // Step 3: play, place, draw.
        self.board.play(action.card, accepted)?;
        self.hand.remove(pos);
        if let Some(drawn) = self.deck.pop_front() {
            self.hand.push(drawn);
        }
        // Step 4: history.
        self.history.push(Play { card: action.card, accepted, reasoning: action.reasoning.clone() });
        // Steps 5–6: formal or shadow check.
        let text = action.tentative_rule.clone().unwrap_or_default();
        let check = verdict.map(|(kind, v)| {
            if v.equivalent && self.first_correct_turn.is_none() {
                self.first_correct_turn = Some(turn);
            }
            if kind == GuessKind::Formal {
                if v.equivalent {
                    self.win_turn = Some(turn);
                } else {
                    self.failed_guesses.push(text.clone());
                }
            }
            GuessCheck { kind, guess: text, correct: v.equivalent, message: v.message, comparisons: v.comparisons, mismatches: v.mismatches }
        });
        // Step 7: record.
        let record = TurnRecord {
            turn,
            board_before,
            hand_before,
            card: action.card,
            accepted,
            reasoning: action.reasoning,
            tentative_rule: action.tentative_rule,
            confidence: action.confidence,
            guess: action.guess,
            check,
        };
        self.turns.push(record.clone());
        Ok(record)
    }

    /// Plays one turn synchronously: prepare, ask `judge` if a check is due, commit.
    pub fn apply(&mut self, action: Action, judge: &mut dyn Judge) -> Result<TurnRecord, GameError> {
        let prepared = self.prepare(action)?;
        let verdict = prepared.judge_request().map(|req| judge.judge(&req));
        self.commit(prepared, verdict)
    }

    /// The round's result so far (final once [`Round::is_over`]).
    pub fn finish(&self) -> RoundResult {
        let max_turns = i64::from(self.config.max_turns);
        let f = self.failed_count();
        let penalty = self.config.wrong_guess_penalty.saturating_mul(i64::from(f));
        let score = match self.win_turn {
            Some(w) => (max_turns + 1 - i64::from(w)).saturating_sub(penalty),
            None => 0i64.saturating_sub(penalty),
        };
        let game_over_reason = if self.win_turn.is_some() {
            GameOverReason::CorrectGuess
        } else if self.context_exceeded {
            GameOverReason::ContextExceeded
        } else if self.is_over() {
            GameOverReason::MaxTurns
        } else {
            GameOverReason::Incomplete
        };
        RoundResult {
            rule: self.rule.name().to_owned(),
            batch: self.batch,
            seed: self.seed,
            config: self.config,
            starter: self.starter,
            turns: self.turns.clone(),
            turns_played: self.turns.len() as u32,
            success: self.win_turn.is_some(),
            win_turn: self.win_turn,
            failed_guesses: f,
            score,
            floored_score: score.max(0),
            first_correct_turn: self.first_correct_turn,
            no_stakes_score: self.first_correct_turn.map_or(0, |t| max_turns - i64::from(t) + 1),
            game_over_reason,
            final_board: self.board.board_string(),
        }
    }
}

#[cfg(test)]
mod tests;
