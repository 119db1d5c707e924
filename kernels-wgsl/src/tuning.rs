//! The few numbers that trade parallelism against overhead, with their defaults (chosen on
//! an NVIDIA H200, see BENCHMARKS.md) and environment overrides for tuning runs on other
//! GPUs: `TINYGPT_WGPU_SPLIT_BELOW`, `TINYGPT_WGPU_SPLIT_TARGET`,
//! `TINYGPT_WGPU_MIN_K_SLICE`, `TINYGPT_WGPU_SUBMIT_EVERY`. They change speed only: a split product sums in another
//! (still fixed) order, well inside the tests' tolerances.

/// See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tuning {
    /// A matmul with fewer output tiles than this (less than a wave of workgroups on a
    /// big GPU) splits k into slices (see `shaders/matmul.wgsl`); one with more is not
    /// split: on the H200 a 2048 × 256 product (128 tiles) ran slower split.
    pub split_below_tiles: usize,
    /// How many workgroups a split product aims for: a big GPU needs several per compute
    /// unit to hide its memory latency.
    pub split_target_groups: usize,
    /// The shortest slice of k a split makes.
    pub min_k_slice: usize,
    /// Dispatches recorded before the recorder submits them on its own, so the GPU starts
    /// on a step while the host still records the rest of it (0: only when needed).
    pub submit_every: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { split_below_tiles: 128, split_target_groups: 512, min_k_slice: 128, submit_every: 128 }
    }
}

impl Tuning {
    /// The defaults, with any override from the environment (natively; a browser has none).
    pub fn from_env() -> Self {
        let mut t = Tuning::default();
        let read = |name: &str, slot: &mut usize| {
            #[cfg(not(target_arch = "wasm32"))]
            if let Some(v) = std::env::var(name).ok().and_then(|v| v.parse().ok()) {
                *slot = v;
            }
            #[cfg(target_arch = "wasm32")]
            let _ = (name, slot);
        };
        read("TINYGPT_WGPU_SPLIT_BELOW", &mut t.split_below_tiles);
        read("TINYGPT_WGPU_SPLIT_TARGET", &mut t.split_target_groups);
        read("TINYGPT_WGPU_MIN_K_SLICE", &mut t.min_k_slice);
        read("TINYGPT_WGPU_SUBMIT_EVERY", &mut t.submit_every);
        t.min_k_slice = t.min_k_slice.max(1);
        t
    }

    /// How many slices of k a product with `tiles` output tiles is split into (1: not split).
    pub fn split_k(&self, tiles: usize, k: usize) -> usize {
        if tiles == 0 || tiles >= self.split_below_tiles.min(self.split_target_groups) {
            return 1;
        }
        self.split_target_groups.div_ceil(tiles).min(k / self.min_k_slice).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::Tuning;

    #[test]
    fn splits_only_products_with_few_tiles_and_a_long_k() {
        let t =
            Tuning { split_below_tiles: 128, split_target_groups: 512, min_k_slice: 128, submit_every: 0 };
        assert_eq!(t.split_k(1024, 4096), 1);
        // A weight gradient at `huge`: 256 × 256 outputs in 16 tiles, k = 2048.
        assert_eq!(t.split_k(16, 2048), 16);
        // A projection at `huge`: 128 tiles, a wave already.
        assert_eq!(t.split_k(128, 1024), 1);
        // A weight gradient at `large`: 36 tiles, k = 1536.
        assert_eq!(t.split_k(36, 1536), 12);
        assert_eq!(t.split_k(4, 100), 1);
    }
}
