//! The loss at the end of the forward pass: the tied output head `logits = x · wteᵀ` and the
//! mean next-token cross-entropy, computed a chunk of rows at a time when the head is large.
//!
//! Why chunks: with GPT-2's vocabulary the head is by far the largest op of a step (1,024
//! rows × 768 × 50,257 is 79 GFLOP forward and as much again backward: over a second each in
//! a tab), and the worker can give a step up for `pause` or `stop` only between ops (its
//! `abandon` module). Cut into chunks of at most [`CHUNK_MULTIPLY_ADDS`], every head op ends
//! within tens of milliseconds. A byte-vocabulary model's head is small enough to be one
//! chunk, so it takes exactly the ops it took before (one product, one cross-entropy).

use tinygpt_autograd::{Tape, Var};
use tinygpt_tensor::{Backend, Indices};

/// The most multiply-adds one chunk's head product may take: 2³¹, about 4.3 GFLOP. At the
/// speed of a whole LoRA step at the GPT-2-124M shape (about 520 GFLOP: 7.8 s in the tab
/// and 2.6 s natively on two threads, BENCHMARKS.md) that is some 65 ms and 21 ms: worked
/// out from those steps, not timed chunk by chunk.
pub const CHUNK_MULTIPLY_ADDS: usize = 1 << 31;

/// Rows per chunk for a head of `vocab × width` over `rows` rows: as many as
/// [`CHUNK_MULTIPLY_ADDS`] allows, at least one, at most all.
pub fn head_chunk_rows(rows: usize, width: usize, vocab: usize) -> usize {
    (CHUNK_MULTIPLY_ADDS / (width * vocab).max(1)).clamp(1, rows.max(1))
}

/// Mean cross-entropy of `x · tableᵀ` (`x` `[.., C]` with one row per target, `table`
/// `[V, C]`) against `targets`, in chunks of [`head_chunk_rows`] rows: each chunk's mean,
/// weighted by its share of the rows, summed. The same value and gradients as one product
/// and one cross-entropy, up to the order of the sums.
pub fn head_cross_entropy<B: Backend>(tape: &Tape<B>, x: &Var<B>, table: &Var<B>, targets: &[u32]) -> Var<B> {
    let (vocab, width) = (table.value().dims()[0], table.value().dims()[1]);
    head_cross_entropy_in_chunks(tape, x, table, targets, head_chunk_rows(targets.len(), width, vocab))
}

/// [`head_cross_entropy`] in chunks of `chunk` rows (the last may have fewer); one chunk of
/// all the rows is one product and one cross-entropy.
pub fn head_cross_entropy_in_chunks<B: Backend>(
    tape: &Tape<B>,
    x: &Var<B>,
    table: &Var<B>,
    targets: &[u32],
    chunk: usize,
) -> Var<B> {
    let backend = x.value().backend();
    let rows = targets.len();
    assert!(chunk >= 1, "head chunks of at least one row");
    if chunk >= rows {
        let logits = tape.matmul(x, table, None, false, true);
        return tape.cross_entropy(&logits, &Indices::new(backend, targets));
    }
    let mut total: Option<Var<B>> = None;
    for start in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - start);
        let logits = tape.matmul(&tape.rows(x, start, n), table, None, false, true);
        let mean = tape.cross_entropy(&logits, &Indices::new(backend, &targets[start..start + n]));
        let part = tape.scale(&mean, n as f32 / rows as f32);
        total = Some(match total {
            Some(sum) => tape.add(&sum, &part),
            None => part,
        });
    }
    total.expect("a batch has rows")
}
