//! Checkpoint → the layout's files. A pure function of the checkpoint (no clock, no
//! randomness, no platform-dependent formatting), so every build writes the same bytes.

use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::json::to_json;
use crate::layout::{
    ModelConfigFile, TrainerState, ADAM_M, ADAM_V, DATASET_MANIFEST, LOSS_HISTORY, MODEL_CONFIG,
    TRAINER_STATE, TRAINING_CONFIG, WEIGHTS,
};

/// One file of a generation, as a [`crate::GenerationKind`] writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedFile {
    /// Its name in the generation.
    pub name: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// The files of `ckpt` in write order (trainer_state.json last), after checking the
/// checkpoint can be read back. The moments are left out when `with_moments` is false or
/// the checkpoint has none.
pub(crate) fn encode(ckpt: &Checkpoint, with_moments: bool) -> Result<Vec<EncodedFile>> {
    ckpt.check()?;
    let table =
        ModelConfigFile { config: ckpt.model_config.clone(), tensors: ckpt.model_config.tensor_specs() };
    let mut files = vec![
        EncodedFile { name: MODEL_CONFIG, bytes: to_json(MODEL_CONFIG, &table, 2)? },
        EncodedFile { name: TRAINING_CONFIG, bytes: to_json(TRAINING_CONFIG, &ckpt.training_config, 2)? },
        EncodedFile { name: DATASET_MANIFEST, bytes: to_json(DATASET_MANIFEST, &ckpt.dataset, 2)? },
        EncodedFile { name: LOSS_HISTORY, bytes: to_json(LOSS_HISTORY, &ckpt.loss_history, 1)? },
        EncodedFile { name: WEIGHTS, bytes: f32_le_bytes(&ckpt.weights) },
    ];
    if with_moments && ckpt.has_moments() {
        files.push(EncodedFile { name: ADAM_M, bytes: f32_le_bytes(&ckpt.adam_m) });
        files.push(EncodedFile { name: ADAM_V, bytes: f32_le_bytes(&ckpt.adam_v) });
    }
    let state = TrainerState::sealed(&ckpt.progress, &files);
    files.push(EncodedFile { name: TRAINER_STATE, bytes: to_json(TRAINER_STATE, &state, 2)? });
    Ok(files)
}

/// `values` as little-endian f32 bytes.
pub(crate) fn f32_le_bytes(values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * 4];
    for (chunk, v) in out.chunks_exact_mut(4).zip(values) {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    out
}
