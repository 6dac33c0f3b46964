//! The two fixed card lists of the benchmark (spec §1.1): the unshuffled 104-card double
//! deck (suit-major build order, input of the seeded shuffle) and the 52-card rank-major
//! simulation universe of the equivalence check (§3.3).

use super::card::{Card, Suit};

/// Number of cards in the double deck.
pub const DOUBLE_DECK_SIZE: usize = 104;

/// The 104-card double deck in reference build order before shuffling: for deck in 1..2,
/// for suit in hearts, diamonds, clubs, spades, for rank 1..13.
pub fn double_deck() -> Vec<Card> {
    let mut cards = Vec::with_capacity(DOUBLE_DECK_SIZE);
    for _ in 0..2 {
        for suit in Suit::ALL {
            for rank in 1..=13u8 {
                cards.push(Card::new(rank, suit));
            }
        }
    }
    cards
}

/// The 52 distinct cards in rank-major order (`A♥ A♦ A♣ A♠ 2♥ … K♠`); the equivalence
/// check scans them in this order and its RNG chooses among them in this order.
pub const fn universe() -> [Card; 52] {
    let mut out = [Card::new(1, Suit::Hearts); 52];
    let mut i = 0;
    while i < 52 {
        // i / 4 < 13, so the rank fits in u8.
        out[i] = Card::new((i / 4) as u8 + 1, Suit::ALL[i % 4]);
        i += 1;
    }
    out
}

/// Position of `card` in [`universe`] (`(rank − 1) · 4 + suit index`); `None` for a rank
/// outside 1..=13. Bit `i` of an acceptance mask stands for `universe()[i]`.
pub const fn universe_index(card: Card) -> Option<usize> {
    if card.rank >= 1 && card.rank <= 13 { Some((card.rank as usize - 1) * 4 + card.suit.index()) } else { None }
}

#[cfg(test)]
mod tests;
