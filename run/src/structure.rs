//! The model's structure, written once: every parameter tensor with its name, shape and
//! initialisation, in canonical order, and the typed places ([`GptParts`]) the forward
//! pass reads them from.
//!
//! Everything else is derived by walking [`GptParts::build`]: the canonical tensor list
//! ([`crate::ModelConfig::tensor_specs`]), the parameter count (counted in `u64` before a
//! config is trusted), the initial values (`tinygpt_model::Params::init`) and the index of
//! each tensor in the list, which the forward pass uses instead of looking names up. The names
//! are the checkpoint contract (`blocks.{i}.attn.q_proj.weight`, …); the typed fields are
//! how code reaches a tensor.

use std::fmt;

use crate::model_config::ModelConfig;

/// How a parameter starts (GPT-2 style; see `tinygpt_model::Params::init`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// All zeros (biases, LayerNorm shifts).
    Zeros,
    /// All ones (LayerNorm scales).
    Ones,
    /// Normal with this standard deviation.
    Normal(f64),
}

/// One tensor as [`GptParts::build`] declares it.
#[derive(Clone, Copy, Debug)]
pub struct TensorDecl<'a> {
    /// The block it belongs to (`None`: embeddings and the final LayerNorm).
    pub block: Option<usize>,
    /// Its name inside the block (or the whole name outside blocks), e.g. `attn.q_proj.weight`.
    pub path: &'static str,
    /// Layouts: embeddings `[rows, d_model]`; linear weights PyTorch's `[out_features,
    /// in_features]` (`y = x · Wᵀ + b`); biases and LayerNorm gains/shifts `[features]`.
    pub shape: &'a [usize],
    /// How it starts.
    pub init: Init,
}

impl TensorDecl<'_> {
    /// The canonical name (the checkpoint contract).
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Elements, counted in `u64` (a hostile config would overflow `usize` on wasm32).
    pub fn numel_u64(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }
}

impl fmt::Display for TensorDecl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.block {
            Some(i) => write!(f, "blocks.{i}.{}", self.path),
            None => f.write_str(self.path),
        }
    }
}

/// A linear layer `y = x · Wᵀ + b`: weight `[out, in]`, bias `[out]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linear<T> {
    /// The weight, `[out, in]`.
    pub weight: T,
    /// The bias, `[out]`.
    pub bias: T,
}

/// A LayerNorm's gain and shift, both `[features]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerNorm<T> {
    /// The scale, `[d_model]`.
    pub weight: T,
    /// The shift, `[d_model]`.
    pub bias: T,
}

/// One transformer block: `x += o_proj(attn(q, k, v of ln1(x)))`, `x += fc_out(gelu(fc_in(ln2(x))))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block<T> {
    /// LayerNorm before attention.
    pub ln1: LayerNorm<T>,
    /// Query projection.
    pub q_proj: Linear<T>,
    /// Key projection.
    pub k_proj: Linear<T>,
    /// Value projection.
    pub v_proj: Linear<T>,
    /// Attention output projection.
    pub o_proj: Linear<T>,
    /// LayerNorm before the MLP.
    pub ln2: LayerNorm<T>,
    /// MLP input projection (`d_model` → `d_mlp`).
    pub fc_in: Linear<T>,
    /// MLP output projection (`d_mlp` → `d_model`).
    pub fc_out: Linear<T>,
}

/// The six linears of a block, by the names adapters and PEFT use for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinearKind {
    /// Query projection.
    QProj,
    /// Key projection.
    KProj,
    /// Value projection.
    VProj,
    /// Attention output projection.
    OProj,
    /// MLP input projection.
    FcIn,
    /// MLP output projection.
    FcOut,
}

impl LinearKind {
    /// Every kind, in block order.
    pub const ALL: [LinearKind; 6] =
        [Self::QProj, Self::KProj, Self::VProj, Self::OProj, Self::FcIn, Self::FcOut];

    /// The module name (`q_proj`, …, `fc_out`).
    pub fn name(self) -> &'static str {
        match self {
            Self::QProj => "q_proj",
            Self::KProj => "k_proj",
            Self::VProj => "v_proj",
            Self::OProj => "o_proj",
            Self::FcIn => "fc_in",
            Self::FcOut => "fc_out",
        }
    }

    /// The module's path inside a block (`attn.q_proj`, `mlp.fc_in`, …).
    pub fn path(self) -> &'static str {
        match self {
            Self::QProj => "attn.q_proj",
            Self::KProj => "attn.k_proj",
            Self::VProj => "attn.v_proj",
            Self::OProj => "attn.o_proj",
            Self::FcIn => "mlp.fc_in",
            Self::FcOut => "mlp.fc_out",
        }
    }

    /// The kind named `name` (`q_proj`, `fc_in`, …).
    pub fn from_name(name: &str) -> Option<LinearKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// `(out_features, in_features)` for `config`.
    pub fn dims(self, config: &ModelConfig) -> (usize, usize) {
        let (d, f) = (config.d_model, config.d_mlp);
        match self {
            Self::FcIn => (f, d),
            Self::FcOut => (d, f),
            _ => (d, d),
        }
    }
}

impl<T> Block<T> {
    /// The linear of that kind.
    pub fn linear(&self, kind: LinearKind) -> &Linear<T> {
        match kind {
            LinearKind::QProj => &self.q_proj,
            LinearKind::KProj => &self.k_proj,
            LinearKind::VProj => &self.v_proj,
            LinearKind::OProj => &self.o_proj,
            LinearKind::FcIn => &self.fc_in,
            LinearKind::FcOut => &self.fc_out,
        }
    }
}

/// Every parameter place of the model, typed. `T` is what a place holds: a position in the
/// canonical list (`usize`, see `tinygpt_model::Gpt`), a tensor, or nothing (`()`, when only the
/// walk matters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptParts<T> {
    /// Token embedding, `[vocab, d_model]`.
    pub token_embedding: T,
    /// Position embedding, `[context_length, d_model]`.
    pub position_embedding: T,
    /// The transformer blocks.
    pub blocks: Vec<Block<T>>,
    /// LayerNorm before the output head.
    pub ln_final: LayerNorm<T>,
}

impl<T> GptParts<T> {
    /// The architecture: calls `make` once per tensor in canonical order and keeps what it
    /// returns in that tensor's place. This is the one place the structure is written.
    pub fn build(config: &ModelConfig, mut make: impl FnMut(TensorDecl<'_>) -> T) -> Self {
        let (v, c, d, f) = (config.vocab_size, config.context_length, config.d_model, config.d_mlp);
        let std = 0.02;
        // Residual projections (o_proj, fc_out) are scaled down by the number of residual adds.
        let residual = 0.02 / (2.0 * config.n_layers as f64).sqrt();
        let make = &mut make;
        let token_embedding = make(TensorDecl {
            block: None,
            path: "token_embedding",
            shape: &[v, d],
            init: Init::Normal(std),
        });
        let position_embedding = make(TensorDecl {
            block: None,
            path: "position_embedding",
            shape: &[c, d],
            init: Init::Normal(std),
        });
        let blocks = (0..config.n_layers)
            .map(|i| {
                let b = Some(i);
                Block {
                    ln1: layer_norm(make, b, ["ln1.weight", "ln1.bias"], d),
                    q_proj: linear(make, b, ["attn.q_proj.weight", "attn.q_proj.bias"], [d, d], std),
                    k_proj: linear(make, b, ["attn.k_proj.weight", "attn.k_proj.bias"], [d, d], std),
                    v_proj: linear(make, b, ["attn.v_proj.weight", "attn.v_proj.bias"], [d, d], std),
                    o_proj: linear(make, b, ["attn.o_proj.weight", "attn.o_proj.bias"], [d, d], residual),
                    ln2: layer_norm(make, b, ["ln2.weight", "ln2.bias"], d),
                    fc_in: linear(make, b, ["mlp.fc_in.weight", "mlp.fc_in.bias"], [f, d], std),
                    fc_out: linear(make, b, ["mlp.fc_out.weight", "mlp.fc_out.bias"], [d, f], residual),
                }
            })
            .collect();
        let ln_final = layer_norm(make, None, ["ln_final.weight", "ln_final.bias"], d);
        GptParts { token_embedding, position_embedding, blocks, ln_final }
    }
}

/// A LayerNorm over `d` features: gain 1, shift 0.
fn layer_norm<T>(
    make: &mut impl FnMut(TensorDecl<'_>) -> T,
    block: Option<usize>,
    [weight, bias]: [&'static str; 2],
    d: usize,
) -> LayerNorm<T> {
    LayerNorm {
        weight: make(TensorDecl { block, path: weight, shape: &[d], init: Init::Ones }),
        bias: make(TensorDecl { block, path: bias, shape: &[d], init: Init::Zeros }),
    }
}

/// A linear `[out, in]` with weights `N(0, std)` and a zero bias.
fn linear<T>(
    make: &mut impl FnMut(TensorDecl<'_>) -> T,
    block: Option<usize>,
    [weight, bias]: [&'static str; 2],
    [out, inp]: [usize; 2],
    std: f64,
) -> Linear<T> {
    Linear {
        weight: make(TensorDecl { block, path: weight, shape: &[out, inp], init: Init::Normal(std) }),
        bias: make(TensorDecl { block, path: bias, shape: &[out], init: Init::Zeros }),
    }
}

impl GptParts<usize> {
    /// Each tensor's position in the canonical list.
    pub fn indices(config: &ModelConfig) -> Self {
        let mut next = 0;
        Self::build(config, |_| {
            next += 1;
            next - 1
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_the_canonical_names() {
        let config = ModelConfig::reference();
        let parts = GptParts::indices(&config);
        let specs = config.tensor_specs();
        assert_eq!(specs[parts.token_embedding].name, "token_embedding");
        assert_eq!(specs[parts.blocks[2].v_proj.bias].name, "blocks.2.attn.v_proj.bias");
        assert_eq!(specs[parts.blocks[3].fc_out.weight].name, "blocks.3.mlp.fc_out.weight");
        assert_eq!(specs[parts.blocks[3].fc_out.weight].shape, [128, 512]);
        assert_eq!(specs[parts.ln_final.bias].name, "ln_final.bias");
        for kind in LinearKind::ALL {
            let w = &specs[parts.blocks[1].linear(kind).weight];
            assert_eq!(w.name, format!("blocks.1.{}.weight", kind.path()));
            let (out, inp) = kind.dims(&config);
            assert_eq!(w.shape, [out, inp]);
            assert_eq!(LinearKind::from_name(kind.name()), Some(kind));
        }
    }
}
