//! Unit tests of `card`.

use super::*;

#[test]
fn display_matches_spec_examples() {
    assert_eq!(Card::new(10, Suit::Diamonds).to_string(), "10♦");
    assert_eq!(Card::new(13, Suit::Spades).to_string(), "K♠");
    assert_eq!(Card::new(1, Suit::Hearts).to_string(), "A♥");
    assert_eq!(Card::new(12, Suit::Clubs).to_string(), "Q♣");
    assert_eq!("\u{2665}\u{2666}\u{2663}\u{2660}", "♥♦♣♠");
}

#[test]
fn parse_roundtrips_all_52() {
    for suit in Suit::ALL {
        for rank in 1..=13 {
            let c = Card::new(rank, suit);
            assert_eq!(c.to_string().parse::<Card>(), Ok(c));
        }
    }
}

#[test]
fn parse_rejects_bad_input() {
    assert_eq!("".parse::<Card>(), Err(CardParseError::Empty));
    assert!(matches!("10".parse::<Card>(), Err(CardParseError::MissingSuit(_))));
    assert!(matches!("1♥".parse::<Card>(), Err(CardParseError::InvalidRank(_))));
    assert!(matches!("11♥".parse::<Card>(), Err(CardParseError::InvalidRank(_))));
    assert!(matches!(" A♥".parse::<Card>(), Err(CardParseError::InvalidRank(_))));
    assert!(matches!("A♥\u{fe0f}".parse::<Card>(), Err(CardParseError::MissingSuit(_))));
    assert!(matches!("♥".parse::<Card>(), Err(CardParseError::InvalidRank(_))));
    assert_eq!(Card::try_new(0, Suit::Hearts), Err(CardParseError::RankOutOfRange(0)));
    assert_eq!(Card::new(14, Suit::Hearts).to_string(), "14♥");
}

#[test]
fn attributes() {
    assert_eq!(Suit::Hearts.name(), "hearts");
    assert_eq!(Suit::Spades.symbol(), '♠');
    assert_eq!(Suit::Diamonds.color(), Color::Red);
    assert_eq!(Card::new(3, Suit::Clubs).color().name(), "black");
    assert!(Card::new(11, Suit::Clubs).is_face());
    assert!(!Card::new(10, Suit::Clubs).is_face());
}

#[test]
fn serde_as_string() {
    let c = Card::new(10, Suit::Diamonds);
    let js = serde_json::to_string(&c).expect("serialize");
    assert_eq!(js, "\"10♦\"");
    let back: Card = serde_json::from_str(&js).expect("deserialize");
    assert_eq!(back, c);
    assert!(serde_json::from_str::<Card>("\"Z♦\"").is_err());
    assert!(serde_json::from_str::<Card>("3").is_err());
    let v: Vec<Card> = serde_json::from_str(r#"["A♥","K♠"]"#).expect("vec");
    assert_eq!(v, vec![Card::new(1, Suit::Hearts), Card::new(13, Suit::Spades)]);
}
