//! Host side of `shaders/matmul.wgsl`: [`Gemm`], one product as the kernel sees it (plain,
//! or batched over strided operands as attention's per-head products are), and how it is
//! launched: tile, slices of k, generated constants.

use tinygpt_tensor::MatmulDims;

use crate::coop;
use crate::pipelines::{Access, Kernel};
use crate::pool::GpuBuffer;
use crate::tuning::{TileSpec, Tuning, NARROW_MAX_N, SPLIT_TILE_MAX_LARGE};
use crate::{MatmulPath, WgpuBackend};

use Access::{Read as R, ReadWrite as W};

const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const TRANSPOSE: &str = include_str!("shaders/transpose.wgsl");

const K_MATMUL_DIRECT: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_direct", bindings: &[(1, R), (2, R), (3, W)] };
const K_MATMUL_DIRECT_BIAS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_direct", bindings: &[(1, R), (2, R), (3, W), (4, R)] };
const K_MATMUL: Kernel = Kernel { parts: &[MATMUL], entry: "matmul", bindings: &[(1, R), (2, R), (3, W)] };
const K_MATMUL_BIAS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul", bindings: &[(1, R), (2, R), (3, W), (4, R)] };
const K_MATMUL_ROW_SUMS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul", bindings: &[(1, R), (2, R), (3, W), (5, W)] };
const K_MATMUL_SPLIT_SUM_ROW_SUMS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_split_sum", bindings: &[(1, R), (3, W), (5, W)] };
const K_MATMUL_SPLIT_SUM: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_split_sum", bindings: &[(1, R), (3, W)] };
const K_MATMUL_SPLIT_SUM_BIAS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_split_sum", bindings: &[(1, R), (3, W), (4, R)] };

const K_TRANSPOSE: Kernel = Kernel { parts: &[TRANSPOSE], entry: "transpose", bindings: &[(1, R), (2, W)] };

/// Invocations per workgroup of `matmul_split_sum`.
const SPLIT_SUM_WG: usize = 256;

/// A matmul variant: block tile `bm`×`bn` (`tm`×`tn` outputs per invocation, so
/// (bm / tm)·(bn / tn) invocations), depth `bk`.
#[derive(Clone, Copy)]
struct Tile {
    bm: usize,
    bn: usize,
    bk: usize,
    tm: usize,
    tn: usize,
}

const TILE_LARGE: Tile = Tile { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 };
const TILE_SMALL: Tile = Tile { bm: 64, bn: 64, bk: 8, tm: 4, tn: 4 };
/// The small tile in 64 invocations of 8 × 8 outputs (the large tile's arithmetic per
/// workgroup-memory read).
const TILE_SMALL_DENSE: Tile = Tile { bm: 64, bn: 64, bk: 8, tm: 8, tn: 8 };
/// `matmul_direct`'s block (it has no stages: `bk` 1; `tm`, `tn` only keep the module's
/// tiled entry valid).
const TILE_DIRECT: Tile = Tile { bm: 32, bn: 32, bk: 1, tm: 4, tn: 4 };
/// Below this many large tiles a matrix uses small ones, to keep every compute unit busy.
const LARGE_TILE_MIN_GROUPS: usize = 256;

fn tiles(tile: Tile, m: usize, n: usize) -> usize {
    m.div_ceil(tile.bm) * n.div_ceil(tile.bn)
}

fn spec_tile(spec: TileSpec) -> Tile {
    let TileSpec { bm, bn, tm, tn } = spec;
    Tile { bm, bn, tm, tn, ..TILE_LARGE }
}

fn large_tile(tuning: &Tuning) -> Tile {
    tuning.large_tile.map_or(TILE_LARGE, spec_tile)
}

/// The tile for `g.batch` products of [m, n]: the large one when one product has enough of
/// them; otherwise the small one, as 64 invocations of 8 × 8 outputs for a batched product
/// (attention's per-head ones: many workgroups over all batches, so each can be dense; on
/// the H200 at the shakespeare-char recipe's shape 3.3 -> 3.1 ms a step for the three
/// kinds) unless `batched_dense` is off. Among the large-tile products, a plain (`nn`)
/// one with a narrow output takes `narrow_tile` (see [`Tuning`]).
fn pick_tile(tuning: &Tuning, g: &Gemm) -> Tile {
    let (m, n) = (g.m, g.n);
    let large = large_tile(tuning);
    if tiles(large, m, n) >= LARGE_TILE_MIN_GROUPS {
        let plain = !g.trans_a && !g.trans_b;
        match tuning.narrow_tile {
            Some(narrow) if plain && n <= NARROW_MAX_N => spec_tile(narrow),
            _ => large,
        }
    } else if g.batch > 1 && tuning.batched_dense {
        TILE_SMALL_DENSE
    } else {
        TILE_SMALL
    }
}

/// Whether `g` (B stored transposed, [n, k]) runs as B transposed first and then the plain
/// product: a big unbatched one whose B is at most an eighth of A (a linear's forward,
/// `x · Wᵀ`). Both sum every output over k in the same order, so the result is the same
/// bit for bit; on the H200 the plain layout runs faster (at the shakespeare-char recipe's
/// 16,384 × 384 outputs 34 -> 40 TFLOP/s) than the transpose costs.
fn transposes_b(tuning: &Tuning, g: &Gemm) -> bool {
    tuning.nt_as_nn
        && g.trans_b
        && !g.trans_a
        && g.batch == 1
        && g.causal == Causal::None
        && g.b.ld == g.k
        && tiles(large_tile(tuning), g.m, g.n) >= LARGE_TILE_MIN_GROUPS
        && g.n * 8 <= g.m
}

/// The tile and slices of k for a tiled product (`splittable`: unbatched, no causal skip).
/// A small output with a long k (a weight gradient over many rows) keeps the large tile,
/// whose arithmetic per load is higher, when splitting k alone gives enough workgroups;
/// otherwise a small output takes small tiles (split too when k is long).
fn plan_tiled(tuning: &Tuning, g: &Gemm, splittable: bool) -> (Tile, usize) {
    let (m, n, k) = (g.m, g.n, g.k);
    let tile = pick_tile(tuning, g);
    if !splittable {
        return (tile, 1);
    }
    let large = tiles(large_tile(tuning), m, n);
    let large_split = tuning.split_k_large(large, k);
    // (A quarter of the split target: slices of k shorter than `split_k_large`'s would
    // cost more than the smaller tile's lower arithmetic per load.)
    if tuning.split_large && large_split > 1 && large * large_split >= tuning.split_target_groups / 4 {
        // An output of a few large tiles only (a 384 × 384 weight gradient: 9) takes
        // `split_tile`, more of them, each split as the large tiles would be.
        if let Some(spec) = tuning.split_tile.filter(|_| large <= SPLIT_TILE_MAX_LARGE) {
            let tile = spec_tile(spec);
            return (tile, tuning.split_k_large(tiles(tile, m, n), k));
        }
        return (large_tile(tuning), large_split);
    }
    (tile, tuning.split_k(tiles(tile, m, n), k))
}

/// Which zeros of a causal mask a batched product may skip (`CAUSAL` in matmul.wgsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Causal {
    None = 0,
    /// op(A)[i, kk] is 0 for kk > i: row block m0 stops at k = m0 + BM.
    KUpToRow = 1,
    /// op(A)[i, kk] is 0 for kk < i: row block m0 starts at k = m0.
    KFromRow = 2,
    /// Outputs above the diagonal are not needed (left unwritten).
    SkipAboveDiagonal = 3,
}

/// Where an operand's matrices lie in its buffer: stored rows `ld` values apart; batch
/// z's matrix at `(z / group)·outer + (z % group)·inner` (see [`Gemm::group`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    pub ld: usize,
    pub outer: usize,
    pub inner: usize,
}

/// `batch` products C = op(A) · op(B) of [m, k] by [k, n], as matmul.wgsl computes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
    pub batch: usize,
    /// Batches per outer step: attention's heads, so that batch z = (b, h) finds head h of
    /// sequence b.
    pub group: usize,
    pub a: Operand,
    pub b: Operand,
    pub c: Operand,
    pub causal: Causal,
}

impl Gemm {
    /// The parameter block every matmul kernel (`matmul.wgsl`, `matmul_coop.wgsl`) reads:
    /// sizes, `k_slice` (the k each slice of a split product sums, else k), strides.
    pub fn params(&self, k_slice: usize) -> [u32; 14] {
        let (a, b, c) = (&self.a, &self.b, &self.c);
        let group = self.group.max(1);
        [
            self.m, self.k, self.n, k_slice, a.ld, b.ld, c.ld, group, a.outer, a.inner, b.outer, b.inner,
            c.outer, c.inner,
        ]
        .map(u)
    }

    /// One product of whole buffers, rows packed (the trait's `matmul`).
    pub fn plain(dims: MatmulDims) -> Self {
        let MatmulDims { m, k, n, trans_a, trans_b } = dims;
        let packed = |ld| Operand { ld, outer: 0, inner: 0 };
        Gemm {
            m,
            n,
            k,
            trans_a,
            trans_b,
            batch: 1,
            group: 1,
            a: packed(if trans_a { m } else { k }),
            b: packed(if trans_b { k } else { n }),
            c: packed(n),
            causal: Causal::None,
        }
    }
}

/// The operand bindings and readers matmul.wgsl expects from its defines: plain f32
/// arrays, or (VEC4) arrays of vec4 read a value or a vec4 at a time.
pub(crate) const OPERANDS_F32: &str = "@group(0) @binding(1) var<storage, read> a: array<f32>;\n\
    @group(0) @binding(2) var<storage, read> b: array<f32>;\n\
    fn a_at(i: u32) -> f32 { return a[i]; }\n\
    fn b_at(i: u32) -> f32 { return b[i]; }\n\
    fn a4_at(v: u32) -> vec4<f32> { return vec4<f32>(a[4u * v], a[4u * v + 1u], a[4u * v + 2u], a[4u * v + 3u]); }\n\
    fn b4_at(v: u32) -> vec4<f32> { return vec4<f32>(b[4u * v], b[4u * v + 1u], b[4u * v + 2u], b[4u * v + 3u]); }";
pub(crate) const OPERANDS_VEC4: &str = "@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;\n\
    @group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;\n\
    fn a_at(i: u32) -> f32 { return a[i / 4u][i % 4u]; }\n\
    fn b_at(i: u32) -> f32 { return b[i / 4u][i % 4u]; }\n\
    fn a4_at(v: u32) -> vec4<f32> { return a[v]; }\n\
    fn b4_at(v: u32) -> vec4<f32> { return b[v]; }";

/// The precision's rounding of a product's inputs (`narrow`, `narrow1` in matmul.wgsl): the
/// identity in f32; in mixed, to the nearest f16 (ties to even, f16's subnormals, infinity
/// from 65520 on, NaN kept), kept as an f32. The rounding is done on the f32's bits, not by
/// WGSL's conversion `vec4<f32>(vec4<f16>(v))`: the NVIDIA H200's Vulkan driver folds that
/// round trip (and `unpack2x16float(pack2x16float(v))`) away, so its "mixed" results were
/// f32's bit for bit (the start-up self-test caught it); integer operations cannot be folded,
/// and WGSL leaves a conversion's rounding direction open while this one is exact everywhere.
const NARROW_F32: &str = "fn narrow(v: vec4<f32>) -> vec4<f32> { return v; }\n\
    fn narrow1(v: f32) -> f32 { return v; }";
pub(crate) const NARROW_F16: &str = "fn narrow(v: vec4<f32>) -> vec4<f32> {\n\
        let bits = bitcast<vec4<u32>>(v);\n\
        let mag = bits & vec4<u32>(0x7fffffffu);\n\
        let lsb = (bits >> vec4<u32>(13u)) & vec4<u32>(1u);\n\
        let normal = bitcast<vec4<f32>>((bits + vec4<u32>(0xfffu) + lsb) & vec4<u32>(0xffffe000u));\n\
        let subnormal = round(v * 0x1p24f) * 0x1p-24f;\n\
        let inf = bitcast<vec4<f32>>((bits & vec4<u32>(0x80000000u)) | vec4<u32>(0x7f800000u));\n\
        var r = select(normal, subnormal, mag < vec4<u32>(0x38800000u));\n\
        r = select(r, inf, mag >= vec4<u32>(0x477ff000u));\n\
        return select(r, v, mag > vec4<u32>(0x7f800000u));\n\
    }\n\
    fn narrow1(v: f32) -> f32 { return narrow(vec4<f32>(v)).x; }";

/// One compiled form of matmul.wgsl's `matmul` (and its split sum).
#[derive(Clone, Copy)]
struct Variant {
    tile: Tile,
    bias: bool,
    /// Slices of k.
    split: usize,
    double_buffer: bool,
    /// Stages fetched as vec4s (see `vec4_fits`).
    vec4: bool,
    /// op(A)'s rows summed too (ROW_SUMS in matmul.wgsl).
    row_sums: bool,
    /// The result added onto a prior [m, n] at binding 4 (`onto_at`).
    onto: bool,
    /// The products' inputs rounded to f16 (mixed precision; `narrow` in matmul.wgsl).
    narrow: bool,
}

/// Whether `g` may fetch its stages as vec4s with `tile` (VEC4 in matmul.wgsl): no bound
/// is checked, and every stored row and batch start of A and B is a whole vec4.
fn vec4_fits(tile: Tile, g: &Gemm) -> bool {
    let whole = |o: &Operand| [o.ld, o.outer, o.inner].iter().all(|v| v.is_multiple_of(4));
    !checked(tile, g) && tile.bk.is_multiple_of(4) && whole(&g.a) && whole(&g.b)
}

/// Whether matmul.wgsl must check bounds (CHECKED): a size is not a whole number of tiles.
fn checked(tile: Tile, g: &Gemm) -> bool {
    !g.m.is_multiple_of(tile.bm) || !g.n.is_multiple_of(tile.bn) || !g.k.is_multiple_of(tile.bk)
}

/// The generated constants in front of matmul.wgsl for one variant.
fn matmul_defines(v: Variant, g: &Gemm) -> String {
    let Variant { tile, bias, split, double_buffer, vec4, row_sums, onto, narrow } = v;
    let checked = checked(tile, g);
    let row_sum_fns = match (row_sums, split) {
        (false, _) => "fn store_row_sum(slice: u32, i: u32, v: f32) {}\n\
                       fn store_row_sum_final(i: u32, v: f32) {}",
        (true, 1) => "@group(0) @binding(5) var<storage, read_write> sums: array<f32>;\n\
                      fn store_row_sum(slice: u32, i: u32, v: f32) { sums[i] = v; }\n\
                      fn store_row_sum_final(i: u32, v: f32) { sums[i] = v; }",
        (true, _) => "@group(0) @binding(5) var<storage, read_write> sums: array<f32>;\n\
                      fn store_row_sum(slice: u32, i: u32, v: f32) { c[SPLIT_K * p.m * p.n + slice * p.m + i] = v; }\n\
                      fn store_row_sum_final(i: u32, v: f32) { sums[i] = v; }",
    };
    let bias_fn = extra_fns(bias, onto);
    let operands = if vec4 { OPERANDS_VEC4 } else { OPERANDS_F32 };
    let narrow_fns = if narrow { NARROW_F16 } else { NARROW_F32 };
    format!(
        "const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst TM: u32 = {}u;\n\
         const TN: u32 = {}u;\nconst TRANS_A: bool = {};\nconst TRANS_B: bool = {};\n\
         const CHECKED: bool = {checked};\nconst SPLIT_K: u32 = {split}u;\nconst CAUSAL: u32 = {}u;\n\
         const DOUBLE_BUFFER: bool = {double_buffer};\nconst VEC4: bool = {vec4};\n\
         const ROW_SUMS: bool = {row_sums};\nconst NARROWS: bool = {narrow};\n{bias_fn}\n{row_sum_fns}\n{operands}\n{narrow_fns}",
        tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, g.trans_a, g.trans_b, g.causal as u32,
    )
}

/// matmul.wgsl's `bias_at(j)` and `onto_at(i, v)` (and binding 4) for a bias, a prior or
/// neither (matmul_coop.wgsl takes the same).
pub(crate) fn extra_fns(bias: bool, onto: bool) -> &'static str {
    assert!(!(bias && onto), "matmul: a bias or a prior, not both");
    match (bias, onto) {
        (true, _) => {
            "@group(0) @binding(4) var<storage, read> bias: array<f32>;\n\
             fn bias_at(j: u32) -> f32 { return bias[j]; }\n\
             fn onto_at(i: u32, v: f32) -> f32 { return v; }"
        }
        (false, true) => {
            "@group(0) @binding(4) var<storage, read> prior: array<f32>;\n\
             fn bias_at(j: u32) -> f32 { return 0.0; }\n\
             fn onto_at(i: u32, v: f32) -> f32 { return prior[i] + v; }"
        }
        (false, false) => {
            "fn bias_at(j: u32) -> f32 { return 0.0; }\n\
             fn onto_at(i: u32, v: f32) -> f32 { return v; }"
        }
    }
}

pub(crate) fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

/// What a product writes besides C = op(A) · op(B), through matmul.wgsl's bindings 4 and 5.
#[derive(Clone, Copy)]
pub(crate) enum Extra<'a> {
    None,
    /// `+ bias` on every row (binding 4; unbatched only).
    Bias(&'a GpuBuffer<f32>),
    /// `prior + C` for a prior [m, n] (binding 4; unbatched only).
    Onto(&'a GpuBuffer<f32>),
    /// op(A)'s rows summed over k into [m] (binding 5; unbatched, A stored transposed).
    RowSums(&'a GpuBuffer<f32>),
}

impl WgpuBackend {
    /// Records `g` writing `out` (plus `bias` on every row; unbatched products only). The
    /// caller has checked that the operands lie inside their buffers.
    pub(crate) fn gemm(
        &self,
        a: &GpuBuffer<f32>,
        b: &GpuBuffer<f32>,
        bias: Option<&GpuBuffer<f32>>,
        out: &GpuBuffer<f32>,
        g: &Gemm,
    ) {
        self.gemm_with(a, b, bias.map_or(Extra::None, Extra::Bias), out, g)
    }

    /// Records `g` (unbatched) writing `prior + C` to `out`, for `prior` [m, n].
    pub(crate) fn gemm_onto(
        &self,
        a: &GpuBuffer<f32>,
        b: &GpuBuffer<f32>,
        prior: &GpuBuffer<f32>,
        out: &GpuBuffer<f32>,
        g: &Gemm,
    ) {
        assert!(g.batch == 1 && g.c.ld == g.n, "matmul: a prior only for an unbatched, packed C");
        self.gemm_with(a, b, Extra::Onto(prior), out, g)
    }

    /// Records `g` (unbatched, A stored transposed; the tiled path) writing `out`, and
    /// op(A)'s rows summed over k into `sums` [m] (ROW_SUMS in matmul.wgsl).
    pub(crate) fn gemm_row_sums(
        &self,
        a: &GpuBuffer<f32>,
        b: &GpuBuffer<f32>,
        out: &GpuBuffer<f32>,
        sums: &GpuBuffer<f32>,
        g: &Gemm,
    ) {
        assert!(g.trans_a && g.batch == 1, "matmul: row sums only of an unbatched A stored transposed");
        self.gemm_with(a, b, Extra::RowSums(sums), out, g)
    }

    fn gemm_with(
        &self,
        a: &GpuBuffer<f32>,
        b: &GpuBuffer<f32>,
        extra: Extra<'_>,
        out: &GpuBuffer<f32>,
        g: &Gemm,
    ) {
        let (m, n, k) = (g.m, g.n, g.k);
        if m * n * g.batch == 0 {
            return;
        }
        if let Some(plan) = self.coop.filter(|_| coop::takes(g, &extra)) {
            return self.gemm_coop(plan, a, b, extra, out, g);
        }
        let tuning = &self.gpu.tuning;
        if self.matmul_path == MatmulPath::Tiled && transposes_b(tuning, g) {
            let b_plain = self.alloc::<f32>(n * k);
            let params = [u(n), u(k)];
            let grid = [u(k.div_ceil(32)), u(n.div_ceil(32)), 1];
            self.run(&K_TRANSPOSE, "", &params, &[b.bind(), b_plain.bind()], grid);
            let plain = Gemm { trans_b: false, b: Operand { ld: n, outer: 0, inner: 0 }, ..*g };
            return self.gemm_with(a, &b_plain, extra, out, &plain);
        }
        let row_sums = matches!(extra, Extra::RowSums(_));
        assert!(
            matches!(extra, Extra::None | Extra::RowSums(_)) || g.batch == 1,
            "matmul: a bias or prior only on unbatched products"
        );
        let max_grid = self.gpu.adapter.max_compute_workgroups_per_dimension as usize;
        assert!(
            g.batch <= max_grid,
            "matmul: {} batches are beyond this adapter's grid ({max_grid})",
            g.batch
        );
        // k = 0 needs no special case: the kernel's k loop runs no stage and writes the bias.
        let splittable = g.batch == 1 && g.causal == Causal::None;
        let (tile, split, kernels) = match (self.matmul_path, self.matmul_split_k) {
            (MatmulPath::Direct, _) => (TILE_DIRECT, 1, [&K_MATMUL_DIRECT, &K_MATMUL_DIRECT_BIAS]),
            (MatmulPath::Tiled, forced) => {
                let (tile, split) = match forced {
                    Some(forced) => (pick_tile(tuning, g), if splittable { forced.max(1) } else { 1 }),
                    None => plan_tiled(tuning, g, splittable),
                };
                let tile = Tile { bk: tuning.matmul_bk.unwrap_or(tile.bk), ..tile };
                (tile, split, [&K_MATMUL, &K_MATMUL_BIAS])
            }
        };
        let tiles = [n.div_ceil(tile.bn), m.div_ceil(tile.bm)];
        let double_buffer = tuning.double_buffer.unwrap_or(g.trans_b);
        // The partial sums must fit one binding, and no more slices than the grid allows.
        let max_binding = self.gpu.adapter.max_storage_buffer_binding_size as usize;
        let split = split.min(max_binding / ((m * n + m) * 4)).min(max_grid).max(1);
        // Slices of k are whole stages; `split` shrinks to the slices that hold any of k.
        let k_chunk = k.div_ceil(split).next_multiple_of(tile.bk).max(tile.bk);
        let split = k.div_ceil(k_chunk).max(1);
        let params = g.params(if split > 1 { k_chunk } else { k });
        let grid = [u(tiles[0]), u(tiles[1]), u(split * g.batch)];
        let vec4 = tuning.matmul_vec4 && self.matmul_path == MatmulPath::Tiled && vec4_fits(tile, g);
        assert!(!row_sums || self.matmul_path == MatmulPath::Tiled, "matmul_direct has no row sums");
        let variant = Variant {
            tile,
            bias: matches!(extra, Extra::Bias(_)),
            split,
            double_buffer,
            vec4,
            row_sums,
            onto: matches!(extra, Extra::Onto(_)),
            narrow: self.mixed,
        };
        if split == 1 {
            let defines = matmul_defines(variant, g);
            match extra {
                // The bias or the prior at binding 4.
                Extra::Bias(at_4) | Extra::Onto(at_4) => {
                    let bufs = [a.bind(), b.bind(), out.bind(), at_4.bind()];
                    self.run(kernels[1], &defines, &params, &bufs, grid)
                }
                Extra::RowSums(sums) => {
                    let bufs = [a.bind(), b.bind(), out.bind(), sums.bind()];
                    self.run(&K_MATMUL_ROW_SUMS, &defines, &params, &bufs, grid)
                }
                Extra::None => {
                    self.run(kernels[0], &defines, &params, &[a.bind(), b.bind(), out.bind()], grid)
                }
            }
            return;
        }
        // Each slice's sums into its own [m, n] of `partial` (and its row sums after them),
        // then their sum (and the bias).
        let sums_len = if row_sums { split * m } else { 0 };
        let partial = self.alloc::<f32>(split * m * n + sums_len);
        let defines = matmul_defines(Variant { bias: false, onto: false, ..variant }, g);
        self.run(&K_MATMUL, &defines, &params, &[a.bind(), b.bind(), partial.bind()], grid);
        self.sum_slices(&partial, extra, out, g, split, &params);
    }

    /// Adds the `split` slices' partial sums in `partial` ([split, m, n], then the row
    /// sums' [split, m] with `Extra::RowSums`) into `out` (and the bias, the prior or the
    /// row sums): matmul.wgsl's `matmul_split_sum`, for matmul.wgsl's and
    /// matmul_coop.wgsl's split products, with their `params`.
    pub(crate) fn sum_slices(
        &self,
        partial: &GpuBuffer<f32>,
        extra: Extra<'_>,
        out: &GpuBuffer<f32>,
        g: &Gemm,
        split: usize,
        params: &[u32],
    ) {
        let (m, n) = (g.m, g.n);
        let row_sums = matches!(extra, Extra::RowSums(_));
        let variant = Variant {
            tile: TILE_SMALL,
            bias: matches!(extra, Extra::Bias(_)),
            split,
            double_buffer: false,
            vec4: false,
            row_sums,
            onto: matches!(extra, Extra::Onto(_)),
            narrow: false,
        };
        let outputs = m * n + if row_sums { m } else { 0 };
        let grid = self.recorder().grid_1d(outputs.div_ceil(SPLIT_SUM_WG));
        // (The partials arrive as `a`, read a value at a time, and are never narrowed: the
        // sum shares the f32 variant's pipeline.)
        let defines = matmul_defines(variant, g);
        match extra {
            Extra::Bias(at_4) | Extra::Onto(at_4) => {
                let bufs = [partial.bind(), out.bind(), at_4.bind()];
                self.run(&K_MATMUL_SPLIT_SUM_BIAS, &defines, params, &bufs, grid)
            }
            Extra::RowSums(sums) => {
                let bufs = [partial.bind(), out.bind(), sums.bind()];
                self.run(&K_MATMUL_SPLIT_SUM_ROW_SUMS, &defines, params, &bufs, grid)
            }
            Extra::None => {
                self.run(&K_MATMUL_SPLIT_SUM, &defines, params, &[partial.bind(), out.bind()], grid)
            }
        }
    }
}

impl WgpuBackend {
    /// Which columns of row t of a causal product's stored [T, T] operand (`KUpToRow`,
    /// `KFromRow`) are read: those before the end of the `BM`-position block holding t with
    /// the tiled kernel, which skips the rest (`Some(BM)`); all with the direct one, which
    /// ignores CAUSAL (`None`). The softmax kernels write their zeros only that far.
    pub(crate) fn causal_block(&self, g: &Gemm) -> Option<usize> {
        match self.matmul_path {
            MatmulPath::Direct => None,
            MatmulPath::Tiled => Some(pick_tile(&self.gpu.tuning, g).bm),
        }
    }
}
