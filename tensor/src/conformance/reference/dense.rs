//! f64 references for matmul, column reductions and embeddings.

use crate::MatmulDims;

/// `op(A) · op(B) (+ bias)` → `[m, n]`; layouts as in [`MatmulDims`].
pub(crate) fn matmul(a: &[f32], b: &[f32], bias: Option<&[f32]>, d: MatmulDims) -> Vec<f64> {
    let a_at = |i: usize, p: usize| if d.trans_a { a[p * d.m + i] } else { a[i * d.k + p] } as f64;
    let b_at = |p: usize, j: usize| if d.trans_b { b[j * d.k + p] } else { b[p * d.n + j] } as f64;
    let mut c = vec![0f64; d.m * d.n];
    for i in 0..d.m {
        for j in 0..d.n {
            let dot: f64 = (0..d.k).map(|p| a_at(i, p) * b_at(p, j)).sum();
            c[i * d.n + j] = dot + bias.map_or(0.0, |b| b[j] as f64);
        }
    }
    c
}

/// Column sums of `[rows, cols]` → `[cols]`.
pub(crate) fn sum_rows(x: &[f32], cols: usize) -> Vec<f64> {
    let mut out = vec![0f64; cols];
    for row in x.chunks_exact(cols) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v as f64;
        }
    }
    out
}

pub(crate) fn sum_squares(x: &[f32]) -> f64 {
    x.iter().map(|&v| v as f64 * v as f64).sum()
}

/// Rows of `table` `[_, dim]` at `ids` → `[ids.len(), dim]`.
pub(crate) fn embedding(table: &[f32], ids: &[u32], dim: usize) -> Vec<f64> {
    ids.iter().flat_map(|&id| table[id as usize * dim..][..dim].iter().map(|&v| v as f64)).collect()
}

/// Scatter-add of `dout` `[ids.len(), dim]` into zero `[table_rows, dim]`.
pub(crate) fn embedding_backward(dout: &[f32], ids: &[u32], table_rows: usize, dim: usize) -> Vec<f64> {
    let mut out = vec![0f64; table_rows * dim];
    for (i, &id) in ids.iter().enumerate() {
        for j in 0..dim {
            out[id as usize * dim + j] += dout[i * dim + j] as f64;
        }
    }
    out
}
