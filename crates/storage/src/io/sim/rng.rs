//! A tiny seeded generator (SplitMix64) for crash outcomes: the same seed always gives the
//! same crash, on every machine, with no dependency.

/// SplitMix64 (Steele, Lea, Flood 2014); statistically fine for choosing crash outcomes.
#[derive(Clone, Debug)]
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// A number in `0..bound`.
    pub(super) fn below(&mut self, bound: usize) -> usize {
        assert!(bound > 0, "empty range");
        // Modulo bias is irrelevant at these bounds.
        (self.next_u64() % bound as u64) as usize
    }

    /// True with probability one in `odds`.
    pub(super) fn one_in(&mut self, odds: usize) -> bool {
        self.below(odds) == 0
    }

    pub(super) fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let random = self.next_u64().to_le_bytes();
            for (byte, value) in chunk.iter_mut().zip(random) {
                *byte = value;
            }
        }
    }
}
