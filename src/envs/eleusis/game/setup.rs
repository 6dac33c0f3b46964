//! Round setup (spec §1.2): the model-independent round seed, the seeded shuffle of the
//! double deck, the 12-card deal and the starter search that discards non-matching cards.
//! Every model sees exactly the same decks, which is what makes rounds comparable.

use std::collections::VecDeque;

use super::card::Card;
use super::deck::double_deck;
use super::pyrandom::PyRandom;
use super::rule::SecretRule;

/// The reference `game.seed`, first term of every round seed.
pub const GAME_SEED: u64 = 42;

/// The reference hand size.
pub const DEFAULT_HAND_SIZE: usize = 12;

/// Why a round could not be set up (only reachable with unusual batches or hand sizes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The deck is smaller than the requested hand.
    #[error("cannot deal a hand of {hand_size} cards from a {deck_size}-card deck")]
    HandTooLarge {
        /// Requested hand size.
        hand_size: usize,
        /// Cards available.
        deck_size: usize,
    },
    /// No remaining deck card is accepted by the rule on an empty mainline.
    #[error("no deck card after the hand is a valid starter for rule {rule}")]
    NoStarter {
        /// Rule name.
        rule: &'static str,
    },
}

/// `round_seed = (42 + H + b) mod 2^32`, H = md5 low 32 bits of the rule code, b = batch.
pub fn round_seed(rule: SecretRule, batch: u32) -> u64 {
    (GAME_SEED + u64::from(rule.code_md5_low32()) + u64::from(batch)) % (1u64 << 32)
}

/// The 104-card deck after `Random(seed).shuffle`, top (first drawn) first.
pub fn shuffled_deck(seed: u64) -> Vec<Card> {
    let mut deck = double_deck();
    PyRandom::new(seed).shuffle(&mut deck);
    deck
}

/// The state of a round right after setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundSetup {
    /// The round seed used for the shuffle.
    pub seed: u64,
    /// Cards still to be drawn, front = next card.
    pub deck: VecDeque<Card>,
    /// The dealt hand, in deal order.
    pub hand: Vec<Card>,
    /// Cards drawn and thrown away before the starter, in draw order (never shown).
    pub discarded: Vec<Card>,
    /// The first drawn card the rule accepts on an empty mainline (mainline card #1).
    pub starter: Card,
}

impl RoundSetup {
    /// Reference setup of a round: seed from (rule, batch), 12-card hand.
    pub fn new(rule: SecretRule, batch: u32) -> Result<Self, SetupError> {
        Self::from_seed(rule, round_seed(rule, batch), DEFAULT_HAND_SIZE)
    }

    /// Setup with an explicit seed and hand size (the reference uses 12).
    pub fn from_seed(rule: SecretRule, seed: u64, hand_size: usize) -> Result<Self, SetupError> {
        let mut deck: VecDeque<Card> = shuffled_deck(seed).into();
        if hand_size > deck.len() {
            return Err(SetupError::HandTooLarge { hand_size, deck_size: deck.len() });
        }
        let hand: Vec<Card> = deck.drain(..hand_size).collect();
        let mut discarded = Vec::new();
        while let Some(card) = deck.pop_front() {
            if rule.accepts(&card, &[]) {
                return Ok(RoundSetup { seed, deck, hand, discarded, starter: card });
            }
            discarded.push(card);
        }
        Err(SetupError::NoStarter { rule: rule.name() })
    }
}

#[cfg(test)]
mod tests;
