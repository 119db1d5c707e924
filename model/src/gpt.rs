//! The forward pass. Shapes: B = batch, T = sequence, C = d_model, F = d_mlp, V = 256.

use tinygpt_autograd::{Tape, Var};
use tinygpt_tensor::{Backend, Indices, Rng};

use crate::config::ModelConfig;
use crate::dropout::{DropoutDraw, Site};
use crate::error::ModelError;
use crate::params::Params;

/// LayerNorm epsilon, fixed by the model contract.
pub const LN_EPS: f32 = 1e-5;

/// A byte-level GPT: its config, its parameters and which of them train.
#[derive(Clone, Debug)]
pub struct Gpt<B: Backend> {
    config: ModelConfig,
    params: Params<B>,
    /// Per parameter (canonical order): false freezes it (no gradient is computed).
    trainable: Vec<bool>,
}

/// One forward pass on a tape: the logits and the tape vars of every parameter
/// (canonical order), whose gradients [`Tape::backward`] fills.
pub struct Forward<B: Backend> {
    /// `[B, T, V]`.
    pub logits: Var<B>,
    pub params: Vec<Var<B>>,
}

impl<B: Backend> Gpt<B> {
    pub fn new(config: ModelConfig, params: Params<B>) -> Result<Self, ModelError> {
        config.validate()?;
        let expected = config.tensor_specs();
        if params.specs() != expected.as_slice() {
            return Err(ModelError::InvalidConfig {
                field: "tensors",
                reason: "the parameters do not match the config's tensor table".into(),
            });
        }
        let trainable = vec![true; params.len()];
        Ok(Gpt { config, params, trainable })
    }

    /// A freshly initialised model (see [`Params::init`]); the config is validated first.
    pub fn init(backend: &B, config: ModelConfig, rng: &mut Rng) -> Result<Self, ModelError> {
        config.validate()?;
        let params = Params::init(backend, &config, rng);
        Self::new(config, params)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn params(&self) -> &Params<B> {
        &self.params
    }

    pub fn trainable(&self) -> &[bool] {
        &self.trainable
    }

    /// Freezes (`false`) or unfreezes the named parameter. Unknown names are an error.
    pub fn set_trainable(&mut self, name: &str, trainable: bool) -> Result<(), ModelError> {
        let i = self.params.index_of(name).ok_or_else(|| ModelError::InvalidConfig {
            field: "tensors",
            reason: format!("no parameter named {name}"),
        })?;
        self.trainable[i] = trainable;
        Ok(())
    }

    /// Logits for `tokens` (`[batch, seq]`, row-major, `seq <= context_length`), with the
    /// model's parameters put on the tape as leaves (frozen ones without gradient).
    pub fn forward(&self, tape: &Tape<B>, tokens: &Indices<B>, batch: usize, seq: usize) -> Forward<B> {
        self.forward_dropout(tape, tokens, batch, seq, None)
    }

    /// [`Gpt::forward`] of a training pass that drops out with the config's `dropout`
    /// (with `draw`'s masks; none when `draw` is `None`, `dropout` is 0 or the tape does
    /// not record). See [`crate::dropout`].
    pub fn forward_dropout(
        &self,
        tape: &Tape<B>,
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> Forward<B> {
        let params: Vec<Var<B>> = self
            .params
            .tensors()
            .iter()
            .zip(&self.trainable)
            .map(|(t, &train)| tape.leaf(t, train))
            .collect();
        let logits = self.forward_with_dropout(tape, &params, tokens, batch, seq, draw);
        Forward { logits, params }
    }

    /// The forward pass over caller-provided parameter vars (canonical order), e.g. weights
    /// wrapped by adapters or perturbed by a gradient checker. Returns logits `[B, T, V]`.
    pub fn forward_with(
        &self,
        tape: &Tape<B>,
        params: &[Var<B>],
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
    ) -> Var<B> {
        self.forward_with_dropout(tape, params, tokens, batch, seq, None)
    }

    /// [`Gpt::forward_with`] with dropout as in [`Gpt::forward_dropout`].
    pub fn forward_with_dropout(
        &self,
        tape: &Tape<B>,
        params: &[Var<B>],
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> Var<B> {
        let c = &self.config;
        let draw = draw.filter(|_| c.dropout > 0.0 && tape.is_recording());
        let mask = |site: Site, row_elements: usize| draw.map(|d| d.mask(c.dropout, site, row_elements));
        let width = seq * c.d_model;
        assert!(seq >= 1 && seq <= c.context_length, "sequence {seq} outside 1..={}", c.context_length);
        assert_eq!(tokens.len(), batch * seq, "tokens for [{batch}, {seq}]");
        assert_eq!(params.len(), self.params.len(), "one var per parameter");
        let backend = self.params.tensors()[0].backend();
        let p = |name: &str| &params[self.params.index_of(name).expect("canonical name")];

        // Embeddings: x[b, t] = wte[token] + wpe[t]  → [B, T, C].
        let positions: Vec<u32> = (0..batch).flat_map(|_| 0..seq as u32).collect();
        let positions = Indices::new(backend, &positions);
        let tok = tape.embedding(p("token_embedding"), tokens);
        let pos = tape.embedding(p("position_embedding"), &positions);
        let mut x = tape.reshape(&tape.add(&tok, &pos), &[batch, seq, c.d_model]);
        if let Some(m) = mask(Site::Embeddings, width) {
            x = tape.dropout(&x, m);
        }

        for i in 0..c.n_layers {
            let w = |suffix: &str| p(&format!("blocks.{i}.{suffix}"));
            // Attention: x += o_proj(attn(q, k, v of ln1(x))).
            let h = tape.layer_norm(&x, w("ln1.weight"), w("ln1.bias"), LN_EPS);
            let q = tape.linear(&h, w("attn.q_proj.weight"), Some(w("attn.q_proj.bias")));
            let k = tape.linear(&h, w("attn.k_proj.weight"), Some(w("attn.k_proj.bias")));
            let v = tape.linear(&h, w("attn.v_proj.weight"), Some(w("attn.v_proj.bias")));
            let probs_mask = mask(Site::AttentionProbs(i), c.n_heads * seq * seq);
            let a = tape.attention_with_dropout(&q, &k, &v, c.n_heads, probs_mask);
            let o = tape.linear(&a, w("attn.o_proj.weight"), Some(w("attn.o_proj.bias")));
            x = match mask(Site::AttentionOut(i), width) {
                Some(m) => tape.dropout_add(&x, &o, m),
                None => tape.add(&x, &o),
            };
            // MLP: x += fc_out(gelu(fc_in(ln2(x)))), [B, T, F] in between.
            let h = tape.layer_norm(&x, w("ln2.weight"), w("ln2.bias"), LN_EPS);
            let f = tape.gelu(&tape.linear(&h, w("mlp.fc_in.weight"), Some(w("mlp.fc_in.bias"))));
            let o = tape.linear(&f, w("mlp.fc_out.weight"), Some(w("mlp.fc_out.bias")));
            x = match mask(Site::MlpOut(i), width) {
                Some(m) => tape.dropout_add(&x, &o, m),
                None => tape.add(&x, &o),
            };
        }

        let x = tape.layer_norm(&x, p("ln_final.weight"), p("ln_final.bias"), LN_EPS);
        // Tied output head: logits = x · wteᵀ → [B, T, V].
        tape.matmul(&x, p("token_embedding"), None, false, true)
    }

    /// Mean next-token cross-entropy of `inputs` against `targets` (both `[batch, seq]`),
    /// with the forward pass that produced it.
    pub fn loss(
        &self,
        tape: &Tape<B>,
        inputs: &Indices<B>,
        targets: &Indices<B>,
        batch: usize,
        seq: usize,
    ) -> (Var<B>, Forward<B>) {
        self.loss_dropout(tape, inputs, targets, batch, seq, None)
    }

    /// [`Gpt::loss`] of a training pass, dropping out as in [`Gpt::forward_dropout`].
    pub fn loss_dropout(
        &self,
        tape: &Tape<B>,
        inputs: &Indices<B>,
        targets: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> (Var<B>, Forward<B>) {
        let fwd = self.forward_dropout(tape, inputs, batch, seq, draw);
        let loss = tape.cross_entropy(&fwd.logits, targets);
        (loss, fwd)
    }
}
