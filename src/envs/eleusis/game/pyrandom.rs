//! CPython-compatible `random.Random` (MT19937), spec §1.3. The reference draws its decks
//! (`shuffle`) and its equivalence-check walks (`choice`) from it, so decks and verdicts are
//! only bit-exact with the same generator, seeding and integer-sampling algorithm.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// A Mersenne Twister that reproduces CPython 3.11 `random.Random(n)` for integer seeds:
/// same state after seeding, same 32-bit outputs, `getrandbits`, `_randbelow`, `shuffle`
/// and `choice`.
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyRandom").field("index", &self.index).finish_non_exhaustive()
    }
}

impl PyRandom {
    /// Equivalent of `random.Random(seed)` for a non-negative integer seed: the key is the
    /// little-endian list of 32-bit limbs of `seed` (one limb `[0]` for 0).
    pub fn new(seed: u64) -> Self {
        // Truncations are intended: we split the seed into its two 32-bit limbs.
        let low = seed as u32;
        let high = (seed >> 32) as u32;
        if high == 0 { Self::from_key(&[low]) } else { Self::from_key(&[low, high]) }
    }

    /// Seeds from an explicit `init_by_array` key (CPython's limb list for big integers).
    /// An empty key behaves like `[0]`, as CPython always uses at least one limb.
    pub fn from_key(key: &[u32]) -> Self {
        let mut rng = PyRandom { mt: [0; N], index: N };
        rng.init_genrand(19_650_218);
        let key: &[u32] = if key.is_empty() { &[0] } else { key };
        let mut i = 1usize;
        let mut j = 0usize;
        let mut k = N.max(key.len());
        while k > 0 {
            let prev = rng.mt[i - 1];
            rng.mt[i] = (rng.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                rng.mt[0] = rng.mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
            k -= 1;
        }
        k = N - 1;
        while k > 0 {
            let prev = rng.mt[i - 1];
            rng.mt[i] = (rng.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                rng.mt[0] = rng.mt[N - 1];
                i = 1;
            }
            k -= 1;
        }
        rng.mt[0] = 0x8000_0000;
        rng.index = N;
        rng
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn twist(&mut self) {
        for kk in 0..N {
            let y = (self.mt[kk] & UPPER_MASK) | (self.mt[(kk + 1) % N] & LOWER_MASK);
            let mag = if y & 1 == 0 { 0 } else { MATRIX_A };
            self.mt[kk] = self.mt[(kk + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// The next tempered 32-bit MT19937 output (`genrand_uint32`).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `getrandbits(k)` for 0 ≤ k ≤ 64 (k = 0 returns 0 without consuming output; k > 64
    /// is clamped to 64). For k ≤ 32 this is one output shifted right by 32 − k; larger k
    /// fill 32-bit words least significant first, exactly like CPython.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        let k = k.min(64);
        if k == 0 {
            return 0;
        }
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// CPython's `_randbelow_with_getrandbits(n)`: rejection sampling with k = bit length
    /// of n. Returns 0 without consuming output for n = 0 (CPython would loop forever).
    #[inline]
    pub fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = 64 - n.leading_zeros();
        if k <= 32 {
            // Fast path (all practical sizes): same draws as `getrandbits(k)`.
            let n32 = n as u32;
            loop {
                let r = self.next_u32() >> (32 - k);
                if r < n32 {
                    return u64::from(r);
                }
            }
        }
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `randbelow` for slice indices (lengths always fit in u64 on supported targets).
    #[inline]
    pub fn randbelow_usize(&mut self, n: usize) -> usize {
        // usize ≤ 64 bits on every supported target, so both conversions are lossless.
        self.randbelow(n as u64) as usize
    }

    /// In-place `random.shuffle(x)`: for i from len − 1 down to 1, swap x[i] with
    /// x[randbelow(i + 1)].
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow_usize(i + 1);
            x.swap(i, j);
        }
    }

    /// `random.choice(seq)` = `seq[randbelow(len(seq))]`; `None` (and no output consumed)
    /// for an empty slice, where CPython raises `IndexError`.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> Option<&'a T> {
        if seq.is_empty() {
            return None;
        }
        let i = self.randbelow_usize(seq.len());
        seq.get(i)
    }
}

#[cfg(test)]
mod tests;
