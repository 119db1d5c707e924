//! Whether a checkpoint may be resumed with a given model config and data.

use tinygpt_run::{DatasetManifest, ModelConfig};

use crate::checkpoint::Checkpoint;
use crate::error::{CkptError, Result};
use crate::layout::MODEL_CONFIG;

/// Refuses to resume `ckpt` as `model` on `data`, naming the first field that differs.
///
/// Every architecture field must match (`model_name` is a label and may differ). Data:
/// a different tokenizer is [`CkptError::TokenizerMismatch`] (never resumable); any other
/// difference, `dataset_id` first, is [`CkptError::DatasetMismatch`], which a caller may
/// override for a deliberate change of data (the CLI's `--force`).
pub fn check_compatible(ckpt: &Checkpoint, model: &ModelConfig, data: &DatasetManifest) -> Result<()> {
    let (c, m) = (&ckpt.model_config, model);
    let fields: [(&'static str, String, String); 9] = [
        ("vocab_size", c.vocab_size.to_string(), m.vocab_size.to_string()),
        ("context_length", c.context_length.to_string(), m.context_length.to_string()),
        ("n_layers", c.n_layers.to_string(), m.n_layers.to_string()),
        ("n_heads", c.n_heads.to_string(), m.n_heads.to_string()),
        ("d_model", c.d_model.to_string(), m.d_model.to_string()),
        ("d_mlp", c.d_mlp.to_string(), m.d_mlp.to_string()),
        ("dropout", c.dropout.to_string(), m.dropout.to_string()),
        ("tie_embeddings", c.tie_embeddings.to_string(), m.tie_embeddings.to_string()),
        ("dtype", c.dtype.clone(), m.dtype.clone()),
    ];
    if let Some((field, checkpoint, requested)) = fields.into_iter().find(|(_, a, b)| a != b) {
        return Err(CkptError::ConfigMismatch {
            file: MODEL_CONFIG.to_string(),
            field,
            checkpoint,
            requested,
        });
    }

    let (c, d) = (&ckpt.dataset, data);
    if c.tokenizer != d.tokenizer {
        return Err(CkptError::TokenizerMismatch {
            checkpoint: c.tokenizer.clone(),
            current: d.tokenizer.clone(),
        });
    }
    let fields: [(&'static str, String, String); 7] = [
        ("dataset_id", c.dataset_id.clone(), d.dataset_id.clone()),
        ("raw_bytes", c.raw_bytes.to_string(), d.raw_bytes.to_string()),
        ("token_count", c.token_count.to_string(), d.token_count.to_string()),
        ("train_split", c.train_split.to_string(), d.train_split.to_string()),
        ("val_split", c.val_split.to_string(), d.val_split.to_string()),
        ("seed", c.seed.to_string(), d.seed.to_string()),
        ("name", c.name.clone(), d.name.clone()),
    ];
    if let Some((field, checkpoint, current)) = fields.into_iter().find(|(_, a, b)| a != b) {
        return Err(CkptError::DatasetMismatch { field, checkpoint, current });
    }
    Ok(())
}
