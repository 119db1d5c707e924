//! The forward pass. Shapes: B = batch, T = sequence, C = d_model, F = d_mlp, V = 256.

use std::cell::RefCell;

use tinygpt_autograd::{Tape, Var};
use tinygpt_tensor::{Backend, Indices, Rng};

use crate::dropout::{DropoutDraw, Site};
use crate::error::ModelError;
use crate::head_loss::head_cross_entropy;
use crate::lora::Lora;
use crate::params::Params;
use crate::ModelConfig;
use crate::{Block, GptParts, LayerNorm, Linear, LinearKind};

/// LayerNorm epsilon, fixed by the model contract.
pub const LN_EPS: f32 = 1e-5;

/// A byte-level GPT: its config, its parameters and which of them train.
#[derive(Clone, Debug)]
pub struct Gpt<B: Backend> {
    config: ModelConfig,
    params: Params<B>,
    /// Per parameter (canonical order): false freezes it (no gradient is computed).
    trainable: Vec<bool>,
    /// Each parameter's position in the canonical list, by its typed place (built once).
    parts: GptParts<usize>,
    /// The most multiply-adds one head product of the training loss may take (None: the
    /// head whole); see [`crate::head_loss`].
    head_chunk_budget: Option<usize>,
}

/// Adds a learned term to chosen linears' outputs (LoRA: `(alpha/r)·(x·Aᵀ)·Bᵀ`), composed
/// from tape ops so it runs, and back-propagates, on every backend.
pub trait LinearDelta<B: Backend> {
    /// `y` (`kind`'s output in block `layer`, `[B, T, out]`) plus the term for its input `x`
    /// (`[B, T, in]`), or `None` where this linear is left as it is.
    fn add_onto(
        &self,
        tape: &Tape<B>,
        layer: usize,
        kind: LinearKind,
        x: &Var<B>,
        y: &Var<B>,
    ) -> Option<Var<B>>;
}

/// One forward pass on a tape: the logits and the tape vars of every parameter
/// (canonical order), whose gradients [`Tape::backward`] fills.
pub struct Forward<B: Backend> {
    /// `[B, T, V]`.
    pub logits: Var<B>,
    /// The parameters as tape variables, in canonical order.
    pub params: Vec<Var<B>>,
}

impl<B: Backend> Gpt<B> {
    /// A model of `config` with these parameters (checked against the config).
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
        let parts = GptParts::indices(&config);
        Ok(Gpt { config, params, trainable, parts, head_chunk_budget: None })
    }

    /// A freshly initialised model (see [`Params::init`]); the config is validated first.
    pub fn init(backend: &B, config: ModelConfig, rng: &mut Rng) -> Result<Self, ModelError> {
        config.validate()?;
        let params = Params::init(backend, &config, rng);
        Self::new(config, params)
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The model's parameters.
    pub fn params(&self) -> &Params<B> {
        &self.params
    }

    /// Each parameter's position in the canonical list ([`Params::tensors`]), by place.
    pub fn parts(&self) -> &GptParts<usize> {
        &self.parts
    }

    /// Which parameters train (one flag per tensor, canonical order).
    pub fn trainable(&self) -> &[bool] {
        &self.trainable
    }

    /// Cuts the training loss's head into row chunks of at most `multiply_adds` each (None:
    /// the head whole, the default): for a caller that can give a step up only between ops,
    /// as the worker does for `pause` and `stop` ([`crate::head_loss`]).
    pub fn set_head_chunk_budget(&mut self, multiply_adds: Option<usize>) {
        self.head_chunk_budget = multiply_adds;
    }

    /// The head's chunk budget ([`Gpt::set_head_chunk_budget`]).
    pub fn head_chunk_budget(&self) -> Option<usize> {
        self.head_chunk_budget
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
        let mut params = Vec::with_capacity(self.params.len());
        self.leaves_into(tape, &mut params);
        let logits = self.forward_with_dropout(tape, &params, tokens, batch, seq, draw);
        Forward { logits, params }
    }

    /// Puts the parameters on `tape` as leaves (frozen ones without gradient), in canonical
    /// order, into `vars` (emptied first): [`Gpt::forward_dropout`]'s vars, in a list a
    /// training loop keeps from step to step.
    pub fn leaves_into(&self, tape: &Tape<B>, vars: &mut Vec<Var<B>>) {
        vars.clear();
        vars.extend(self.params.tensors().iter().zip(&self.trainable).map(|(t, &train)| tape.leaf(t, train)));
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
        self.forward_adapted(tape, params, tokens, batch, seq, draw, None)
    }

    /// The forward pass over caller-provided parameter vars (canonical order), dropping out
    /// as in [`Gpt::forward_dropout`], with `delta`'s terms added to the linears it names.
    /// Returns logits `[B, T, V]`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_adapted(
        &self,
        tape: &Tape<B>,
        params: &[Var<B>],
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
        delta: Option<&dyn LinearDelta<B>>,
    ) -> Var<B> {
        let x = self.hidden(tape, params, tokens, batch, seq, draw, delta);
        // Tied output head: logits = x · wteᵀ → [B, T, V].
        tape.matmul(&x, &params[self.parts.token_embedding], None, false, true)
    }

    /// [`Gpt::forward_adapted`] up to the head: the final LayerNorm's output `[B, T, C]`.
    #[allow(clippy::too_many_arguments)]
    fn hidden(
        &self,
        tape: &Tape<B>,
        params: &[Var<B>],
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
        delta: Option<&dyn LinearDelta<B>>,
    ) -> Var<B> {
        let c = &self.config;
        let draw = draw.filter(|_| c.dropout > 0.0 && tape.is_recording());
        let mask = |site: Site, row_elements: usize| draw.map(|d| d.mask(c.dropout, site, row_elements));
        let width = seq * c.d_model;
        assert!(seq >= 1 && seq <= c.context_length, "sequence {seq} outside 1..={}", c.context_length);
        assert_eq!(tokens.len(), batch * seq, "tokens for [{batch}, {seq}]");
        assert_eq!(params.len(), self.params.len(), "one var per parameter");
        let backend = self.params.tensors()[0].backend();
        let parts = &self.parts;

        // Embeddings: x[b, t] = wte[token] + wpe[t]  → [B, T, C].
        let positions = positions(backend, batch, seq);
        let tok = tape.embedding(&params[parts.token_embedding], tokens);
        let pos = tape.embedding(&params[parts.position_embedding], &positions);
        let mut x = tape.reshape(&tape.add(&tok, &pos), &[batch, seq, c.d_model]);
        if let Some(m) = mask(Site::Embeddings, width) {
            x = tape.dropout(&x, m);
        }

        for (i, block) in parts.blocks.iter().enumerate() {
            let layer = BlockVars { tape, params, block, layer: i, delta };
            // Attention: x += o_proj(attn(q, k, v of ln1(x))).
            let h = layer.layer_norm(&x, &block.ln1);
            let q = layer.linear(&h, LinearKind::QProj);
            let k = layer.linear(&h, LinearKind::KProj);
            let v = layer.linear(&h, LinearKind::VProj);
            let probs_mask = mask(Site::AttentionProbs(i), c.n_heads * seq * seq);
            let a = tape.attention_with_dropout(&q, &k, &v, c.n_heads, probs_mask);
            x = match mask(Site::AttentionOut(i), width) {
                Some(m) => tape.dropout_add(&x, &layer.linear(&a, LinearKind::OProj), m),
                None => layer.linear_onto(&x, &a, LinearKind::OProj),
            };
            // MLP: x += fc_out(gelu(fc_in(ln2(x)))), [B, T, F] in between.
            let h = layer.layer_norm(&x, &block.ln2);
            let f = tape.gelu(&layer.linear(&h, LinearKind::FcIn));
            x = match mask(Site::MlpOut(i), width) {
                Some(m) => tape.dropout_add(&x, &layer.linear(&f, LinearKind::FcOut), m),
                None => layer.linear_onto(&x, &f, LinearKind::FcOut),
            };
        }

        let LayerNorm { weight, bias } = &parts.ln_final;
        tape.layer_norm(&x, &params[*weight], &params[*bias], LN_EPS)
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
        let fwd = self.forward(tape, inputs, batch, seq);
        (tape.cross_entropy(&fwd.logits, targets), fwd)
    }

    /// The training loss, the one place that adds an adapter or not: mean next-token
    /// cross-entropy of `inputs` against `targets` (`[batch, seq]`, the targets as host ids
    /// because the head takes them a chunk at a time: [`head_cross_entropy`]) with `adapter`'s
    /// term on its linears (or the model alone), dropping out as in [`Gpt::forward_dropout`].
    /// `trained` (emptied first; a list a caller keeps from step to step, so a steady step
    /// allocates nothing) gets the vars of what trains: the adapter's (the base going on the
    /// tape frozen, without gradient buffers), or the model's parameters (frozen ones without
    /// gradient).
    #[allow(clippy::too_many_arguments)]
    pub fn loss_into(
        &self,
        tape: &Tape<B>,
        adapter: Option<&Lora<B>>,
        inputs: &Indices<B>,
        targets: &[u32],
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
        trained: &mut Vec<Var<B>>,
    ) -> Var<B> {
        let table = self.parts.token_embedding;
        match adapter {
            Some(adapter) => {
                let base: Vec<Var<B>> = self.params.tensors().iter().map(|t| tape.leaf(t, false)).collect();
                trained.clear();
                trained.extend(adapter.tensors().iter().map(|t| tape.leaf(t, true)));
                let delta = adapter.delta(trained);
                let x = self.hidden(tape, &base, inputs, batch, seq, draw, Some(&delta));
                head_cross_entropy(tape, &x, &base[table], targets, self.head_chunk_budget)
            }
            None => {
                self.leaves_into(tape, trained);
                let x = self.hidden(tape, trained, inputs, batch, seq, draw, None);
                head_cross_entropy(tape, &x, &trained[table], targets, self.head_chunk_budget)
            }
        }
    }
}

thread_local! {
    /// [`positions`]' list, kept: a steady training step allocates nothing.
    static POSITIONS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// The position of every token of a `[batch, seq]` batch: `0..seq` once per row.
fn positions<B: Backend>(backend: &B, batch: usize, seq: usize) -> Indices<B> {
    POSITIONS.with_borrow_mut(|list| {
        list.clear();
        list.extend((0..batch).flat_map(|_| 0..seq as u32));
        Indices::new(backend, list)
    })
}

/// One block's parameter vars on a tape, and the adapter terms for its linears.
struct BlockVars<'a, B: Backend> {
    tape: &'a Tape<B>,
    params: &'a [Var<B>],
    block: &'a Block<usize>,
    layer: usize,
    delta: Option<&'a dyn LinearDelta<B>>,
}

impl<B: Backend> BlockVars<'_, B> {
    fn layer_norm(&self, x: &Var<B>, norm: &LayerNorm<usize>) -> Var<B> {
        self.tape.layer_norm(x, &self.params[norm.weight], &self.params[norm.bias], LN_EPS)
    }

    /// `x · Wᵀ + b`, plus the adapter's term where there is one.
    fn linear(&self, x: &Var<B>, kind: LinearKind) -> Var<B> {
        let Linear { weight, bias } = self.block.linear(kind);
        let y = self.tape.linear(x, &self.params[*weight], Some(&self.params[*bias]));
        self.adapted(x, y, kind)
    }

    /// `stream + linear(x)`, added in the product's last pass ([`Tape::linear_onto`]: a
    /// whole pass over the stream fewer, twice a block, with the same bits).
    fn linear_onto(&self, stream: &Var<B>, x: &Var<B>, kind: LinearKind) -> Var<B> {
        let Linear { weight, bias } = self.block.linear(kind);
        let y = self.tape.linear_onto(stream, x, &self.params[*weight], Some(&self.params[*bias]));
        self.adapted(x, y, kind)
    }

    /// `y` plus the adapter's term for `kind`'s input `x`, where it has one.
    fn adapted(&self, x: &Var<B>, y: Var<B>, kind: LinearKind) -> Var<B> {
        self.delta.and_then(|d| d.add_onto(self.tape, self.layer, kind, x, &y)).unwrap_or(y)
    }
}
