//! Flash-style causal attention for the fast variants: the scores of one block of `R` query
//! rows are computed, turned into probabilities and used at once, so no `[T, T]` matrix per
//! head is ever stored. The forward pass keeps only each row's log-sum-exp, from which the
//! backward pass recomputes that block's probabilities exactly as the forward pass made them.
//!
//! attention_forward:  q, k, v [B, T, C] -> out [B, T, C], lse [B, H, T]
//! attention_backward: dout [B, T, C], q, k, v, lse [B, H, T] -> dq, dk, dv [B, T, C]
//!
//! Same maths as the reference (`kernels/attention.rs`, dropout included): with
//! `s_u = (q_t · k_u) · scale` (`scale = 1/sqrt(hd)`) for `u <= t`, `lse_t = log Σ_u e^{s_u}`,
//! `P[t,u] = e^{s_u - lse_t}` and the dropout factor `D[t,u] = mask.factor((bh·T + t)·T + u)`:
//! out_t = Σ_u (P D)[t,u] v_u; backward dP = (dout_t · v_u) D, dS = P (dP − Σ_u P dP) · scale,
//! dq_t = Σ_u dS k_u, dk_u = Σ_t dS q_t, dv_u = Σ_t (P D) dout_t.
//!
//! Layout of the work, per (batch, head) pair: the head's keys (and, backward, values) are
//! transposed once into `[hd][T']` panels (`T'` = T rounded up to `BLOCK`, zero keys past T).
//! Rows of queries, keys, values and douts are read where they lie in `[B, T, C]` (and `out`
//! and `dq` written there) when `hd` is a whole number of `BLOCK` strips, else copied into
//! `[n][hd']` rows (`hd'` = hd rounded up to `BLOCK`, zero columns past hd; see
//! [`Head::rows`]). Query rows go
//! `R` at a time; a block's keys stop at its last row (causal: later key blocks are skipped)
//! and every product is a small register-tiled matmul over [`Simd`] vectors
//! ([`rows_by_panel`]: `R` rows × one `NV`-vector column strip in registers, so each loaded
//! key or value vector serves `R` rows; [`accumulate_transposed`]: dk/dv rows updated with
//! the block's `R` query/dout rows held in registers). Entries above the diagonal within a
//! block are exact zeros, which add nothing.
//!
//! Summation order (fixed by the shapes alone): each score sums `d` ascending in one
//! multiply-add chain (fused where the ISA has FMA; simd128 rounds the product and the sum
//! separately); out_t and dq_t sum `u` ascending; dk_u and dv_u sum `t` ascending
//! (block by block, rows ascending within a block); the softmax sum and `Σ P dP` run over
//! whole `BLOCK`-wide strips of the row (exact zeros past the diagonal) in `BLOCK` partial
//! sums, then add those pairwise ([`pairwise_sum`]). One (batch, head) pair is one parallel
//! piece; it writes only its own columns of the outputs and its own `lse` row, so results do
//! not depend on the thread count. `R` and `NV` (chosen per ISA) group rows and columns only
//! and do not change any element's order of additions.

use std::cell::RefCell;

use tinygpt_tensor::{AttentionDims, DropoutMask};

use crate::fast::gemm::at_least;
use crate::fast::math::{block_lanes, block_vectors, exp, BLOCK, MAX_BLOCK_VECTORS};
pub(crate) use crate::fast::shared_out::SharedOut;
use crate::fast::simd::Simd;
use crate::fast::transpose::transpose4x4;

/// The forward pass of one (batch, head) pair `bh`.
pub(crate) struct HeadForward<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub dims: AttentionDims,
    pub bh: usize,
    /// `[B, T, C]`.
    pub out: SharedOut,
    /// This pair's `T` log-sum-exps.
    pub lse: SharedOut,
}

/// The backward pass of one (batch, head) pair `bh`.
pub(crate) struct HeadBackward<'a> {
    pub dout: &'a [f32],
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// This pair's `T` log-sum-exps, as the forward pass saved them.
    pub lse: &'a [f32],
    pub dims: AttentionDims,
    pub bh: usize,
    /// `[B, T, C]` each.
    pub dq: SharedOut,
    pub dk: SharedOut,
    pub dv: SharedOut,
}

/// Per-thread working memory, grown to the largest head seen and then reused, so a
/// steady-state step allocates nothing here.
#[derive(Default)]
struct Scratch {
    /// `[hd][T']` panels.
    kt: Vec<f32>,
    vt: Vec<f32>,
    /// `[T][hd']` rows.
    keys: Vec<f32>,
    values: Vec<f32>,
    /// `[R][hd']`: the block's query and dout rows, and its output (out or dq) rows.
    queries: Vec<f32>,
    douts: Vec<f32>,
    block_out: Vec<f32>,
    /// `[R][T']`: scores, then probabilities; their gradients; dropped probabilities.
    probs: Vec<f32>,
    dprobs: Vec<f32>,
    dropped: Vec<f32>,
    /// `[T][hd']` accumulators.
    dk: Vec<f32>,
    dv: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `buf` resized to `len` zeros (no allocation once it has held `len` values).
fn zeroed(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.clear();
    buf.resize(len, 0.0);
    buf
}

/// `dst = src` (equal lengths) in `BLOCK`-long constant-size copies, which compile to a few
/// vector moves: a head's row is short (`hd` values) and `copy_from_slice` of a run-time
/// length is a `memmove` call each (about a tenth of this file's time, `perf`).
#[inline(always)]
fn copy_row(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len());
    let (mut dsts, mut srcs) = (dst.chunks_exact_mut(BLOCK), src.chunks_exact(BLOCK));
    for (d, s) in (&mut dsts).zip(&mut srcs) {
        let s: &[f32; BLOCK] = s.try_into().expect("a BLOCK-long chunk");
        d.copy_from_slice(s);
    }
    for (d, &s) in dsts.into_remainder().iter_mut().zip(srcs.remainder()) {
        *d = s;
    }
}

/// Where one head's values lie in a `[B, T, C]` buffer.
#[derive(Clone, Copy)]
struct Head {
    /// Offset of row (b, 0) plus the head's first column.
    base: usize,
    channels: usize,
    hd: usize,
    seq: usize,
    /// `seq` rounded up to `BLOCK`: the row length of the transposed panels.
    padded: usize,
    /// `hd` rounded up to `BLOCK`: the row length of the padded row copies.
    width: usize,
}

impl Head {
    fn new(dims: AttentionDims, bh: usize) -> Self {
        let (b, h) = (bh / dims.heads, bh % dims.heads);
        Head {
            base: b * dims.seq * dims.channels() + h * dims.head_dim,
            channels: dims.channels(),
            hd: dims.head_dim,
            seq: dims.seq,
            padded: dims.seq.next_multiple_of(BLOCK),
            width: dims.head_dim.next_multiple_of(BLOCK),
        }
    }

    #[inline(always)]
    fn at(&self, t: usize) -> usize {
        self.base + t * self.channels
    }

    #[inline(always)]
    fn row<'a>(&self, buf: &'a [f32], t: usize) -> &'a [f32] {
        &buf[self.at(t)..][..self.hd]
    }

    /// This head's `[T, hd]` slice of `src` as `[hd][padded]` into zeros, no bounds checks
    /// in the loop (they were 15% of the backward).
    ///
    /// Never inlined, so it compiles for the baseline ISA whatever variant calls it: inside
    /// the AVX-512 entry points the element loop became 16-lane gathers (`vgatherqps`), slow
    /// on AMD's Zen 4 (14% of the backward there, `perf`). It moves 4 × 4 blocks through
    /// SSE registers on x86-64 (baseline there) and `simd128` ones in wasm; element by
    /// element it was 2% of a native `medium` step, and in wasm slower than the loop it
    /// replaced. Either way the same values land in the same places.
    #[inline(never)]
    fn transpose_into(&self, dst: &mut [f32], src: &[f32]) {
        if self.seq == 0 {
            return;
        }
        assert!(dst.len() >= self.hd * self.padded && src.len() >= self.at(self.seq - 1) + self.hd);
        let (dst, src) = (dst.as_mut_ptr(), src[self.base..].as_ptr());
        let (ld_src, ld_dst) = (self.channels, self.padded);
        let (rows4, cols4) = (self.seq / 4 * 4, self.hd / 4 * 4);
        for u in (0..rows4).step_by(4) {
            for d in (0..cols4).step_by(4) {
                // SAFETY: rows `u..u + 4 <= seq` and columns `d..d + 4 <= hd` lie in `src`
                // and, transposed, in `dst` (asserted above).
                unsafe { transpose4x4(dst.add(d * ld_dst + u), ld_dst, src.add(u * ld_src + d), ld_src) };
            }
        }
        // What the blocks left: the last `seq % 4` rows, and the last `hd % 4` columns.
        let rest = (rows4..self.seq).flat_map(|u| (0..self.hd).map(move |d| (u, d)));
        let rest = rest.chain((0..rows4).flat_map(|u| (cols4..self.hd).map(move |d| (u, d))));
        for (u, d) in rest {
            // SAFETY: `d < hd`, `u < seq <= padded`, and the last row read lies in `src`
            // (both asserted above).
            unsafe { *dst.add(d * ld_dst + u) = *src.add(u * ld_src + d) };
        }
    }

    /// Whether rows `first..first + n` of this head can be read (or written) where they lie
    /// in the `[B, T, C]` buffer: they all exist, and `hd` is a whole number of `BLOCK`
    /// strips, so the products touch exactly the head's `hd` columns of each row.
    #[inline(always)]
    fn in_place(&self, first: usize, n: usize) -> bool {
        self.hd == self.width && first + n <= self.seq
    }

    /// Rows `first..first + n` of this head of `src`, and how far apart they lie: in place
    /// ([`Head::in_place`]), or copied into `copy` as `[n][width]` zero-padded rows. In
    /// place saves a copy per row block (with a `medium` head, 32 values a row, the copies
    /// were about a sixth of the forward's time).
    #[inline(always)]
    fn rows<'a>(&self, copy: &'a mut Vec<f32>, src: &'a [f32], first: usize, n: usize) -> (&'a [f32], usize) {
        if self.in_place(first, n) {
            (&src[self.at(first)..], self.channels)
        } else {
            // `rows_into` writes every value, padding included: no zero-fill first.
            let copy = at_least(copy, n * self.width);
            self.rows_into(copy, src, first);
            (copy, self.width)
        }
    }

    /// Rows `first..first + rows.len() / width` of this head of `src` into `[n][width]`
    /// rows, zero past `hd` and past `T`.
    #[inline(always)]
    fn rows_into(&self, rows: &mut [f32], src: &[f32], first: usize) {
        for (i, dst) in rows.chunks_exact_mut(self.width).enumerate() {
            let t = first + i;
            if t < self.seq {
                copy_row(&mut dst[..self.hd], self.row(src, t));
                dst[self.hd..].fill(0.0);
            } else {
                dst.fill(0.0);
            }
        }
    }
}

/// `out[r][j] = Σ_p a[r][p] · b[p][j]` for `r < R`, `p < depth`, `j < cols`, the sum in
/// ascending `p` (one fused multiply-add each where the ISA has them). Rows lie `lda`, `ldb`,
/// `ldc` apart; `cols` is a multiple of `NV · S::LANES`. Each column strip is held in `R × NV`
/// registers while `p` runs, so every loaded vector of `b` serves `R` rows.
///
/// `out` is a pointer, not a slice: it may be a head's columns of the `[B, T, C]` output
/// itself, whose rows are interleaved with other heads' columns that other threads write.
///
/// # Safety
/// The variant's instructions are available (see [`Simd`]); `out` points at `R` rows of
/// `cols` values, `ldc` apart, that nothing else reads or writes meanwhile.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_by_panel<S: Simd, const R: usize, const NV: usize>(
    out: *mut f32,
    ldc: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    depth: usize,
    cols: usize,
) {
    let strip = NV * S::LANES;
    assert!(cols.is_multiple_of(strip) && cols <= ldc && cols <= ldb && depth <= lda);
    assert!(a.len() >= (R - 1) * lda + depth);
    if depth == 0 {
        for r in 0..R {
            std::slice::from_raw_parts_mut(out.add(r * ldc), cols).fill(0.0);
        }
        return;
    }
    assert!(b.len() >= (depth - 1) * ldb + cols);
    let (a, b, c) = (a.as_ptr(), b.as_ptr(), out);
    for j0 in (0..cols).step_by(strip) {
        let mut acc = [[S::zero(); NV]; R];
        for p in 0..depth {
            let mut bv = [S::zero(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = S::load(b.add(p * ldb + j0 + v * S::LANES));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let av = S::splat(*a.add(r * lda + p));
                for (x, &bv) in row.iter_mut().zip(&bv) {
                    *x = S::mul_add(av, bv, *x);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, &x) in row.iter().enumerate() {
                S::store(c.add(r * ldc + j0 + v * S::LANES), x);
            }
        }
    }
}

/// `acc[u][j] += Σ_r w[r][u] · rows[r][j]` for `u < n`, `j < cols`, adding `r` ascending.
/// Rows lie `ld_acc`, `ldw`, `ld_rows` apart; `cols` is a multiple of `NV · S::LANES`. Each
/// column strip of the `R` rows is held in registers while `u` runs.
///
/// # Safety
/// As [`rows_by_panel`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate_transposed<S: Simd, const R: usize, const NV: usize>(
    acc: &mut [f32],
    ld_acc: usize,
    w: &[f32],
    ldw: usize,
    n: usize,
    rows: &[f32],
    ld_rows: usize,
    cols: usize,
) {
    let strip = NV * S::LANES;
    if n == 0 {
        return;
    }
    assert!(cols.is_multiple_of(strip) && cols <= ld_acc && cols <= ld_rows && n <= ldw);
    assert!(acc.len() >= (n - 1) * ld_acc + cols && w.len() >= (R - 1) * ldw + n);
    assert!(rows.len() >= (R - 1) * ld_rows + cols);
    let (acc, w, rows) = (acc.as_mut_ptr(), w.as_ptr(), rows.as_ptr());
    for j0 in (0..cols).step_by(strip) {
        let mut held = [[S::zero(); NV]; R];
        for (r, row) in held.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                *x = S::load(rows.add(r * ld_rows + j0 + v * S::LANES));
            }
        }
        for u in 0..n {
            let at = acc.add(u * ld_acc + j0);
            let mut sum = [S::zero(); NV];
            for (v, x) in sum.iter_mut().enumerate() {
                *x = S::load(at.add(v * S::LANES));
            }
            for (r, row) in held.iter().enumerate() {
                let wv = S::splat(*w.add(r * ldw + u));
                for (x, &h) in sum.iter_mut().zip(row) {
                    *x = S::mul_add(wv, h, *x);
                }
            }
            for (v, &x) in sum.iter().enumerate() {
                S::store(at.add(v * S::LANES), x);
            }
        }
    }
}

/// Multiplies `row[u]` by the dropout factor of `probs` element `first + u`.
#[inline(always)]
fn drop_row(row: &mut [f32], mask: Option<&DropoutMask>, first: usize) {
    if let Some(mask) = mask {
        let scale = mask.scale();
        for (u, x) in row.iter_mut().enumerate() {
            // `mask.factor`, with the scale computed once.
            *x *= if mask.keeps(first + u) { scale } else { 0.0 };
        }
    }
}

/// `acc[0] + acc[1] + ...` added pairwise (halves, then quarters, ...): a fixed order in
/// a few vector shuffles, where a serial sum is `BLOCK - 1` dependent adds.
#[inline(always)]
fn pairwise_sum(mut acc: [f32; BLOCK]) -> f32 {
    let mut half = BLOCK / 2;
    while half > 0 {
        for i in 0..half {
            acc[i] += acc[i + half];
        }
        half /= 2;
    }
    acc[0]
}

/// The largest of `acc`, taken pairwise as [`pairwise_sum`] adds (a serial fold of `BLOCK`
/// dependent max operations per row was a tenth of the forward).
#[inline(always)]
fn pairwise_max(mut acc: [f32; BLOCK]) -> f32 {
    let mut half = BLOCK / 2;
    while half > 0 {
        for i in 0..half {
            acc[i] = if acc[i + half] > acc[i] { acc[i + half] } else { acc[i] };
        }
        half /= 2;
    }
    acc[0]
}

/// The softmax of a block's rows: row `r` of `probs` (rows `padded` apart, `cols` values
/// each, a whole number of `BLOCK` strips) holds the scores of query `t0 + r`, of which the
/// first `t0 + r + 1` are in use (causal). Each row's scores are scaled by `scale`, their
/// max taken, `e^{s - max}` summed in `BLOCK` partial sums (lane `i % BLOCK` for value `i`)
/// and the row becomes its probabilities, exact zeros past its last key; `lse[r]` gets its
/// log-sum-exp. Only the first `lse.len()` rows are in use.
///
/// Phase by phase over the rows (all maxima, then all sums, then all normalisations), not
/// row by row: one row's phases wait on each other (a max before its exponentials, a sum
/// before its reciprocal and logarithm), and row by row those waits could not overlap.
///
/// Every pass runs over whole strips, with no test of `i < n` per lane: with that test the
/// compiler turned the scale-and-max pass into scalar code (a row of a few strips then took
/// longer than its share of both products). The scores past a row's last key are set to
/// `-inf` first (what the masked pass gave them); `e^{-inf}` is taken as exactly 0 by a
/// test on the value, which vectorises; so every value sees the same operations in the same
/// order as with lane masks.
///
/// # Safety
/// `S`'s instructions are available (see [`Simd`]).
#[inline(always)]
unsafe fn softmax_rows<S: Simd, const R: usize>(
    probs: &mut [f32],
    padded: usize,
    cols: usize,
    t0: usize,
    scale: f32,
    lse: &mut [f32],
) {
    let live = lse.len();
    assert!(live <= R && cols <= padded && probs.len() >= R * padded);
    let (mut maxes, mut sums) = ([0f32; R], [0f32; R]);
    for (r, max) in maxes.iter_mut().enumerate().take(live) {
        let scores = &mut probs[r * padded..][..cols];
        scores[t0 + r + 1..].fill(f32::NEG_INFINITY);
        *max = scaled_max::<S>(scores, scale);
    }
    for (r, (sum, &max)) in sums.iter_mut().zip(&maxes).enumerate().take(live) {
        let mut partials = [0f32; BLOCK];
        for strip in probs[r * padded..][..cols].chunks_exact_mut(BLOCK) {
            for (x, s) in strip.iter_mut().zip(partials.iter_mut()) {
                *x = if *x > f32::NEG_INFINITY { exp::<S>(*x - max) } else { 0.0 };
                *s += *x;
            }
        }
        *sum = pairwise_sum(partials);
    }
    for (r, ((&sum, &max), lse)) in sums.iter().zip(&maxes).zip(lse.iter_mut()).enumerate() {
        let inv = 1.0 / sum;
        for x in probs[r * padded..][..cols].iter_mut() {
            *x *= inv;
        }
        *lse = max + sum.ln();
    }
}

/// `row *= scale` (a whole number of `BLOCK` strips), returning the largest value: per lane
/// in `BLOCK` partial maxima in vectors, then [`pairwise_max`]. `S::max` keeps the partial
/// where the new value is not greater, as `if x > m { x } else { m }` does.
///
/// # Safety
/// As [`softmax_rows`].
#[inline(always)]
unsafe fn scaled_max<S: Simd>(row: &mut [f32], scale: f32) -> f32 {
    let vectors = block_vectors::<S>();
    assert!(row.len().is_multiple_of(BLOCK));
    let mut maxes = [S::splat(f32::NEG_INFINITY); MAX_BLOCK_VECTORS];
    let (scale, x) = (S::splat(scale), row.as_mut_ptr());
    for i0 in (0..row.len()).step_by(BLOCK) {
        for (j, m) in maxes.iter_mut().enumerate().take(vectors) {
            // `i0 + BLOCK <= row.len()` (asserted above).
            let at = x.add(i0 + j * S::LANES);
            let v = S::mul(S::load(at), scale);
            S::store(at, v);
            *m = S::max(v, *m);
        }
    }
    pairwise_max(block_lanes::<S>(&maxes))
}

/// The backward's probabilities of one row (a whole number of `BLOCK` strips) from its
/// scores and log-sum-exp, as [`softmax_rows`] made them: `e^{s·scale - lse}`, zero from
/// `n` on. Over whole strips, the scores past `n` set to `-inf` first (see there).
#[inline(always)]
fn probs_row<S: Simd>(row: &mut [f32], n: usize, scale: f32, lse: f32) {
    row[n..].fill(f32::NEG_INFINITY);
    for x in row.iter_mut() {
        *x = if *x > f32::NEG_INFINITY { exp::<S>(*x * scale - lse) } else { 0.0 };
    }
}

/// `dS = P (dP - Σ P dP) · scale` in place of `dp` (zero from `n` on; `p` is zero there
/// already); the sum in `BLOCK` partial sums over whole strips, added pairwise. Over whole
/// strips with no lane test (with one, the compiler made gathers and scatters), then the
/// values past `n` set to zero.
#[inline(always)]
fn dscores_row(dp: &mut [f32], p: &[f32], n: usize, scale: f32) {
    let mut sums = [0f32; BLOCK];
    for (ps, ds) in p.chunks_exact(BLOCK).zip(dp.chunks_exact(BLOCK)) {
        for ((s, &p), &d) in sums.iter_mut().zip(ps).zip(ds) {
            *s += p * d;
        }
    }
    let weighted = pairwise_sum(sums);
    for (d, &p) in dp.iter_mut().zip(p) {
        *d = p * (*d - weighted) * scale;
    }
    dp[n..].fill(0.0);
}

/// With the dropout factor `D[u]` of `probs` element `first + u` (one mask draw each):
/// `dp[u] *= D[u]` and `pd[u] = p[u] · D[u]`.
#[inline(always)]
fn drop_pair(dp: &mut [f32], pd: &mut [f32], p: &[f32], mask: &DropoutMask, first: usize) {
    let scale = mask.scale();
    for (u, ((d, x), &p)) in dp.iter_mut().zip(pd.iter_mut()).zip(p).enumerate() {
        let factor = if mask.keeps(first + u) { scale } else { 0.0 };
        *d *= factor;
        *x = p * factor;
    }
}

/// # Safety
/// `job.out` and `job.lse` point at buffers of the sizes [`HeadForward`] names, and no other
/// piece writes this head's part of them meanwhile; the variant's instructions are
/// available (see [`Simd`]).
#[inline(always)]
pub(crate) unsafe fn forward_head<S: Simd, const R: usize, const NV: usize>(job: &HeadForward<'_>) {
    debug_assert_eq!(BLOCK % (NV * S::LANES), 0);
    let dims = job.dims;
    let mask = dims.dropout.as_ref();
    let head = Head::new(dims, job.bh);
    let (seq, hd, padded, width) = (head.seq, head.hd, head.padded, head.width);
    let scale = 1.0 / (hd as f32).sqrt();
    // Taken out of the thread-local for the duration (no closure: a closure would not
    // inherit the caller's `#[target_feature]`s and would compile to baseline SSE).
    let mut scratch = SCRATCH.take();
    let sc = &mut scratch;
    let kt = zeroed(&mut sc.kt, hd * padded);
    head.transpose_into(kt, job.k);
    let (values, ldv) = head.rows(&mut sc.values, job.v, 0, seq);
    let probs = zeroed(&mut sc.probs, R * padded);
    let block_out = zeroed(&mut sc.block_out, R * width);
    let lse = job.lse.slice(0, seq);
    for t0 in (0..seq).step_by(R) {
        // Keys past the block's last row are masked for all its rows: skipped.
        let keys = (t0 + R).min(seq);
        let cols = keys.next_multiple_of(BLOCK);
        let (queries, ldq) = head.rows(&mut sc.queries, job.q, t0, R);
        rows_by_panel::<S, R, NV>(probs.as_mut_ptr(), padded, queries, ldq, kt, padded, hd, cols);
        let live = R.min(seq - t0);
        for row in probs.chunks_exact_mut(padded).skip(live) {
            row[..cols].fill(0.0);
        }
        softmax_rows::<S, R>(probs, padded, cols, t0, scale, &mut lse[t0..t0 + live]);
        for (r, row) in probs.chunks_exact_mut(padded).enumerate().take(live) {
            let t = t0 + r;
            drop_row(&mut row[..t + 1], mask, (job.bh * seq + t) * seq);
        }
        if head.in_place(t0, R) {
            let out = job.out.offset(head.at(t0)).0;
            rows_by_panel::<S, R, NV>(out, head.channels, probs, padded, values, ldv, keys, width);
        } else {
            rows_by_panel::<S, R, NV>(block_out.as_mut_ptr(), width, probs, padded, values, ldv, keys, width);
            for (r, row) in block_out.chunks_exact(width).enumerate().take(keys - t0) {
                copy_row(job.out.slice(head.at(t0 + r), hd), &row[..hd]);
            }
        }
    }
    SCRATCH.set(scratch);
}

/// # Safety
/// As [`forward_head`], for `job.dq`, `job.dk` and `job.dv`.
#[inline(always)]
pub(crate) unsafe fn backward_head<S: Simd, const R: usize, const NV: usize>(job: &HeadBackward<'_>) {
    debug_assert_eq!(BLOCK % (NV * S::LANES), 0);
    let dims = job.dims;
    let mask = dims.dropout.as_ref();
    let head = Head::new(dims, job.bh);
    let (seq, hd, padded, width) = (head.seq, head.hd, head.padded, head.width);
    let scale = 1.0 / (hd as f32).sqrt();
    // Taken out of the thread-local for the duration (no closure: a closure would not
    // inherit the caller's `#[target_feature]`s and would compile to baseline SSE).
    let mut scratch = SCRATCH.take();
    let sc = &mut scratch;
    let kt = zeroed(&mut sc.kt, hd * padded);
    head.transpose_into(kt, job.k);
    let vt = zeroed(&mut sc.vt, hd * padded);
    head.transpose_into(vt, job.v);
    let (keys_rows, ldk) = head.rows(&mut sc.keys, job.k, 0, seq);
    let block_out = zeroed(&mut sc.block_out, R * width);
    let probs = zeroed(&mut sc.probs, R * padded);
    let dprobs = zeroed(&mut sc.dprobs, R * padded);
    let dropped = zeroed(&mut sc.dropped, if mask.is_some() { R * padded } else { 0 });
    let dk = zeroed(&mut sc.dk, seq * width);
    let dv = zeroed(&mut sc.dv, seq * width);
    for t0 in (0..seq).step_by(R) {
        let keys = (t0 + R).min(seq);
        let cols = keys.next_multiple_of(BLOCK);
        let (queries, ldq) = head.rows(&mut sc.queries, job.q, t0, R);
        let (douts, ldo) = head.rows(&mut sc.douts, job.dout, t0, R);
        rows_by_panel::<S, R, NV>(probs.as_mut_ptr(), padded, queries, ldq, kt, padded, hd, cols);
        rows_by_panel::<S, R, NV>(dprobs.as_mut_ptr(), padded, douts, ldo, vt, padded, hd, cols);
        for r in 0..R {
            let t = t0 + r;
            let p = &mut probs[r * padded..][..cols];
            let dp = &mut dprobs[r * padded..][..cols];
            if t >= seq {
                p.fill(0.0);
                dp.fill(0.0);
                if mask.is_some() {
                    dropped[r * padded..][..cols].fill(0.0);
                }
                continue;
            }
            let n = t + 1;
            probs_row::<S>(p, n, scale, job.lse[t]);
            // With dropout factors D: dP = (dout · v_u) D and v_u is weighted by P D.
            let first = (job.bh * seq + t) * seq;
            if let Some(mask) = mask {
                let pd = &mut dropped[r * padded..][..cols];
                drop_pair(&mut dp[..n], &mut pd[..n], &p[..n], mask, first);
                pd[n..].fill(0.0);
            }
            // dS, scaled as the scores were; kept in `dprobs`.
            dscores_row(dp, p, n, scale);
        }
        if head.in_place(t0, R) {
            let dq = job.dq.offset(head.at(t0)).0;
            rows_by_panel::<S, R, NV>(dq, head.channels, dprobs, padded, keys_rows, ldk, keys, width);
        } else {
            rows_by_panel::<S, R, NV>(
                block_out.as_mut_ptr(),
                width,
                dprobs,
                padded,
                keys_rows,
                ldk,
                keys,
                width,
            );
            for (r, row) in block_out.chunks_exact(width).enumerate().take(keys - t0) {
                copy_row(job.dq.slice(head.at(t0 + r), hd), &row[..hd]);
            }
        }
        accumulate_transposed::<S, R, NV>(dk, width, dprobs, padded, keys, queries, ldq, width);
        let weights = if mask.is_some() { &dropped[..] } else { &probs[..] };
        accumulate_transposed::<S, R, NV>(dv, width, weights, padded, keys, douts, ldo, width);
    }
    for u in 0..seq {
        copy_row(job.dk.slice(head.at(u), hd), &dk[u * width..][..hd]);
        copy_row(job.dv.slice(head.at(u), hd), &dv[u * width..][..hd]);
    }
    SCRATCH.set(scratch);
}
