//! Unit tests of `deck`.

use super::*;

#[test]
fn double_deck_order() {
    let d = double_deck();
    assert_eq!(d.len(), 104);
    assert_eq!(d[0].to_string(), "A♥");
    assert_eq!(d[12].to_string(), "K♥");
    assert_eq!(d[13].to_string(), "A♦");
    assert_eq!(d[51].to_string(), "K♠");
    assert_eq!(d[52].to_string(), "A♥");
    assert_eq!(&d[..52], &d[52..]);
}

#[test]
fn universe_order() {
    let u = universe();
    let s: Vec<String> = u.iter().take(5).map(|c| c.to_string()).collect();
    assert_eq!(s, ["A♥", "A♦", "A♣", "A♠", "2♥"]);
    assert_eq!(u[51].to_string(), "K♠");
    let mut set = std::collections::HashSet::new();
    assert!(u.iter().all(|c| set.insert(*c)));
    for (i, c) in u.iter().enumerate() {
        assert_eq!(universe_index(*c), Some(i));
    }
    assert_eq!(universe_index(Card::new(0, Suit::Spades)), None);
    assert_eq!(universe_index(Card::new(14, Suit::Spades)), None);
}
