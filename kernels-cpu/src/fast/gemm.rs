//! The fast matmul shared by every SIMD variant: packed panels, cache blocking and a
//! register-tiled microkernel generic over [`Simd`]; each ISA picks its tile (`MR` rows ×
//! `NV` vectors) and instantiates [`piece`] behind its `#[target_feature]` (x86.rs, wasm.rs).
//!
//! matmul: A, B, bias [n] -> C [m, n], C = op(A) · op(B) (+ bias), as the reference
//! (`kernels/matmul.rs`) defines it.
//!
//! Layout of the work:
//! - op(B) is packed once per call into `nr`-column panels `[n / nr][k][nr]` (zero past
//!   `n`), so the microkernel reads B contiguously whatever its layout, and each panel is
//!   read from cache by every row block instead of being re-streamed per 4 rows.
//! - C is cut into pieces of `MC` rows × `NC` (or, given enough rows, `NC_WIDE`) columns
//!   — sizes chosen by the problem, never derived from the thread count — that run in
//!   parallel. A piece walks k in `KC` slices, packs its
//!   `MC × KC` block of op(A) into `mr`-row panels (L2), then for each `KC × nr` panel of B
//!   (L1) runs the microkernel over its `mr`-row panels.
//! - Every output starts at its bias (or 0) and gets `a(i,p)·b(p,j)` added by one
//!   multiply-add per `p`, in ascending `p`, whatever the piece or thread. The first k
//!   slice's tiles start their registers from the bias, so C is written once per slice
//!   and never zero-filled first. So results are
//!   bit-identical at any thread count; they differ from the reference's (which rounds the
//!   product and the sum separately) within the conformance kit's tolerance.

use std::cell::RefCell;
use std::ops::Range;

use tinygpt_tensor::MatmulDims;

use crate::fast::simd::Simd;
use crate::parallel::Parallel;

/// Depth of one k slice: a `KC × nr` B panel (16 KiB for AVX2, 32 KiB for AVX-512) stays
/// in L1 while the `mr`-row A panels stream past it.
const KC: usize = 256;
/// Rows per parallel piece; a multiple of every variant's `mr` (4, 6, 12).
const MC: usize = 48;
/// Columns per parallel piece when C has few row blocks; a multiple of every variant's `nr`
/// (8, 16, 32).
const NC: usize = 256;
/// Columns per parallel piece when C has at least [`ROW_BLOCKS_FOR_WIDE`] row blocks (enough
/// pieces for the threads without cutting columns): a row block of A is then packed once
/// for every layer up to `large` (`d_mlp` 768), where 256 columns packed it three times
/// at the `large` MLP shapes; 768 ran them 10–40% faster (`matmul_bench`, BENCHMARKS.md).
const NC_WIDE: usize = 768;
const ROW_BLOCKS_FOR_WIDE: usize = 4;
/// Room for the largest `mr × nr` tile, for the partial tiles at the edges of C.
const MAX_TILE: usize = 512;

/// One ISA's microkernel: its tile and the `#[target_feature]` entry point running [`piece`].
pub(crate) struct Microkernel {
    pub mr: usize,
    pub nr: usize,
    /// # Safety
    /// Only for a variant [`crate::KernelVariant::is_supported`] accepted; see [`Piece`].
    pub piece: unsafe fn(&Piece<'_>),
}

/// An `[rows, cols]` matrix read through strides (a transposed operand costs nothing).
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl Strided<'_> {
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.row_stride + c * self.col_stride]
    }
}

/// Where C lives, shared by the pieces; each piece writes only its own rows × columns.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(*mut f32);
// SAFETY: pieces write disjoint parts of C (see `matmul`), and C outlives every piece.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// One parallel piece of C: `rows` × `cols` (cols start on an `nr` boundary).
pub(crate) struct Piece<'a> {
    a: Strided<'a>,
    packed_b: &'a [f32],
    bias: Option<&'a [f32]>,
    c: OutPtr,
    k: usize,
    n: usize,
    rows: Range<usize>,
    cols: Range<usize>,
}

thread_local! {
    /// Packed op(B), kept between calls so a training step does not fault in fresh pages
    /// for it every time (it is as big as B).
    static PACKED_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Each thread's packed block of op(A), kept between pieces for the same reason.
    static PACKED_A: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn matmul(
    kernel: &Microkernel,
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    dims: MatmulDims,
) {
    let MatmulDims { m, k, n, trans_a, trans_b } = dims;
    crate::kernels::matmul::check_operands(c, a, b, bias, dims);
    assert!(
        kernel.mr * kernel.nr <= MAX_TILE
            && MC.is_multiple_of(kernel.mr)
            && NC.is_multiple_of(kernel.nr)
            && NC_WIDE.is_multiple_of(kernel.nr)
    );
    if c.is_empty() {
        return;
    }
    let a = if trans_a {
        Strided { data: a, row_stride: 1, col_stride: m }
    } else {
        Strided { data: a, row_stride: k, col_stride: 1 }
    };
    let b = if trans_b {
        Strided { data: b, row_stride: 1, col_stride: k }
    } else {
        Strided { data: b, row_stride: n, col_stride: 1 }
    };
    PACKED_B.with(|packed| {
        let mut packed = packed.borrow_mut();
        pack_b(par, &mut packed, b, k, n, kernel.nr);
        let packed: &[f32] = &packed;
        let out = OutPtr(c.as_mut_ptr());
        let row_blocks = m.div_ceil(MC);
        let nc = if row_blocks >= ROW_BLOCKS_FOR_WIDE { NC_WIDE } else { NC };
        let col_blocks = n.div_ceil(nc);
        par.map(row_blocks * col_blocks, |index| {
            let (rb, cb) = (index / col_blocks, index % col_blocks);
            let piece = Piece {
                a,
                packed_b: packed,
                bias,
                c: out,
                k,
                n,
                rows: rb * MC..((rb + 1) * MC).min(m),
                cols: cb * nc..((cb + 1) * nc).min(n),
            };
            // SAFETY: `kernel` belongs to a supported variant (the backend checked it when it
            // was built); pieces cover disjoint parts of C, which is `m × n` as asserted.
            unsafe { (kernel.piece)(&piece) }
        });
    });
}

/// op(B) `[k, n]` into `[n.div_ceil(nr)][k][nr]` panels, zero past column `n`.
fn pack_b(par: &Parallel, packed: &mut Vec<f32>, b: Strided<'_>, k: usize, n: usize, nr: usize) {
    packed.clear();
    packed.resize(n.div_ceil(nr) * k * nr, 0.0);
    if k == 0 {
        return;
    }
    par.chunks_mut(packed, k * nr, |panel, dst| {
        let j0 = panel * nr;
        let w = nr.min(n - j0);
        if b.col_stride == 1 {
            // Row-major B (a weight gradient's activations): one contiguous copy per row.
            for (p, row) in dst.chunks_exact_mut(nr).enumerate() {
                let start = p * b.row_stride + j0;
                row[..w].copy_from_slice(&b.data[start..start + w]);
            }
        } else {
            for j in 0..w {
                for p in 0..k {
                    dst[p * nr + j] = b.at(p, j0 + j);
                }
            }
        }
    });
}

/// Rows `rows` of op(A), columns `pc..pc + kc`, into `mr`-row panels `[panel][kc][MR]`
/// (zero past the last row).
#[inline(always)]
fn pack_a<const MR: usize>(dst: &mut [f32], a: Strided<'_>, rows: Range<usize>, pc: usize, kc: usize) {
    for (ip, i0) in rows.clone().step_by(MR).enumerate() {
        let panel = &mut dst[ip * kc * MR..][..kc * MR];
        let h = MR.min(rows.end - i0);
        if a.row_stride == 1 {
            // Transposed A (a weight gradient's output gradient): rows lie side by side.
            for (p, col) in panel.chunks_exact_mut(MR).enumerate() {
                let start = (pc + p) * a.col_stride + i0;
                if h == MR {
                    // A constant length: a few vector moves, not a `memcpy` call.
                    col.copy_from_slice(&a.data[start..start + MR]);
                } else {
                    col[..h].copy_from_slice(&a.data[start..start + h]);
                    col[h..].fill(0.0);
                }
            }
        } else {
            // Row-major A (activations): each row read contiguously, written every MR values.
            for r in 0..MR {
                if r < h {
                    let row = &a.data[(i0 + r) * a.row_stride + pc..][..kc];
                    for (col, &x) in panel.chunks_exact_mut(MR).zip(row) {
                        col[r] = x;
                    }
                } else {
                    panel.chunks_exact_mut(MR).for_each(|col| col[r] = 0.0);
                }
            }
        }
    }
}

/// Computes one piece of C with an `MR × (NV · S::LANES)` register tile.
///
/// # Safety
/// The CPU must support `S`'s instructions; `job.c` must point at an `m × n` buffer whose
/// `rows × cols` part nobody else touches meanwhile.
#[inline(always)]
pub(crate) unsafe fn piece<S: Simd, const MR: usize, const NV: usize>(job: &Piece<'_>) {
    let nr = NV * S::LANES;
    let Piece { a, packed_b, bias, c, k, n, ref rows, ref cols } = *job;
    let c = c.0;
    if k == 0 {
        // No k slice below to start the outputs: each is its bias (or 0).
        for i in rows.clone() {
            for j in cols.clone() {
                *c.add(i * n + j) = bias.map_or(0.0, |b| b[j]);
            }
        }
    }
    // Taken out of the thread-local, not borrowed in a closure: a closure would not inherit
    // this function's `#[target_feature]`s.
    let mut a_pack = PACKED_A.take();
    a_pack.clear();
    a_pack.resize(rows.len().div_ceil(MR) * MR * KC.min(k), 0.0);
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        pack_a::<MR>(&mut a_pack, a, rows.clone(), pc, kc);
        for j0 in cols.clone().step_by(nr) {
            let w = nr.min(cols.end - j0);
            let b_panel = packed_b[(j0 / nr) * k * nr + pc * nr..][..kc * nr].as_ptr();
            for (ip, i0) in rows.clone().step_by(MR).enumerate() {
                let h = MR.min(rows.end - i0);
                let a_panel = a_pack[ip * kc * MR..][..kc * MR].as_ptr();
                let corner = c.add(i0 * n + j0);
                if h == MR && w == nr {
                    let start = match (pc, bias) {
                        (0, Some(bias)) => Start::Bias(bias[j0..j0 + nr].as_ptr()),
                        (0, None) => Start::Zero,
                        _ => Start::FromC,
                    };
                    microkernel::<S, MR, NV>(kc, a_panel, b_panel, corner, n, start);
                } else {
                    // An edge tile: the same sums through a full-size scratch tile that
                    // starts from the bias (first slice) or C's values.
                    let mut tile = [0f32; MAX_TILE];
                    for r in 0..h {
                        for j in 0..w {
                            tile[r * nr + j] = match (pc, bias) {
                                (0, bias) => bias.map_or(0.0, |b| b[j0 + j]),
                                _ => *corner.add(r * n + j),
                            };
                        }
                    }
                    microkernel::<S, MR, NV>(kc, a_panel, b_panel, tile.as_mut_ptr(), nr, Start::FromC);
                    for r in 0..h {
                        for j in 0..w {
                            *corner.add(r * n + j) = tile[r * nr + j];
                        }
                    }
                }
            }
        }
    }
    PACKED_A.set(a_pack);
}

/// Where a tile's sums start: C's values (a later k slice, or an edge tile's scratch), or,
/// on the first slice, the bias row (`nr` values) or zero, so C needs no pass of its own to
/// be initialised.
#[derive(Clone, Copy)]
enum Start {
    FromC,
    Bias(*const f32),
    Zero,
}

/// `C[MR, nr] = start + A_panel[kc][MR] · B_panel[kc][nr]` with the whole tile of C held in
/// `MR × NV` registers while `p` runs (`ldc`: C's row stride).
#[inline(always)]
unsafe fn microkernel<S: Simd, const MR: usize, const NV: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    start: Start,
) {
    let nr = NV * S::LANES;
    let mut acc = [[S::zero(); NV]; MR];
    match start {
        Start::FromC => {
            for (r, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = S::load(c.add(r * ldc + v * S::LANES));
                }
            }
        }
        Start::Bias(bias) => {
            for v in 0..NV {
                let b = S::load(bias.add(v * S::LANES));
                for row in acc.iter_mut() {
                    row[v] = b;
                }
            }
        }
        Start::Zero => {}
    }
    for p in 0..kc {
        let mut bv = [S::zero(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = S::load(b.add(p * nr + v * S::LANES));
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let av = S::splat(*a.add(p * MR + r));
            for (x, &bv) in row.iter_mut().zip(&bv) {
                *x = S::mul_add(av, bv, *x);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &x) in row.iter().enumerate() {
            S::store(c.add(r * ldc + v * S::LANES), x);
        }
    }
}
