//! `model_config.json`: the architecture contract that checkpoints, the web worker and
//! outside tools rely on.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::structure::GptParts;

/// The byte tokenizer's name, the default.
pub const BYTE_V1: &str = "byte-v1";

/// The GPT's shape. Serialized as `model_config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelConfig {
    /// A name for the model, saved with it.
    pub model_name: String,
    /// Token ids the model reads and predicts: 256 for `byte-v1`; a BPE's vocabulary size
    /// (at least its 256 one-byte tokens) otherwise.
    pub vocab_size: usize,
    /// The tokenizer: `"byte-v1"` (one token per UTF-8 byte; the default, and left out of
    /// the JSON, so byte models' files are what they always were) or a byte-level BPE's
    /// `"bpe-<16 hex>"` (GPT-2's `vocab.json` + `merges.txt`, which live beside the model;
    /// the hex is `tinygpt_model::tokenizer::Bpe::id`'s hash of them).
    #[serde(default = "byte_v1", skip_serializing_if = "is_byte_v1")]
    pub tokenizer: String,
    /// The longest sequence the model reads (positions).
    pub context_length: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Attention heads per block (`d_model` divisible by it).
    pub n_heads: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Width of the MLP's hidden layer.
    pub d_mlp: usize,
    /// Dropout probability in training, `0 <= dropout < 1` (0: none; the presets' default).
    /// Where and how masks are drawn: `tinygpt_model::dropout`.
    pub dropout: f32,
    /// Always true: logits use the token embedding transposed.
    pub tie_embeddings: bool,
    /// Always "float32".
    pub dtype: String,
}

fn byte_v1() -> String {
    BYTE_V1.to_string()
}

fn is_byte_v1(name: &str) -> bool {
    name == BYTE_V1
}

/// Whether `name` is a BPE tokenizer's: `bpe-` and 16 lower-case hex digits.
pub fn is_bpe_name(name: &str) -> bool {
    name.strip_prefix("bpe-")
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// A named model size with the batch size it trains with.
#[derive(Clone, Debug, PartialEq)]
pub struct Preset {
    /// The preset's name (`tiny`, `small`, …).
    pub name: &'static str,
    /// Its model.
    pub model: ModelConfig,
    /// The batch size it is meant to train with.
    pub batch_size: usize,
}

/// `(name, layers, d_model, heads, context, batch)`; `d_mlp` is `4 * d_model`.
const PRESETS: [(&str, usize, usize, usize, usize, usize); 6] = [
    ("tiny", 2, 48, 3, 32, 16),
    ("small", 3, 96, 3, 64, 16),
    ("medium", 4, 128, 4, 96, 16),
    ("large", 6, 192, 6, 128, 12),
    ("xl", 8, 256, 8, 128, 8),
    ("huge", 12, 256, 8, 256, 8),
];

impl Preset {
    /// Every preset's name.
    pub fn names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|p| p.0)
    }

    /// Every preset.
    pub fn all() -> Vec<Preset> {
        Self::names().map(|n| Self::by_name(n).expect("listed preset")).collect()
    }

    /// The preset called `name`, or an error listing the known ones.
    pub fn by_name(name: &str) -> Result<Preset, ConfigError> {
        let &(name, n_layers, d_model, n_heads, context_length, batch_size) =
            PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| ConfigError::UnknownPreset {
                name: name.to_string(),
                known: Self::names().collect::<Vec<_>>().join(", "),
            })?;
        let model = ModelConfig {
            model_name: format!("tinygpt-{name}"),
            context_length,
            n_layers,
            n_heads,
            d_model,
            d_mlp: 4 * d_model,
            ..ModelConfig::reference()
        };
        Ok(Preset { name, model, batch_size })
    }
}

/// One parameter tensor of the canonical list: its name, shape and offset (in f32s)
/// into the concatenation of all parameters (`weights.f32`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// The tensor's name, e.g. `blocks.0.attn.q_proj.weight`.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Where it starts in the flat parameter vector.
    pub offset: usize,
}

impl TensorSpec {
    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

impl ModelConfig {
    /// The reference config: ctx 128, 4 layers, 4 heads, d 128, d_mlp 512 (842,496 parameters).
    pub fn reference() -> Self {
        ModelConfig {
            model_name: "tinygpt-reference".to_string(),
            vocab_size: 256,
            tokenizer: byte_v1(),
            context_length: 128,
            n_layers: 4,
            n_heads: 4,
            d_model: 128,
            d_mlp: 512,
            dropout: 0.0,
            tie_embeddings: true,
            dtype: "float32".to_string(),
        }
    }

    /// GPT-2-124M's shape, as Hugging Face's `GPT2Config()` defaults make it: 12 layers of
    /// 12 heads, d 768, context 1,024, a 50,257-token vocabulary (124,439,808 parameters).
    /// `tokenizer` is left at byte-v1: a real base names its BPE files' hash there, so a
    /// caller that tokenizes sets it. The shape memory estimates and wide-vocabulary tests
    /// are written against.
    pub fn gpt2_124m_shape() -> Self {
        ModelConfig {
            model_name: "gpt2".to_string(),
            vocab_size: 50_257,
            context_length: 1024,
            n_layers: 12,
            n_heads: 12,
            d_model: 768,
            d_mlp: 3072,
            ..ModelConfig::reference()
        }
    }

    /// Channels per attention head (`d_model / n_heads`).
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Rejects configs this implementation cannot run, naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, reason: String| Err(ConfigError::InvalidConfig { field, reason });
        if self.tokenizer == BYTE_V1 {
            if self.vocab_size != 256 {
                return bad(
                    "vocab_size",
                    format!("is {}, but the byte-v1 tokenizer needs 256", self.vocab_size),
                );
            }
        } else if is_bpe_name(&self.tokenizer) {
            if !(256..=1 << 24).contains(&self.vocab_size) {
                return bad(
                    "vocab_size",
                    format!(
                        "is {}, but a byte-level BPE has its 256 one-byte tokens and at most 2^24",
                        self.vocab_size
                    ),
                );
            }
        } else {
            return bad(
                "tokenizer",
                format!(
                    "is {:?}; known are \"byte-v1\" and a byte-level BPE's \"bpe-<16 hex>\"",
                    self.tokenizer
                ),
            );
        }
        for (field, v) in [
            ("context_length", self.context_length),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("d_model", self.d_model),
            ("d_mlp", self.d_mlp),
        ] {
            if v == 0 {
                return bad(field, "must be positive".into());
            }
            if v > 1 << 16 {
                return bad(field, format!("is {v}, larger than this implementation supports (65536)"));
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return bad(
                "d_model",
                format!("{} is not divisible by n_heads = {}", self.d_model, self.n_heads),
            );
        }
        if !(self.dropout >= 0.0 && self.dropout < 1.0) {
            return bad("dropout", format!("is {}, but it must be at least 0 and below 1", self.dropout));
        }
        if !self.tie_embeddings {
            return bad("tie_embeddings", "must be true: logits use the token embedding".into());
        }
        if self.dtype != "float32" {
            return bad("dtype", format!("is {:?}, only \"float32\" is supported", self.dtype));
        }
        // Counted in u64: on wasm32 a hostile config would overflow usize before this check.
        let params = self.param_count_u64();
        if params > 1 << 31 {
            return bad("d_model", format!("gives {params} parameters, over the 2^31 limit"));
        }
        Ok(())
    }

    /// Every parameter in canonical order with its shape and offset (the walk of
    /// [`GptParts::build`], which also gives the layouts).
    pub fn tensor_specs(&self) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        let mut offset = 0;
        GptParts::build(self, |decl| {
            let spec = TensorSpec { name: decl.name(), shape: decl.shape.to_vec(), offset };
            offset += spec.numel();
            specs.push(spec);
        });
        specs
    }

    /// The number of parameters. Call on a validated config (validation bounds it by 2^31).
    pub fn param_count(&self) -> usize {
        self.param_count_u64() as usize
    }

    /// Counted in `u64` over the same walk, without naming anything.
    fn param_count_u64(&self) -> u64 {
        let mut count = 0u64;
        GptParts::build(self, |decl| count = count.saturating_add(decl.numel_u64()));
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_config_has_842_496_parameters() {
        let c = ModelConfig::reference();
        assert_eq!(c.param_count(), 842_496);
        let specs = c.tensor_specs();
        let last = specs.last().unwrap();
        assert_eq!(last.offset + last.numel(), 842_496);
        assert_eq!(specs.len(), 2 + 16 * 4 + 2);
    }

    #[test]
    fn presets_are_valid_and_match_the_table() {
        for p in Preset::all() {
            p.model.validate().unwrap();
            let specs = p.model.tensor_specs();
            assert_eq!(specs.iter().map(TensorSpec::numel).sum::<usize>(), p.model.param_count());
        }
        let tiny = Preset::by_name("tiny").unwrap();
        assert_eq!((tiny.model.n_layers, tiny.model.d_model, tiny.model.n_heads), (2, 48, 3));
        assert_eq!((tiny.model.context_length, tiny.batch_size), (32, 16));
        assert!(Preset::by_name("gigantic").is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let mut c = ModelConfig::reference();
        c.n_heads = 3;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("d_model") && err.contains("n_heads"), "{err}");
    }

    #[test]
    fn the_tokenizer_field_is_left_out_for_bytes_and_sets_the_vocabulary_rule() {
        let c = ModelConfig::reference();
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("tokenizer"), "{json}");
        let back: ModelConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let gpt2 = ModelConfig {
            vocab_size: 50_257,
            tokenizer: "bpe-0123456789abcdef".into(),
            ..ModelConfig::reference()
        };
        gpt2.validate().unwrap();
        let json = serde_json::to_string(&gpt2).unwrap();
        assert!(json.contains(r#""tokenizer":"bpe-0123456789abcdef""#), "{json}");
        assert_eq!(serde_json::from_str::<ModelConfig>(&json).unwrap(), gpt2);
        let err = ModelConfig { vocab_size: 50_257, ..c.clone() }.validate().unwrap_err().to_string();
        assert!(err.contains("vocab_size") && err.contains("byte-v1"), "{err}");
        let err = ModelConfig { vocab_size: 100, ..gpt2.clone() }.validate().unwrap_err().to_string();
        assert!(err.contains("vocab_size") && err.contains("256"), "{err}");
        let err = ModelConfig { tokenizer: "sentencepiece".into(), ..c }.validate().unwrap_err().to_string();
        assert!(err.contains("tokenizer") && err.contains("sentencepiece"), "{err}");
    }

    #[test]
    fn dropout_must_lie_in_0_to_below_1_and_presets_keep_0() {
        for p in Preset::all() {
            assert_eq!(p.model.dropout, 0.0, "{}", p.name);
        }
        for ok in [0.0, 0.2, 0.999] {
            ModelConfig { dropout: ok, ..ModelConfig::reference() }.validate().unwrap();
        }
        for bad in [-0.1, 1.0, 1.5, f32::NAN] {
            let err =
                ModelConfig { dropout: bad, ..ModelConfig::reference() }.validate().unwrap_err().to_string();
            assert!(err.contains("dropout") && err.contains("below 1"), "{bad}: {err}");
        }
    }
}
