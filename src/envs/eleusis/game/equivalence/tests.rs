//! Tests of the equivalence check: self-checks, hand-reasoned mismatches, the exception
//! path, RNG-path vectors cross-checked with a CPython re-implementation, the recorded
//! simulation vectors and a timing probe.

use super::super::card::Suit;
use super::super::setup::RoundSetup;
use super::*;
use crate::envs::eleusis::test_support::*;

type Res = Result<bool, RuleEvalError>;

fn c(s: &str) -> Card {
    s.parse().expect("card")
}

fn cards(s: &str) -> Vec<Card> {
    s.split_whitespace().map(c).collect()
}

fn run(actual: &dyn RuleFn, guessed: &dyn RuleFn, start: &[Card]) -> Verdict {
    check(actual, guessed, start, &SimulationParams::default())
}

#[test]
fn every_rule_is_equivalent_to_itself() {
    for rule in SecretRule::ALL {
        let starter = RoundSetup::new(rule, 0).expect("setup").starter;
        let v = run(&rule, &rule, &[starter]);
        assert!(v.equivalent, "{}: {}", rule.name(), v.message);
        assert_eq!(v.comparisons, 208_000);
        assert_eq!(v.mismatches, 0);
        assert_eq!(v.message, "Rules appear equivalent: 208000 comparisons, all matched");
    }
}

/// Reasoning: from [4♠] the first universe card is A♥; even_ranks_only rejects it (odd),
/// only_red_cards accepts it (red): direct mismatch at sim 1, turn 1, first comparison.
#[test]
fn simple_mismatch_message() {
    let v = run(&SecretRule::EvenRanksOnly, &SecretRule::OnlyRedCards, &cards("4♠"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 1: card=A♥, actual=False, guessed=True");
    assert_eq!((v.equivalent, v.comparisons, v.mismatches), (false, 1, 1));
    // Reversed roles: A♥ still differs first.
    let v = run(&SecretRule::OnlyRedCards, &SecretRule::EvenRanksOnly, &cards("4♠"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 1: card=A♥, actual=True, guessed=False");
    // face_cards_only vs black_face_cards: first difference is J♥ (index 40).
    let v = run(&SecretRule::FaceCardsOnly, &SecretRule::BlackFaceCards, &cards("K♠"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 1: card=J♥, actual=True, guessed=False");
    assert_eq!(v.comparisons, 41);
}

/// Forward-reachability: "same colour as previous" is equivalent to "red only" from a
/// red mainline (the write-up's example, §3.3).
#[test]
fn forward_walk_equivalence() {
    let same_color = |card: &Card, m: &[Card]| -> Res { Ok(m.last().is_none_or(|l| l.color() == card.color())) };
    let v = run(&SecretRule::OnlyRedCards, &same_color, &cards("5♥"));
    assert!(v.equivalent, "{}", v.message);
    let v = run(&SecretRule::OnlyRedCards, &same_color, &cards("5♠"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 1: card=A♥, actual=True, guessed=False");
}

#[test]
fn exception_path_counts_and_continues() {
    // Raises on every card whose rank differs from the last card's (48 of 52 after 8♥).
    let raising = |card: &Card, m: &[Card]| -> Res {
        match m.last() {
            None => Ok(true),
            Some(last) if card.rank == last.rank => Ok(false),
            Some(_) => Err(RuleEvalError::Exception("NameError: name 'getattr' is not defined".into())),
        }
    };
    let ml = cards("6♥ J♦ 10♠ K♠ 7♣ J♠ 9♥ K♦ 8♥");
    let v = run(&SecretRule::AlternatingFaceNumber, &raising, &ml);
    assert_eq!(v.message, "Rules differ: 48/52 comparisons mismatched. Stopped at simulation 1, turn 1.");
    assert_eq!((v.comparisons, v.mismatches), (52, 48));
    // An exception followed by a direct mismatch in the same turn: the direct mismatch
    // message wins, both mismatches are counted.
    let mixed = |card: &Card, _: &[Card]| -> Res { if card.rank == 1 { Err(RuleEvalError::Timeout { limit_ms: 1 }) } else { Ok(card.rank != 2) } };
    let v = run(&SecretRule::NoSpades, &mixed, &cards("3♥"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 1: card=2♥, actual=True, guessed=False");
    assert_eq!((v.comparisons, v.mismatches), (5, 5));
}

#[test]
fn pre_check_verdicts() {
    assert_eq!(Verdict::no_code().message, "No code provided for guessed rule");
    assert_eq!(Verdict::syntax_error("invalid syntax (<string>, line 2)").message, "Guessed rule code has syntax errors: invalid syntax (<string>, line 2)");
    assert!(!Verdict::no_code().equivalent);
}

/// Expected messages from `/work/scratch/eleusis/py/deep.py`, an independent Python
/// re-implementation of §3.3 using CPython's `random` and the reference rule code.
#[test]
fn deep_rng_paths_match_python() {
    let ds = SecretRule::DifferentSuit;
    let g1 = |card: &Card, m: &[Card]| -> Res {
        let r = ds.accepts(card, m);
        let flip = m.len() >= 38 && m.last() == Some(&c("K♠")) && *card == c("A♥");
        Ok(r != flip)
    };
    let v = run(&ds, &g1, &cards("9♣"));
    assert_eq!(v.message, "Mismatch at sim 3, turn 40: card=A♥, actual=True, guessed=False");

    let pr = SecretRule::PairedRanksDistinct;
    let g2 = |card: &Card, m: &[Card]| -> Res {
        if m.len() == 40 && card.rank == 13 && m.last().map(|l| l.rank) == Some(5) {
            return Err(RuleEvalError::Exception("NameError".into()));
        }
        Ok(pr.accepts(card, m))
    };
    let v = run(&pr, &g2, &cards("7♥"));
    assert_eq!(v.message, "Rules differ: 4/45760 comparisons mismatched. Stopped at simulation 22, turn 40.");

    let cy = SecretRule::CyclicSuitOrder;
    let g3 = |card: &Card, m: &[Card]| -> Res {
        let aces = m.iter().filter(|x| x.rank == 1).count();
        if m.len() >= 30 && aces >= 3 && *card == c("2♦") {
            return Ok(true);
        }
        Ok(cy.accepts(card, m))
    };
    let v = run(&cy, &g3, &cards("A♥"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 30: card=2♦, actual=False, guessed=True");

    let small = SimulationParams { num_simulations: 3, turns_per_simulation: 7, seed: 42 };
    let rb = SecretRule::RedUpBlackDown;
    let v = check(&rb, &rb, &cards("K♠"), &small);
    assert_eq!(v.message, "Rules appear equivalent: 1092 comparisons, all matched");

    // Walks that die early (nothing accepted after a King) and their RNG path.
    let a5 = |card: &Card, m: &[Card]| -> Res {
        let _ = card;
        Ok(m.last().is_none_or(|l| l.rank != 13))
    };
    let g5 = |card: &Card, m: &[Card]| -> Res {
        let base = m.last().is_none_or(|l| l.rank != 13);
        Ok(base && !(m.len() >= 12 && card.rank == 12 && m.last() == Some(&c("Q♣"))))
    };
    let v = run(&a5, &g5, &cards("2♥"));
    assert_eq!(v.message, "Mismatch at sim 7, turn 25: card=Q♥, actual=True, guessed=False");
    let v = run(&a5, &a5, &cards("2♥"));
    assert_eq!(v.message, "Rules appear equivalent: 69784 comparisons, all matched");
}

/// All 26 × 26 (actual, guessed) library pairs from each actual rule's round-1 starter:
/// FNV-1a-64 of the 676 messages joined by newlines, as computed by `xcheck.py`.
#[test]
fn library_matrix_matches_python() {
    let mut blob = String::new();
    for (i, actual) in SecretRule::ALL.iter().enumerate() {
        let starter = RoundSetup::new(*actual, 0).expect("setup").starter;
        for guessed in SecretRule::ALL {
            let v = run(actual, &guessed, &[starter]);
            // Same verdict when one or both sides go through the per-card path.
            let slow_a = |card: &Card, m: &[Card]| -> Res { Ok(actual.accepts(card, m)) };
            let slow_g = |card: &Card, m: &[Card]| -> Res { Ok(guessed.accepts(card, m)) };
            assert_eq!(run(&slow_a, &slow_g, &[starter]), v);
            assert_eq!(run(actual, &slow_g, &[starter]), v);
            assert_eq!(run(&slow_a, &guessed, &[starter]), v);
            if i > 0 || guessed.index() > 0 {
                blob.push('\n');
            }
            blob.push_str(&v.message);
        }
    }
    assert_eq!(blob.len(), 43734);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in blob.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    assert_eq!(h, 0x2db9_efce_fe7b_59fc);
    let v = run(&SecretRule::DifferentSuit, &SecretRule::FaceCardImposesSuit, &cards("3♦"));
    assert_eq!(v.message, "Mismatch at sim 1, turn 9: card=A♥, actual=True, guessed=False");
}

/// The 13 recorded checks of `vectors.json`, with the recorded guess code translated
/// to Rust by hand (the Python source is in the results files).
#[test]
fn recorded_simulation_vectors() {
    fn suit_rule(card: &Card, m: &[Card], f: fn(Suit) -> &'static [Suit]) -> Res {
        Ok(match m.last() {
            None => true,
            Some(l) => f(l.suit).contains(&card.suit),
        })
    }
    let v = vectors();
    assert_eq!(v.simulation_vectors.len(), 13);
    for sv in &v.simulation_vectors {
        let actual = SecretRule::from_name(&sv.rule_name).expect("rule");
        let guessed: Box<dyn RuleFn> = match (sv.round_number, sv.turn_number) {
            (2, 6) => Box::new(|c: &Card, _: &[Card]| -> Res { Ok(!matches!(c.rank, 2 | 3 | 5 | 7 | 11 | 13)) }),
            (5, 6) => Box::new(|c: &Card, m: &[Card]| -> Res {
                Ok(match m.last().map(|l| l.suit) {
                    None => matches!(c.suit, Suit::Hearts | Suit::Clubs),
                    Some(Suit::Hearts) => c.suit == Suit::Clubs,
                    Some(Suit::Clubs) => c.suit == Suit::Hearts,
                    Some(_) => false,
                })
            }),
            (5, 8) | (5, 9) => Box::new(|c: &Card, m: &[Card]| -> Res { Ok(m.last().is_none_or(|l| c.rank == l.rank)) }),
            (46, 5) => Box::new(|c: &Card, m: &[Card]| -> Res { Ok(m.last().is_none_or(|l| c.rank >= l.rank)) }),
            (49, 4) => Box::new(SecretRule::AlternatingColors),
            (55, 7) => Box::new(|c: &Card, m: &[Card]| -> Res {
                Ok(match m.last().map(|l| l.suit) {
                    None => c.color() == super::super::card::Color::Black,
                    Some(p) => (p == Suit::Clubs && c.suit == Suit::Spades) || (p == Suit::Spades && c.suit == Suit::Clubs),
                })
            }),
            (58, 9) => Box::new(SecretRule::CyclicSuitOrder),
            (62, 15) => Box::new(|c: &Card, m: &[Card]| -> Res {
                suit_rule(c, m, |p| match p {
                    Suit::Hearts => &[Suit::Diamonds],
                    Suit::Diamonds => &[Suit::Hearts, Suit::Spades],
                    Suit::Spades => &[Suit::Diamonds, Suit::Clubs],
                    Suit::Clubs => &[Suit::Spades],
                })
            }),
            (62, 17) => Box::new(|c: &Card, m: &[Card]| -> Res {
                let pos = |s: Suit| match s {
                    Suit::Hearts => 0i32,
                    Suit::Diamonds => 1,
                    Suit::Spades => 2,
                    Suit::Clubs => 3,
                };
                Ok(m.last().is_none_or(|l| (pos(l.suit) - pos(c.suit)).abs() == 1))
            }),
            (70, 6) | (70, 7) => Box::new(SecretRule::DifferentSuit),
            (42, 11) => Box::new(|c: &Card, m: &[Card]| -> Res {
                match m.last() {
                    None => Ok(true),
                    Some(l) if c.rank == l.rank => Ok(false),
                    Some(_) => Err(RuleEvalError::Exception("NameError: name 'getattr' is not defined".into())),
                }
            }),
            other => panic!("unexpected vector {other:?} ({})", sv.kind),
        };
        let verdict = run(&actual, guessed.as_ref(), &sv.mainline_after_turn);
        assert_eq!(verdict.message, sv.expected_reasoning, "{} r{} t{}", sv.results_file, sv.round_number, sv.turn_number);
        assert_eq!(verdict.equivalent, sv.expected_correct);
    }
}

/// Timing of one full 208,000-comparison native check (run with `--nocapture`).
#[test]
fn full_check_timing() {
    let rule = SecretRule::FaceCardImposesSuit;
    let start = cards("7♦");
    let reps = 50;
    let t0 = std::time::Instant::now();
    for _ in 0..reps {
        let v = run(&rule, &rule, &start);
        assert_eq!(v.comparisons, 208_000);
    }
    let per = t0.elapsed() / reps;
    println!("full equivalence check (mask path): {per:?} per 208,000-comparison check");
    // Card-by-card path: a closure guess forces per-card evaluation of both sides.
    let slow = |card: &Card, m: &[Card]| -> Res { Ok(rule.accepts(card, m)) };
    let t0 = std::time::Instant::now();
    for _ in 0..reps {
        let v = run(&slow, &slow, &start);
        assert_eq!(v.comparisons, 208_000);
    }
    let per = t0.elapsed() / reps;
    println!("full equivalence check (per-card path): {per:?} per 208,000-comparison check");
}
