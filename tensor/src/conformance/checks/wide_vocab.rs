//! A GPT-2-wide output head: 50,257 tokens (the byte-level BPE's vocabulary). The token
//! embedding's gather at ids up to 50,256, the head's matmul (hidden `[rows, C]` times the
//! tied embedding `[V, C]` transposed) and softmax cross-entropy with its gradient over
//! rows of 50,257 logits, against the f64 reference. Softmax sums 50,257 exponentials per
//! row, far more terms than the other checks' rows, yet f32 stays inside the kit's
//! tolerances: the terms are positive, so their relative rounding error does not grow
//! with cancellation.

use crate::conformance::harness::{ids, normal, read, read_scalar};
use crate::conformance::reference::{dense, layers};
use crate::conformance::Tolerance;
use crate::{Backend, MatmulDims, MatmulFused, Precision, Rng};

/// GPT-2's vocabulary.
pub const GPT2_VOCAB: usize = 50_257;

/// Embedding, head matmul and cross-entropy (forward and backward) at 50,257 tokens.
pub async fn wide_vocab_head<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0x50257);
    let (rows, c, v) = (3, 64, GPT2_VOCAB);
    let table = normal(&mut rng, v * c, 0.5);
    let mut idx = ids(&mut rng, rows, v);
    idx[0] = (v - 1) as u32;
    let utable = backend.upload(&table);
    let h =
        read(backend, &backend.embedding(&utable, &backend.upload_indices(&idx), rows, c), "embedding").await;
    Tolerance::POINTWISE.assert_close("embedding [50257, 64]", &h, &dense::embedding(&table, &idx, c));

    let dims = MatmulDims { m: rows, k: c, n: v, trans_a: false, trans_b: true };
    let logits =
        read(backend, &backend.matmul(&backend.upload(&h), &utable, dims, MatmulFused::none()).out, "logits")
            .await;
    let want = dense::matmul(&h, &table, None, dims);
    Tolerance::products(precision, c).assert_close(&format!("head matmul {dims:?}"), &logits, &want);

    // Cross-entropy on the reference logits (so it is checked on its own).
    let x: Vec<f32> = want.iter().map(|&w| w as f32).collect();
    let t = ids(&mut rng, rows, v);
    let (ux, ut) = (backend.upload(&x), backend.upload_indices(&t));
    let loss =
        read_scalar(backend, &backend.cross_entropy(&ux, &ut, rows, v, false).loss, "cross_entropy").await;
    Tolerance::ACCUMULATED.assert_close(
        "cross_entropy [3, 50257]",
        &[loss],
        &[layers::cross_entropy(&x, &t, v)],
    );
    let dloss = 0.7f32;
    let dx = backend.cross_entropy_backward(&ux, &ut, None, &backend.upload(&[dloss]), rows, v);
    let dx = read(backend, &dx, "dlogits").await;
    let want = layers::cross_entropy_backward(&x, &t, dloss, v);
    Tolerance::ACCUMULATED.assert_close("cross_entropy_backward [3, 50257]", &dx, &want);
    let trained = backend.cross_entropy(&ux, &ut, rows, v, true);
    let loss = read_scalar(backend, &trained.loss, "cross_entropy_for_training").await;
    Tolerance::ACCUMULATED.assert_close(
        "cross_entropy_for_training [3, 50257]",
        &[loss],
        &[layers::cross_entropy(&x, &t, v)],
    );
}
