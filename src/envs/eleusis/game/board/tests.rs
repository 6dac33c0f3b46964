//! Unit tests of `board`.

use super::*;

fn c(s: &str) -> Card {
    s.parse().expect("card")
}

#[test]
fn spec_example_board_string() {
    let mut b = Board::with_starter(c("K♠"));
    b.play(c("8♦"), false).expect("play");
    b.play(c("K♣"), true).expect("play");
    b.play(c("J♥"), true).expect("play");
    b.play(c("7♠"), false).expect("play");
    b.play(c("J♠"), true).expect("play");
    assert_eq!(b.board_string(), "K♠ [8♦] K♣ J♥ [7♠] J♠");
    assert_eq!(b.mainline.len(), 4);
    assert_eq!(b.sidelines.len(), 4);
}

#[test]
fn multiple_rejections_and_empty() {
    let mut b = Board::default();
    assert_eq!(b.board_string(), "(empty)");
    assert_eq!(b.play(c("2♥"), false), Err(BoardError::EmptyMainline(c("2♥"))));
    b.play(c("2♥"), true).expect("play");
    b.play(c("3♥"), false).expect("play");
    b.play(c("4♥"), false).expect("play");
    assert_eq!(b.board_string(), "2♥ [3♥] [4♥]");
    // Inconsistent hand-built sidelines never panic.
    let b2 = Board { mainline: vec![c("A♠"), c("2♠")], sidelines: vec![] };
    assert_eq!(b2.board_string(), "A♠ 2♠");
}
