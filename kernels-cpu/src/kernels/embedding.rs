//! Embedding lookup and its scatter-add backward.
//!
//! embedding_forward:  table [table_rows, dim], ids [n] -> out [n, dim]
//! embedding_backward: dout [n, dim], ids [n] -> dtable [table_rows, dim]
//!
//! The backward pass adds rows in ascending `n` order on one thread (a few thousand rows
//! of a few hundred values: not worth splitting, and the order stays fixed).

use crate::parallel::Parallel;

fn row_of(ids: &[u32], i: usize, table_rows: usize, op: &str) -> usize {
    let id = ids[i] as usize;
    assert!(id < table_rows, "{op}: id {id} at position {i} is outside the table of {table_rows} rows");
    id
}

pub(crate) fn embedding_forward(par: &Parallel, out: &mut [f32], table: &[f32], ids: &[u32], dim: usize) {
    let table_rows = table.len().checked_div(dim).unwrap_or(0);
    par.chunks_mut(out, dim, |i, out| {
        let id = row_of(ids, i, table_rows, "embedding");
        out.copy_from_slice(&table[id * dim..][..dim]);
    });
}

pub(crate) fn embedding_backward(dtable: &mut [f32], dout: &[f32], ids: &[u32], dim: usize) {
    let table_rows = dtable.len().checked_div(dim).unwrap_or(0);
    for i in 0..ids.len() {
        let id = row_of(ids, i, table_rows, "embedding_backward");
        let src = &dout[i * dim..][..dim];
        for (d, &g) in dtable[id * dim..][..dim].iter_mut().zip(src) {
            *d += g;
        }
    }
}
