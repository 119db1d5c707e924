//! Host side of `shaders/matmul.wgsl`: [`Gemm`], one product as the kernel sees it (plain,
//! batched over strided operands as attention's per-head products are, or a group of
//! products or terms over separate buffers), and how it is launched: tile, slices of k,
//! generated constants and bindings.

use tinygpt_tensor::MatmulDims;

use crate::pipelines::{Access, Kernel};
use crate::pool::GpuBuffer;
use crate::tuning::Tuning;
use crate::{MatmulPath, WgpuBackend};

use Access::{Read as R, ReadWrite as W};

const MATMUL: &str = include_str!("shaders/matmul.wgsl");

/// Storage bindings one dispatch may use: the WebGPU default per shader stage (a browser
/// gives no more unless asked), so a group binds at most this many buffers.
pub(crate) const MAX_BINDINGS: usize = 8;

/// Bindings 1..=MAX_BINDINGS with the first `w` writable: a matmul dispatch binds its
/// outputs first, then A's, B's and the bias (see [`Roles`]).
const fn writes_first(w: usize) -> [(u32, Access); MAX_BINDINGS] {
    let mut out = [(0, R); MAX_BINDINGS];
    let mut i = 0;
    while i < MAX_BINDINGS {
        out[i] = (i as u32 + 1, if i < w { W } else { R });
        i += 1;
    }
    out
}

const BINDINGS: [[(u32, Access); MAX_BINDINGS]; 4] =
    [writes_first(0), writes_first(1), writes_first(2), writes_first(3)];

/// How many buffers a matmul dispatch binds in each role, in binding order: `c` outputs
/// (or the partial sums), `a` and `b` operands (1: shared by every product or term;
/// 0: none, for the split sum's `b`), and the bias (one buffer, product i's at i·n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Roles {
    pub c: usize,
    pub a: usize,
    pub b: usize,
    pub bias: bool,
}

impl Roles {
    pub fn total(self) -> usize {
        self.c + self.a + self.b + usize::from(self.bias)
    }

    fn kernel(self, entry: &'static str) -> Kernel {
        assert!(
            self.c < BINDINGS.len() && self.total() <= MAX_BINDINGS,
            "matmul: too many bindings {self:?}"
        );
        Kernel { parts: &[MATMUL], entry, bindings: &BINDINGS[self.c][..self.total()] }
    }

    /// The WGSL declarations of these bindings and their accessors (see matmul.wgsl), each
    /// picking buffer `term` of its role where it has several.
    fn declarations(self, vec4: bool) -> String {
        let mut out = String::new();
        let mut binding = 1;
        let operand = if vec4 { "vec4<f32>" } else { "f32" };
        let roles = [
            ("c", self.c, "read_write", "f32"),
            ("a", self.a, "read", operand),
            ("b", self.b, "read", operand),
        ];
        for (name, count, access, elem) in
            roles.into_iter().chain(self.bias.then_some(("bias", 1, "read", "f32")))
        {
            for i in 0..count {
                out += &format!(
                    "@group(0) @binding({binding}) var<storage, {access}> {name}{i}: array<{elem}>;\n"
                );
                binding += 1;
            }
        }
        for (name, count) in [("a", self.a), ("b", self.b)] {
            // (With VEC4 the arrays hold vec4s; else f32s, a vec4 read as four values.)
            let value = |t: usize| match vec4 {
                true => format!("{name}{t}[i / 4u][i % 4u]"),
                false => format!("{name}{t}[i]"),
            };
            let vector = |t: usize| match vec4 {
                true => format!("{name}{t}[v]"),
                false => {
                    let at = |q: u32| format!("{name}{t}[4u * v + {q}u]");
                    format!("vec4<f32>({}, {}, {}, {})", at(0), at(1), at(2), at(3))
                }
            };
            out += &read_fn(&format!("fn {name}_at(i: u32) -> f32"), count, "0.0", value);
            out += &read_fn(&format!("fn {name}4_at(v: u32) -> vec4<f32>"), count, "vec4<f32>(0.0)", vector);
        }
        out += "fn c_set(i: u32, value: f32) {\n";
        for t in 0..self.c {
            let branch = if t + 1 == self.c { "{".to_string() } else { format!("if (term == {t}u) {{") };
            let before = if t == 0 { "    " } else { " else " };
            out += &format!("{before}{branch} c{t}[i] = value; }}");
        }
        out += "\n}\n";
        out += if self.bias {
            "fn bias_at(j: u32) -> f32 { return bias0[term * p.n + j]; }\n"
        } else {
            "fn bias_at(j: u32) -> f32 { return 0.0; }\n"
        };
        out
    }
}

/// A WGSL reader `signature` returning `value(t)` of buffer `t = term` of `count` (the
/// last one for any larger `term`), or `none` when there is no buffer.
fn read_fn(signature: &str, count: usize, none: &str, value: impl Fn(usize) -> String) -> String {
    let mut f = format!("{signature} {{\n");
    for t in 0..count.saturating_sub(1) {
        f += &format!("    if (term == {t}u) {{ return {}; }}\n", value(t));
    }
    let last = if count == 0 { none.to_string() } else { value(count - 1) };
    f + &format!("    return {last};\n}}\n")
}

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

fn large_tile(tuning: &Tuning) -> Tile {
    match tuning.large_tile {
        Some((bm, bn, t)) => {
            Tile { bm, bn, tm: t.unwrap_or(bm / 16), tn: t.unwrap_or(bn / 16), ..TILE_LARGE }
        }
        None => TILE_LARGE,
    }
}

/// The tile for `g`: the large one when one product (or a group's products together)
/// have enough of them; otherwise the small one, as 64 invocations of 8 × 8 outputs for a
/// batched product (attention's per-head ones: many workgroups over all batches, so each
/// can be dense; on the H200 at the shakespeare-char recipe's shape 3.3 -> 3.1 ms a step
/// for the three kinds) unless `batched_dense` is off.
fn pick_tile(tuning: &Tuning, g: &Gemm) -> Tile {
    let large = large_tile(tuning);
    if tiles(large, g.m, g.n) * g.products >= LARGE_TILE_MIN_GROUPS {
        large
    } else if g.batch > 1 && tuning.batched_dense {
        TILE_SMALL_DENSE
    } else {
        TILE_SMALL
    }
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
    // (A group's products are split alike: their tiles count together.)
    let large = tiles(large_tile(tuning), m, n) * g.products;
    let large_split = tuning.split_k_large(large, k);
    // (A quarter of the split target: slices of k shorter than `split_k_large`'s would
    // cost more than the smaller tile's lower arithmetic per load.)
    if tuning.split_large && large_split > 1 && large * large_split >= tuning.split_target_groups / 4 {
        return (large_tile(tuning), large_split);
    }
    (tile, tuning.split_k(tiles(tile, m, n) * g.products, k))
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
    /// Products of a group, each over its own buffers, one per grid z (unbatched; see
    /// PRODUCTS in matmul.wgsl).
    pub products: usize,
    /// Terms summed into one output, each over its own buffers (unbatched, no bias; see
    /// TERMS in matmul.wgsl).
    pub terms: usize,
}

impl Gemm {
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
            products: 1,
            terms: 1,
        }
    }
}

/// One compiled form of matmul.wgsl's `matmul` (and its split sum).
#[derive(Clone, Copy)]
struct Variant {
    tile: Tile,
    /// The buffers bound.
    roles: Roles,
    /// Slices of k.
    split: usize,
    double_buffer: bool,
    /// Stages fetched as vec4s (see `vec4_fits`).
    vec4: bool,
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
    let Variant { tile, roles, split, double_buffer, vec4 } = v;
    let checked = checked(tile, g);
    format!(
        "const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst TM: u32 = {}u;\n\
         const TN: u32 = {}u;\nconst TRANS_A: bool = {};\nconst TRANS_B: bool = {};\n\
         const CHECKED: bool = {checked};\nconst SPLIT_K: u32 = {split}u;\nconst CAUSAL: u32 = {}u;\n\
         const DOUBLE_BUFFER: bool = {double_buffer};\nconst VEC4: bool = {vec4};\n\
         const PRODUCTS: u32 = {}u;\nconst TERMS: u32 = {}u;\n{}",
        tile.bm,
        tile.bn,
        tile.bk,
        tile.tm,
        tile.tn,
        g.trans_a,
        g.trans_b,
        g.causal as u32,
        g.products,
        g.terms,
        roles.declarations(vec4),
    )
}

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

/// The buffers of one matmul dispatch: `a` and `b` one per product or term of a group
/// (or one shared by all), `c` one per product (one for a sum), the bias of every product
/// in one buffer (product i's at i·n).
pub(crate) struct GemmBuffers<'a> {
    pub a: &'a [&'a GpuBuffer<f32>],
    pub b: &'a [&'a GpuBuffer<f32>],
    pub bias: Option<&'a GpuBuffer<f32>>,
    pub c: &'a [&'a GpuBuffer<f32>],
}

impl GemmBuffers<'_> {
    fn roles(&self) -> Roles {
        Roles { c: self.c.len(), a: self.a.len(), b: self.b.len(), bias: self.bias.is_some() }
    }
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
        self.gemm_bound(&GemmBuffers { a: &[a], b: &[b], bias, c: &[out] }, g)
    }

    /// Records `g` (a single product, or a group: see [`Gemm::products`] and
    /// [`Gemm::terms`]) over `bufs`, whose roles fit [`MAX_BINDINGS`]. The caller has
    /// checked that the operands lie inside their buffers.
    pub(crate) fn gemm_bound(&self, bufs: &GemmBuffers<'_>, g: &Gemm) {
        let (m, n, k) = (g.m, g.n, g.k);
        if m * n * g.batch * g.products == 0 {
            return;
        }
        let grouped = g.products > 1 || g.terms > 1;
        assert!(bufs.bias.is_none() || g.batch == 1, "matmul: a bias only on unbatched products");
        assert!(!grouped || (g.batch == 1 && g.causal == Causal::None), "matmul: a group is unbatched");
        assert!(g.terms == 1 || bufs.bias.is_none(), "matmul: no bias on a sum of products");
        let max_grid = self.gpu.adapter.max_compute_workgroups_per_dimension as usize;
        assert!(
            g.batch * g.products <= max_grid,
            "matmul: {} batches are beyond this adapter's grid ({max_grid})",
            g.batch * g.products
        );
        // k = 0 needs no special case: the kernel's k loop runs no stage and writes the bias.
        let splittable = g.batch == 1 && g.causal == Causal::None;
        let tuning = &self.gpu.tuning;
        let (tile, split, entry) = match (self.matmul_path, self.matmul_split_k) {
            (MatmulPath::Direct, _) => (TILE_DIRECT, 1, "matmul_direct"),
            (MatmulPath::Tiled, forced) => {
                let (tile, split) = match forced {
                    Some(forced) => (pick_tile(tuning, g), if splittable { forced.max(1) } else { 1 }),
                    None => plan_tiled(tuning, g, splittable),
                };
                let tile = Tile { bk: tuning.matmul_bk.unwrap_or(tile.bk), ..tile };
                (tile, split, "matmul")
            }
        };
        let tiles = [n.div_ceil(tile.bn), m.div_ceil(tile.bm)];
        let double_buffer = tuning.double_buffer.unwrap_or(g.trans_b);
        // The partial sums must fit one binding, and no more slices than the grid allows.
        let max_binding = self.gpu.adapter.max_storage_buffer_binding_size as usize;
        let split = split.min(max_binding / (g.products * m * n * 4)).min(max_grid / g.products).max(1);
        // Slices of k are whole stages; `split` shrinks to the slices that hold any of k.
        let k_chunk = k.div_ceil(split).next_multiple_of(tile.bk).max(tile.bk);
        let split = k.div_ceil(k_chunk).max(1);
        // Split, a group's products write their partial sums one after another.
        let c_outer = if split > 1 && g.products > 1 { split * m * n } else { g.c.outer };
        let params = [
            u(m),
            u(k),
            u(n),
            u(if split > 1 { k_chunk } else { k }),
            u(g.a.ld),
            u(g.b.ld),
            u(g.c.ld),
            u(g.group.max(1)),
            u(g.a.outer),
            u(g.a.inner),
            u(g.b.outer),
            u(g.b.inner),
            u(c_outer),
            u(g.c.inner),
        ];
        let grid = [u(tiles[0]), u(tiles[1]), u(split * g.batch * g.products)];
        let vec4 = tuning.matmul_vec4 && self.matmul_path == MatmulPath::Tiled && vec4_fits(tile, g);
        let operands = || bufs.a.iter().chain(bufs.b).map(|buf| buf.bind());
        if split == 1 {
            let roles = bufs.roles();
            let defines = matmul_defines(Variant { tile, roles, split, double_buffer, vec4 }, g);
            let binds: Vec<_> = bufs
                .c
                .iter()
                .map(|c| c.bind())
                .chain(operands())
                .chain(bufs.bias.map(|b| b.bind()))
                .collect();
            self.run(&roles.kernel(entry), &defines, &params, &binds, grid);
            return;
        }
        // Each slice's sums into its own [m, n] of `partial`, then their sum (and the bias).
        let partial = self.alloc::<f32>(g.products * split * m * n);
        let roles = Roles { c: 1, bias: false, ..bufs.roles() };
        let defines = matmul_defines(Variant { tile, roles, split, double_buffer, vec4 }, g);
        let binds: Vec<_> = std::iter::once(partial.bind()).chain(operands()).collect();
        self.run(&roles.kernel("matmul"), &defines, &params, &binds, grid);
        let grid = self.recorder().grid_1d((g.products * m * n).div_ceil(SPLIT_SUM_WG));
        // (The partials arrive as `a`, read a value at a time.)
        let roles = Roles { a: 1, b: 0, ..bufs.roles() };
        let defines = matmul_defines(Variant { tile, roles, split, double_buffer, vec4: false }, g);
        let binds: Vec<_> = bufs
            .c
            .iter()
            .map(|c| c.bind())
            .chain([partial.bind()])
            .chain(bufs.bias.map(|b| b.bind()))
            .collect();
        self.run(&roles.kernel("matmul_split_sum"), &defines, &params, &binds, grid);
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
