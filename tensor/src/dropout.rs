//! Dropout masks from a counter-based rule: whether element `i` of one dropout site is kept
//! is a pure function of (seed, step, site, i), so every backend (the CPU reference, SIMD,
//! threads, WASM, WGSL) draws the same mask bit for bit, a backward pass redraws the mask
//! instead of storing it, and a resumed run draws the masks the uninterrupted one would have.
//! There is no generator state to carry.
//!
//! The rule, so another implementation can reproduce it:
//! - A site's 64-bit key: `k = mix64(mix64(mix64(seed ^ 0xD7A0_0000_0000_0004) ^ step) ^ site)`
//!   where `mix64` is SplitMix64's output function (`z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//!   z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^ (z >> 31)`, wrapping). `key = [k as u32,
//!   (k >> 32) as u32]`.
//! - Element `i` (a u32, counted from the start of the whole batch, see
//!   [`DropoutMask::offset`]) gets the bits `fmix32(fmix32(i ^ key[0]) ^ key[1])`, where
//!   `fmix32` is MurmurHash3's 32-bit finaliser (`h ^= h >> 16; h *= 0x85EBCA6B;
//!   h ^= h >> 13; h *= 0xC2B2AE35; h ^= h >> 16`, wrapping).
//! - It is dropped when `bits < threshold`, `threshold = round(p · 2^32)` (so the drop rate is
//!   `p` to within 2^-32), and a kept value is multiplied by `scale = 2^32 / (2^32 -
//!   threshold)` (≈ `1 / (1 - p)`, "inverted" dropout: evaluation needs no rescaling).
//!   `scale` is computed in f64 on the host and rounded to f32 once, and `x * scale` is one
//!   correctly rounded f32 multiply everywhere.

/// SplitMix64's output function (see [`crate::Rng`]).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// MurmurHash3's 32-bit finaliser: a bijection on u32 that mixes every input bit into every
/// output bit. `#[inline]` so the kernels that draw a mask element by element (the CPU
/// backend's attention rows) inline and vectorise it rather than call it per element.
#[inline]
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// Keeps the key salt apart from the other streams derived from the run's seed.
const DROPOUT_SALT: u64 = 0xD7A0_0000_0000_0004;

/// One dropout site's mask over a buffer: which elements are kept, and the factor they are
/// scaled by. Plain data (a GPU backend puts it in a uniform).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DropoutMask {
    /// The site's key (see the module docs).
    pub key: [u32; 2],
    /// An element is dropped when its bits are below this.
    pub threshold: u32,
    /// The index of the buffer's element 0 in the site's numbering: a slice of a batch
    /// (the rows of a gradient-accumulation part) starts past the rows before it, so the
    /// whole batch draws the same mask however it is cut.
    pub offset: u32,
}

impl DropoutMask {
    /// The mask of site `site` at training step `step` of a run seeded with `seed`, dropping
    /// with probability `p` (`0 <= p < 1`); `offset` as in [`DropoutMask::offset`].
    pub fn new(p: f32, seed: u64, step: u64, site: u64, offset: u32) -> Self {
        assert!((0.0..1.0).contains(&p), "dropout probability {p} outside [0, 1)");
        let k = mix64(mix64(mix64(seed ^ DROPOUT_SALT) ^ step) ^ site);
        let threshold = (p as f64 * 4_294_967_296.0).round().min(u32::MAX as f64) as u32;
        DropoutMask { key: [k as u32, (k >> 32) as u32], threshold, offset }
    }

    /// The same mask for a buffer starting `elements` further into the site.
    pub fn shifted(self, elements: u32) -> Self {
        DropoutMask { offset: self.offset.wrapping_add(elements), ..self }
    }

    /// The random bits of element `index` (counted from the site's start, offset included).
    #[inline]
    pub fn bits(&self, index: u32) -> u32 {
        fmix32(fmix32(index ^ self.key[0]) ^ self.key[1])
    }

    /// Whether the buffer's element `i` is kept.
    #[inline]
    pub fn keeps(&self, i: usize) -> bool {
        self.bits(self.offset.wrapping_add(i as u32)) >= self.threshold
    }

    /// The factor kept values are multiplied by: `2^32 / (2^32 - threshold)`.
    #[inline]
    pub fn scale(&self) -> f32 {
        (4_294_967_296.0 / (4_294_967_296.0 - self.threshold as f64)) as f32
    }

    /// The factor for the buffer's element `i`: [`DropoutMask::scale`] or 0.
    #[inline]
    pub fn factor(&self, i: usize) -> f32 {
        if self.keeps(i) {
            self.scale()
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_pinned() {
        // Values written down once, so a change to the rule (which would change every
        // dropout run) cannot pass unnoticed.
        assert_eq!(fmix32(0), 0);
        assert_eq!(fmix32(1), 0x514E_28B7);
        let m = DropoutMask::new(0.25, 1337, 7, 3, 0);
        assert_eq!(m.threshold, 1 << 30);
        assert_eq!(m.scale(), 4.0 / 3.0);
        assert_eq!(m.shifted(5).bits(5), m.bits(5));
        assert_eq!(m.shifted(5).keeps(0), m.keeps(5));
    }

    #[test]
    fn about_p_of_the_elements_are_dropped_and_sites_differ() {
        let n = 200_000;
        let a = DropoutMask::new(0.2, 1, 1, 0, 0);
        let dropped = (0..n).filter(|&i| !a.keeps(i)).count() as f64 / n as f64;
        assert!((dropped - 0.2).abs() < 0.005, "{dropped}");
        let b = DropoutMask::new(0.2, 1, 1, 1, 0);
        let c = DropoutMask::new(0.2, 1, 2, 0, 0);
        for other in [b, c] {
            let same = (0..n).filter(|&i| a.keeps(i) == other.keeps(i)).count() as f64 / n as f64;
            // Independent masks agree on 0.8² + 0.2² = 68% of the elements.
            assert!((same - 0.68).abs() < 0.01, "{same}");
        }
        assert!((0..1000).all(|i| DropoutMask::new(0.0, 9, 9, 9, 0).keeps(i)));
    }
}
