//! Forward ops on the tape. Each computes its value with [`Tensor`] ops and records what
//! its derivative (in `backward.rs`) will need.

use tinygpt_tensor::{Backend, DropoutMask, Indices, Tensor};

use crate::tape::{Op, Tape, Var};

impl<B: Backend> Tape<B> {
    /// `a + b` (same shapes).
    pub fn add(&self, a: &Var<B>, b: &Var<B>) -> Var<B> {
        let value = a.value.add(&b.value);
        self.record(Op::Add { a: a.id, b: b.id }, value, &[a, b])
    }

    /// `alpha · x`.
    pub fn scale(&self, x: &Var<B>, alpha: f32) -> Var<B> {
        let value = x.value.scale(alpha);
        self.record(Op::Scale { x: x.id, alpha }, value, &[x])
    }

    /// `x` with another shape of the same element count (no copy).
    pub fn reshape(&self, x: &Var<B>, shape: &[usize]) -> Var<B> {
        let value = x.value.reshape(shape);
        self.record(Op::Reshape { x: x.id }, value, &[x])
    }

    /// `op(a) · op(b) (+ bias)`; see [`Tensor::matmul`].
    pub fn matmul(
        &self,
        a: &Var<B>,
        b: &Var<B>,
        bias: Option<&Var<B>>,
        trans_a: bool,
        trans_b: bool,
    ) -> Var<B> {
        let value = a.value.matmul(&b.value, bias.map(|v| &v.value), trans_a, trans_b);
        let op = Op::Matmul { a: a.id, b: b.id, bias: bias.map(|v| v.id), onto: None, trans_a, trans_b };
        match bias {
            Some(bias) => self.record(op, value, &[a, b, bias]),
            None => self.record(op, value, &[a, b]),
        }
    }

    /// A linear layer with PyTorch's weight layout: `x · weightᵀ + bias`, `weight` `[out, in]`.
    pub fn linear(&self, x: &Var<B>, weight: &Var<B>, bias: Option<&Var<B>>) -> Var<B> {
        self.matmul(x, weight, bias, false, true)
    }

    /// `onto + linear(x, weight, bias)`, `onto` shaped as the linear's output: a residual
    /// block's last layer added to the stream in the product's last pass
    /// ([`Tensor::matmul_onto`]) instead of in an `add` of its own. The same values and
    /// gradients as [`Tape::linear`] then [`Tape::add`].
    pub fn linear_onto(&self, onto: &Var<B>, x: &Var<B>, weight: &Var<B>, bias: Option<&Var<B>>) -> Var<B> {
        let value = x.value.matmul_onto(&weight.value, bias.map(|v| &v.value), false, true, &onto.value);
        let (a, b) = (x.id, weight.id);
        let op =
            Op::Matmul { a, b, bias: bias.map(|v| v.id), onto: Some(onto.id), trans_a: false, trans_b: true };
        match bias {
            Some(bias) => self.record(op, value, &[x, weight, bias, onto]),
            None => self.record(op, value, &[x, weight, onto]),
        }
    }

    /// Rows `start .. start + n` of `x` seen as `[rows, last]` → `[n, last]` (a copy; see
    /// [`Tensor::rows`]). Its gradient is `dout` in those rows and zeros elsewhere.
    pub fn rows(&self, x: &Var<B>, start: usize, n: usize) -> Var<B> {
        let value = x.value.rows(start, n);
        self.record(Op::Rows { x: x.id, start }, value, &[x])
    }

    /// Rows of `table` picked by `ids`.
    pub fn embedding(&self, table: &Var<B>, ids: &Indices<B>) -> Var<B> {
        let value = table.value.embedding(ids);
        self.record(Op::Embedding { table: table.id, ids: ids.clone() }, value, &[table])
    }

    /// LayerNorm over the last dimension: `(x - mean) · rstd · gamma + beta`.
    pub fn layer_norm(&self, x: &Var<B>, gamma: &Var<B>, beta: &Var<B>, eps: f32) -> Var<B> {
        let (value, saved) = x.value.layer_norm(&gamma.value, &beta.value, eps);
        let op = Op::LayerNorm { x: x.id, gamma: gamma.id, beta: beta.id, saved };
        self.record(op, value, &[x, gamma, beta])
    }

    /// GELU (tanh approximation), elementwise.
    pub fn gelu(&self, x: &Var<B>) -> Var<B> {
        let value = x.value.gelu();
        self.record(Op::Gelu { x: x.id }, value, &[x])
    }

    /// Causal multi-head self-attention; `q`, `k`, `v` are `[batch, seq, channels]`.
    pub fn attention(&self, q: &Var<B>, k: &Var<B>, v: &Var<B>, heads: usize) -> Var<B> {
        self.attention_with_dropout(q, k, v, heads, None)
    }

    /// [`Tape::attention`] with the attention probabilities dropped out by `dropout`.
    pub fn attention_with_dropout(
        &self,
        q: &Var<B>,
        k: &Var<B>,
        v: &Var<B>,
        heads: usize,
        dropout: Option<DropoutMask>,
    ) -> Var<B> {
        let (value, saved) = q.value.attention_for_training(&k.value, &v.value, heads, dropout);
        let op = Op::Attention { q: q.id, k: k.id, v: v.id, saved, heads, dropout };
        self.record(op, value, &[q, k, v])
    }

    /// Dropout of `x` with `mask` (inverted: kept values scaled by `mask.scale()`).
    pub fn dropout(&self, x: &Var<B>, mask: DropoutMask) -> Var<B> {
        let value = x.value.dropout(&mask);
        self.record(Op::Dropout { x: x.id, mask }, value, &[x])
    }

    /// `residual + dropout(x)`, fused (a block's output dropped out before its residual add).
    pub fn dropout_add(&self, residual: &Var<B>, x: &Var<B>, mask: DropoutMask) -> Var<B> {
        let value = residual.value.dropout_add(&x.value, &mask);
        self.record(Op::DropoutAdd { residual: residual.id, x: x.id, mask }, value, &[residual, x])
    }

    /// Mean softmax cross-entropy of `logits` against `targets` → `[1]`.
    pub fn cross_entropy(&self, logits: &Var<B>, targets: &Indices<B>) -> Var<B> {
        let (value, saved) = logits.value.cross_entropy_for_training(targets);
        self.record(Op::CrossEntropy { logits: logits.id, targets: targets.clone(), saved }, value, &[logits])
    }

    /// A constant on the tape (no gradient), e.g. an input batch.
    pub fn constant(&self, value: &Tensor<B>) -> Var<B> {
        self.leaf(value, false)
    }
}
