//! The cooperative-matrix (tensor-core) matmul of mixed precision: whether an adapter can
//! run it ([`plan`], a pure function of what the adapter reports), the WGSL of one variant
//! (`shaders/matmul_coop.wgsl` with generated constants and unrolled accumulators), and how
//! a product is launched on it ([`WgpuBackend::gemm_coop`]).
//!
//! It needs what wgpu 30 calls `EXPERIMENTAL_COOPERATIVE_MATRIX` (Vulkan's
//! `VK_KHR_cooperative_matrix` with the Vulkan memory model), a 16×16×16 f16×f16→f32
//! configuration at subgroup scope among `cooperative_matrix_properties()` (WGSL's
//! `coop_mat16x16<f16, A|B>` and `coop_mat16x16<f32, C>`), `shader-f16` (its tiles are f16
//! in workgroup memory) and `subgroups` (each subgroup finds its part of the tile by
//! `subgroup_id`). The device asks for the three features only when the plan holds, and
//! the kernel runs only after the start-up self-test passed (`precision.rs`).
//!
//! Which products: every product the mixed matmul runs except those with a causal skip
//! (attention's, whose softmax leaves the skipped blocks unwritten to the size of
//! matmul.wgsl's tile) and those that also sum rows (a bias gradient): those stay on
//! matmul.wgsl's shader-f16 variants, which round the same way.

use crate::matmul::{self, Causal, Extra, Gemm};
use crate::pipelines::{Access, Kernel};
use crate::pool::GpuBuffer;
use crate::WgpuBackend;

use Access::{Read as R, ReadWrite as W};

const MATMUL_COOP: &str = include_str!("shaders/matmul_coop.wgsl");
const MATMUL_COOP_EMULATED: &str = include_str!("shaders/matmul_coop_emulated.wgsl");

// (The whole source is generated, so `parts` is empty: `enable` must come first.)
const K_COOP: Kernel = Kernel { parts: &[], entry: "matmul_coop", bindings: &[(1, R), (2, R), (3, W)] };
const K_COOP_EXTRA: Kernel =
    Kernel { parts: &[], entry: "matmul_coop", bindings: &[(1, R), (2, R), (3, W), (4, R)] };

/// A workgroup's output tile `bm` × `bn` in stages `bk` deep, computed by `wm` × `wn`
/// subgroups, each owning (bm / wm) × (bn / wn) outputs in 16 × 16 accumulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopTile {
    pub bm: usize,
    pub bn: usize,
    pub bk: usize,
    pub wm: usize,
    pub wn: usize,
}

/// 128 × 128 in 8 subgroups of 64 × 32 (4 × 2 accumulators each): 8 products per 6
/// fragment loads from workgroup memory.
pub(crate) const TILE_LARGE: CoopTile = CoopTile { bm: 128, bn: 128, bk: 32, wm: 2, wn: 4 };
/// 64 × 64 in 4 subgroups of 32 × 32, for outputs of few large tiles.
pub(crate) const TILE_SMALL: CoopTile = CoopTile { bm: 64, bn: 64, bk: 32, wm: 2, wn: 2 };
/// Below this many large tiles a product takes small ones.
const LARGE_TILE_MIN_GROUPS: usize = 256;

impl CoopTile {
    /// Workgroup memory of a variant, in bytes: two halves of each staged f16 tile (rows
    /// padded by 8 halves) and one f32 16 × 16 accumulator per subgroup.
    pub fn workgroup_bytes(self, trans_a: bool, trans_b: bool) -> usize {
        let (_, a_size, _, b_size) = self.staged(trans_a, trans_b);
        2 * (a_size + b_size) * 2 + self.wm * self.wn * 256 * 4
    }

    /// `(A_LD, A_SIZE, B_LD, B_SIZE)` of matmul_coop.wgsl: each operand's stage in its stored
    /// orientation, rows padded by 8 halves (16 bytes, as cooperative loads need).
    fn staged(self, trans_a: bool, trans_b: bool) -> (usize, usize, usize, usize) {
        let (a_rows, a_len) = if trans_a { (self.bk, self.bm) } else { (self.bm, self.bk) };
        let (b_rows, b_len) = if trans_b { (self.bn, self.bk) } else { (self.bk, self.bn) };
        (a_len + 8, a_rows * (a_len + 8), b_len + 8, b_rows * (b_len + 8))
    }

    fn frags(self) -> (usize, usize) {
        (self.bm / self.wm / 16, self.bn / self.wn / 16)
    }
}

/// How this adapter runs the cooperative-matrix matmul: its largest subgroup (the
/// workgroup is that many invocations per tile subgroup), whether the large tile fits its
/// workgroup memory, and (tests only, `TINYGPT_WGPU_COOP=emulate`) whether the
/// cooperative-matrix built-ins are emulated (`shaders/matmul_coop_emulated.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopPlan {
    pub subgroup: u32,
    pub large: bool,
    /// Every product on the large tile, whatever its size (the start-up self-test's
    /// products are small; and `TINYGPT_WGPU_COOP=emulate-large`).
    pub always_large: bool,
    pub emulated: bool,
}

impl CoopPlan {
    fn tile(self, g: &Gemm) -> CoopTile {
        let large = g.m.div_ceil(TILE_LARGE.bm) * g.n.div_ceil(TILE_LARGE.bn) * g.batch;
        if self.large && (large >= LARGE_TILE_MIN_GROUPS || self.always_large) {
            TILE_LARGE
        } else {
            TILE_SMALL
        }
    }
}

/// What [`plan`] needs to know of an adapter.
#[derive(Clone, Debug)]
pub(crate) struct CoopOffer<'a> {
    pub features: wgpu::Features,
    pub properties: &'a [wgpu::CooperativeMatrixProperties],
    pub subgroup_max_size: u32,
    pub max_invocations: u32,
    pub max_workgroup_bytes: u32,
}

impl<'a> CoopOffer<'a> {
    pub fn of(adapter: &wgpu::Adapter, properties: &'a [wgpu::CooperativeMatrixProperties]) -> Self {
        let limits = adapter.limits();
        CoopOffer {
            features: adapter.features(),
            properties,
            subgroup_max_size: adapter.get_info().subgroup_max_size,
            max_invocations: limits.max_compute_invocations_per_workgroup,
            max_workgroup_bytes: limits.max_compute_workgroup_storage_size,
        }
    }
}

/// Whether `offer` can run the cooperative-matrix matmul, and how; else why not, as the
/// end of a sentence ("no cooperative matrix on …" is the caller's).
pub(crate) fn plan(offer: &CoopOffer<'_>) -> Result<CoopPlan, String> {
    use wgpu::CooperativeScalarType::{F16, F32};
    let f16_f32 = |p: &&wgpu::CooperativeMatrixProperties| p.ab_type == F16 && p.cr_type == F32;
    let Some(first) = offer.properties.iter().find(f16_f32) else {
        return Err(if offer.properties.is_empty() {
            "no cooperative matrices listed".into()
        } else {
            "no f16×f16→f32 cooperative matrices listed".into()
        });
    };
    let square = |p: &&wgpu::CooperativeMatrixProperties| p.m_size == 16 && p.n_size == 16 && p.k_size == 16;
    if !offer.properties.iter().filter(f16_f32).any(|p| square(&p)) {
        return Err(format!(
            "f16×f16→f32 cooperative matrices listed as {}×{}×{}, not the 16×16×16 the kernel uses",
            first.m_size, first.n_size, first.k_size
        ));
    }
    let needs = [
        (wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX, "wgpu does not offer them here"),
        (wgpu::Features::SHADER_F16, "no shader-f16"),
        (wgpu::Features::SUBGROUP, "no subgroups"),
    ];
    if let Some((_, why)) = needs.iter().find(|(f, _)| !offer.features.contains(*f)) {
        return Err(format!("16×16×16 f16×f16→f32 cooperative matrices listed, but {why}"));
    }
    let sg = offer.subgroup_max_size;
    let fits = |t: CoopTile| {
        let invocations = (t.wm * t.wn) as u32 * sg;
        let bytes = [false, true].iter().flat_map(|&ta| [(ta, false), (ta, true)]);
        invocations <= offer.max_invocations
            && bytes.map(|(ta, tb)| t.workgroup_bytes(ta, tb)).max().unwrap_or(0) as u32
                <= offer.max_workgroup_bytes
    };
    if !(1..=128).contains(&sg) || !fits(TILE_SMALL) {
        return Err(format!(
            "cooperative matrices listed, but subgroups of up to {sg} with {} invocations and {} bytes of \
             workgroup memory do not fit the kernel",
            offer.max_invocations, offer.max_workgroup_bytes
        ));
    }
    Ok(CoopPlan { subgroup: sg, large: fits(TILE_LARGE), always_large: false, emulated: false })
}

/// Whether the cooperative-matrix kernel takes `g` (see the module doc).
pub(crate) fn takes(g: &Gemm, extra: &Extra<'_>) -> bool {
    g.causal == Causal::None && !matches!(extra, Extra::RowSums(_))
}

/// A variant of matmul_coop.wgsl.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CoopVariant {
    pub tile: CoopTile,
    pub subgroup: u32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub checked: bool,
    pub split: usize,
    pub vec4: bool,
    pub bias: bool,
    pub onto: bool,
    /// The built-ins emulated (see [`CoopPlan`]).
    pub emulated: bool,
}

/// The whole WGSL module of `v`.
pub(crate) fn source(v: CoopVariant) -> String {
    let t = v.tile;
    let (a_ld, a_size, b_ld, b_size) = t.staged(v.trans_a, v.trans_b);
    let (fm, fn_) = t.frags();
    let operands = if v.vec4 { matmul::OPERANDS_VEC4 } else { matmul::OPERANDS_F32 };
    let header = format!(
        "enable f16;\n{}const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst WM: u32 = {}u;\n\
         const WN: u32 = {}u;\nconst SG: u32 = {}u;\nconst A_LD: u32 = {a_ld}u;\nconst A_SIZE: u32 = {a_size}u;\n\
         const B_LD: u32 = {b_ld}u;\nconst B_SIZE: u32 = {b_size}u;\nconst TRANS_A: bool = {};\n\
         const TRANS_B: bool = {};\nconst CHECKED: bool = {};\nconst SPLIT_K: u32 = {}u;\nconst VEC4: bool = {};\n\
         {}\n{operands}\n{}\n",
        if v.emulated { "" } else { "enable wgpu_cooperative_matrix;\n" },
        t.bm,
        t.bn,
        t.bk,
        t.wm,
        t.wn,
        v.subgroup,
        v.trans_a,
        v.trans_b,
        v.checked,
        v.split,
        v.vec4,
        matmul::extra_fns(v.bias, v.onto),
        matmul::NARROW_F16,
    );
    let accs = || (0..fm).flat_map(|i| (0..fn_).map(move |j| (i, j)));
    let mut zero = String::new();
    let mut multiply = String::new();
    let mut write = String::new();
    for (slot, (i, j)) in accs().enumerate() {
        zero += &if v.emulated {
            format!("    var acc_{i}_{j} = emu_zero(warp, {slot}u);\n")
        } else {
            format!("    var acc_{i}_{j} = coopLoadT<coop_mat16x16<f32, C>>(&c_tile[0], 16u);\n")
        };
        write += &format!(
            "    coopStoreT(acc_{i}_{j}, &c_tile[warp * 256u], 16u);\n    write_out(lid, m0, n0, {i}u, {j}u);\n"
        );
    }
    for i in 0..fm {
        multiply += &format!("            let a_{i} = a_frag(a_half, wr + {}u, kk);\n", i * 16);
    }
    for j in 0..fn_ {
        multiply += &format!("            let b_{j} = b_frag(b_half, kk, wc + {}u);\n", j * 16);
    }
    for (i, j) in accs() {
        multiply += &format!("            acc_{i}_{j} = coopMultiplyAdd(a_{i}, b_{j}, acc_{i}_{j});\n");
    }
    let mut body = String::with_capacity(MATMUL_COOP.len() + 4096);
    for line in MATMUL_COOP.lines() {
        match line.trim() {
            "// @zero_accumulators" => body += &zero,
            "// @multiply_stage" => body += &multiply,
            "// @write_accumulators" => body += &write,
            _ => {
                body += line;
                body.push('\n');
            }
        }
    }
    if v.emulated {
        body = emulate(&body) + &format!("const EMU_ACCS: u32 = {}u;\n", fm * fn_) + MATMUL_COOP_EMULATED;
    }
    header + &body
}

/// `body` with the cooperative-matrix built-ins and types replaced by
/// matmul_coop_emulated.wgsl's stand-ins (each pattern is matmul_coop.wgsl's own text, or
/// [`source`]'s).
fn emulate(body: &str) -> String {
    let swaps = [
        ("coopLoadT<coop_mat16x16<f16, A>>(&a_tile[", "emu_load_a(true, "),
        ("coopLoad<coop_mat16x16<f16, A>>(&a_tile[", "emu_load_a(false, "),
        ("coopLoadT<coop_mat16x16<f16, B>>(&b_tile[", "emu_load_b(true, "),
        ("coopLoad<coop_mat16x16<f16, B>>(&b_tile[", "emu_load_b(false, "),
        ("], A_LD)", ", A_LD)"),
        ("], B_LD)", ", B_LD)"),
        ("coopMultiplyAdd(", "emu_mma("),
        ("coop_mat16x16<f16, A>", "EmuA"),
        ("coop_mat16x16<f16, B>", "EmuB"),
        (
            "@builtin(subgroup_id) sid: u32) {",
            "@builtin(subgroup_id) sid: u32,\n    @builtin(subgroup_invocation_id) lane: u32, \
             @builtin(subgroup_size) size: u32) {\n    emu_lane = lane;\n    emu_size = size;",
        ),
    ];
    let mut text = swaps.iter().fold(body.to_string(), |t, (from, to)| {
        assert!(t.contains(from), "matmul_coop.wgsl no longer holds `{from}`");
        t.replace(from, to)
    });
    // `coopStoreT(acc_i_j, &c_tile[warp * 256u], 16u);`
    text =
        text.replace("coopStoreT(", "emu_store(").replace(", &c_tile[warp * 256u], 16u);", ", warp * 256u);");
    text
}

impl WgpuBackend {
    /// Records `g` on the cooperative-matrix kernel (see [`takes`]): as `gemm_with` does on
    /// matmul.wgsl, split over k when the output has few tiles (the slices added by
    /// `matmul_split_sum`).
    pub(crate) fn gemm_coop(
        &self,
        plan: CoopPlan,
        a: &GpuBuffer<f32>,
        b: &GpuBuffer<f32>,
        extra: Extra<'_>,
        out: &GpuBuffer<f32>,
        g: &Gemm,
    ) {
        let u = matmul::u;
        let (m, n, k) = (g.m, g.n, g.k);
        let tile = plan.tile(g);
        let tiles = m.div_ceil(tile.bm) * n.div_ceil(tile.bn);
        let max_grid = self.gpu.adapter.max_compute_workgroups_per_dimension as usize;
        assert!(
            g.batch <= max_grid,
            "matmul: {} batches are beyond this adapter's grid ({max_grid})",
            g.batch
        );
        let split = if g.batch > 1 {
            1
        } else {
            match self.matmul_split_k {
                Some(forced) => forced.max(1),
                None => self.gpu.tuning.split_k(tiles, k),
            }
        };
        let max_binding = self.gpu.adapter.max_storage_buffer_binding_size as usize;
        let split = split.min(max_binding / (m * n * 4)).min(max_grid).max(1);
        let k_chunk = k.div_ceil(split).next_multiple_of(tile.bk).max(tile.bk);
        let split = k.div_ceil(k_chunk).max(1);
        let params = g.params(if split > 1 { k_chunk } else { k });
        let grid = [u(n.div_ceil(tile.bn)), u(m.div_ceil(tile.bm)), u(split * g.batch)];
        let checked = !m.is_multiple_of(tile.bm) || !n.is_multiple_of(tile.bn) || !k.is_multiple_of(tile.bk);
        let whole = |o: &matmul::Operand| [o.ld, o.outer, o.inner].iter().all(|v| v.is_multiple_of(4));
        let variant = CoopVariant {
            tile,
            subgroup: plan.subgroup,
            trans_a: g.trans_a,
            trans_b: g.trans_b,
            checked,
            split,
            vec4: self.gpu.tuning.matmul_vec4 && !checked && whole(&g.a) && whole(&g.b),
            bias: split == 1 && matches!(extra, Extra::Bias(_)),
            onto: split == 1 && matches!(extra, Extra::Onto(_)),
            emulated: plan.emulated,
        };
        let defines = source(variant);
        if split == 1 {
            match extra {
                Extra::Bias(at_4) | Extra::Onto(at_4) => {
                    let bufs = [a.bind(), b.bind(), out.bind(), at_4.bind()];
                    self.run(&K_COOP_EXTRA, &defines, &params, &bufs, grid)
                }
                _ => self.run(&K_COOP, &defines, &params, &[a.bind(), b.bind(), out.bind()], grid),
            }
            return;
        }
        let partial = self.alloc::<f32>(split * m * n);
        self.run(&K_COOP, &defines, &params, &[a.bind(), b.bind(), partial.bind()], grid);
        self.sum_slices(&partial, extra, out, g, split, &params);
    }
}

#[cfg(test)]
#[path = "coop_tests.rs"]
mod tests;
