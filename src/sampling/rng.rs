//! The random numbers llama.cpp samples with: the 32-bit Mersenne Twister
//! (`std::mt19937`) and libstdc++'s `discrete_distribution` over it, so a seeded
//! chain draws what llama.cpp draws from the same probabilities.

/// MT19937 (Matsumoto & Nishimura), 32-bit output.
#[derive(Clone)]
pub struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    pub fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            state[i] = 1812433253u32
                .wrapping_mul(state[i - 1] ^ (state[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: 624 }
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[i] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `std::generate_canonical<double, 53>`: two draws, low word first.
    pub fn canonical(&mut self) -> f64 {
        let lo = self.next_u32() as f64;
        let hi = self.next_u32() as f64;
        let r = (lo + hi * 4294967296.0) / 18446744073709551616.0;
        if r >= 1.0 {
            1.0 - f64::EPSILON / 2.0
        } else {
            r
        }
    }

    /// `std::uniform_real_distribution<float>(0, 1)(rng)` as libstdc++
    /// draws it (`generate_canonical<float, 24>`): one draw, rounded to
    /// f32, divided by 2^32, kept below 1.
    pub fn canonical_f32(&mut self) -> f32 {
        let r = self.next_u32() as f32 / 4294967296.0f32;
        if r >= 1.0 {
            1.0 - f32::EPSILON / 2.0
        } else {
            r
        }
    }

    /// `std::discrete_distribution<int>(weights)(rng)`: the first index whose
    /// cumulative normalised weight is not below a canonical draw.
    pub fn discrete(&mut self, weights: impl Iterator<Item = f32>) -> usize {
        let w: Vec<f64> = weights.map(|p| p as f64).collect();
        let total: f64 = w.iter().sum();
        let mut cumulative = Vec::with_capacity(w.len());
        let mut acc = 0.0;
        for p in &w {
            acc += p / total;
            cumulative.push(acc);
        }
        if let Some(last) = cumulative.last_mut() {
            *last = 1.0;
        }
        let u = self.canonical();
        cumulative
            .partition_point(|&c| c < u)
            .min(w.len().saturating_sub(1))
    }
}

/// A seed for "no seed given" (llama.cpp's LLAMA_DEFAULT_SEED): fresh entropy.
pub fn random_seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5eed);
    h.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn matches_the_standard_mt19937() {
        // The C++ standard requires the 10000th output of a default-seeded
        // (5489) mt19937 to be 4123659995.
        let mut rng = Mt19937::new(5489);
        let mut v = 0;
        for _ in 0..10000 {
            v = rng.next_u32();
        }
        assert_eq!(v, 4123659995);
    }

    #[test]
    fn discrete_follows_the_weights() {
        let mut rng = Mt19937::new(1);
        let mut counts = [0usize; 3];
        for _ in 0..30000 {
            counts[rng.discrete([0.5f32, 0.0, 1.5].into_iter())] += 1;
        }
        assert_eq!(counts[1], 0);
        let share = counts[2] as f64 / 30000.0;
        assert!((share - 0.75).abs() < 0.02, "{counts:?}");
    }
}
