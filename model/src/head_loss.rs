//! The loss at the end of the forward pass: the tied output head `logits = x · wteᵀ` and the
//! mean next-token cross-entropy, computed whole or a chunk of rows at a time.
//!
//! Why chunks: with GPT-2's vocabulary the head is by far the largest op of a step (1,024
//! rows × 768 × 50,257 is 79 GFLOP forward and as much again backward: over a second each in
//! a tab), and the worker can give a step up for `pause` or `stop` only between ops (its
//! `abandon` module). Cut into chunks of at most [`CHUNK_MULTIPLY_ADDS`], every head op ends
//! within tens of milliseconds. The chunks are the caller's choice
//! ([`crate::Gpt::set_head_chunk_budget`]): the worker asks for them; a native run, which
//! gives no step up, takes the head whole, because a chunk of a few dozen rows re-reads the
//! whole table for few rows and ran the GPT-2-124M LoRA step some 10% slower on two native
//! threads (docs/benchmarks-log.md).
//! A byte-vocabulary model's head is one chunk either way.

use tinygpt_autograd::{Tape, Var};
use tinygpt_tensor::{Backend, Indices};

/// The chunk budget the worker sets: at most 2³¹ multiply-adds (about 4.3 GFLOP) a chunk's
/// head product. At the speed of a whole LoRA step at the GPT-2-124M shape (about 520 GFLOP:
/// 7.8 s in the tab, BENCHMARKS.md) that is some 65 ms: worked out from that step, not timed
/// chunk by chunk.
pub const CHUNK_MULTIPLY_ADDS: usize = 1 << 31;

/// Rows per chunk for a head of `vocab × width` over `rows` rows: as many as `budget`
/// multiply-adds allow, at least one, at most all.
pub fn head_chunk_rows(rows: usize, width: usize, vocab: usize, budget: usize) -> usize {
    (budget / (width * vocab).max(1)).clamp(1, rows.max(1))
}

/// Mean cross-entropy of `x · tableᵀ` (`x` `[.., C]` with one row per target, `table`
/// `[V, C]`) against `targets`: whole (`budget` None), or in chunks of [`head_chunk_rows`]
/// rows within `budget` multiply-adds, each chunk's mean weighted by its share of the rows
/// and summed. The same value and gradients as one product and one cross-entropy, up to the
/// order of the sums.
pub fn head_cross_entropy<B: Backend>(
    tape: &Tape<B>,
    x: &Var<B>,
    table: &Var<B>,
    targets: &[u32],
    budget: Option<usize>,
) -> Var<B> {
    let (vocab, width, rows) = (table.value().dims()[0], table.value().dims()[1], targets.len());
    let chunk = budget.map_or(rows.max(1), |budget| head_chunk_rows(rows, width, vocab, budget));
    head_cross_entropy_in_chunks(tape, x, table, targets, chunk)
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
