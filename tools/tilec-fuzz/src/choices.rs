//! Where generation's choices come from: a byte string, read by
//! `arbitrary::Unstructured`. The driver fills it from SplitMix64 (seeded
//! by the run's seed, the target and the iteration), so a seed fixes every
//! input; mutating the bytes instead gives structure-aware mutation, since
//! the same generator reads them (`Source::ChoiceMutation`).

use arbitrary::Unstructured;

/// SplitMix64 (Steele, Lea, Flood 2014): the project's fixed generator
/// (docs/ARCHITECTURE.md, invariant 9), so a seed means the same inputs
/// whatever the versions of our dependencies.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `n` bytes of the stream.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(n);
        out
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// A stable 64-bit hash (FNV-1a) of bytes: corpus file names, and the
/// seeds a target derives from its input (so a replay is deterministic).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The stream of one iteration: seed, target name and index mixed so that
/// targets and iterations get unrelated streams.
pub fn iteration_rng(seed: u64, target: &str, index: u64) -> SplitMix {
    let mut mix = SplitMix(seed ^ fnv1a(target.as_bytes()));
    let base = mix.next_u64();
    let mut r = SplitMix(base ^ index.wrapping_mul(0xD134_2543_DE82_EF95));
    r.next_u64();
    r
}

/// Choices read from bytes. When the bytes run out every choice takes its
/// first option, so any byte string generates something.
pub struct G<'a> {
    u: Unstructured<'a>,
}

impl<'a> G<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        G {
            u: Unstructured::new(bytes),
        }
    }

    /// An integer in `lo..=hi`.
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.u.int_in_range(lo..=hi).unwrap_or(lo)
    }

    pub fn index(&mut self, n: usize) -> usize {
        if n <= 1 {
            0
        } else {
            self.int(0, n as u64 - 1) as usize
        }
    }

    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.index(xs.len())].clone()
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u32, den: u32) -> bool {
        if num == 0 {
            return false;
        }
        if num >= den {
            return true;
        }
        self.u.ratio(num, den).unwrap_or(false)
    }

    /// An index drawn with the given weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        let mut x = self.int(0, total.saturating_sub(1));
        for (i, &w) in weights.iter().enumerate() {
            if x < w as u64 {
                return i;
            }
            x -= w as u64;
        }
        0
    }

    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.int(0, i as u64) as usize;
            xs.swap(i, j);
        }
    }
}
