//! The fast matmul shared by every SIMD variant: packed panels, cache blocking and a
//! register-tiled microkernel generic over [`Simd`]; each ISA picks its tile (`MR` rows ×
//! `NV` vectors) and instantiates [`piece`] behind its `#[target_feature]` (x86.rs, wasm.rs).
//!
//! matmul: A, B, bias [n] -> C [m, n], C = op(A) · op(B) (+ bias), as the reference
//! (`kernels/matmul.rs`) defines it; or, given `onto` [m, n], C = onto + (op(A) · op(B)
//! (+ bias)) (`MatmulFused::onto`).
//!
//! Layout of the work:
//! - op(B) is packed into `nr`-column panels (`[kc][nr]` each, zero past `n`), so the
//!   microkernel reads each `p`'s `nr` values side by side whatever B's layout: once per
//!   call for all pieces (`[n / nr][k][nr]`, [`Split::Rows`]), or by each piece for its own
//!   columns and k slice ([`Split::Deep`], when k is long and B wide). A row-major op(B)
//!   with a long k and whole panels (a weight gradient's activations) already has them side
//!   by side and is read in place ([`PanelsOfB::InPlace`]), one stored row per `p`.
//! - C is cut into pieces — sizes chosen by the problem, never derived from the thread
//!   count (see [`Split`]) — that run in parallel. A piece walks k in `KC` slices and,
//!   for each `KC × nr` panel of B (L1), runs the microkernel over its `mr`-row tiles of
//!   op(A), read where they lie (row-major or transposed alike); only a last, partial tile
//!   is packed into an `mr`-row panel, zero past the last row. (Packing a transposed A,
//!   a weight gradient's output gradient, made those products 2–9% slower than reading it
//!   in place, `matmul_bench`, except where its stored rows lie a multiple of
//!   [`ALIASED_STRIDE`] apart: that one is packed whole.)
//! - Every output starts at its bias (or 0) and gets `a(i,p)·b(p,j)` added by one
//!   multiply-add per `p`, in ascending `p`, whatever the piece or thread. The first k
//!   slice's tiles start their registers from the bias, so C is written once per slice
//!   and never zero-filled first. `onto` is added to each finished sum as the last slice
//!   stores it, so `matmul` with `onto` gives the bits of a product and then an `add`, without the
//!   `add`'s pass over C. So results are
//!   bit-identical at any thread count; they differ from the reference's (which rounds the
//!   product and the sum separately) within the conformance kit's tolerance.

use std::cell::RefCell;
use std::ops::Range;

use tinygpt_tensor::MatmulDims;

use crate::fast::simd::Simd;
use crate::fast::transpose::transpose4x4;
use crate::parallel::Parallel;

/// Depth of one k slice: a `KC × nr` B panel (16 KiB for AVX2, 32 KiB for AVX-512) stays
/// in L1 while the `mr`-row A panels stream past it.
const KC: usize = 256;
/// Rows per parallel piece; it and its half are multiples of every variant's `mr` (4, 6, 12).
const MC: usize = 48;
/// The fewest [`Split::Rows`] pieces worth cutting a small C into (see [`few_rows_piece`]).
const MIN_PIECES: usize = 4;
/// Columns per parallel piece when C has few row blocks; a multiple of every variant's `nr`
/// (8, 16, 32).
const NC: usize = 256;
/// Columns per parallel piece when C has at least [`ROW_BLOCKS_FOR_WIDE`] row blocks (enough
/// pieces for the threads without cutting columns): a row block of A is then packed once
/// for every layer up to `large` (`d_mlp` 768), where 256 columns packed it three times
/// at the `large` MLP shapes; 768 ran them 10–40% faster (`matmul_bench`, docs/benchmarks-log.md).
const NC_WIDE: usize = 768;
const ROW_BLOCKS_FOR_WIDE: usize = 4;
/// Room for the largest `mr × nr` tile, for the partial tiles at the edges of C.
const MAX_TILE: usize = 512;
/// A transposed op(A) whose stored rows lie a multiple of this many values (2 KiB) apart is
/// packed, not read where it lies: a tile's `KC` rows of `MR` values then fall in a few cache
/// sets. The weight gradients with `m` = 512 and 1024 (`medium`'s and `xl`'s `fc`), packed:
/// `512x128x1536:tn` went from a median of 80 to 94 GFLOP/s on one thread (0.70 to 0.82 of
/// the FMA peak) and `1024x256x1024:tn` from 94 to 104. Other strides (m = 192, 256, 576,
/// 768) were level or slower packed (`matmul_bench`, docs/benchmarks-log.md).
const ALIASED_STRIDE: usize = 512;
/// Rows and columns of a [`Split::Deep`] piece: multiples of every variant's `mr` and `nr`,
/// and so are the halves [`deep_piece`] takes (rows down to [`DEEP_MIN_ROWS`]) to make at
/// least [`DEEP_PIECES`]. 384 rows, not 192: B, packed per piece and k slice, is read and
/// packed half as often, and A's 384-row slice (384 KiB) and C's block (288 KiB) still sit
/// in a 1-2 MiB L2 beside it. GPT-2's head products (1024 rows × 768 × 50,257, both ways
/// round) ran 1.04× and 1.05× as fast on two threads, the median of five alternated pairs
/// (`matmul_bench`, docs/benchmarks-log.md); the blocks' products level within the noise.
const DEEP_ROWS: usize = 384;
const DEEP_COLS: usize = 192;
const DEEP_MIN_ROWS: usize = 96;
const DEEP_PIECES: usize = 4;
/// Past this many values of op(B) (2 MiB: a core's L2 on the dev VM's Xeon), a long-k
/// matmul takes [`Split::Deep`] rather than sharing one packed B that L2 cannot hold.
const SHARED_B_MAX: usize = 512 * 1024;

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

/// Where C lives, shared by the pieces; each piece writes only its own rows × columns.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(*mut f32);
// SAFETY: pieces write disjoint parts of C (see `matmul`), and C outlives every piece.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// One parallel piece of C: `rows` × `cols` (cols start on an `nr` boundary).
pub(crate) struct Piece<'a> {
    a: Strided<'a>,
    b: PanelsOfB<'a>,
    bias: Option<&'a [f32]>,
    /// `[m, n]`, added to the finished sums (see the module's doc).
    onto: Option<&'a [f32]>,
    c: OutPtr,
    k: usize,
    n: usize,
    rows: Range<usize>,
    cols: Range<usize>,
}

/// Where a piece finds op(B)'s `nr`-column panels.
#[derive(Clone, Copy)]
pub(crate) enum PanelsOfB<'a> {
    /// Packed once per call by [`matmul`], `[n / nr][k][nr]`, read by every row block.
    Shared(&'a [f32]),
    /// op(B) itself: the piece packs its own columns of each k slice (see [`Split::Deep`]).
    Own(Strided<'a>),
    /// A row-major op(B) whose width is whole panels, read where it lies: each `p` of a
    /// panel is `nr` neighbouring values of one stored row, as a packed panel's row is, one
    /// stored row apart instead of `nr` values (see [`matmul_split`]).
    InPlace(Strided<'a>),
}

thread_local! {
    /// Packed op(B), kept between calls so a training step does not fault in fresh pages
    /// for it every time (it is as big as B).
    static PACKED_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Each thread's packed block of op(A), kept between pieces for the same reason.
    static PACKED_A: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Each thread's packed `KC ×` piece-width block of op(B), for [`PanelsOfB::Own`].
    static PIECE_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The transposed C of [`thin_matmul`], kept for the same reason.
    static THIN_C: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// How [`matmul`] cuts C into parallel pieces. Either way every output gets the same sums in
/// the same order, so the split changes the speed, never a bit of the result.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Split {
    /// `MC`-row pieces of `NC` (or `NC_WIDE`) columns, all reading op(B) packed once per
    /// call: the packed B stays in L2 and its packing is shared by every row block.
    Rows,
    /// Pieces of up to `DEEP_ROWS × DEEP_COLS` (see [`deep_piece`]), each packing its own
    /// block of op(B) per k slice. For a long k and a wide B (a wide layer's weight
    /// gradient, k = batch × context), whose packed copy L2 cannot hold: `MC`-row pieces
    /// then streamed all of it from L3 once per 48 rows, after a pass that packed (and
    /// zero-filled) it, and two threads scaled poorly (fc_out's weight gradient at `large`,
    /// 192×768×1536, ran at 0.38 of the 2-core FMA peak). A deep piece reads op(B) once per
    /// `DEEP_ROWS` rows of C and op(A) once per `DEEP_COLS` columns, packing each block just
    /// before using it from L2.
    Deep,
}

impl Split {
    fn for_dims(dims: MatmulDims) -> Split {
        let MatmulDims { k, n, .. } = dims;
        if k > KC && k * n > SHARED_B_MAX {
            Split::Deep
        } else {
            Split::Rows
        }
    }
}

/// `c = [onto +] (op(a) · op(b) [+ bias])`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    kernel: &Microkernel,
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    onto: Option<&[f32]>,
    dims: MatmulDims,
) {
    if bias.is_none() && dims.n < kernel.nr && dims.m >= kernel.nr {
        return thin_matmul(kernel, par, c, a, b, onto, dims);
    }
    matmul_split(kernel, par, c, a, b, bias, onto, dims, Split::for_dims(dims))
}

/// A C narrower than one `nr`-column panel but with many rows (a LoRA adapter's rank-8
/// products: `x · Aᵀ` and the gradients of `x · Aᵀ` and of B, 1,024 × 8 at GPT-2's shape),
/// computed as its transpose `Cᵀ = op(B)ᵀ · op(A)ᵀ` into a scratch and then transposed
/// into C. Every tile of C itself would be an edge tile using `n` of its `nr` columns (8 of
/// 32 with AVX-512); Cᵀ's `m` columns fill whole panels. The same bits as [`matmul_split`]:
/// each output is the same multiply-adds (`b·a` for `a·b`, the same exact product) from
/// zero in ascending `p`, and `onto` is added once to the finished sum. Only without a
/// bias: the microkernel starts a tile's columns from it, and Cᵀ's would be its rows.
fn thin_matmul(
    kernel: &Microkernel,
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    onto: Option<&[f32]>,
    dims: MatmulDims,
) {
    let MatmulDims { m, k, n, trans_a, trans_b } = dims;
    crate::kernels::matmul::check_operands(c, a, b, None, dims);
    assert!(onto.is_none_or(|onto| onto.len() == m * n));
    let flipped = MatmulDims { m: n, k, n: m, trans_a: !trans_b, trans_b: !trans_a };
    let mut c_t = THIN_C.take();
    let c_t_slice = at_least(&mut c_t, n * m);
    matmul_split(kernel, par, c_t_slice, b, a, None, None, flipped, Split::for_dims(flipped));
    for (i, row) in c.chunks_exact_mut(n).enumerate() {
        for (j, out) in row.iter_mut().enumerate() {
            let sum = c_t_slice[j * m + i];
            *out = onto.map_or(sum, |onto| onto[i * n + j] + sum);
        }
    }
    THIN_C.set(c_t);
}

#[allow(clippy::too_many_arguments)]
fn matmul_split(
    kernel: &Microkernel,
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    onto: Option<&[f32]>,
    dims: MatmulDims,
    split: Split,
) {
    let MatmulDims { m, k, n, trans_a, trans_b } = dims;
    crate::kernels::matmul::check_operands(c, a, b, bias, dims);
    assert!(onto.is_none_or(|onto| onto.len() == m * n));
    assert!(
        kernel.mr * kernel.nr <= MAX_TILE
            && matches!(kernel.nr, 8 | 16 | 32)
            && (MC / 2).is_multiple_of(kernel.mr)
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
    // A row-major op(B) already holds each panel's rows as `nr` neighbouring values. For a
    // weight gradient (k = batch × context, B its activations) packing it was a pass over
    // all of B per call, for only m / MC row blocks to share: about 3% of a two-thread
    // `medium` step (`perf`). A short k (dX = dY · W) packs a small B for many row blocks.
    let in_place = b.col_stride == 1 && k > KC && n.is_multiple_of(kernel.nr);
    PACKED_B.with(|packed| {
        let mut packed = packed.borrow_mut();
        let ((piece_rows, piece_cols), panels) = match split {
            Split::Deep => (deep_piece(m, n), PanelsOfB::Own(b)),
            Split::Rows => {
                let nc = if m.div_ceil(MC) >= ROW_BLOCKS_FOR_WIDE { NC_WIDE } else { NC };
                let panels = if in_place {
                    PanelsOfB::InPlace(b)
                } else {
                    let packed = at_least(&mut packed, n.div_ceil(kernel.nr) * k * kernel.nr);
                    pack_b(par, packed, b, k, n, kernel.nr);
                    PanelsOfB::Shared(&packed[..])
                };
                (few_rows_piece(m, n, nc, kernel.nr), panels)
            }
        };
        let out = OutPtr(c.as_mut_ptr());
        let col_blocks = n.div_ceil(piece_cols);
        par.map(m.div_ceil(piece_rows) * col_blocks, |index| {
            let (rb, cb) = (index / col_blocks, index % col_blocks);
            let piece = Piece {
                a,
                b: panels,
                bias,
                onto,
                c: out,
                k,
                n,
                rows: rb * piece_rows..((rb + 1) * piece_rows).min(m),
                cols: cb * piece_cols..((cb + 1) * piece_cols).min(n),
            };
            // SAFETY: `kernel` belongs to a supported variant (the backend checked it when it
            // was built); pieces cover disjoint parts of C, which is `m × n` as asserted.
            unsafe { (kernel.piece)(&piece) }
        });
    });
}

/// Rows × columns of a [`Split::Rows`] piece: `MC` × `nc`, unless C is too small to give
/// [`MIN_PIECES`] of those (a narrow layer's weight gradient, `96x96x1024:tn` at `small`,
/// made two pieces and ran no faster on two threads than on one): then rows are halved
/// down to `MC / 2`, and then columns (in whole `nr` panels), until it does.
fn few_rows_piece(m: usize, n: usize, nc: usize, nr: usize) -> (usize, usize) {
    let (mut rows, mut cols) = (MC, nc);
    let pieces = |rows: usize, cols: usize| m.div_ceil(rows) * n.div_ceil(cols);
    while pieces(rows, cols) < MIN_PIECES {
        if rows > MC / 2 && m > rows / 2 {
            rows /= 2;
        } else if cols > nr && n > nr {
            cols = (cols / 2).div_ceil(nr) * nr;
        } else {
            break;
        }
    }
    (rows, cols)
}

/// Rows × columns of a deep piece: [`DEEP_ROWS`] × [`DEEP_COLS`], the rows halved (down to
/// [`DEEP_MIN_ROWS`]) and then the columns halved once while C would have fewer than
/// [`DEEP_PIECES`] pieces.
fn deep_piece(m: usize, n: usize) -> (usize, usize) {
    let (mut rows, mut cols) = (DEEP_ROWS, DEEP_COLS);
    let pieces = |rows: usize, cols: usize| m.div_ceil(rows) * n.div_ceil(cols);
    while pieces(rows, cols) < DEEP_PIECES && rows > DEEP_MIN_ROWS && m > DEEP_MIN_ROWS {
        rows /= 2;
    }
    if pieces(rows, cols) < DEEP_PIECES {
        cols /= 2;
    }
    (rows, cols)
}

/// The first `len` values of `buf`, which grows to hold them but never shrinks. The packing
/// buffers are kept between calls and every value a call reads is written by it first, so
/// they are never zeroed: `Vec::resize` to each call's length zero-filled the difference
/// whenever a smaller product came between two larger ones (most calls of a training step;
/// 4.5% of the calling thread's time in a 2-thread `small` step, `perf`).
pub(crate) fn at_least(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// op(B) `[k, n]` into `[n.div_ceil(nr)][k][nr]` panels (`packed` holds exactly those), zero
/// past column `n`.
fn pack_b(par: &Parallel, packed: &mut [f32], b: Strided<'_>, k: usize, n: usize, nr: usize) {
    if k == 0 {
        return;
    }
    par.chunks_mut(packed, k * nr, |panel, dst| {
        pack_b_panels(dst, b, 0..k, panel * nr..((panel + 1) * nr).min(n), nr)
    });
}

/// Columns `cols` of op(B), rows `ks`, into `nr`-column panels `[panel][ks.len()][nr]` (zero
/// past `cols.end`), writing every value of `dst`.
///
/// Dispatched to a constant `nr` so a panel row is copied by a few vector moves: with `nr`
/// a run-time value, every 8–32-value row was a `memmove` call (4% of a `medium` step).
#[inline(always)]
fn pack_b_panels(dst: &mut [f32], b: Strided<'_>, ks: Range<usize>, cols: Range<usize>, nr: usize) {
    match nr {
        8 => pack_b_panels_of::<8>(dst, b, ks, cols),
        16 => pack_b_panels_of::<16>(dst, b, ks, cols),
        32 => pack_b_panels_of::<32>(dst, b, ks, cols),
        _ => unreachable!("no variant has {nr}-column panels"),
    }
}

#[inline(always)]
fn pack_b_panels_of<const NR: usize>(dst: &mut [f32], b: Strided<'_>, ks: Range<usize>, cols: Range<usize>) {
    if b.col_stride == 1 {
        // Row-major B (a weight gradient's activations).
        deal_rows::<NR>(dst, b.data, b.row_stride, ks, cols);
        return;
    }
    let (kc, nr) = (ks.len(), NR);
    for (panel, j0) in dst.chunks_exact_mut(kc * nr).zip(cols.clone().step_by(nr)) {
        let w = nr.min(cols.end - j0);
        // Transposed B (a linear layer's weights): each column read contiguously. A whole
        // panel moves in 4 × 4 blocks, but for its last `kc % 4` rows.
        if w == nr {
            let (kc4, src, ld_src) = (kc / 4 * 4, &b.data[j0 * b.col_stride + ks.start..], b.col_stride);
            assert!(src.len() >= (nr - 1) * ld_src + kc);
            for p in (0..kc4).step_by(4) {
                for j in (0..nr).step_by(4) {
                    // SAFETY: columns `j..j + 4 < nr` of op(B), values `p..p + 4 <= kc` of
                    // each, lie in `src` (asserted above); rows `p..p + 4` and columns
                    // `j..j + 4` of the `[kc][nr]` panel lie in `panel`.
                    unsafe {
                        transpose4x4(
                            panel.as_mut_ptr().add(p * nr + j),
                            nr,
                            src.as_ptr().add(j * ld_src + p),
                            ld_src,
                        )
                    };
                }
            }
            for (p, row) in panel.chunks_exact_mut(nr).enumerate().skip(kc4) {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = src[j * ld_src + p];
                }
            }
            continue;
        }
        for j in 0..nr {
            if j < w {
                let col = &b.data[(j0 + j) * b.col_stride + ks.start..][..kc];
                for (row, &x) in panel.chunks_exact_mut(nr).zip(col) {
                    row[j] = x;
                }
            } else {
                panel.chunks_exact_mut(nr).for_each(|row| row[j] = 0.0);
            }
        }
    }
}

/// Values `span` of stored rows `stored` (row `r` at `data[r · stride..]`) into panels of
/// `W` values, `[span.len() / W][stored.len()][W]` (zero past `span.end`): a transposed A
/// ([`pack_a`]) or a row-major B ([`pack_b_panels`]), whose panels each take a few values
/// of every stored row.
///
/// Each stored row's part is read once, in order, and dealt out to the panels, and the rows
/// [`PREFETCH_ROWS`] ahead are asked for. Panel by panel instead, every panel walked all the
/// stored rows again, a whole row apart, and each row waited on memory: a quarter of the
/// time of `512x128x1536:tn` went to one load of that copy (`perf`, docs/benchmarks-log.md).
#[inline(always)]
fn deal_rows<const W: usize>(
    dst: &mut [f32],
    data: &[f32],
    stride: usize,
    stored: Range<usize>,
    span: Range<usize>,
) {
    let panel_len = stored.len() * W;
    // Whole panels first, then the last partial one (zero past `span.end`), so the copy of
    // each `W` values is a fixed-length move with no per-panel width test.
    let whole = span.len() / W * W;
    let dst = &mut dst[..span.len().div_ceil(W) * panel_len];
    let (whole_panels, last_panel) = dst.split_at_mut(whole / W * panel_len);
    for (i, r) in stored.clone().enumerate() {
        if r + PREFETCH_ROWS < stored.end {
            prefetch(&data[(r + PREFETCH_ROWS) * stride + span.start..][..span.len()]);
        }
        let (body, tail) = data[r * stride + span.start..][..span.len()].split_at(whole);
        for (panel, src) in whole_panels.chunks_exact_mut(panel_len).zip(body.chunks_exact(W)) {
            let src: &[f32; W] = src.try_into().expect("a W-long chunk");
            panel[i * W..][..W].copy_from_slice(src);
        }
        if !tail.is_empty() {
            let out = &mut last_panel[i * W..][..W];
            out[..tail.len()].copy_from_slice(tail);
            out[tail.len()..].fill(0.0);
        }
    }
}

/// How many stored rows ahead [`deal_rows`] asks for the rows it will copy next: each is a
/// block's few cache lines a whole row (hundreds or thousands of values) past the last,
/// which the hardware prefetchers did not fetch ahead of time.
const PREFETCH_ROWS: usize = 8;

/// Asks the CPU to bring `values` into cache (a hint; nothing where there is none).
#[inline(always)]
fn prefetch(values: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in values.chunks(16) {
        // SAFETY: a prefetch reads nothing architecturally; the address is inside `values`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = values;
}

/// Rows `rows` of op(A), columns `pc..pc + kc`, into `mr`-row panels `[panel][kc][MR]`
/// (zero past the last row).
#[inline(always)]
fn pack_a<const MR: usize>(dst: &mut [f32], a: Strided<'_>, rows: Range<usize>, pc: usize, kc: usize) {
    if a.row_stride == 1 {
        // Transposed A (a weight gradient's output gradient): op(A)'s rows lie side by side
        // in each stored row.
        deal_rows::<MR>(dst, a.data, a.col_stride, pc..pc + kc, rows);
        return;
    }
    for (ip, i0) in rows.clone().step_by(MR).enumerate() {
        let panel = &mut dst[ip * kc * MR..][..kc * MR];
        let h = MR.min(rows.end - i0);
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

/// Computes one piece of C with an `MR × (NV · S::LANES)` register tile.
///
/// # Safety
/// The CPU must support `S`'s instructions; `job.c` must point at an `m × n` buffer whose
/// `rows × cols` part nobody else touches meanwhile.
#[inline(always)]
pub(crate) unsafe fn piece<S: Simd, const MR: usize, const NV: usize>(job: &Piece<'_>) {
    let nr = NV * S::LANES;
    let Piece { a, b, bias, onto, c, k, n, ref rows, ref cols } = *job;
    let c = c.0;
    if k == 0 {
        // No k slice below to start the outputs: each is its bias (or 0), onto `onto`.
        for i in rows.clone() {
            for j in cols.clone() {
                let sum = bias.map_or(0.0, |b| b[j]);
                *c.add(i * n + j) = onto.map_or(sum, |onto| onto[i * n + j] + sum);
            }
        }
    }
    // Taken out of the thread-local, not borrowed in a closure: a closure would not inherit
    // this function's `#[target_feature]`s.
    let mut a_pack = PACKED_A.take();
    // op(A) feeds full-height tiles where it lies. Row-major (activations, output gradients;
    // [`RowsOfA`]): packing it meant a strided scatter of every value (`vscatterqps`, a
    // quarter of the time of `1024x96x384:nt`), worth it only when a panel serves many B
    // panels. Transposed (a weight gradient's output gradient; [`ColumnsOfA`]): a tile's
    // `MR` values at each `p` lie side by side in one stored row.
    let rows_of_a = a.col_stride == 1;
    // Except where those rows lie a multiple of [`ALIASED_STRIDE`] apart: then every panel
    // is packed per k slice.
    let pack_all = !rows_of_a && a.col_stride.is_multiple_of(ALIASED_STRIDE);
    // How many of the piece's rows make full-height tiles read where they lie.
    let in_place_rows = if pack_all { 0 } else { rows.len() / MR * MR };
    // `pack_a` writes every value a slice reads, so the kept buffer is not zeroed first.
    at_least(&mut a_pack, rows.len().div_ceil(MR) * MR * KC.min(k));
    let mut b_pack = match b {
        PanelsOfB::Own(_) => PIECE_B.take(),
        PanelsOfB::Shared(_) | PanelsOfB::InPlace(_) => Vec::new(),
    };
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        // `onto`, where this slice finishes the sums.
        let onto = onto.filter(|_| pc + kc == k);
        // The rest is packed (a last, partial panel with zeros past the last row).
        if in_place_rows < rows.len() {
            let dst = &mut a_pack[(in_place_rows / MR) * kc * MR..];
            pack_a::<MR>(dst, a, rows.start + in_place_rows..rows.end, pc, kc);
        }
        // This slice's B panels for the piece's columns, each `panel_len` after the last,
        // whose rows lie `ldb` apart.
        let (b_block, panel_len, ldb) = match b {
            PanelsOfB::Shared(packed) => (&packed[(cols.start / nr) * k * nr + pc * nr..], k * nr, nr),
            PanelsOfB::Own(b) => {
                let b_pack = at_least(&mut b_pack, cols.len().div_ceil(nr) * kc * nr);
                pack_b_panels(b_pack, b, pc..pc + kc, cols.clone(), nr);
                (&b_pack[..], kc * nr, nr)
            }
            PanelsOfB::InPlace(b) => (&b.data[pc * b.row_stride + cols.start..], nr, b.row_stride),
        };
        for (jp, j0) in cols.clone().step_by(nr).enumerate() {
            let w = nr.min(cols.end - j0);
            let b_panel =
                PanelOfB { data: b_block[jp * panel_len..][..(kc - 1) * ldb + nr].as_ptr(), ld: ldb };
            for (ip, i0) in rows.clone().step_by(MR).enumerate() {
                let h = MR.min(rows.end - i0);
                let corner = c.add(i0 * n + j0);
                let in_place = ip * MR < in_place_rows;
                // The microkernel on this tile's rows of A: read where they lie (full height)
                // or from the packed panel. A macro, not a closure, which would not inherit
                // this function's `#[target_feature]`s.
                macro_rules! tile {
                    ($c:expr, $ldc:expr, $start:expr, $onto:expr) => {
                        if in_place && rows_of_a {
                            let a = RowsOfA::new(a.data.as_ptr().add(i0 * a.row_stride + pc), a.row_stride);
                            microkernel::<S, MR, NV>(kc, a, b_panel, $c, $ldc, $start, $onto)
                        } else if in_place {
                            let a = ColumnsOfA(a.data.as_ptr().add(pc * a.col_stride + i0), a.col_stride);
                            microkernel::<S, MR, NV>(kc, a, b_panel, $c, $ldc, $start, $onto)
                        } else {
                            let a = PackedA::<MR>(a_pack[ip * kc * MR..][..kc * MR].as_ptr());
                            microkernel::<S, MR, NV>(kc, a, b_panel, $c, $ldc, $start, $onto)
                        }
                    };
                }
                if h == MR && w == nr {
                    let start = match (pc, bias) {
                        (0, Some(bias)) => Start::Bias(bias[j0..j0 + nr].as_ptr()),
                        (0, None) => Start::Zero,
                        _ => Start::FromC,
                    };
                    let onto = onto.map(|onto| onto[i0 * n + j0..].as_ptr());
                    tile!(corner, n, start, onto);
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
                    tile!(tile.as_mut_ptr(), nr, Start::FromC, None);
                    for r in 0..h {
                        for j in 0..w {
                            let sum = tile[r * nr + j];
                            *corner.add(r * n + j) =
                                onto.map_or(sum, |onto| onto[(i0 + r) * n + j0 + j] + sum);
                        }
                    }
                }
            }
        }
    }
    PACKED_A.set(a_pack);
    if let PanelsOfB::Own(_) = b {
        PIECE_B.set(b_pack);
    }
}

/// Where the microkernel reads `a(r, p)` of its `MR` rows of op(A).
trait PanelOfA: Copy {
    /// # Safety
    /// `r < MR` and `p < kc` of the microkernel call.
    unsafe fn at(self, r: usize, p: usize) -> f32;
}

/// A packed panel, `[kc][MR]`.
#[derive(Clone, Copy)]
struct PackedA<const MR: usize>(*const f32);

impl<const MR: usize> PanelOfA for PackedA<MR> {
    #[inline(always)]
    unsafe fn at(self, r: usize, p: usize) -> f32 {
        *self.0.add(p * MR + r)
    }
}

/// `MR` rows of a row-major op(A) as they lie, `lda` apart, starting at the slice's column.
#[derive(Clone, Copy)]
struct RowsOfA {
    /// Rows 0, 3, 6 and 9: each row is `lda` or `2 · lda` past one of these, an address x86
    /// forms in the load itself, where one base and eleven offsets took a chain of adds.
    groups: [*const f32; 4],
    lda: usize,
}

impl RowsOfA {
    #[inline(always)]
    unsafe fn new(a: *const f32, lda: usize) -> Self {
        // Opaque to the optimiser, which would otherwise fold them back into `a + r · lda`.
        let groups = std::hint::black_box([
            a,
            a.wrapping_add(3 * lda),
            a.wrapping_add(6 * lda),
            a.wrapping_add(9 * lda),
        ]);
        RowsOfA { groups, lda }
    }
}

impl PanelOfA for RowsOfA {
    #[inline(always)]
    unsafe fn at(self, r: usize, p: usize) -> f32 {
        *self.groups[r / 3].add((r % 3) * self.lda + p)
    }
}

/// `MR` rows of a transposed op(A) as they lie: `a(r, p)` is stored at `p · lda + r`, so
/// each `p` reads `MR` neighbouring values of one stored row (`lda` = the matmul's `m`).
#[derive(Clone, Copy)]
struct ColumnsOfA(*const f32, usize);

impl PanelOfA for ColumnsOfA {
    #[inline(always)]
    unsafe fn at(self, r: usize, p: usize) -> f32 {
        *self.0.add(p * self.1 + r)
    }
}

/// An `nr`-column panel of op(B): row `p`'s `nr` values at `data + p · ld` (`ld` = `nr`
/// when packed, B's row stride when read in place).
#[derive(Clone, Copy)]
struct PanelOfB {
    data: *const f32,
    ld: usize,
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
/// `MR × NV` registers while `p` runs (`ldc`: C's row stride), then `onto`'s tile (same
/// stride) added to each finished sum as it is stored.
#[inline(always)]
unsafe fn microkernel<S: Simd, const MR: usize, const NV: usize>(
    kc: usize,
    a: impl PanelOfA,
    b: PanelOfB,
    c: *mut f32,
    ldc: usize,
    start: Start,
    onto: Option<*const f32>,
) {
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
            *x = S::load(b.data.add(p * b.ld + v * S::LANES));
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let av = S::splat(a.at(r, p));
            for (x, &bv) in row.iter_mut().zip(&bv) {
                *x = S::mul_add(av, bv, *x);
            }
        }
    }
    if let Some(onto) = onto {
        // `1 · onto + sum` is `onto + sum` rounded once, fused or not: an `add`'s bits.
        let one = S::splat(1.0);
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                *x = S::mul_add(one, S::load(onto.add(r * ldc + v * S::LANES)), *x);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &x) in row.iter().enumerate() {
            S::store(c.add(r * ldc + v * S::LANES), x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels this CPU can run.
    fn kernels() -> Vec<&'static Microkernel> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                out.push(&crate::fast::x86::AVX2_FMA.matmul);
            }
            if is_x86_feature_detected!("avx512f") {
                out.push(&crate::fast::x86::AVX512.matmul);
            }
        }
        out
    }

    /// Both splits give the same bits, within 1e-4 of the reference kernel, at shapes with
    /// edge tiles, several k slices, several pieces each way, and halved deep pieces (the
    /// conformance kit's shapes are too small for a deep piece).
    #[test]
    fn deep_and_row_pieces_give_identical_bits() {
        let par = Parallel::Inline;
        let mut rng = tinygpt_tensor::Rng::new(7);
        for kernel in kernels() {
            // (70, 300, 96): a long k and whole panels, so the row split reads a row-major B
            // in place and the deep split packs it. (512, 300, 40): a transposed A whose rows
            // lie `ALIASED_STRIDE` apart, packed whole.
            for (m, k, n) in [
                (150, 67, 133),
                (100, 520, 300),
                (3, 600, 530),
                (250, 300, 70),
                (37, 1000, 45),
                (70, 300, 96),
                (512, 300, 40),
                (800, 300, 200),
            ] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
                let bias: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
                for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    for bias in [None, Some(&bias[..])] {
                        let dims = MatmulDims { m, k, n, trans_a, trans_b };
                        let run = |split| {
                            let mut c = vec![f32::NAN; m * n];
                            matmul_split(kernel, &par, &mut c, &a, &b, bias, None, dims, split);
                            c
                        };
                        let (rows, deep) = (run(Split::Rows), run(Split::Deep));
                        let same = rows.iter().zip(&deep).all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "{dims:?} bias {}: the splits differ", bias.is_some());
                        // And right: within 1e-4 of the reference kernel's result, relative to
                        // the output's largest magnitude (sums of up to 1000 products of
                        // normal values; the two round differently, by ~1e-6 of that).
                        let mut want = vec![0.0; m * n];
                        crate::kernels::matmul::matmul_forward(&par, &mut want, &a, &b, bias, dims);
                        let scale = want.iter().fold(1e-30f32, |s, v| s.max(v.abs()));
                        for (i, (got, want)) in deep.iter().zip(&want).enumerate() {
                            assert!(
                                (got - want).abs() <= 1e-4 * scale,
                                "{dims:?} [{i}]: {got} against {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A thin C (fewer columns than a panel, many rows) computed as its transpose has the
    /// bits of the plain split, with and without `onto`, in every layout and across k slices.
    #[test]
    fn thin_products_give_the_bits_of_the_plain_split() {
        let par = Parallel::Inline;
        let mut rng = tinygpt_tensor::Rng::new(13);
        for kernel in kernels() {
            for (m, k, n) in [(1024, 768, 8), (100, 300, 3), (kernel.nr, 5, kernel.nr - 1), (70, 0, 4)] {
                if n >= kernel.nr || m < kernel.nr {
                    continue;
                }
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
                let onto: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    let dims = MatmulDims { m, k, n, trans_a, trans_b };
                    for onto in [None, Some(&onto[..])] {
                        let (mut thin, mut plain) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
                        matmul(kernel, &par, &mut thin, &a, &b, None, onto, dims);
                        matmul_split(kernel, &par, &mut plain, &a, &b, None, onto, dims, Split::Rows);
                        let same = thin.iter().zip(&plain).all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "{dims:?} onto {}: the thin product differs", onto.is_some());
                    }
                }
            }
        }
    }

    /// `onto` added as the last k slice stores C gives the bits of the product then an add,
    /// in both splits, with edge tiles, several k slices and no k at all.
    #[test]
    fn onto_is_the_product_then_an_add() {
        let par = Parallel::Inline;
        let mut rng = tinygpt_tensor::Rng::new(11);
        for kernel in kernels() {
            for (m, k, n) in [(150, 67, 133), (100, 520, 300), (37, 1000, 45), (20, 0, 40), (70, 300, 96)] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
                let onto: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    let dims = MatmulDims { m, k, n, trans_a, trans_b };
                    for split in [Split::Rows, Split::Deep] {
                        let run = |onto| {
                            let mut c = vec![f32::NAN; m * n];
                            matmul_split(kernel, &par, &mut c, &a, &b, None, onto, dims, split);
                            c
                        };
                        let (fused, product) = (run(Some(&onto[..])), run(None));
                        for (i, (got, (&o, &p))) in fused.iter().zip(onto.iter().zip(&product)).enumerate() {
                            let want = o + p;
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{dims:?} {split:?} [{i}]: {got} against {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
