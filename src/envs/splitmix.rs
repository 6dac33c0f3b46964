//! SplitMix64 (Steele, Lea & Flood 2014): the small deterministic generator
//! the BBQ-Bench (§4.4) and WeirdML (§6.2) specs make normative, shared by
//! every benchmark that needs reproducible draws.

/// SplitMix64 with wrapping u64 arithmetic, exactly as both specs give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A stream starting from `state` (the first output mixes `state + γ`).
    #[must_use]
    pub fn new(state: u64) -> Self {
        Self { state }
    }

    /// Next raw 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `next() mod n`, with the modulo bias both specs accept; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        let v = self.next_u64();
        if n == 0 { 0 } else { v % n }
    }

    /// Uniform double in [0, 1): top 53 bits times 2^-53 (exact).
    pub fn uniform(&mut self) -> f64 {
        const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;
        #[expect(clippy::cast_precision_loss, reason = "53-bit values are exact in f64")]
        let top = (self.next_u64() >> 11) as f64;
        top * TWO_POW_MINUS_53
    }

    /// Integer in `[lo, hi]`: `lo + below(hi − lo + 1)`; `lo` when `hi < lo`.
    pub fn randint(&mut self, lo: i64, hi: i64) -> i64 {
        let span = u64::try_from(i128::from(hi) - i128::from(lo) + 1).unwrap_or(0);
        let off = self.below(span);
        i64::try_from(i128::from(lo) + i128::from(off)).unwrap_or(lo)
    }

    /// Index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n).unwrap_or(u64::MAX);
        usize::try_from(self.below(n64)).unwrap_or(0)
    }
}
