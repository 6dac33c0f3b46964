//! Unit tests of `setup`.

use super::*;
use crate::envs::eleusis::test_support::*;

#[test]
fn round_one_example() {
    let s = RoundSetup::new(SecretRule::EvenRanksOnly, 0).expect("setup");
    assert_eq!(s.seed, 3991486048);
    let hand: Vec<String> = s.hand.iter().map(ToString::to_string).collect();
    assert_eq!(hand.join(" "), "8♦ 2♥ A♠ 2♠ 3♦ 6♥ 6♠ J♥ 4♣ 4♣ 7♦ 7♥");
    assert_eq!(s.discarded.iter().map(ToString::to_string).collect::<Vec<_>>(), ["7♠", "K♣"]);
    assert_eq!(s.starter.to_string(), "4♠");
    assert_eq!(s.deck.len(), 104 - 12 - 3);
}

#[test]
fn all_78_rounds_match_vectors() {
    let v = vectors();
    assert_eq!(v.rounds.len(), 78);
    let mut total_discarded = 0;
    for (i, r) in v.rounds.iter().enumerate() {
        let rule = SecretRule::ALL[i / 3];
        let batch = (i % 3) as u32;
        assert_eq!(r.round_number as usize, i + 1);
        assert_eq!((r.rule_index, r.rule_name.as_str(), r.batch_round_index), (rule.index(), rule.name(), batch));
        assert_eq!(round_seed(rule, batch), r.round_seed, "seed of round {}", r.round_number);
        let deck = shuffled_deck(r.round_seed);
        assert_eq!(deck, r.shuffled_deck_top_first, "deck of round {}", r.round_number);
        let s = RoundSetup::new(rule, batch).expect("setup");
        assert_eq!(s.seed, r.round_seed);
        assert_eq!(s.hand, r.initial_hand, "hand of round {}", r.round_number);
        assert_eq!(s.discarded, r.discarded_before_starter, "discards of round {}", r.round_number);
        assert_eq!(s.starter, r.starter, "starter of round {}", r.round_number);
        let used = 12 + s.discarded.len() + 1;
        assert_eq!(s.deck.iter().copied().collect::<Vec<_>>(), deck[used..].to_vec());
        assert!(s.deck.len() >= 60);
        total_discarded += s.discarded.len();
    }
    assert_eq!(total_discarded, 178);
}

#[test]
fn seed_modulo_and_errors() {
    assert!(round_seed(SecretRule::EvenRanksOnly, u32::MAX) < 1 << 32);
    assert_eq!(round_seed(SecretRule::EvenRanksOnly, u32::MAX), (42 + 3991486006u64 + u64::from(u32::MAX)) - (1 << 32));
    assert_eq!(RoundSetup::from_seed(SecretRule::OnlyAces, 1, 105), Err(SetupError::HandTooLarge { hand_size: 105, deck_size: 104 }));
    // With a 100-card hand only 4 cards remain; find a seed where none is an Ace.
    let err = (0..50u64)
        .map(|seed| RoundSetup::from_seed(SecretRule::OnlyAces, seed, 100))
        .find(Result::is_err)
        .expect("some seed leaves no Ace among the last 4 cards");
    assert_eq!(err, Err(SetupError::NoStarter { rule: "only_aces" }));
}

/// md5 of every rule code stored in the results files ends with the H constant.
#[test]
fn results_rule_code_md5_matches_constants() {
    let v = vectors();
    for file in RESULTS_FILES {
        let res = results(file);
        let library = res["checkpoint"]["rules_library"].as_array().expect("library");
        assert_eq!(library.len(), 26);
        for (rule, entry) in SecretRule::ALL.iter().zip(library) {
            assert_eq!(entry["name"].as_str(), Some(rule.name()));
            assert_eq!(entry["description"].as_str(), Some(rule.description()));
            let code = entry["code"].as_str().expect("code");
            let digest = md5_hex(code.as_bytes());
            assert_eq!(digest, v.rules[rule.index()].code_md5);
            assert_eq!(md5_low32(code.as_bytes()), rule.code_md5_low32(), "{}", rule.name());
        }
        for round in res["rounds"].as_array().expect("rounds") {
            let rule = SecretRule::from_name(round["rule_name"].as_str().expect("name")).expect("known rule");
            let code = round["rule_code"].as_str().expect("rule_code");
            assert_eq!(md5_low32(code.as_bytes()), rule.code_md5_low32());
        }
    }
}
