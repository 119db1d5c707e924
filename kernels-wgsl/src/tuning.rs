//! The few numbers that trade parallelism against overhead, with their defaults (chosen on
//! an NVIDIA H200, see docs/benchmarks-log.md) and environment overrides for tuning runs on other
//! GPUs: `TINYGPT_WGPU_SPLIT_BELOW`, `TINYGPT_WGPU_SPLIT_TARGET`,
//! `TINYGPT_WGPU_MIN_K_SLICE`, `TINYGPT_WGPU_SUBMIT_EVERY`, `TINYGPT_WGPU_SPLIT_LARGE` (0 or 1),
//! `TINYGPT_WGPU_MATMUL_BK`, `TINYGPT_WGPU_DOUBLE_BUFFER` (0 or 1), `TINYGPT_WGPU_MATMUL_VEC4`
//! (0 or 1), `TINYGPT_WGPU_MATMUL_TILE` (the large tile, `BMxBN`, `BMxBN:T` or `BMxBN:TMxTN`:
//! see [`TileSpec::parse`]), `TINYGPT_WGPU_NARROW_TILE`, `TINYGPT_WGPU_SPLIT_TILE` (the
//! same syntax, or `off`), `TINYGPT_WGPU_NT_AS_NN` (0 or 1),
//! `TINYGPT_WGPU_BATCHED_DENSE` (0 or 1), `TINYGPT_WGPU_COOP` (`off`, `force`, `emulate`, `emulate-large`:
//! see [`CoopSetting`]). They change speed only: a split product sums in another
//! (still fixed) order, well inside the tests' tolerances.

/// What `TINYGPT_WGPU_COOP` asks of the cooperative-matrix matmul (`coop.rs`); unset (or
/// in a browser) the adapter decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(target_arch = "wasm32", allow(dead_code))] // a browser has no environment to set it
pub(crate) enum CoopSetting {
    /// `off`: never (to compare with the shader-f16 path).
    Off,
    /// `force`: try it even where the adapter lists no cooperative matrices (the kernel
    /// then fails to compile, and the start-up self-test falls back: tests of that path).
    Force,
    /// `emulate` (`emulate-large`): run it with its cooperative-matrix built-ins emulated,
    /// every product on the small (large) tile: tests of the kernel's staging, addressing
    /// and write-out on adapters without cooperative matrices; slow.
    Emulate { large: bool },
}

/// The `TINYGPT_WGPU_COOP` setting, if any.
pub(crate) fn coop_setting() -> Option<CoopSetting> {
    #[cfg(not(target_arch = "wasm32"))]
    match std::env::var("TINYGPT_WGPU_COOP").as_deref() {
        Ok("off") => return Some(CoopSetting::Off),
        Ok("force") => return Some(CoopSetting::Force),
        Ok("emulate") => return Some(CoopSetting::Emulate { large: false }),
        Ok("emulate-large") => return Some(CoopSetting::Emulate { large: true }),
        _ => {}
    }
    None
}

/// The widest output (columns) that takes [`Tuning::narrow_tile`].
pub(crate) const NARROW_MAX_N: usize = 384;
/// The most large tiles an output split over k may have and take [`Tuning::split_tile`].
pub(crate) const SPLIT_TILE_MAX_LARGE: usize = 9;

/// 64 × 128 outputs in 8 × 8 per invocation (128 invocations).
const TILE_64X128: TileSpec = TileSpec { bm: 64, bn: 128, tm: 8, tn: 8 };

/// A matmul block tile as the tuning knobs name it: `bm` × `bn` outputs per workgroup,
/// `tm` × `tn` per invocation (so (bm / tm)·(bn / tn) invocations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TileSpec {
    pub bm: usize,
    pub bn: usize,
    pub tm: usize,
    pub tn: usize,
}

impl TileSpec {
    /// `BMxBN` (16 × 16 invocations), `BMxBN:T` (T × T outputs each) or `BMxBN:TMxTN`;
    /// `None` for `off` or a tile matmul.wgsl cannot take: BM and BN multiples of 16 from
    /// 32 to 256, TM and TN 4, 8, 12 or 16 dividing them, at most 1024 invocations.
    // (Read from the environment natively only: a browser has none.)
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub fn parse(v: &str) -> Option<TileSpec> {
        let (tile, per) = v.split_once(':').map_or((v, None), |(t, p)| (t, Some(p)));
        let (m, n) = tile.split_once('x')?;
        let (bm, bn) = (m.parse::<usize>().ok()?, n.parse::<usize>().ok()?);
        let (tm, tn) = match per {
            None => (bm / 16, bn / 16),
            Some(p) => match p.split_once('x') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => (p.parse().ok()?, p.parse().ok()?),
            },
        };
        let side = |v: usize| v.is_multiple_of(16) && (32..=256).contains(&v);
        let per = |t: usize, b: usize| [4, 8, 12, 16].contains(&t) && b.is_multiple_of(t);
        let ok = side(bm) && side(bn) && per(tm, bm) && per(tn, bn) && (bm / tm) * (bn / tn) <= 1024;
        ok.then_some(TileSpec { bm, bn, tm, tn })
    }
}

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
    /// The large tile instead of 128 × 128 in 8 × 8 outputs per invocation.
    pub large_tile: Option<TileSpec>,
    /// The tile of a plain (`nn`) product with a narrow output (at most [`NARROW_MAX_N`]
    /// columns) that would take the large tile (`matmul.rs`'s `pick_tile`); `None`: the
    /// large tile. On the H200 at 16,384 × 384 outputs, 64 × 128 against 128 × 128: `nn`
    /// 34 -> 40 TFLOP/s (k 384), 42.9 -> 43.2 (k 1,536); `nt` lost (34 -> 30), so it
    /// stays plain-only.
    pub narrow_tile: Option<TileSpec>,
    /// The tile of an output of at most [`SPLIT_TILE_MAX_LARGE`] large tiles that splits k
    /// (`plan_tiled`); `None`: the large tile. On the H200, a 384 × 384 weight gradient
    /// over 16,384 rows in 64 × 128 tiles (57 slices): 33.4 -> 37.7 TFLOP/s.
    pub split_tile: Option<TileSpec>,
    /// Whether a big product whose B is stored transposed and small transposes B first
    /// and runs plain (`matmul.rs`'s `transposes_b`).
    pub nt_as_nn: bool,
    /// Whether a batched product (attention's per-head ones) with small tiles computes
    /// them as 64 invocations of 8 × 8 outputs instead of 256 of 4 × 4 (`matmul.rs`'s
    /// `pick_tile`).
    pub batched_dense: bool,
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
            narrow_tile: Some(TILE_64X128),
            split_tile: Some(TILE_64X128),
            nt_as_nn: true,
            batched_dense: true,
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
        let mut nt_as_nn = usize::from(t.nt_as_nn);
        read("TINYGPT_WGPU_NT_AS_NN", &mut nt_as_nn);
        t.nt_as_nn = nt_as_nn != 0;
        let mut dense = usize::from(t.batched_dense);
        read("TINYGPT_WGPU_BATCHED_DENSE", &mut dense);
        t.batched_dense = dense != 0;
        #[cfg(not(target_arch = "wasm32"))]
        {
            let spec = |name: &str| std::env::var(name).ok().map(|v| TileSpec::parse(&v));
            if let Some(large) = spec("TINYGPT_WGPU_MATMUL_TILE") {
                t.large_tile = large;
            }
            if let Some(narrow) = spec("TINYGPT_WGPU_NARROW_TILE") {
                t.narrow_tile = narrow;
            }
            if let Some(split) = spec("TINYGPT_WGPU_SPLIT_TILE") {
                t.split_tile = split;
            }
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
    use super::{TileSpec, Tuning};

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

    #[test]
    fn tile_specs_parse_in_three_forms_and_refuse_what_the_shader_cannot_take() {
        let spec = |bm, bn, tm, tn| Some(TileSpec { bm, bn, tm, tn });
        assert_eq!(TileSpec::parse("128x128"), spec(128, 128, 8, 8));
        assert_eq!(TileSpec::parse("64x128:8"), spec(64, 128, 8, 8));
        assert_eq!(TileSpec::parse("128x96:8x8"), spec(128, 96, 8, 8));
        assert_eq!(TileSpec::parse("128x192:8x12"), spec(128, 192, 8, 12));
        for bad in ["off", "128", "100x128", "128x96:8x5", "32x32:16x16x", "256x256:4"] {
            assert_eq!(TileSpec::parse(bad), None, "{bad}");
        }
    }
}
