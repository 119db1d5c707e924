/// The project's one pseudo-random generator: SplitMix64 (Steele, Lea & Flood 2014).
///
/// Every random draw in TinyGPT (weight init, batch sampling, token sampling) comes from
/// this generator so that any backend, native or WASM, replays the same stream from the
/// same seed. The whole state is one `u64`, which checkpoints store as `rng_state`.
///
/// The contract, so another implementation can reproduce it bit for bit:
/// - `next_u64`: `state += 0x9E3779B97F4A7C15; z = state;`
///   `z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;`
///   `return z ^ (z >> 31)` (all arithmetic wrapping, mod 2^64).
/// - `below(n)`: `(next_u64() as u128 * n as u128) >> 64` (Lemire's multiply-high, no rejection).
/// - `uniform()`: `(next_u64() >> 11) as f64 * 2^-53`, in `[0, 1)`.
/// - `normal()`: Box–Muller with `u1 = 1 - uniform()` (in `(0, 1]`), `u2 = uniform()`,
///   `sqrt(-2 ln u1) * cos(2π u2)`, computed in f64; one normal per two draws.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The whole generator state, for checkpoints.
    pub fn state(&self) -> u64 {
        self.state
    }

    /// Restores a generator saved with [`Rng::state`].
    pub fn from_state(state: u64) -> Self {
        Rng { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n`. `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below needs a positive bound");
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform f64 in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal sample (mean 0, variance 1).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // Published SplitMix64 outputs for seed 0 (e.g. Vigna's reference C code).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn state_round_trips() {
        let mut a = Rng::new(42);
        a.next_u64();
        let mut b = Rng::from_state(a.state());
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn below_stays_in_range_and_normal_has_unit_variance() {
        let mut r = Rng::new(7);
        assert!((0..10_000).all(|_| r.below(13) < 13));
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "variance {var}");
    }
}
