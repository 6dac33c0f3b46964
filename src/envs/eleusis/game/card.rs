//! Playing cards of the Eleusis benchmark (spec §1.1): suits, colours, ranks and the
//! exact card string (`10♦`, `K♠`, `A♥`) used in prompts, board strings, result files and
//! equivalence-check messages.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Card colour, derived from the suit; the secret rules and guesses test it (`card.color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    /// Hearts and diamonds.
    Red,
    /// Clubs and spades.
    Black,
}

impl Color {
    /// The reference string value of `card.color` (`"red"` / `"black"`).
    pub const fn name(self) -> &'static str {
        match self {
            Color::Red => "red",
            Color::Black => "black",
        }
    }
}

/// One of the four suits, in the reference build order (hearts, diamonds, clubs, spades).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suit {
    /// ♥, red.
    Hearts,
    /// ♦, red.
    Diamonds,
    /// ♣, black.
    Clubs,
    /// ♠, black.
    Spades,
}

impl Suit {
    /// All suits in the reference order, used to build the deck and the simulation universe.
    pub const ALL: [Suit; 4] = [Suit::Hearts, Suit::Diamonds, Suit::Clubs, Suit::Spades];

    /// The reference `suit.suit_name` (`"hearts"` …), as seen by rule code.
    pub const fn name(self) -> &'static str {
        match self {
            Suit::Hearts => "hearts",
            Suit::Diamonds => "diamonds",
            Suit::Clubs => "clubs",
            Suit::Spades => "spades",
        }
    }

    /// The suit symbol of the card string (no variation selector): ♥ ♦ ♣ ♠.
    pub const fn symbol(self) -> char {
        match self {
            Suit::Hearts => '\u{2665}',
            Suit::Diamonds => '\u{2666}',
            Suit::Clubs => '\u{2663}',
            Suit::Spades => '\u{2660}',
        }
    }

    /// The colour derived from the suit (hearts, diamonds red; clubs, spades black).
    pub const fn color(self) -> Color {
        match self {
            Suit::Hearts | Suit::Diamonds => Color::Red,
            Suit::Clubs | Suit::Spades => Color::Black,
        }
    }

    /// Position in [`Suit::ALL`] (0..4); handy for table lookups.
    pub const fn index(self) -> usize {
        match self {
            Suit::Hearts => 0,
            Suit::Diamonds => 1,
            Suit::Clubs => 2,
            Suit::Spades => 3,
        }
    }

    /// Inverse of [`Suit::symbol`]; used by the card-string parser.
    pub const fn from_symbol(c: char) -> Option<Suit> {
        match c {
            '\u{2665}' => Some(Suit::Hearts),
            '\u{2666}' => Some(Suit::Diamonds),
            '\u{2663}' => Some(Suit::Clubs),
            '\u{2660}' => Some(Suit::Spades),
            _ => None,
        }
    }
}

/// Why a card string could not be parsed with [`Card::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardParseError {
    /// The string was empty.
    #[error("empty card string")]
    Empty,
    /// The last character is not one of ♥ ♦ ♣ ♠.
    #[error("card string {0:?} does not end with a suit symbol (♥ ♦ ♣ ♠)")]
    MissingSuit(String),
    /// The rank label is not one of A, 2 … 10, J, Q, K.
    #[error("card string {0:?} has an invalid rank label (expected A, 2-10, J, Q or K)")]
    InvalidRank(String),
    /// A numeric rank outside 1..=13 was given to [`Card::try_new`].
    #[error("rank {0} is outside 1..=13")]
    RankOutOfRange(u8),
}

/// An immutable card (rank 1–13, 1 = Ace, 11 = J, 12 = Q, 13 = K; suit). Equality is by
/// rank and suit; the double deck therefore holds every card twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Card {
    /// 1 (Ace) … 13 (King).
    pub rank: u8,
    /// The suit; the colour derives from it.
    pub suit: Suit,
}

impl Card {
    /// Builds a card without validation (for trusted, in-range constants such as the deck).
    pub const fn new(rank: u8, suit: Suit) -> Self {
        Card { rank, suit }
    }

    /// Builds a card, rejecting ranks outside 1..=13 (for untrusted input).
    pub fn try_new(rank: u8, suit: Suit) -> Result<Self, CardParseError> {
        if (1..=13).contains(&rank) { Ok(Card { rank, suit }) } else { Err(CardParseError::RankOutOfRange(rank)) }
    }

    /// The card colour (`card.color` of the reference).
    pub const fn color(self) -> Color {
        self.suit.color()
    }

    /// True for J, Q, K (rank ≥ 11), the "face cards" of the rule texts.
    pub const fn is_face(self) -> bool {
        self.rank >= 11
    }

    /// The rank label of the card string: `A`, `2` … `10`, `J`, `Q`, `K` (other numbers
    /// are printed as digits so that an invalid card never panics).
    pub fn rank_label(self) -> RankLabel {
        RankLabel(self.rank)
    }
}

/// Display adapter for a rank label (see [`Card::rank_label`]); avoids allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankLabel(pub u8);

impl fmt::Display for RankLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("A"),
            11 => f.write_str("J"),
            12 => f.write_str("Q"),
            13 => f.write_str("K"),
            n => write!(f, "{n}"),
        }
    }
}

impl fmt::Display for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        write!(f, "{}", RankLabel(self.rank))?;
        f.write_char(self.suit.symbol())
    }
}

impl FromStr for Card {
    type Err = CardParseError;

    /// Parses the exact card string of §1.1 (no whitespace, no variation selector).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut chars = s.chars();
        let last = chars.next_back().ok_or(CardParseError::Empty)?;
        let suit = Suit::from_symbol(last).ok_or_else(|| CardParseError::MissingSuit(s.to_owned()))?;
        let rank = match chars.as_str() {
            "A" => 1,
            "2" => 2,
            "3" => 3,
            "4" => 4,
            "5" => 5,
            "6" => 6,
            "7" => 7,
            "8" => 8,
            "9" => 9,
            "10" => 10,
            "J" => 11,
            "Q" => 12,
            "K" => 13,
            _ => return Err(CardParseError::InvalidRank(s.to_owned())),
        };
        Ok(Card { rank, suit })
    }
}

impl Serialize for Card {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Card {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
