//! The fast matmul for a few rows against a linear layer's weight: decoding one token (or a
//! few) at a time, where packing the whole weight into panels (as `gemm.rs` does) would
//! cost more than the products themselves.
//!
//! gemv: A [m, k], W [n, k], bias [n] -> C [m, n], C = A · Wᵀ (+ bias), 1 ≤ m ≤ [`MAX_ROWS`]
//! (`MatmulDims` with `trans_b` and not `trans_a`; [`applies`] says when `fast::matmul`
//! sends a call here instead of to `gemm.rs`).
//!
//! Each weight row is read once per block of up to `ROWS` rows of A, where it lies (no
//! packing, no copy): `COLS` weight rows at a time against the block's rows, one vector
//! accumulator per output. The summation order of one output `c[i][j]`:
//! 1. lane `l` of its accumulator sums `a(i,p)·w(j,p)` for `p ≡ l (mod LANES)` over the
//!    first `k - k % LANES` values of `p`, ascending, one multiply-add each;
//! 2. the lanes are summed as a tree: lane `l` gets lane `l + LANES/2` added, halving until
//!    one is left;
//! 3. the last `k % LANES` products are added in ascending `p` (a product, then a sum);
//! 4. the bias (if any) is added last.
//!
//! So an output's bits depend on the variant's `LANES` alone: not on the thread count, the
//! parallel pieces, the row blocks or `m` (a position decoded alone gets the bits it gets
//! beside three others). They differ from `gemm.rs`'s order (one multiply-add per `p`
//! from the bias) within the conformance kit's tolerance.

use std::ops::Range;

use tinygpt_tensor::MatmulDims;

use crate::fast::shared_out::SharedOut;
use crate::fast::simd::Simd;
use crate::parallel::Parallel;

/// The most rows of A this path takes. At the `medium` fc_in shape (n 512, k 128, AVX-512,
/// `matmul_bench`) it took 0.024 ms for 4 rows, 0.04 for 8, 0.086 for 16 and 0.27 for 48,
/// against the packed path's 0.12 for 5 to 8 rows and 0.20 for 48: past a few dozen rows
/// packing pays for itself.
pub(crate) const MAX_ROWS: usize = 16;
/// Rows of A per block: every weight row is read once per block.
const ROWS: usize = 4;
/// The widest vector any variant has (AVX-512), for the lane-sum scratch.
const MAX_LANES: usize = 16;
/// About this many multiply-adds per parallel piece: a piece is a run of whole columns
/// (weight rows), sized by the problem alone so the split never depends on the threads.
/// Big enough that one decoded token's matmuls at `medium` run inline (waking a thread
/// costs more than they do).
const PIECE_MACS: usize = 1 << 17;
/// Piece widths are a multiple of this (a multiple of every variant's `COLS`).
const PIECE_ALIGN: usize = 16;

/// Whether [`matmul`] computes `dims` (else `gemm.rs` does).
pub(crate) fn applies(dims: MatmulDims) -> bool {
    dims.trans_b && !dims.trans_a && dims.m >= 1 && dims.m <= MAX_ROWS && dims.n > 0
}

/// One parallel piece: every row of C, columns `cols`.
pub(crate) struct Columns<'a> {
    a: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    c: SharedOut,
    m: usize,
    k: usize,
    n: usize,
    cols: Range<usize>,
}

/// `C = A · Wᵀ (+ bias)` for a `dims` that [`applies`]; `columns` is the variant's
/// `#[target_feature]` entry point running [`columns`].
pub(crate) fn matmul(
    columns: unsafe fn(&Columns<'_>),
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    dims: MatmulDims,
) {
    let MatmulDims { m, k, n, .. } = dims;
    assert!(applies(dims), "gemv: {dims:?} is not a few rows times a transposed weight");
    crate::kernels::matmul::check_operands(c, a, w, bias, dims);
    let width = (PIECE_MACS / (m * k).max(1)).max(1).next_multiple_of(PIECE_ALIGN);
    let out = SharedOut(c.as_mut_ptr());
    par.map(n.div_ceil(width), |piece| {
        let cols = piece * width..((piece + 1) * width).min(n);
        // SAFETY: pieces write disjoint columns of C (`m × n`, as checked); `columns` is a
        // supported variant's entry point (the backend checked the variant when built).
        unsafe { columns(&Columns { a, w, bias, c: out, m, k, n, cols }) }
    });
}

/// Computes one piece of C with `COLS` weight rows per step.
///
/// # Safety
/// The CPU must support `S`'s instructions; `job.c` must point at an `m × n` buffer whose
/// `cols` columns nobody else touches meanwhile.
#[inline(always)]
pub(crate) unsafe fn columns<S: Simd, const COLS: usize>(job: &Columns<'_>) {
    for i0 in (0..job.m).step_by(ROWS) {
        match ROWS.min(job.m - i0) {
            1 => block::<S, 1, COLS>(job, i0),
            2 => block::<S, 2, COLS>(job, i0),
            3 => block::<S, 3, COLS>(job, i0),
            _ => block::<S, ROWS, COLS>(job, i0),
        }
    }
}

/// Rows `i0..i0 + R` of C, the piece's columns.
#[inline(always)]
unsafe fn block<S: Simd, const R: usize, const COLS: usize>(job: &Columns<'_>, i0: usize) {
    let Columns { a, w, bias, c, k, n, ref cols, .. } = *job;
    let body = k - k % S::LANES;
    let mut rows = [a.as_ptr(); R];
    for (r, row) in rows.iter_mut().enumerate() {
        *row = a[(i0 + r) * k..][..k].as_ptr();
    }
    for j0 in cols.clone().step_by(COLS) {
        let width = COLS.min(cols.end - j0);
        // Past the last column, the last weight row again: computed, never stored.
        let mut weights = [w.as_ptr(); COLS];
        for (col, row) in weights.iter_mut().enumerate() {
            *row = w[(j0 + col.min(width - 1)) * k..][..k].as_ptr();
        }
        let mut acc = [[S::zero(); COLS]; R];
        for p in (0..body).step_by(S::LANES) {
            let mut av = [S::zero(); R];
            for (v, row) in av.iter_mut().zip(&rows) {
                *v = S::load(row.add(p));
            }
            for (col, weight) in weights.iter().enumerate() {
                let wv = S::load(weight.add(p));
                for (accs, &av) in acc.iter_mut().zip(&av) {
                    accs[col] = S::mul_add(av, wv, accs[col]);
                }
            }
        }
        for (r, accs) in acc.iter().enumerate() {
            for (col, &sum) in accs[..width].iter().enumerate() {
                let mut sum = lane_sum::<S>(sum);
                for p in body..k {
                    sum += *rows[r].add(p) * *weights[col].add(p);
                }
                if let Some(bias) = bias {
                    sum += bias[j0 + col];
                }
                *c.0.add((i0 + r) * n + j0 + col) = sum;
            }
        }
    }
}

/// The lanes of `v` summed as a tree (lane `l` += lane `l + half`, halving).
#[inline(always)]
unsafe fn lane_sum<S: Simd>(v: S::V) -> f32 {
    let mut lanes = [0f32; MAX_LANES];
    S::store(lanes.as_mut_ptr(), v);
    let mut half = S::LANES / 2;
    while half > 0 {
        for l in 0..half {
            lanes[l] += lanes[l + half];
        }
        half /= 2;
    }
    lanes[0]
}
