//! Where the model drops out, and which masks a training pass draws.
//!
//! nanoGPT's placement: the sum of token and position embeddings (site 0), and in block `i`
//! the attention probabilities (site `1 + 3i`), the output of `o_proj` (site `2 + 3i`) and
//! the output of `fc_out` (site `3 + 3i`), the last two before their residual add (fused
//! with it). A site's mask is [`DropoutMask::new`]`(p, seed, step, site, offset)`: `seed`
//! the run's training seed, `step` the number of optimizer steps completed before this one
//! (0 for the first), and element indices counted over the whole batch, so a step cut into
//! row parts (gradient accumulation) draws the same masks as the uncut step. Evaluation,
//! sampling and no-grad passes draw none.

use tinygpt_tensor::DropoutMask;

/// The masks of one training pass: the run's seed, the step, and the batch row the pass
/// starts at (a gradient-accumulation part starts past the rows before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropoutDraw {
    /// The run's seed.
    pub seed: u64,
    /// The optimizer step (a fresh mask every step).
    pub step: u64,
    /// The first batch row this draw covers (a batch scored in parts draws the same masks).
    pub first_row: usize,
}

/// The sites of one block, numbered as in the module docs.
pub(crate) enum Site {
    Embeddings,
    AttentionProbs(usize),
    AttentionOut(usize),
    MlpOut(usize),
}

impl Site {
    fn number(&self) -> u64 {
        match *self {
            Site::Embeddings => 0,
            Site::AttentionProbs(i) => 1 + 3 * i as u64,
            Site::AttentionOut(i) => 2 + 3 * i as u64,
            Site::MlpOut(i) => 3 + 3 * i as u64,
        }
    }
}

impl DropoutDraw {
    /// The mask of `site` with probability `p`, for a buffer whose batch rows each hold
    /// `row_elements` values.
    pub(crate) fn mask(&self, p: f32, site: Site, row_elements: usize) -> DropoutMask {
        let offset = self.first_row.wrapping_mul(row_elements) as u32;
        DropoutMask::new(p, self.seed, self.step, site.number(), offset)
    }
}
