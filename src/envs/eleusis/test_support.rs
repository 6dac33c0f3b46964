//! Test-only helpers: locate the shipped Eleusis test data (`shared/data/eleusis`) from
//! either the main crate or a scratch crate, and load `vectors.json` and results files.

use std::path::PathBuf;

use serde::Deserialize;

use super::game::card::Card;

/// The `shared/data/eleusis` folder: `$CARGO_MANIFEST_DIR/../shared/…` (main crate) or
/// `$CARGO_MANIFEST_DIR/../../shared/…` (scratch crate), whichever exists.
pub(crate) fn data_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [root.join("../shared/data/eleusis"), root.join("../../shared/data/eleusis")];
    for c in &candidates {
        if c.join("vectors.json").is_file() {
            return c.clone();
        }
    }
    panic!("eleusis test data not found; tried {candidates:?}");
}

/// One `vectors.json → rules[]` entry.
#[derive(Debug, Deserialize)]
pub(crate) struct VecRule {
    pub(crate) index: usize,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) code_md5: String,
    pub(crate) code_md5_low32: u32,
    pub(crate) cyclomatic: u32,
    pub(crate) node_count: u32,
}

/// One `vectors.json → rounds[]` entry (round setup vector).
#[derive(Debug, Deserialize)]
pub(crate) struct VecRound {
    pub(crate) round_number: u32,
    pub(crate) rule_index: usize,
    pub(crate) rule_name: String,
    pub(crate) batch_round_index: u32,
    pub(crate) round_seed: u64,
    pub(crate) shuffled_deck_top_first: Vec<Card>,
    pub(crate) initial_hand: Vec<Card>,
    pub(crate) discarded_before_starter: Vec<Card>,
    pub(crate) starter: Card,
}

/// One `vectors.json → simulation_vectors[]` entry (recorded equivalence check).
#[derive(Debug, Deserialize)]
pub(crate) struct VecSimulation {
    pub(crate) kind: String,
    pub(crate) results_file: String,
    pub(crate) round_number: usize,
    pub(crate) turn_number: usize,
    pub(crate) rule_name: String,
    pub(crate) mainline_after_turn: Vec<Card>,
    pub(crate) expected_correct: bool,
    pub(crate) expected_reasoning: String,
}

/// The parts of `vectors.json` the tests use.
#[derive(Debug, Deserialize)]
pub(crate) struct Vectors {
    pub(crate) rules: Vec<VecRule>,
    pub(crate) rounds: Vec<VecRound>,
    pub(crate) simulation_vectors: Vec<VecSimulation>,
}

/// Parses `vectors.json`.
pub(crate) fn vectors() -> Vectors {
    let path = data_dir().join("vectors.json");
    let text = std::fs::read_to_string(&path).expect("read vectors.json");
    serde_json::from_str(&text).expect("parse vectors.json")
}

/// Names of the shipped results files (`results/*.results.json.gz`).
pub(crate) const RESULTS_FILES: [&str; 3] = ["gpt_5_2_high.results.json.gz", "deepseek_r1.results.json.gz", "gemini_3_flash_preview_low.results.json.gz"];

/// Decompresses and parses one shipped results file.
pub(crate) fn results(file: &str) -> serde_json::Value {
    use std::io::Read;
    let path = data_dir().join("results").join(file);
    let raw = std::fs::File::open(&path).expect("open results file");
    let mut text = String::new();
    flate2::read::GzDecoder::new(raw).read_to_string(&mut text).expect("gunzip results");
    serde_json::from_str(&text).expect("parse results json")
}

/// Hand-written MD5 (RFC 1321), test-only: checks the H constants against the rule code
/// strings of the results files without an extra dependency.
pub(crate) fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4,
        11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64).map(|i: i32| ((f64::from(i + 1).sin().abs()) * 4_294_967_296.0) as u32).collect();
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());
    let (mut a0, mut b0, mut c0, mut d0) = (0x67452301u32, 0xefcdab89u32, 0x98badcfeu32, 0x10325476u32);
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f2 = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f2.rotate_left(S[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (i, w) in [a0, b0, c0, d0].iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Lower-case hex md5 digest.
pub(crate) fn md5_hex(data: &[u8]) -> String {
    md5(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest read as a big-endian 128-bit integer, masked to its low 32 bits (§1.2's H).
pub(crate) fn md5_low32(data: &[u8]) -> u32 {
    let d = md5(data);
    u32::from_be_bytes([d[12], d[13], d[14], d[15]])
}

#[test]
fn md5_known_answers() {
    assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(md5_hex(b"The quick brown fox jumps over the lazy dog"), "9e107d9d372bb6826bd81d3542a419d6");
    // Multi-block input (Python: hashlib.md5(b"a" * 200)).
    assert_eq!(md5_hex(&[b'a'; 200]), "887f30b43b2867f4a9accceee7d16e6c");
}
