//! Embedding gather and its scatter-add backward (repeated ids included).

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, ids, normal, read, weighted_sum};
use crate::conformance::reference::dense;
use crate::conformance::Tolerance;
use crate::{Backend, Precision, Rng};

/// `(table_rows, dim, n)`; `n` above `table_rows` forces repeated ids.
const CASES: [(usize, usize, usize); 4] = [(1, 1, 1), (4, 3, 9), (256, 13, 20), (50, 64, 70)];

/// `embedding` and its backward against the f64 reference.
pub async fn embedding<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xE3B);
    for (rows, dim, n) in CASES {
        let (table, idx) = (normal(&mut rng, rows * dim, 1.0), ids(&mut rng, n, rows));
        let utable = backend.upload(&table);
        let got =
            read(backend, &backend.embedding(&utable, &backend.upload_indices(&idx), n, dim), "embedding")
                .await;
        let what = format!("embedding [{rows}, {dim}] at {n} ids");
        Tolerance::POINTWISE.assert_close(&what, &got, &dense::embedding(&table, &idx, dim));
        assert_inputs_unchanged(backend, &what, &[(&utable, &table, "table")]).await;
    }
}

/// Against the f64 scatter-add, and against finite differences of `embedding` with
/// respect to the table.
pub async fn embedding_backward<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xE3BB);
    for (rows, dim, n) in CASES {
        let (table, idx, dout) =
            (normal(&mut rng, rows * dim, 1.0), ids(&mut rng, n, rows), normal(&mut rng, n * dim, 1.0));
        let uids = backend.upload_indices(&idx);
        let udout = backend.upload(&dout);
        let dtable = read(backend, &backend.embedding_backward(&udout, &uids, n, rows, dim), "dtable").await;
        let what = format!("embedding_backward [{rows}, {dim}] at {n} ids");
        assert_inputs_unchanged(backend, &what, &[(&udout, &dout, "dout")]).await;
        Tolerance::ACCUMULATED.assert_close(
            &what,
            &dtable,
            &dense::embedding_backward(&dout, &idx, rows, dim),
        );
        check_gradient(&what, &table, &dtable, &mut rng, async |t| {
            weighted_sum(
                &read(backend, &backend.embedding(&backend.upload(t), &uids, n, dim), "embedding").await,
                &dout,
            )
        })
        .await;
    }
}
