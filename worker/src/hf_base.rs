//! A Hugging Face GPT-2 folder (`config.json`, `model.safetensors`, `vocab.json`,
//! `merges.txt`) as a LoRA base: read with the CLI's importer (`tinygpt_ckpt::import_hf_gpt2`)
//! and kept with its BPE tokenizer, because adapter text is tokenized, and samples decoded,
//! with the base's own vocabulary, not bytes.
//!
//! The config and the tokenizer are checked before the weights are touched, so that a
//! folder that is not GPT-2 is refused before its largest file is downloaded ([`HfHead`]).

use tinygpt_ckpt::{config_from_hf_json, import_hf_gpt2, CkptError, HfTokenizer, ImportDefaults};
use tinygpt_model::{Dataset, ModelConfig, Tokenizer};
use tinygpt_optim::TrainingConfig;

use crate::adapters::BaseModel;
use crate::error::WorkerError;
use crate::fits::check_base_fits_wasm32;
use crate::protocol::{BaseSource, ErrorCode, HfFiles};

/// The folder's files in the order they are fetched: the small ones first, so a folder
/// that is not GPT-2 (or too large for a tab) is refused before the weights download.
pub const HF_FILES: [&str; 4] = ["config.json", "vocab.json", "merges.txt", "model.safetensors"];

/// The batch an adapter on a GPT-2 base trains with unless `trainingConfig` says (and the
/// batch a base must fit with to load): GPT-2's windows are long (1,024 tokens) and its
/// vocabulary wide, so the checkpoints' default of 16 rows would refuse most such models.
pub const HF_BATCH_SIZE: usize = 4;

/// The checked small files of a folder: its tokenizer and the model `config.json` makes.
pub struct HfHead {
    pub tokenizer: Tokenizer,
    pub config: ModelConfig,
}

impl HfHead {
    /// Reads the tokenizer and `config.json`, refusing (naming the file and the reason) a
    /// folder TinyGPT cannot run, or one a tab's memory could not train adapters on.
    pub fn read(config_json: &[u8], vocab_json: &[u8], merges_txt: &[u8]) -> Result<Self, WorkerError> {
        let tokenizer = Tokenizer::bpe(vocab_json, merges_txt).map_err(|e| {
            refused(format!(
                "its tokenizer cannot be read ({e}); GPT-2's vocab.json and merges.txt are needed"
            ))
        })?;
        let config = config_from_hf_json(config_json, &hf_tokenizer(&tokenizer)).map_err(import_error)?;
        check_base_fits_wasm32(&config, HF_BATCH_SIZE)?;
        Ok(HfHead { tokenizer, config })
    }
}

impl BaseModel {
    /// A base from a GPT-2 folder's four files, called `name`.
    pub fn from_hf(name: String, source: BaseSource, files: &HfFiles) -> Result<Self, WorkerError> {
        let head = HfHead::read(&files.config_json, &files.vocab_json, &files.merges_txt)?;
        let training = TrainingConfig { batch_size: HF_BATCH_SIZE, ..TrainingConfig::default() };
        let defaults = ImportDefaults { dataset: placeholder_dataset(&head.tokenizer, &training)?, training };
        let ckpt = import_hf_gpt2(
            &files.config_json,
            &files.model_safetensors,
            &hf_tokenizer(&head.tokenizer),
            defaults,
        )
        .map_err(import_error)?;
        Ok(Self::new(name, source, ckpt)?.with_tokenizer(head.tokenizer))
    }
}

fn hf_tokenizer(tokenizer: &Tokenizer) -> HfTokenizer {
    HfTokenizer { name: tokenizer.name().to_string(), vocab_size: tokenizer.vocab_size() }
}

/// An imported checkpoint records the data it trained on; a Hugging Face folder does not
/// say, and adapters record their own text, so this names that it is unknown.
fn placeholder_dataset(
    tokenizer: &Tokenizer,
    training: &TrainingConfig,
) -> Result<tinygpt_model::DatasetManifest, WorkerError> {
    let text = b"unknown: imported from a Hugging Face GPT-2 folder";
    Ok(Dataset::with_tokenizer("unknown", text, tokenizer, 1, training.seed)?.manifest().clone())
}

fn refused(reason: String) -> WorkerError {
    WorkerError::new(
        ErrorCode::BadCheckpoint,
        format!(
            "That folder cannot be a GPT-2 base: {reason}. Give the folder of a Hugging Face GPT-2 model."
        ),
    )
}

/// The importer's refusal (which names the file and what is wrong) as a sentence.
fn import_error(e: CkptError) -> WorkerError {
    match e {
        CkptError::HfGpt2 { reason } => refused(reason),
        other => refused(other.to_string()),
    }
}
