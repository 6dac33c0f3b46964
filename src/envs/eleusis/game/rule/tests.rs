//! Tests of the 26 library rules: identity data against `vectors.json`, the semantics
//! table of spec §2.2 and the cached acceptance masks.

use super::*;
use crate::envs::eleusis::test_support::*;

fn cards(s: &str) -> Vec<Card> {
    s.split_whitespace().map(|c| c.parse().expect("card")).collect()
}

fn c(s: &str) -> Card {
    s.parse().expect("card")
}

#[test]
fn identity_matches_vectors() {
    let v = vectors();
    assert_eq!(v.rules.len(), 26);
    for (rule, vr) in SecretRule::ALL.iter().zip(&v.rules) {
        assert_eq!(rule.index(), vr.index);
        assert_eq!(rule.name(), vr.name);
        assert_eq!(rule.description(), vr.description);
        assert_eq!(rule.code_md5_low32(), vr.code_md5_low32);
        assert_eq!(rule.cyclomatic(), vr.cyclomatic);
        assert_eq!(rule.node_count(), vr.node_count);
        let tail = u32::from_str_radix(&vr.code_md5[24..], 16).expect("hex");
        assert_eq!(tail, vr.code_md5_low32);
        assert_eq!(SecretRule::from_name(&vr.name), Some(*rule));
        assert_eq!(SecretRule::from_description(&vr.description), Some(*rule));
        assert_eq!(SecretRule::from_index(vr.index), Some(*rule));
    }
    assert_eq!(SecretRule::from_name("nope"), None);
    assert_eq!(SecretRule::from_index(26), None);
    assert_eq!(SecretRule::OnlyAces.description(), "Only Aces (rank 1) .");
}

#[test]
fn static_rules_ignore_mainline() {
    let ml = cards("K♠ 2♥");
    for rule in &SecretRule::ALL[..13] {
        for card in super::super::deck::universe() {
            assert_eq!(rule.accepts(&card, &[]), rule.accepts(&card, &ml), "{rule:?} {card}");
        }
    }
    let n = |r: SecretRule| super::super::deck::universe().iter().filter(|x| r.accepts(x, &[])).count();
    assert_eq!(n(SecretRule::EvenRanksOnly), 24);
    assert_eq!(n(SecretRule::FaceCardsOnly), 12);
    assert_eq!(n(SecretRule::PrimeRanksOnly), 24);
    assert_eq!(n(SecretRule::BlackFaceCards), 6);
    assert_eq!(n(SecretRule::RedRankUpToSeven), 14);
    assert_eq!(n(SecretRule::FaceCardsRedNumberCardsBlack), 26);
}

/// The cached masks agree with card-by-card evaluation on varied mainlines.
#[test]
fn acceptance_mask_matches_accepts() {
    let u = super::super::deck::universe();
    let mut rng = super::super::pyrandom::PyRandom::new(5);
    for len in 0..8usize {
        for _ in 0..40 {
            let ml: Vec<Card> = (0..len).map(|_| *rng.choice(&u).expect("card")).collect();
            for rule in SecretRule::ALL {
                let mask = rule.acceptance_mask(&ml);
                for (i, card) in u.iter().enumerate() {
                    assert_eq!(mask >> i & 1 == 1, rule.accepts(card, &ml), "{rule:?} {card} {ml:?}");
                }
            }
        }
    }
    let odd = [Card::new(14, Suit::Hearts)];
    assert_eq!(SecretRule::OppositeParity.acceptance_mask(&odd), SecretRule::OppositeParity.acceptance_mask(&[c("2♣")]));
}

#[test]
fn empty_mainline_cases() {
    use SecretRule::*;
    assert!(RankNonDecreasingStartAce.accepts(&c("A♣"), &[]));
    assert!(!RankNonDecreasingStartAce.accepts(&c("2♣"), &[]));
    assert!(RedUpBlackDown.accepts(&c("5♣"), &[]));
    assert!(RedUpBlackDown.accepts(&c("9♥"), &[]));
    assert!(!RedUpBlackDown.accepts(&c("10♥"), &[]));
    assert!(!RedUpBlackDown.accepts(&c("4♥"), &[]));
    for r in &SecretRule::ALL[13..] {
        if !matches!(r, RankNonDecreasingStartAce | RedUpBlackDown) {
            assert!(r.accepts(&c("7♦"), &[]), "{r:?}");
        }
    }
}

#[test]
fn sequence_rules_semantics() {
    use SecretRule::*;
    assert!(AlternatingFaceNumber.accepts(&c("3♥"), &cards("Q♠")));
    assert!(!AlternatingFaceNumber.accepts(&c("J♥"), &cards("Q♠")));
    assert!(AlternatingFaceNumber.accepts(&c("J♥"), &cards("10♠")));
    assert!(OppositeParity.accepts(&c("3♥"), &cards("10♣")));
    assert!(!OppositeParity.accepts(&c("4♥"), &cards("10♣")));
    assert!(RankNonDecreasingStartAce.accepts(&c("K♥"), &cards("A♦ K♠")));
    assert!(!RankNonDecreasingStartAce.accepts(&c("Q♥"), &cards("A♦ K♠")));
    assert!(AlternatingColors.accepts(&c("3♠"), &cards("7♥")));
    assert!(!AlternatingColors.accepts(&c("3♦"), &cards("7♥")));
    assert!(DifferentSuit.accepts(&c("3♦"), &cards("7♥")));
    assert!(!DifferentSuit.accepts(&c("3♥"), &cards("7♥")));
    assert!(DifferentSuitSameColor.accepts(&c("3♦"), &cards("7♥")));
    assert!(!DifferentSuitSameColor.accepts(&c("3♠"), &cards("7♥")));
    assert!(!DifferentSuitSameColor.accepts(&c("3♥"), &cards("7♥")));
    assert!(DifferentSuitSameColor.accepts(&c("3♣"), &cards("7♠")));
    assert!(CyclicSuitOrder.accepts(&c("2♠"), &cards("A♥")));
    assert!(CyclicSuitOrder.accepts(&c("2♣"), &cards("A♠")));
    assert!(CyclicSuitOrder.accepts(&c("2♦"), &cards("A♣")));
    assert!(CyclicSuitOrder.accepts(&c("2♥"), &cards("A♦")));
    assert!(!CyclicSuitOrder.accepts(&c("2♦"), &cards("A♥")));
    assert!(AlternatingGroups.accepts(&c("2♣"), &cards("A♥")));
    assert!(AlternatingGroups.accepts(&c("2♠"), &cards("A♦")));
    assert!(!AlternatingGroups.accepts(&c("2♠"), &cards("A♥")));
    assert!(ShareColorOrParity.accepts(&c("3♦"), &cards("8♥")));
    assert!(ShareColorOrParity.accepts(&c("2♠"), &cards("8♥")));
    assert!(!ShareColorOrParity.accepts(&c("3♠"), &cards("8♥")));
    assert!(RedUpBlackDown.accepts(&c("8♠"), &cards("8♥")));
    assert!(RedUpBlackDown.accepts(&c("9♠"), &cards("8♥")));
    assert!(!RedUpBlackDown.accepts(&c("7♠"), &cards("8♥")));
    assert!(RedUpBlackDown.accepts(&c("7♠"), &cards("8♣")));
    assert!(!RedUpBlackDown.accepts(&c("9♠"), &cards("8♣")));
    assert!(FaceCardImposesSuit.accepts(&c("2♣"), &cards("J♣")));
    assert!(!FaceCardImposesSuit.accepts(&c("2♦"), &cards("J♣")));
    assert!(FaceCardImposesSuit.accepts(&c("2♦"), &cards("10♣")));
    assert!(!FaceCardImposesSuit.accepts(&c("2♣"), &cards("10♣")));
    // Pairs: L = 1 (odd) completes a pair; L = 2 (even) starts a new one.
    assert!(PairedSuitsAlternating.accepts(&c("2♣"), &cards("9♣")));
    assert!(!PairedSuitsAlternating.accepts(&c("2♦"), &cards("9♣")));
    assert!(PairedSuitsAlternating.accepts(&c("2♦"), &cards("9♣ 5♣")));
    assert!(!PairedSuitsAlternating.accepts(&c("2♣"), &cards("9♣ 5♣")));
    assert!(PairedRanksDistinct.accepts(&c("9♦"), &cards("9♣")));
    assert!(!PairedRanksDistinct.accepts(&c("8♦"), &cards("9♣")));
    assert!(PairedRanksDistinct.accepts(&c("8♦"), &cards("9♣ 9♥")));
    assert!(!PairedRanksDistinct.accepts(&c("9♦"), &cards("9♣ 9♥")));
    // x,x,y,y,x,x is legal: only the immediately previous pair must differ.
    assert!(PairedRanksDistinct.accepts(&c("9♦"), &cards("9♣ 9♥ 3♦ 3♦")));
}
