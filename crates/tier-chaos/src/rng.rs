//! A small seeded random number generator (SplitMix64) so every run can be replayed
//! from the seed it prints.

/// SplitMix64: fast, good enough for choosing delays and sizes, deterministic per seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[low, high]` (`low` when the range is empty).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low { low } else { low + self.next_u64() % (high - low + 1) }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn is_deterministic_and_bounded() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..50).map(|_| r.between(3, 9)).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..50).map(|_| r.between(3, 9)).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().all(|v| (3..=9).contains(v)));
        assert!(a.iter().any(|v| *v != a[0]), "not constant");
    }
}
