//! Matrix multiply with optional transposes and bias.
//!
//! matmul_forward: A, B, bias [n] -> C [m, n]
//!   C = op(A) · op(B) (+ bias on every row), op(A) [m, k], op(B) [k, n];
//!   A is stored [m, k], or [k, m] with trans_a; B is stored [k, n], or [n, k] with trans_b.
//!
//! Every output element is `bias[j] (or 0) + a(i,0)·b(0,j) + a(i,1)·b(1,j) + …`, summed in
//! f32 in ascending `p`, whatever the tile or thread that computes it; so results do not
//! depend on the thread count. Work is split over blocks of `MR` output rows; each block
//! first copies its rows of op(A) into a small `[k, MR]` panel (reading A in place
//! through strides, so a transposed A costs nothing extra), then walks `MR x NR` tiles
//! whose accumulators stay in registers while `p` runs; the `NR`-wide inner loop over a
//! contiguous row of B is what LLVM vectorizes.
//!
//! A transposed B is copied once to [k, n] first: that costs `k·n` copies against
//! `m·k·n` multiply-adds, and it makes the inner loop contiguous.

use tinygpt_tensor::MatmulDims;

use crate::parallel::Parallel;

/// Output rows per tile (and per parallel piece).
const MR: usize = 4;
/// Output columns per tile: `MR x NR` f32 accumulators fit in 8 SSE registers.
const NR: usize = 8;

/// Read-only view of op(A) as an `[m, k]` matrix through strides.
#[derive(Clone, Copy)]
struct StridedA<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl StridedA<'_> {
    #[inline(always)]
    fn at(&self, i: usize, p: usize) -> f32 {
        self.data[i * self.row_stride + p * self.col_stride]
    }
}

/// The operand lengths every matmul variant requires of its slices (the reference and the
/// fast kernels alike).
pub(crate) fn check_operands(c: &[f32], a: &[f32], b: &[f32], bias: Option<&[f32]>, dims: MatmulDims) {
    let MatmulDims { m, k, n, .. } = dims;
    assert_eq!(c.len(), m * n, "matmul: output length");
    assert_eq!(a.len(), m * k, "matmul: A holds {} values for [{m}, {k}]", a.len());
    assert_eq!(b.len(), k * n, "matmul: B holds {} values for [{k}, {n}]", b.len());
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "matmul: bias holds {} values for {n} columns", bias.len());
    }
}

pub(crate) fn matmul_forward(
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    dims: MatmulDims,
) {
    let MatmulDims { m, k, n, trans_a, trans_b } = dims;
    check_operands(c, a, b, bias, dims);
    if c.is_empty() {
        return;
    }
    let transposed;
    let b_kn: &[f32] = if trans_b {
        transposed = transpose(b, n, k);
        &transposed
    } else {
        b
    };
    let a = if trans_a {
        StridedA { data: a, row_stride: 1, col_stride: m }
    } else {
        StridedA { data: a, row_stride: k, col_stride: 1 }
    };
    par.chunks_mut(c, MR * n, |block, c_rows| {
        let rows = c_rows.len() / n;
        let panel = pack_rows(a, block * MR, rows, k);
        for j0 in (0..n).step_by(NR) {
            let cols = NR.min(n - j0);
            let tile = Tile { panel: &panel, b_kn, bias, k, n, j0 };
            if rows == MR && cols == NR {
                tile.full(c_rows);
            } else {
                tile.edge(c_rows, rows, cols);
            }
        }
    });
}

/// Rows `i0..i0 + rows` of op(A) as a `[k, MR]` panel (`panel[p * MR + r]`), zero past
/// `rows`: one contiguous `MR`-vector per `p` for the tile loop, whatever A's layout.
fn pack_rows(a: StridedA<'_>, i0: usize, rows: usize, k: usize) -> Vec<f32> {
    let mut panel = vec![0f32; k * MR];
    for (p, col) in panel.chunks_exact_mut(MR).enumerate() {
        for (r, v) in col[..rows].iter_mut().enumerate() {
            *v = a.at(i0 + r, p);
        }
    }
    panel
}

/// One `MR x NR` (or smaller, at the edges) tile of C: the block's rows, columns `j0..`.
struct Tile<'a> {
    panel: &'a [f32],
    b_kn: &'a [f32],
    bias: Option<&'a [f32]>,
    k: usize,
    n: usize,
    j0: usize,
}

impl Tile<'_> {
    fn start(&self, j: usize) -> f32 {
        self.bias.map_or(0.0, |bias| bias[self.j0 + j])
    }

    /// A full tile, with fixed-size accumulators the compiler keeps in registers.
    /// `c_rows` is this block's `[MR, n]` slice of C.
    fn full(&self, c_rows: &mut [f32]) {
        let mut acc = [[0f32; NR]; MR];
        for row in acc.iter_mut() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = self.start(j);
            }
        }
        let b_rows = self.b_kn[self.j0..].chunks(self.n);
        for (a, b) in self.panel.chunks_exact(MR).zip(b_rows) {
            let b: &[f32; NR] = b[..NR].try_into().expect("a full tile has NR columns");
            for (row, &a) in acc.iter_mut().zip(a) {
                for (v, &bj) in row.iter_mut().zip(b) {
                    *v += a * bj;
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            c_rows[r * self.n + self.j0..][..NR].copy_from_slice(row);
        }
    }

    /// A partial tile: the same sums in the same order, without the fixed sizes.
    fn edge(&self, c_rows: &mut [f32], rows: usize, cols: usize) {
        for r in 0..rows {
            for j in 0..cols {
                let mut v = self.start(j);
                for p in 0..self.k {
                    v += self.panel[p * MR + r] * self.b_kn[p * self.n + self.j0 + j];
                }
                c_rows[r * self.n + self.j0 + j] = v;
            }
        }
    }
}

/// `src` [rows, cols] -> [cols, rows].
fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; src.len()];
    if src.is_empty() {
        return out;
    }
    for (r, row) in src.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out[c * rows + r] = v;
        }
    }
    out
}
