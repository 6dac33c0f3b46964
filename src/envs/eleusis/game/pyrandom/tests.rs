//! Unit tests of `pyrandom`.

use super::*;

#[test]
fn first_outputs_seed_42() {
    let mut r = PyRandom::new(42);
    let got: Vec<u32> = (0..5).map(|_| r.next_u32()).collect();
    assert_eq!(got, vec![2746317213, 478163327, 107420369, 3184935163, 1181241943]);
}

#[test]
fn choice_vector_seed_42() {
    let mut r = PyRandom::new(42);
    let items: Vec<usize> = (0..52).collect();
    let got: Vec<usize> = (0..10).map(|_| *r.choice(&items).expect("non-empty")).collect();
    assert_eq!(got, vec![40, 7, 1, 47, 17, 15, 14, 8, 47, 6]);
}

#[test]
fn empty_choice_and_zero_bound() {
    let mut r = PyRandom::new(1);
    let mut r2 = r.clone();
    let empty: [u8; 0] = [];
    assert_eq!(r.choice(&empty), None);
    assert_eq!(r.randbelow(0), 0);
    assert_eq!(r.getrandbits(0), 0);
    assert_eq!(r.next_u32(), r2.next_u32(), "no output consumed");
}

/// Values computed with CPython 3.11: `random.Random(0).getrandbits(32)`,
/// `Random(2**32).getrandbits(32)` (two-limb key), `Random(7).getrandbits(40)`,
/// `Random(12345)._randbelow(10**12)` × 5.
#[test]
fn cpython_seeding_and_wide_bits() {
    assert_eq!(PyRandom::new(0).next_u32(), 3626764237);
    assert_eq!(PyRandom::new(1 << 32).next_u32(), 485306839);
    assert_eq!(PyRandom::new(7).getrandbits(40), 1_040_772_936_760);
    let mut r = PyRandom::new(12345);
    let got: Vec<u64> = (0..5).map(|_| r.randbelow(1_000_000_000_000)).collect();
    assert_eq!(got, vec![804_948_253_063, 897_691_841_093, 884_012_530_637, 937_585_518_914, 297_184_512_596]);
}

#[test]
fn shuffle_matches_cpython() {
    // random.Random(3).shuffle(list(range(10)))
    let mut v: Vec<u32> = (0..10).collect();
    PyRandom::new(3).shuffle(&mut v);
    assert_eq!(v, vec![1, 5, 6, 0, 9, 4, 7, 2, 8, 3]);
}
