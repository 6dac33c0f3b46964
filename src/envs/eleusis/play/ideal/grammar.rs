//! The rule grammar of the ideal observer: atoms (static card properties, relations to the
//! previous card), productions (single atoms, two-atom combinations, conditionals on the
//! previous card, position-parity patterns) with their prior probabilities, each rule's
//! acceptance-mask table over the 105 states every grammar rule can distinguish (previous
//! card × mainline-length parity, and the empty mainline), and readable renderings.

use crate::envs::eleusis::game::card::{Card, Color, Suit};
use crate::envs::eleusis::game::deck::{universe, universe_index};
use crate::envs::eleusis::game::rule::SecretRule;

/// States a table covers: index `2·k + p` = previous card `universe()[k]` with mainline
/// length ≡ p (mod 2); [`EMPTY`] = the empty mainline (starter selection).
pub(super) const STATES: usize = 105;
/// Table index of the empty mainline.
pub(super) const EMPTY: usize = 104;
/// All 52 universe cards.
pub(super) const FULL: u64 = (1u64 << 52) - 1;

/// The table index of a mainline; `None` for a last card outside the universe.
pub(super) fn state_of(mainline: &[Card]) -> Option<usize> {
    match mainline.last() {
        None => Some(EMPTY),
        Some(last) => universe_index(*last).map(|k| 2 * k + mainline.len() % 2),
    }
}

/// Prior mass of each production (sums to 1): how often the 26 library rules use each
/// production, with add-one smoothing ((count + 1) / 36; counts 0, 10, 7, 3, 0, 2, 2, 0,
/// 2, 0 in the order below), so the prior knows what *kinds* of rules Eleusis uses, not
/// which ones. A "flip" switches between a branch and its opposite (one atom less to say).
const P_TRUE: f64 = 1.0 / 36.0;
const P_STATIC: f64 = 11.0 / 36.0;
const P_REL: f64 = 8.0 / 36.0;
const P_STATIC_PAIR: f64 = 4.0 / 36.0;
const P_STATIC_REL: f64 = 1.0 / 36.0;
const P_REL_PAIR: f64 = 3.0 / 36.0;
const P_COND_FLIP: f64 = 3.0 / 36.0;
const P_COND: f64 = 1.0 / 36.0;
const P_PARITY_FLIP: f64 = 3.0 / 36.0;
const P_PARITY: f64 = 1.0 / 36.0;
/// Prior factor of an extra starter constraint without a matching static atom.
const START_FALLBACK: f64 = 0.01;

/// A property of one card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StaticAtom {
    Color(Color),
    Suit(Suit),
    NotSuit(Suit),
    SuitPair(Suit, Suit),
    Even,
    Odd,
    Face,
    Number,
    Prime,
    NonPrime,
    RankEq(u8),
    RankGe(u8),
    RankLe(u8),
    RankIn(u8, u8),
}

fn suit_word(s: Suit) -> &'static str {
    match s {
        Suit::Hearts => "a heart",
        Suit::Diamonds => "a diamond",
        Suit::Clubs => "a club",
        Suit::Spades => "a spade",
    }
}

impl StaticAtom {
    fn test(self, c: Card) -> bool {
        use StaticAtom::*;
        match self {
            Color(col) => c.color() == col,
            Suit(s) => c.suit == s,
            NotSuit(s) => c.suit != s,
            SuitPair(a, b) => c.suit == a || c.suit == b,
            Even => c.rank.is_multiple_of(2),
            Odd => !c.rank.is_multiple_of(2),
            Face => c.rank >= 11,
            Number => c.rank <= 10,
            Prime => matches!(c.rank, 2 | 3 | 5 | 7 | 11 | 13),
            NonPrime => !matches!(c.rank, 2 | 3 | 5 | 7 | 11 | 13),
            RankEq(r) => c.rank == r,
            RankGe(r) => c.rank >= r,
            RankLe(r) => c.rank <= r,
            RankIn(a, b) => (a..=b).contains(&c.rank),
        }
    }

    /// Prior family (atoms of a family share its mass equally).
    fn family(self) -> usize {
        use StaticAtom::*;
        match self {
            Color(_) => 0,
            Suit(_) => 1,
            NotSuit(_) => 2,
            SuitPair(..) => 3,
            Even | Odd => 4,
            Face | Number => 5,
            Prime | NonPrime => 6,
            RankEq(_) => 7,
            RankGe(_) => 8,
            RankLe(_) => 9,
            RankIn(..) => 10,
        }
    }

    /// Whether the atom is about suits/colours (else about ranks).
    fn is_suit(self) -> bool {
        self.family() <= 3
    }

    /// Predicate phrase: "the card is …".
    fn phrase(self) -> String {
        use StaticAtom::*;
        match self {
            Color(c) => c.name().to_owned(),
            Suit(s) => suit_word(s).to_owned(),
            NotSuit(s) => format!("not {}", suit_word(s)),
            SuitPair(a, b) => format!("{} or {}", suit_word(a), suit_word(b)),
            Even => "of even rank".to_owned(),
            Odd => "of odd rank".to_owned(),
            Face => "a face card (rank 11-13)".to_owned(),
            Number => "a number card (rank 1-10)".to_owned(),
            Prime => "of prime rank (2, 3, 5, 7, 11, 13)".to_owned(),
            NonPrime => "of non-prime rank (1, 4, 6, 8, 9, 10, 12)".to_owned(),
            RankEq(r) => format!("of rank {r}"),
            RankGe(r) => format!("of rank {r} or more"),
            RankLe(r) => format!("of rank {r} or less"),
            RankIn(a, b) => format!("of rank {a} to {b}"),
        }
    }
}

/// A relation between the candidate card and the previous (last mainline) card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RelAtom {
    SameColor,
    DiffColor,
    SameSuit,
    DiffSuit,
    SameParity,
    DiffParity,
    SameFace,
    DiffFace,
    SameRank,
    DiffRank,
    Ge,
    Le,
    Gt,
    Lt,
    /// Same group, groups = {hearts, partner} and the other two suits.
    SameGroup(Suit),
    DiffGroup(Suit),
    /// Suit = successor of the previous suit in this cyclic order.
    Cycle([Suit; 4]),
    NextRank,
    PrevRank,
    Adjacent,
    Within1,
}

fn in_hearts_group(s: Suit, partner: Suit) -> bool {
    s == Suit::Hearts || s == partner
}

fn suit_plural(s: Suit) -> &'static str {
    s.name()
}

impl RelAtom {
    fn test(self, c: Card, last: Card) -> bool {
        use RelAtom::*;
        let (r, l) = (i32::from(c.rank), i32::from(last.rank));
        match self {
            SameColor => c.color() == last.color(),
            DiffColor => c.color() != last.color(),
            SameSuit => c.suit == last.suit,
            DiffSuit => c.suit != last.suit,
            SameParity => r % 2 == l % 2,
            DiffParity => r % 2 != l % 2,
            SameFace => c.is_face() == last.is_face(),
            DiffFace => c.is_face() != last.is_face(),
            SameRank => r == l,
            DiffRank => r != l,
            Ge => r >= l,
            Le => r <= l,
            Gt => r > l,
            Lt => r < l,
            SameGroup(p) => in_hearts_group(c.suit, p) == in_hearts_group(last.suit, p),
            DiffGroup(p) => in_hearts_group(c.suit, p) != in_hearts_group(last.suit, p),
            Cycle(order) => {
                let pos = order.iter().position(|s| *s == last.suit).unwrap_or(0);
                c.suit == order[(pos + 1) % 4]
            }
            NextRank => r == l + 1,
            PrevRank => r == l - 1,
            Adjacent => (r - l).abs() == 1,
            Within1 => (r - l).abs() <= 1,
        }
    }

    fn family(self) -> usize {
        use RelAtom::*;
        match self {
            SameColor | DiffColor => 0,
            SameSuit | DiffSuit => 1,
            SameParity | DiffParity => 2,
            SameFace | DiffFace => 3,
            SameRank | DiffRank => 4,
            Ge | Le | Gt | Lt => 5,
            SameGroup(_) | DiffGroup(_) => 6,
            Cycle(_) => 7,
            NextRank | PrevRank | Adjacent | Within1 => 8,
        }
    }

    fn phrase(self) -> String {
        use RelAtom::*;
        let group = |p: Suit| {
            let others: Vec<&str> = Suit::ALL.iter().filter(|s| **s != Suit::Hearts && **s != p).map(|s| suit_plural(*s)).collect();
            format!("(hearts+{} vs {})", suit_plural(p), others.join("+"))
        };
        match self {
            SameColor => "the same colour as the previous card".to_owned(),
            DiffColor => "a different colour from the previous card".to_owned(),
            SameSuit => "the same suit as the previous card".to_owned(),
            DiffSuit => "a different suit from the previous card".to_owned(),
            SameParity => "of the same rank parity as the previous card".to_owned(),
            DiffParity => "of the opposite rank parity to the previous card".to_owned(),
            SameFace => "a face card exactly when the previous card is one".to_owned(),
            DiffFace => "a face card exactly when the previous card is not".to_owned(),
            SameRank => "the same rank as the previous card".to_owned(),
            DiffRank => "a different rank from the previous card".to_owned(),
            Ge => "of rank greater than or equal to the previous card's".to_owned(),
            Le => "of rank less than or equal to the previous card's".to_owned(),
            Gt => "of rank strictly greater than the previous card's".to_owned(),
            Lt => "of rank strictly less than the previous card's".to_owned(),
            SameGroup(p) => format!("in the same suit group as the previous card {}", group(p)),
            DiffGroup(p) => format!("in the other suit group than the previous card {}", group(p)),
            Cycle(order) => {
                let names: Vec<&str> = order.iter().map(|s| suit_plural(*s)).collect();
                format!("of the suit after the previous card's in the cycle {} -> hearts", names.join(" -> "))
            }
            NextRank => "of rank one more than the previous card's".to_owned(),
            PrevRank => "of rank one less than the previous card's".to_owned(),
            Adjacent => "of rank one more or one less than the previous card's".to_owned(),
            Within1 => "of rank within one of the previous card's".to_owned(),
        }
    }
}

/// A leaf of conditional and parity rules: a static atom or a relation (indices into the
/// atom lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Term {
    S(u16),
    R(u16),
}

/// Binary connective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    And,
    Or,
    Iff,
}

impl Op {
    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            Op::And => a & b,
            Op::Or => a | b,
            Op::Iff => !(a ^ b) & FULL,
        }
    }
}

/// One grammar expression (indices into [`Atoms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expr {
    /// Every card is accepted.
    True,
    /// A static property (also constrains the starter).
    Static(u16),
    /// A relation to the previous card (any card may start).
    Rel(u16),
    /// Rank property `op` suit property.
    StaticPair(Op, u16, u16),
    /// Static property `op` relation.
    StaticRel(Op, u16, u16),
    /// Relation `op` relation.
    RelPair(Op, u16, u16),
    /// If the previous card has static property `.0` then `.1` else `.2`.
    Cond(u16, Term, Term),
    /// Cards at even positions obey `.0`, cards at odd positions obey `.1`.
    Parity(Term, Term),
    /// A library rule without an identical grammar expression (special starter).
    Library(SecretRule),
}

/// Leading branches that come in opposite pairs (same/different colour, suit, parity,
/// face-ness and rank; ≥/≤; >/<; face/number; red/black; even/odd).
const FLIPS: usize = 20;

/// The atom lists with their masks and prior probabilities.
pub(super) struct Atoms {
    statics: Vec<StaticAtom>,
    static_mask: Vec<u64>,
    static_p: Vec<f64>,
    rels: Vec<RelAtom>,
    /// `rel_mask[i][k]`: cards accepted by relation i after `universe()[k]`.
    rel_mask: Vec<[u64; 52]>,
    rel_p: Vec<f64>,
    conds: Vec<u16>,
    branches: Vec<Term>,
}

/// Uniform over families, then uniform within a family.
fn family_prior(families: &[usize]) -> Vec<f64> {
    let n_fam = families.iter().copied().max().map_or(0, |m| m + 1);
    let mut size = vec![0usize; n_fam];
    for f in families {
        size[*f] += 1;
    }
    let used = size.iter().filter(|s| **s > 0).count() as f64;
    families.iter().map(|f| 1.0 / used / size[*f] as f64).collect()
}

impl Atoms {
    /// Builds the atom lists, their masks and priors.
    pub(super) fn new() -> Self {
        use StaticAtom as S;
        let mut statics = vec![S::Color(Color::Red), S::Color(Color::Black)];
        statics.extend(Suit::ALL.map(S::Suit));
        statics.extend(Suit::ALL.map(S::NotSuit));
        for (a, b) in [(Suit::Hearts, Suit::Clubs), (Suit::Hearts, Suit::Spades), (Suit::Diamonds, Suit::Clubs), (Suit::Diamonds, Suit::Spades)] {
            statics.push(S::SuitPair(a, b));
        }
        statics.extend([S::Even, S::Odd, S::Face, S::Number, S::Prime, S::NonPrime]);
        statics.extend((1..=13).map(S::RankEq));
        statics.extend((2..=13).map(S::RankGe));
        statics.extend((1..=12).map(S::RankLe));
        for a in 2..=12u8 {
            statics.extend((a + 1..=12).map(|b| S::RankIn(a, b)));
        }
        let cards = universe();
        let static_mask = statics.iter().map(|s| mask_of(|c| s.test(c), &cards)).collect();
        let static_p = family_prior(&statics.iter().map(|s| s.family()).collect::<Vec<_>>());

        use RelAtom as R;
        let mut rels = vec![
            R::SameColor,
            R::DiffColor,
            R::SameSuit,
            R::DiffSuit,
            R::SameParity,
            R::DiffParity,
            R::SameFace,
            R::DiffFace,
            R::SameRank,
            R::DiffRank,
            R::Ge,
            R::Le,
            R::Gt,
            R::Lt,
        ];
        let branch_rels = rels.len();
        for p in [Suit::Spades, Suit::Clubs] {
            rels.extend([R::SameGroup(p), R::DiffGroup(p)]);
        }
        let (d, c, s) = (Suit::Diamonds, Suit::Clubs, Suit::Spades);
        for [a, b, e] in [[d, c, s], [d, s, c], [c, d, s], [c, s, d], [s, d, c], [s, c, d]] {
            rels.push(R::Cycle([Suit::Hearts, a, b, e]));
        }
        rels.extend([R::NextRank, R::PrevRank, R::Adjacent, R::Within1]);
        let rel_mask = rels
            .iter()
            .map(|r| {
                let mut row = [0u64; 52];
                for (k, last) in cards.iter().enumerate() {
                    row[k] = mask_of(|c| r.test(c, *last), &cards);
                }
                row
            })
            .collect();
        let rel_p = family_prior(&rels.iter().map(|r| r.family()).collect::<Vec<_>>());

        let index = |a: StaticAtom| {
            let i = statics.iter().position(|s| *s == a).unwrap_or(0);
            u16::try_from(i).unwrap_or(0)
        };
        let mut conds = vec![index(S::Color(Color::Red)), index(S::Face), index(S::Even)];
        conds.extend(Suit::ALL.map(|s| index(S::Suit(s))));
        conds.push(index(S::SuitPair(Suit::Hearts, Suit::Spades)));
        let mut branches: Vec<Term> = (0..branch_rels).map(|i| Term::R(i as u16)).collect();
        for a in [S::Face, S::Number, S::Color(Color::Red), S::Color(Color::Black), S::Even, S::Odd] {
            branches.push(Term::S(index(a)));
        }
        branches.extend(Suit::ALL.map(|s| Term::S(index(S::Suit(s)))));
        Atoms { statics, static_mask, static_p, rels, rel_mask, rel_p, conds, branches }
    }

    fn term_mask(&self, t: Term, k: usize) -> u64 {
        match t {
            Term::S(i) => self.static_mask[usize::from(i)],
            Term::R(i) => self.rel_mask[usize::from(i)][k],
        }
    }

    /// On the empty mainline a relation constrains nothing.
    fn term_empty(&self, t: Term) -> u64 {
        match t {
            Term::S(i) => self.static_mask[usize::from(i)],
            Term::R(_) => FULL,
        }
    }

    fn term_phrase(&self, t: Term) -> String {
        match t {
            Term::S(i) => self.statics[usize::from(i)].phrase(),
            Term::R(i) => self.rels[usize::from(i)].phrase(),
        }
    }

    /// The acceptance table of `e`.
    pub(super) fn table(&self, e: Expr, out: &mut [u64; STATES]) {
        let tm = |t, k| self.term_mask(t, k);
        let (s, r) = (Term::S, Term::R);
        // Most rules ignore the parity: one mask per previous card, written twice.
        let mut per_card = |f: &dyn Fn(usize) -> u64| {
            for k in 0..52 {
                let m = f(k);
                out[2 * k] = m;
                out[2 * k + 1] = m;
            }
        };
        match e {
            Expr::True => per_card(&|_| FULL),
            Expr::Static(i) => per_card(&|k| tm(s(i), k)),
            Expr::Rel(i) => per_card(&|k| tm(r(i), k)),
            Expr::StaticPair(op, a, b) => per_card(&|k| op.apply(tm(s(a), k), tm(s(b), k))),
            Expr::StaticRel(op, a, b) => per_card(&|k| op.apply(tm(s(a), k), tm(r(b), k))),
            Expr::RelPair(op, a, b) => per_card(&|k| op.apply(tm(r(a), k), tm(r(b), k))),
            Expr::Cond(c, x, y) => {
                let cm = self.static_mask[usize::from(c)];
                per_card(&|k| if cm >> k & 1 == 1 { tm(x, k) } else { tm(y, k) });
            }
            Expr::Parity(x, y) => {
                for k in 0..52 {
                    out[2 * k + 1] = tm(x, k);
                    out[2 * k] = tm(y, k);
                }
            }
            Expr::Library(rule) => {
                for k in 0..52 {
                    for p in 0..2 {
                        out[2 * k + p] = library_mask(rule, k, p);
                    }
                }
            }
        }
        let te = |t| self.term_empty(t);
        out[EMPTY] = match e {
            Expr::True | Expr::Rel(_) | Expr::RelPair(..) | Expr::Cond(..) => FULL,
            Expr::Static(i) => te(s(i)),
            Expr::StaticPair(op, a, b) => op.apply(te(s(a)), te(s(b))),
            Expr::StaticRel(op, a, b) => op.apply(te(s(a)), te(r(b))),
            Expr::Parity(_, y) => te(y),
            Expr::Library(rule) => rule.acceptance_mask(&[]),
        };
    }

    /// Prior factor of a starter constraint accepting exactly `mask` on the empty mainline
    /// (the probability of the static atom saying so).
    pub(super) fn start_prior(&self, mask: u64) -> f64 {
        let atom = self.static_mask.iter().position(|m| *m == mask);
        atom.map_or(START_FALLBACK, |i| self.static_p[i] * P_STATIC)
    }

    /// Readable rule text of `e`.
    pub(super) fn render(&self, e: Expr) -> String {
        let st = |i: u16| self.statics[usize::from(i)].phrase();
        let rl = |i: u16| self.rels[usize::from(i)].phrase();
        let any = " Any card may start the line.";
        let op_word = |op| match op {
            Op::And => "and",
            Op::Or => "or",
            Op::Iff => "if and only if it is",
        };
        match e {
            Expr::True => "Every card is accepted.".to_owned(),
            Expr::Static(i) => format!("Each card must be {}.", st(i)),
            Expr::Rel(i) => format!("Each card must be {}.{any}", rl(i)),
            Expr::StaticPair(Op::Iff, a, b) => {
                format!("A card is accepted if it is {} if and only if it is {}.", st(a), st(b))
            }
            Expr::StaticPair(op, a, b) => format!("Each card must be {} {} {}.", st(a), op_word(op), st(b)),
            Expr::StaticRel(op, a, b) => {
                let start = if op == Op::And { "" } else { any };
                format!("Each card must be {} {} {}.{start}", st(a), op_word(op), rl(b))
            }
            Expr::RelPair(op, a, b) => format!("Each card must be {} {} {}.{any}", rl(a), op_word(op), rl(b)),
            Expr::Cond(c, x, y) => {
                format!("If the previous card is {}, the next card must be {}; otherwise it must be {}.{any}", st(c), self.term_phrase(x), self.term_phrase(y))
            }
            Expr::Parity(x, y) => format!(
                "Cards at even positions of the mainline (2nd, 4th, ...) must be {}; cards at odd positions (1st, 3rd, ...) must be {}.",
                self.term_phrase(x),
                self.term_phrase(y)
            ),
            Expr::Library(rule) => rule.description().to_owned(),
        }
    }
}

fn mask_of(f: impl Fn(Card) -> bool, cards: &[Card; 52]) -> u64 {
    cards.iter().enumerate().filter(|(_, c)| f(**c)).fold(0, |m, (i, _)| m | 1u64 << i)
}

/// A library rule's mask after a mainline of parity `p` ending in `universe()[k]`.
fn library_mask(rule: SecretRule, k: usize, p: usize) -> u64 {
    let last = universe()[k];
    if p == 1 { rule.acceptance_mask(&[last]) } else { rule.acceptance_mask(&[last, last]) }
}

/// Calls `emit` with every expression of the grammar and its prior probability.
pub(super) fn expressions(a: &Atoms, emit: &mut dyn FnMut(Expr, f64)) {
    let ns = a.statics.len();
    let nr = a.rels.len();
    let idx = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
    emit(Expr::True, P_TRUE);
    for i in 0..ns {
        emit(Expr::Static(idx(i)), P_STATIC * a.static_p[i]);
    }
    for i in 0..nr {
        emit(Expr::Rel(idx(i)), P_REL * a.rel_p[i]);
    }
    // Rank property with suit property: within-dimension priors renormalised.
    let mass = |suit: bool| -> f64 { (0..ns).filter(|i| a.statics[*i].is_suit() == suit).map(|i| a.static_p[i]).sum() };
    let (m_suit, m_rank) = (mass(true), mass(false));
    for i in (0..ns).filter(|i| !a.statics[*i].is_suit()) {
        for j in (0..ns).filter(|j| a.statics[*j].is_suit()) {
            let p = P_STATIC_PAIR / 3.0 * a.static_p[i] / m_rank * a.static_p[j] / m_suit;
            for op in [Op::And, Op::Or, Op::Iff] {
                emit(Expr::StaticPair(op, idx(i), idx(j)), p);
            }
        }
    }
    for i in 0..ns {
        for j in 0..nr {
            let p = P_STATIC_REL / 2.0 * a.static_p[i] * a.rel_p[j];
            for op in [Op::And, Op::Or] {
                emit(Expr::StaticRel(op, idx(i), idx(j)), p);
            }
        }
    }
    for i in 0..nr {
        for j in i + 1..nr {
            // Unordered pair: both orders' mass.
            let p = P_REL_PAIR * a.rel_p[i] * a.rel_p[j];
            for op in [Op::And, Op::Or] {
                emit(Expr::RelPair(op, idx(i), idx(j)), p);
            }
        }
    }
    let nb = a.branches.len() as f64;
    let pair = 1.0 / nb / (nb - 1.0);
    let nc = a.conds.len() as f64;
    // Branches 0..FLIPS come in opposite pairs (2i, 2i + 1).
    let flips = FLIPS as f64;
    for &c in &a.conds {
        for i in 0..FLIPS {
            emit(Expr::Cond(c, a.branches[i], a.branches[i ^ 1]), P_COND_FLIP / nc / flips);
        }
    }
    for i in 0..FLIPS {
        emit(Expr::Parity(a.branches[i], a.branches[i ^ 1]), P_PARITY_FLIP / flips);
    }
    for &c in &a.conds {
        for &x in &a.branches {
            for &y in a.branches.iter().filter(|y| **y != x) {
                emit(Expr::Cond(c, x, y), P_COND / nc * pair);
            }
        }
    }
    for &x in &a.branches {
        for &y in a.branches.iter().filter(|y| **y != x) {
            emit(Expr::Parity(x, y), P_PARITY * pair);
        }
    }
}
