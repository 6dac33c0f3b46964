//! The 26 secret rules of the reference rule library (spec §2), implemented natively.
//! Library order is round order; names and verbatim descriptions are the join keys of the
//! published data, and the md5 low-32 constants enter the round seeds (§1.2, §2.3).

use std::sync::OnceLock;

use super::card::{Card, Color, Suit};
use super::deck::{universe, universe_index};

/// One of the 26 library rules, in library order (variant index = `#` of spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecretRule {
    /// #0 `even_ranks_only`.
    EvenRanksOnly,
    /// #1 `face_cards_only`.
    FaceCardsOnly,
    /// #2 `ranks_one_to_seven`.
    RanksOneToSeven,
    /// #3 `ranks_five_to_nine`.
    RanksFiveToNine,
    /// #4 `prime_ranks_only`.
    PrimeRanksOnly,
    /// #5 `only_aces`.
    OnlyAces,
    /// #6 `spades_only`.
    SpadesOnly,
    /// #7 `only_red_cards`.
    OnlyRedCards,
    /// #8 `spades_and_diamonds_only`.
    SpadesAndDiamondsOnly,
    /// #9 `no_spades`.
    NoSpades,
    /// #10 `black_face_cards`.
    BlackFaceCards,
    /// #11 `red_rank_up_to_seven`.
    RedRankUpToSeven,
    /// #12 `face_cards_red_number_cards_black`.
    FaceCardsRedNumberCardsBlack,
    /// #13 `alternating_face_number`.
    AlternatingFaceNumber,
    /// #14 `opposite_parity`.
    OppositeParity,
    /// #15 `rank_non_decreasing_start_ace`.
    RankNonDecreasingStartAce,
    /// #16 `alternating_colors`.
    AlternatingColors,
    /// #17 `different_suit`.
    DifferentSuit,
    /// #18 `different_suit_same_color`.
    DifferentSuitSameColor,
    /// #19 `cyclic_suit_order`.
    CyclicSuitOrder,
    /// #20 `alternating_groups`.
    AlternatingGroups,
    /// #21 `share_color_or_parity`.
    ShareColorOrParity,
    /// #22 `red_up_black_down`.
    RedUpBlackDown,
    /// #23 `face_card_imposes_suit`.
    FaceCardImposesSuit,
    /// #24 `paired_suits_alternating`.
    PairedSuitsAlternating,
    /// #25 `paired_ranks_distinct`.
    PairedRanksDistinct,
}

/// Static identity data of one rule: (name, verbatim description, md5 low 32 bits of the
/// reference code string, cyclomatic complexity, AST node count), spec §2.2/§2.3.
struct RuleInfo {
    name: &'static str,
    description: &'static str,
    md5_low32: u32,
    cyclomatic: u32,
    node_count: u32,
}

const fn info(name: &'static str, description: &'static str, md5_low32: u32, cyclomatic: u32, node_count: u32) -> RuleInfo {
    RuleInfo { name, description, md5_low32, cyclomatic, node_count }
}

const INFO: [RuleInfo; 26] = [
    info("even_ranks_only", "Only cards with an even rank (2,4,6,8,10,12).", 3991486006, 1, 12),
    info("face_cards_only", "Only face cards (11,12,13).", 3086841670, 1, 12),
    info("ranks_one_to_seven", "Only cards between 1 and 7 inclusive.", 1359679224, 1, 11),
    info("ranks_five_to_nine", "Only cards between 5 and 9 inclusive.", 2774731231, 1, 11),
    info("prime_ranks_only", "Only ranks that are prime numbers (2,3,5,7,11,13).", 2863803574, 1, 20),
    info("only_aces", "Only Aces (rank 1) .", 1750743651, 1, 9),
    info("spades_only", "Only cards of the suit spades.", 1220911492, 1, 11),
    info("only_red_cards", "Only red cards (hearts or diamonds).", 2113998201, 1, 9),
    info("spades_and_diamonds_only", "Only spades and diamonds.", 784747691, 1, 14),
    info("no_spades", "Only hearts, clubs, and diamonds allowed. Spades are forbidden.", 3522207709, 1, 11),
    info("black_face_cards", "Only black face cards.", 1177824251, 4, 40),
    info("red_rank_up_to_seven", "Only red cards whose rank is <=7.", 3649017041, 2, 18),
    info("face_cards_red_number_cards_black", "Face cards (11-13) must be red; number cards (1-10) must be black.", 1223659498, 2, 25),
    info("alternating_face_number", "Alternate face and number cards. Any card may start the line.", 837406042, 3, 42),
    info("opposite_parity", "Card rank must have opposite odd/even parity to the previous card's rank. Any card may start the line.", 3819063779, 2, 30),
    info("rank_non_decreasing_start_ace", "Each card must have a rank greater or equal to the previous card. Only Ace can start the line.", 3211319022, 2, 30),
    info("alternating_colors", "Cards must alternate between red and black colors. Any card may start the line.", 401830225, 2, 24),
    info("different_suit", "The card must be of a different suit than the card just before it. Any card may start the line.", 82487880, 2, 28),
    info(
        "different_suit_same_color",
        "The card must be of a different suit than but same color as the card just before it. Any card may start the line.",
        3978652424,
        3,
        45,
    ),
    info(
        "cyclic_suit_order",
        "Suits must repeat in the cyclic order hearts \u{2192} spades \u{2192} clubs \u{2192} diamonds \u{2192} hearts... Any card may start the line.",
        687353813,
        2,
        67,
    ),
    info(
        "alternating_groups",
        "Hearts and spades form Group A; clubs and diamonds form Group B. Alternate between groups. Any card may start the line.",
        1090684361,
        2,
        62,
    ),
    info(
        "share_color_or_parity",
        "Each card must share at least one property with the previous card: same color, or same parity. Any card may start the line.",
        1716671963,
        3,
        57,
    ),
    info(
        "red_up_black_down",
        "If the previous card was red, rank must increase or be equal; if black, rank must decrease or be equal. Starting card must be between 5 and 9 inclusive.",
        3137592857,
        3,
        56,
    ),
    info(
        "face_card_imposes_suit",
        "Face cards imposes the suit: if a face card is played, the next card must match its suit. Otherwise, the next card must be a different suit than it.",
        2368408378,
        3,
        60,
    ),
    info(
        "paired_suits_alternating",
        "Suits must appear in pairs: card 1 and 2 same suit, cards 3 and 4 same suit (different from 1 and 2), cards 5 and 6 same suit (different from 3 and 4), etc.",
        705402305,
        3,
        65,
    ),
    info(
        "paired_ranks_distinct",
        "Rank repeats in pairs: ranks must come in doubles: (x, x), then (y, y) with y different from x, then (z, z) with z different from y, etc.",
        3597391689,
        3,
        57,
    ),
];

impl SecretRule {
    /// All 26 rules in library order (= round order: round r uses `ALL[(r − 1) / 3]`).
    pub const ALL: [SecretRule; 26] = [
        SecretRule::EvenRanksOnly,
        SecretRule::FaceCardsOnly,
        SecretRule::RanksOneToSeven,
        SecretRule::RanksFiveToNine,
        SecretRule::PrimeRanksOnly,
        SecretRule::OnlyAces,
        SecretRule::SpadesOnly,
        SecretRule::OnlyRedCards,
        SecretRule::SpadesAndDiamondsOnly,
        SecretRule::NoSpades,
        SecretRule::BlackFaceCards,
        SecretRule::RedRankUpToSeven,
        SecretRule::FaceCardsRedNumberCardsBlack,
        SecretRule::AlternatingFaceNumber,
        SecretRule::OppositeParity,
        SecretRule::RankNonDecreasingStartAce,
        SecretRule::AlternatingColors,
        SecretRule::DifferentSuit,
        SecretRule::DifferentSuitSameColor,
        SecretRule::CyclicSuitOrder,
        SecretRule::AlternatingGroups,
        SecretRule::ShareColorOrParity,
        SecretRule::RedUpBlackDown,
        SecretRule::FaceCardImposesSuit,
        SecretRule::PairedSuitsAlternating,
        SecretRule::PairedRanksDistinct,
    ];

    /// Library index 0..26 (the `#` column of §2.2).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The rule at a library index, if in range.
    pub fn from_index(index: usize) -> Option<Self> {
        Self::ALL.get(index).copied()
    }

    fn info(self) -> &'static RuleInfo {
        &INFO[self.index()]
    }

    /// Library name, e.g. `even_ranks_only` (the results' `rule_name`).
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Verbatim description (the analysis join key; never normalise it).
    pub fn description(self) -> &'static str {
        self.info().description
    }

    /// Low 32 bits of the md5 of the rule's reference code string: the `H` of the round
    /// seed (§1.2).
    pub fn code_md5_low32(self) -> u32 {
        self.info().md5_low32
    }

    /// Cyclomatic complexity of the reference code (§2.3), for complexity metrics.
    pub fn cyclomatic(self) -> u32 {
        self.info().cyclomatic
    }

    /// CPython `ast` node count of the reference code (§2.3), for complexity metrics.
    pub fn node_count(self) -> u32 {
        self.info().node_count
    }

    /// Looks a rule up by its library name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.name() == name)
    }

    /// Looks a rule up by its verbatim description (how the analysis joins results).
    pub fn from_description(description: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.description() == description)
    }

    /// Whether the rule accepts `card` after `mainline` (the exact semantics column of
    /// §2.2, written from the reference code; an empty mainline = starter selection).
    pub fn accepts(&self, card: &Card, mainline: &[Card]) -> bool {
        use SecretRule::*;
        let c = *card;
        match self {
            EvenRanksOnly => c.rank.is_multiple_of(2),
            FaceCardsOnly => matches!(c.rank, 11..=13),
            RanksOneToSeven => (1..=7).contains(&c.rank),
            RanksFiveToNine => (5..=9).contains(&c.rank),
            PrimeRanksOnly => matches!(c.rank, 2 | 3 | 5 | 7 | 11 | 13),
            OnlyAces => c.rank == 1,
            SpadesOnly => c.suit == Suit::Spades,
            OnlyRedCards => c.color() == Color::Red,
            SpadesAndDiamondsOnly => matches!(c.suit, Suit::Spades | Suit::Diamonds),
            NoSpades => c.suit != Suit::Spades,
            BlackFaceCards => c.color() == Color::Black && c.rank >= 11,
            RedRankUpToSeven => c.color() == Color::Red && c.rank <= 7,
            FaceCardsRedNumberCardsBlack => {
                if c.rank >= 11 {
                    c.color() == Color::Red
                } else {
                    c.color() == Color::Black
                }
            }
            _ => {
                let Some(last) = mainline.last().copied() else {
                    return match self {
                        RankNonDecreasingStartAce => c.rank == 1,
                        RedUpBlackDown => (5..=9).contains(&c.rank),
                        _ => true,
                    };
                };
                self.accepts_after(c, last, mainline.len())
            }
        }
    }

    /// Acceptance bitmask over the 52-card universe (bit i = `universe()[i]`) after
    /// `mainline`; lets the equivalence check evaluate a whole step with a table lookup.
    /// Every library rule depends only on the last mainline card and the mainline length's
    /// parity, which is what the cached table is keyed by.
    pub fn acceptance_mask(&self, mainline: &[Card]) -> u64 {
        let key = match mainline.last() {
            None => Some(EMPTY_KEY),
            Some(last) => universe_index(*last),
        };
        match key {
            Some(k) => mask_table()[self.index()][k][mainline.len() % 2],
            // A hand-built card with an out-of-range rank: compute directly.
            None => compute_mask(*self, mainline),
        }
    }

    /// Sequence rules (#13–#25) on a non-empty mainline with last card `last` and length `len`.
    fn accepts_after(self, c: Card, last: Card, len: usize) -> bool {
        use SecretRule::*;
        match self {
            AlternatingFaceNumber => {
                if last.rank >= 11 {
                    c.rank <= 10
                } else {
                    c.rank >= 11
                }
            }
            OppositeParity => c.rank % 2 != last.rank % 2,
            RankNonDecreasingStartAce => c.rank >= last.rank,
            AlternatingColors => c.color() != last.color(),
            DifferentSuit => c.suit != last.suit,
            DifferentSuitSameColor => c.suit != last.suit && c.color() == last.color(),
            CyclicSuitOrder => c.suit == cyclic_successor(last.suit),
            AlternatingGroups => in_group_a(c.suit) != in_group_a(last.suit),
            ShareColorOrParity => c.color() == last.color() || c.rank % 2 == last.rank % 2,
            RedUpBlackDown => {
                if last.color() == Color::Red {
                    c.rank >= last.rank
                } else {
                    c.rank <= last.rank
                }
            }
            FaceCardImposesSuit => {
                if matches!(last.rank, 11..=13) {
                    c.suit == last.suit
                } else {
                    c.suit != last.suit
                }
            }
            PairedSuitsAlternating => {
                if len.is_multiple_of(2) {
                    c.suit != last.suit
                } else {
                    c.suit == last.suit
                }
            }
            PairedRanksDistinct => {
                if len.is_multiple_of(2) {
                    c.rank != last.rank
                } else {
                    c.rank == last.rank
                }
            }
            // Static rules are fully handled in `accepts`; keep them correct here anyway.
            _ => self.accepts(&c, &[]),
        }
    }
}

/// Table key of the empty mainline (after the 52 universe indices).
const EMPTY_KEY: usize = 52;

/// `[rule index][last card's universe index, or EMPTY_KEY][mainline length % 2]` → mask.
type MaskTable = [[[u64; 2]; 53]];

fn compute_mask(rule: SecretRule, mainline: &[Card]) -> u64 {
    universe().iter().enumerate().filter(|(_, c)| rule.accepts(c, mainline)).fold(0u64, |m, (i, _)| m | (1u64 << i))
}

fn mask_table() -> &'static MaskTable {
    static TABLE: OnceLock<Box<MaskTable>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![[[0u64; 2]; 53]; SecretRule::ALL.len()].into_boxed_slice();
        let cards = universe();
        for rule in SecretRule::ALL {
            let row = &mut table[rule.index()];
            let empty = compute_mask(rule, &[]);
            row[EMPTY_KEY] = [empty, empty];
            for (k, last) in cards.iter().enumerate() {
                // Representative mainlines of even (2) and odd (1) length ending in `last`.
                row[k] = [compute_mask(rule, &[*last, *last]), compute_mask(rule, &[*last])];
            }
        }
        table
    })
}

/// Successor in the cycle hearts → spades → clubs → diamonds → hearts (rule #19).
fn cyclic_successor(s: Suit) -> Suit {
    match s {
        Suit::Hearts => Suit::Spades,
        Suit::Spades => Suit::Clubs,
        Suit::Clubs => Suit::Diamonds,
        Suit::Diamonds => Suit::Hearts,
    }
}

/// Group A = {hearts, spades}, group B = {clubs, diamonds} (rule #20).
fn in_group_a(s: Suit) -> bool {
    matches!(s, Suit::Hearts | Suit::Spades)
}

#[cfg(test)]
mod tests;
