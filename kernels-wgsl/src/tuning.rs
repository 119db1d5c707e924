//! The few numbers that trade parallelism against overhead, with their defaults (chosen on
//! an NVIDIA H200, see BENCHMARKS.md) and environment overrides for tuning runs on other
//! GPUs: `TINYGPT_WGPU_SPLIT_BELOW`, `TINYGPT_WGPU_SPLIT_TARGET`,
//! `TINYGPT_WGPU_MIN_K_SLICE`, `TINYGPT_WGPU_SUBMIT_EVERY`, `TINYGPT_WGPU_SPLIT_LARGE` (0 or 1),
//! `TINYGPT_WGPU_MATMUL_BK`, `TINYGPT_WGPU_DOUBLE_BUFFER` (0 or 1), `TINYGPT_WGPU_MATMUL_VEC4`
//! (0 or 1), `TINYGPT_WGPU_MATMUL_TILE` (the large tile, `BMxBN` or `BMxBN:T`: 64, 128 or
//! 256 each, T outputs per invocation along each, 4 or 8), `TINYGPT_WGPU_BATCHED_DENSE`
//! (0 or 1), `TINYGPT_WGPU_FUSED_ATTENTION` (0 or 1),
//! `TINYGPT_WGPU_FLASH_TILE` (16 or 32). They change speed only: a split product sums in another
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
    /// Whether a small output with a long k may keep the large tile and split k instead
    /// of taking small tiles (`matmul.rs`'s `plan_tiled`).
    pub split_large: bool,
    /// Depth of one shared-memory stage of the tiled matmul, instead of the tile's own
    /// (8); a power of two from 4 to 32.
    pub matmul_bk: Option<usize>,
    /// Whether the tiled matmul alternates between two halves of its workgroup tiles (one
    /// barrier per stage instead of two), for every product instead of the default: only
    /// where B is stored transposed (on the H200: +25% for `nt` products at the model's
    /// shapes, −2 to −7% for `nn` and `tn`).
    pub double_buffer: Option<bool>,
    /// Whether the tiled matmul fetches its stages as vec4s where the operands allow it
    /// (`matmul.rs`'s `vec4_fits`).
    pub matmul_vec4: bool,
    /// The large tile's rows and columns instead of 128 × 128, and the outputs per
    /// invocation along each (`BMxBN:T`; without `:T`, 16 × 16 invocations).
    pub large_tile: Option<(usize, usize, Option<usize>)>,
    /// Whether a batched product (attention's per-head ones) with small tiles computes
    /// them as 64 invocations of 8 × 8 outputs instead of 256 of 4 × 4 (`matmul.rs`'s
    /// `pick_tile`).
    pub batched_dense: bool,
    /// Whether training attention runs the fused kernels (`flash.rs`) where they fit,
    /// instead of materialising the probabilities: off, slower on the H200 (see `flash.rs`).
    pub fused_attention: bool,
    /// Rows of the fused attention kernels' shared tiles instead of the largest that fits
    /// (`flash.rs`).
    pub flash_tile: Option<usize>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            split_below_tiles: 128,
            split_target_groups: 512,
            min_k_slice: 128,
            submit_every: 128,
            split_large: true,
            matmul_bk: None,
            double_buffer: None,
            matmul_vec4: true,
            large_tile: None,
            batched_dense: true,
            fused_attention: false,
            flash_tile: None,
        }
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
        let mut split_large = usize::from(t.split_large);
        read("TINYGPT_WGPU_SPLIT_LARGE", &mut split_large);
        t.split_large = split_large != 0;
        let mut bk = 0;
        read("TINYGPT_WGPU_MATMUL_BK", &mut bk);
        t.matmul_bk = [4, 8, 16, 32].contains(&bk).then_some(bk);
        let mut double_buffer = 2;
        read("TINYGPT_WGPU_DOUBLE_BUFFER", &mut double_buffer);
        t.double_buffer = (double_buffer < 2).then_some(double_buffer == 1);
        let mut vec4 = usize::from(t.matmul_vec4);
        read("TINYGPT_WGPU_MATMUL_VEC4", &mut vec4);
        t.matmul_vec4 = vec4 != 0;
        let mut dense = usize::from(t.batched_dense);
        read("TINYGPT_WGPU_BATCHED_DENSE", &mut dense);
        t.batched_dense = dense != 0;
        let mut fused = usize::from(t.fused_attention);
        read("TINYGPT_WGPU_FUSED_ATTENTION", &mut fused);
        t.fused_attention = fused != 0;
        let mut tile = 0;
        read("TINYGPT_WGPU_FLASH_TILE", &mut tile);
        t.flash_tile = [16, 32].contains(&tile).then_some(tile);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some((bm, bn, per)) = std::env::var("TINYGPT_WGPU_MATMUL_TILE").ok().and_then(|v| {
            let (tile, per) = v.split_once(':').map_or((v.as_str(), None), |(t, p)| (t, Some(p)));
            let (m, n) = tile.split_once('x')?;
            let per = match per {
                Some(p) => Some(p.parse::<usize>().ok()?),
                None => None,
            };
            Some((m.parse::<usize>().ok()?, n.parse::<usize>().ok()?, per))
        }) {
            let ok = |v: usize| [64, 128, 256].contains(&v);
            let per_ok = per.is_none_or(|p| [4, 8].contains(&p));
            t.large_tile = (ok(bm) && ok(bn) && per_ok).then_some((bm, bn, per));
        }
        t.min_k_slice = t.min_k_slice.max(1);
        t
    }

    /// How many slices of k a product with `tiles` output tiles is split into (1: not split).
    pub fn split_k(&self, tiles: usize, k: usize) -> usize {
        self.split_k_towards(tiles, k, self.split_target_groups, self.min_k_slice)
    }

    /// [`Tuning::split_k`] for the large tile over a long k (`plan_tiled`): twice the
    /// workgroups, in slices of at least 2 × `min_k_slice`. On the H200, at the
    /// shakespeare-char recipe's 16,384 rows: 1536 × 384 gradients 40 TFLOP/s (29 slices)
    /// against 34 (15 slices, the plain rule); 384 × 384 ones 3.77 -> 3.39 ms a step with
    /// 64 slices (576 workgroups) instead of 32 (288, just over a wave; slices of at least
    /// 4 × `min_k_slice` before).
    pub fn split_k_large(&self, tiles: usize, k: usize) -> usize {
        self.split_k_towards(tiles, k, 2 * self.split_target_groups, 2 * self.min_k_slice)
    }

    fn split_k_towards(&self, tiles: usize, k: usize, target: usize, min_slice: usize) -> usize {
        if tiles == 0 || tiles >= self.split_below_tiles.min(self.split_target_groups) {
            return 1;
        }
        target.div_ceil(tiles).min(k / min_slice).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::Tuning;

    #[test]
    fn splits_only_products_with_few_tiles_and_a_long_k() {
        let t = Tuning { submit_every: 0, ..Tuning::default() };
        assert_eq!(t.split_k(1024, 4096), 1);
        // A weight gradient at `huge`: 256 × 256 outputs in 16 tiles, k = 2048.
        assert_eq!(t.split_k(16, 2048), 16);
        // A projection at `huge`: 128 tiles, a wave already.
        assert_eq!(t.split_k(128, 1024), 1);
        // A weight gradient at `large`: 36 tiles, k = 1536.
        assert_eq!(t.split_k(36, 1536), 12);
        assert_eq!(t.split_k(4, 100), 1);
        // Weight gradients at the shakespeare-char recipe (k = 16,384 rows), large tiles.
        assert_eq!(t.split_k_large(9, 16384), 64);
        assert_eq!(t.split_k_large(36, 16384), 29);
    }
}
