//! `Backend for Checked<B>`: per op, the operands it reads and writes and their rules; the
//! work itself is always `B`'s.

use std::future::Future;

use tinygpt_tensor::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionOut, AttentionSaved, Backend, CachedAttentionDims,
    CopyRange, CrossEntropySaved, DropoutMask, LayerNormGrads, LayerNormOut, MatmulDims, TensorError,
};

use crate::operand::Operand;
use crate::rule::Rule;
use crate::Checked;

type In<S> = Operand<S>;

impl<B: Backend> Backend for Checked<B> {
    type Storage = B::Storage;
    type Indices = B::Indices;

    fn name(&self) -> String {
        format!("checked {}", self.inner().name())
    }

    // Memory: uploads are the caller's data, passed on as given; the ops that use them check them.
    fn max_tensor_len(&self) -> usize {
        self.inner().max_tensor_len()
    }
    fn zeros(&self, len: usize) -> Self::Storage {
        self.inner().zeros(len)
    }
    fn upload(&self, data: &[f32]) -> Self::Storage {
        self.inner().upload(data)
    }
    fn upload_indices(&self, data: &[u32]) -> Self::Indices {
        self.inner().upload_indices(data)
    }
    fn read(&self, src: &Self::Storage) -> impl Future<Output = Result<Vec<f32>, TensorError>> {
        let (verdict, read) = (self.verdict(), self.inner().read(src));
        async move {
            verdict?;
            read.await
        }
    }
    fn read_into(
        &self,
        src: &Self::Storage,
        dst: &mut [f32],
    ) -> impl Future<Output = Result<(), TensorError>> {
        let (verdict, read) = (self.verdict(), self.inner().read_into(src, dst));
        async move {
            verdict?;
            read.await
        }
    }
    fn copy(
        &self,
        src: &Self::Storage,
        src_offset: usize,
        dst: &Self::Storage,
        dst_offset: usize,
        len: usize,
    ) {
        self.op(
            "copy",
            || format!("{len} values from offset {src_offset} to offset {dst_offset}"),
            vec![In::range("src", src, src_offset, len)],
            |b| b.copy(src, src_offset, dst, dst_offset, len),
            |_| vec![In::range("dst", dst, dst_offset, len)],
        )
    }
    /// One op over all the ranges, so `B`'s batched copy (one dispatch for several on a GPU)
    /// stays in use under checking.
    fn copy_many(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        let ranges = |which: fn(&CopyRange<'_, Self::Storage>) -> In<Self::Storage>| {
            copies.iter().map(which).collect()
        };
        self.op(
            "copy_many",
            || format!("{} ranges, {} values", copies.len(), copies.iter().map(|c| c.len).sum::<usize>()),
            ranges(|c| In::range("src", c.src, c.src_offset, c.len)),
            |b| b.copy_many(copies),
            |_| ranges(|c| In::range("dst", c.dst, c.dst_offset, c.len)),
        )
    }
    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        let flush = self.inner().flush();
        async move {
            flush.await?;
            self.verdict()
        }
    }

    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage {
        let ins = vec![In::finite("a", a, len), In::finite("b", b, len)];
        self.op(
            "add",
            || format!("len {len}"),
            ins,
            |be| be.add(a, b, len),
            |y| vec![In::finite("out", y, len)],
        )
    }
    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage {
        let ins = vec![In::finite("a", a, len)];
        let shape = || format!("len {len}, alpha {alpha}");
        self.op("scale", shape, ins, |b| b.scale(a, alpha, len), |y| vec![In::finite("out", y, len)])
    }
    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        let ins = vec![In::finite("x", x, rows * cols)];
        let shape = || format!("rows {rows}, cols {cols}");
        self.op("sum_rows", shape, ins, |b| b.sum_rows(x, rows, cols), |y| vec![In::finite("out", y, cols)])
    }
    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        let ins = vec![In::finite("x", x, len)];
        let outs = |y: &Self::Storage| vec![In::ruled("out", y, 1, Rule::NonNegative)];
        self.op("sum_squares", || format!("len {len}"), ins, |b| b.sum_squares(x, len), outs)
    }

    fn dropout(&self, x: &Self::Storage, mask: &DropoutMask, len: usize) -> Self::Storage {
        let ins = vec![In::finite("x", x, len)];
        let shape = || format!("len {len}, {}", mask_shape(mask));
        self.op("dropout", shape, ins, |b| b.dropout(x, mask, len), |y| vec![In::finite("out", y, len)])
    }
    fn dropout_add(
        &self,
        residual: &Self::Storage,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
    ) -> Self::Storage {
        let ins = vec![In::finite("residual", residual, len), In::finite("x", x, len)];
        let shape = || format!("len {len}, {}", mask_shape(mask));
        let run = |b: &B| b.dropout_add(residual, x, mask, len);
        self.op("dropout_add", shape, ins, run, |y| vec![In::finite("out", y, len)])
    }

    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        let MatmulDims { m, k, n, .. } = dims;
        let mut ins = vec![In::finite("a", a, m * k), In::finite("b", b, k * n)];
        ins.extend(bias.map(|bias| In::finite("bias", bias, n)));
        let shape = || matmul_shape(&dims);
        self.op("matmul", shape, ins, |be| be.matmul(a, b, bias, dims), |y| vec![In::finite("out", y, m * n)])
    }
    fn matmul_sum_rows(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
    ) -> (Self::Storage, Self::Storage) {
        let MatmulDims { m, k, n, .. } = dims;
        let ins = vec![In::finite("a", a, m * k), In::finite("b", b, k * n)];
        let shape = || matmul_shape(&dims);
        let outs = |(y, sums): &(Self::Storage, Self::Storage)| {
            vec![In::finite("out", y, m * n), In::finite("sums", sums, m)]
        };
        self.op("matmul_sum_rows", shape, ins, |be| be.matmul_sum_rows(a, b, dims), outs)
    }
    fn matmul_onto(
        &self,
        onto: &Self::Storage,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        let MatmulDims { m, k, n, .. } = dims;
        let mut ins =
            vec![In::finite("onto", onto, m * n), In::finite("a", a, m * k), In::finite("b", b, k * n)];
        ins.extend(bias.map(|bias| In::finite("bias", bias, n)));
        let shape = || matmul_shape(&dims);
        let run = |be: &B| be.matmul_onto(onto, a, b, bias, dims);
        self.op("matmul_onto", shape, ins, run, |y| vec![In::finite("out", y, m * n)])
    }
    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage {
        let ins = vec![In::whole("table", table)];
        let shape = || format!("n {n}, dim {dim}");
        self.op(
            "embedding",
            shape,
            ins,
            |b| b.embedding(table, ids, n, dim),
            |y| vec![In::finite("out", y, n * dim)],
        )
    }
    fn embedding_backward(
        &self,
        dout: &Self::Storage,
        ids: &Self::Indices,
        n: usize,
        table_rows: usize,
        dim: usize,
    ) -> Self::Storage {
        let ins = vec![In::finite("dout", dout, n * dim)];
        let shape = || format!("n {n}, table_rows {table_rows}, dim {dim}");
        let run = |b: &B| b.embedding_backward(dout, ids, n, table_rows, dim);
        self.op("embedding_backward", shape, ins, run, |y| vec![In::finite("dtable", y, table_rows * dim)])
    }

    fn layer_norm(
        &self,
        x: &Self::Storage,
        gamma: &Self::Storage,
        beta: &Self::Storage,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> LayerNormOut<Self::Storage> {
        let ins = vec![
            In::finite("x", x, rows * dim),
            In::finite("gamma", gamma, dim),
            In::finite("beta", beta, dim),
        ];
        let shape = || format!("rows {rows}, dim {dim}, eps {eps}");
        let run = |b: &B| b.layer_norm(x, gamma, beta, rows, dim, eps);
        let outs = |y: &LayerNormOut<Self::Storage>| {
            vec![
                In::finite("out", &y.out, rows * dim),
                In::finite("mean", &y.mean, rows),
                In::ruled("rstd", &y.rstd, rows, Rule::Positive),
            ]
        };
        self.op("layer_norm", shape, ins, run, outs)
    }
    fn layer_norm_backward(
        &self,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<Self::Storage> {
        let ins = layer_norm_backward_ins(dout, x, gamma, saved, rows, dim);
        let shape = || format!("rows {rows}, dim {dim}");
        let run = |b: &B| b.layer_norm_backward(dout, x, gamma, saved, rows, dim);
        self.op("layer_norm_backward", shape, ins, run, |g| layer_norm_grads(g, rows, dim))
    }
    fn layer_norm_backward_onto(
        &self,
        onto: &Self::Storage,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<Self::Storage> {
        let mut ins = vec![In::finite("onto", onto, rows * dim)];
        ins.extend(layer_norm_backward_ins(dout, x, gamma, saved, rows, dim));
        let shape = || format!("rows {rows}, dim {dim}");
        let run = |b: &B| b.layer_norm_backward_onto(onto, dout, x, gamma, saved, rows, dim);
        self.op("layer_norm_backward_onto", shape, ins, run, |g| layer_norm_grads(g, rows, dim))
    }

    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        let ins = vec![In::finite("x", x, len)];
        self.op("gelu", || format!("len {len}"), ins, |b| b.gelu(x, len), |y| vec![In::finite("out", y, len)])
    }
    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage {
        let ins = vec![In::finite("x", x, len), In::finite("dout", dout, len)];
        let run = |b: &B| b.gelu_backward(x, dout, len);
        self.op("gelu_backward", || format!("len {len}"), ins, run, |y| vec![In::finite("dx", y, len)])
    }

    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionOut<Self::Storage> {
        let (values, scores) = attention_sizes(&dims);
        let ins = attention_inputs(None, q, k, v, values);
        let outs = |y: &AttentionOut<Self::Storage>| {
            vec![In::finite("out", &y.out, values), In::ruled("probs", &y.probs, scores, Rule::Probability)]
        };
        self.op("attention", || attention_shape(&dims), ins, |b| b.attention(q, k, v, dims), outs)
    }
    fn cached_attention(
        &self,
        q: &Self::Storage,
        k_cache: &Self::Storage,
        v_cache: &Self::Storage,
        dims: CachedAttentionDims,
    ) -> Self::Storage {
        let c = dims.channels();
        // Only the written cache rows are read (the rest may hold anything).
        let written = (dims.past + dims.rows) * c;
        let ins = vec![
            In::finite("q", q, dims.rows * c),
            In::finite("k_cache", k_cache, written),
            In::finite("v_cache", v_cache, written),
        ];
        let shape = || format!("{dims:?}");
        let run = |b: &B| b.cached_attention(q, k_cache, v_cache, dims);
        self.op("cached_attention", shape, ins, run, |y| vec![In::finite("out", y, dims.rows * c)])
    }
    fn attention_backward(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        probs: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage> {
        let (values, scores) = attention_sizes(&dims);
        let mut ins = attention_inputs(Some(dout), q, k, v, values);
        ins.push(In::ruled("probs", probs, scores, Rule::Probability));
        let run = |b: &B| b.attention_backward(dout, q, k, v, probs, dims);
        let outs = |g: &AttentionGrads<Self::Storage>| attention_grads(g, values);
        self.op("attention_backward", || attention_shape(&dims), ins, run, outs)
    }

    // The pair training uses: `saved` is opaque (probabilities or log-sum-exps, the inner
    // backend's choice), so only its values are checked, not its length.
    fn attention_for_training(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionSaved<Self::Storage> {
        let (values, _) = attention_sizes(&dims);
        let ins = attention_inputs(None, q, k, v, values);
        let outs = |y: &AttentionSaved<Self::Storage>| {
            vec![In::finite("out", &y.out, values), In::whole("saved", &y.saved)]
        };
        let run = |b: &B| b.attention_for_training(q, k, v, dims);
        self.op("attention_for_training", || attention_shape(&dims), ins, run, outs)
    }
    fn attention_backward_saved(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        saved: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage> {
        let (values, _) = attention_sizes(&dims);
        let mut ins = attention_inputs(Some(dout), q, k, v, values);
        ins.push(In::whole("saved", saved));
        let run = |b: &B| b.attention_backward_saved(dout, q, k, v, saved, dims);
        let outs = |g: &AttentionGrads<Self::Storage>| attention_grads(g, values);
        self.op("attention_backward_saved", || attention_shape(&dims), ins, run, outs)
    }

    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        let ins = vec![In::finite("logits", logits, rows * vocab)];
        let shape = || format!("rows {rows}, vocab {vocab}");
        let run = |b: &B| b.cross_entropy(logits, targets, rows, vocab);
        self.op("cross_entropy", shape, ins, run, |y| vec![In::ruled("loss", y, 1, Rule::NonNegative)])
    }
    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        let ins = vec![In::finite("logits", logits, rows * vocab), In::finite("dloss", dloss, 1)];
        let shape = || format!("rows {rows}, vocab {vocab}");
        let run = |b: &B| b.cross_entropy_backward(logits, targets, dloss, rows, vocab);
        self.op("cross_entropy_backward", shape, ins, run, |y| vec![In::finite("dlogits", y, rows * vocab)])
    }

    // The pair training uses: `saved` is opaque (the inner backend's row statistics, or
    // nothing), so only its values are checked, not its length.
    fn cross_entropy_for_training(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> CrossEntropySaved<Self::Storage> {
        let ins = vec![In::finite("logits", logits, rows * vocab)];
        let shape = || format!("rows {rows}, vocab {vocab}");
        let run = |b: &B| b.cross_entropy_for_training(logits, targets, rows, vocab);
        let outs = |y: &CrossEntropySaved<Self::Storage>| {
            let mut outs = vec![In::ruled("loss", &y.loss, 1, Rule::NonNegative)];
            outs.extend(y.saved.iter().map(|saved| In::whole("saved", saved)));
            outs
        };
        self.op("cross_entropy_for_training", shape, ins, run, outs)
    }
    fn cross_entropy_backward_saved(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        saved: Option<&Self::Storage>,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        let mut ins = vec![In::finite("logits", logits, rows * vocab), In::finite("dloss", dloss, 1)];
        ins.extend(saved.map(|saved| In::whole("saved", saved)));
        let shape = || format!("rows {rows}, vocab {vocab}");
        let run = |b: &B| b.cross_entropy_backward_saved(logits, targets, saved, dloss, rows, vocab);
        self.op("cross_entropy_backward_saved", shape, ins, run, |y| {
            vec![In::finite("dlogits", y, rows * vocab)]
        })
    }

    fn adamw(
        &self,
        param: &Self::Storage,
        grad: &Self::Storage,
        m: &Self::Storage,
        v: &Self::Storage,
        grad_sumsq: &Self::Storage,
        hp: &AdamWStep,
        len: usize,
    ) {
        let ins = vec![
            In::finite("param", param, len),
            In::finite("grad", grad, len),
            In::finite("m", m, len),
            In::ruled("v", v, len, Rule::NonNegative),
            In::ruled("grad_sumsq", grad_sumsq, 1, Rule::NonNegative),
        ];
        let run = |b: &B| b.adamw(param, grad, m, v, grad_sumsq, hp, len);
        let outs = |_: &()| {
            vec![
                In::finite("param", param, len),
                In::finite("m", m, len),
                In::ruled("v", v, len, Rule::NonNegative),
            ]
        };
        self.op("adamw", || format!("len {len}, {hp:?}"), ins, run, outs)
    }
}

/// Values in each of q, k, v and out (`[batch, seq, channels]`), and in probs
/// (`[batch, heads, seq, seq]`).
fn attention_sizes(dims: &AttentionDims) -> (usize, usize) {
    (dims.batch * dims.seq * dims.channels(), dims.batch * dims.heads * dims.seq * dims.seq)
}

/// An attention op's inputs in argument order: `dout` (backward passes), then q, k, v.
fn attention_inputs<S: Clone>(dout: Option<&S>, q: &S, k: &S, v: &S, values: usize) -> Vec<In<S>> {
    let mut ins: Vec<In<S>> = dout.map(|d| In::finite("dout", d, values)).into_iter().collect();
    ins.extend([In::finite("q", q, values), In::finite("k", k, values), In::finite("v", v, values)]);
    ins
}

/// An attention backward pass's outputs: dq, dk, dv.
fn attention_grads<S: Clone>(g: &AttentionGrads<S>, values: usize) -> Vec<In<S>> {
    vec![In::finite("dq", &g.dq, values), In::finite("dk", &g.dk, values), In::finite("dv", &g.dv, values)]
}

fn matmul_shape(d: &MatmulDims) -> String {
    let layout = |t: bool| if t { 't' } else { 'n' };
    format!("m {}, k {}, n {}, layout {}{}", d.m, d.k, d.n, layout(d.trans_a), layout(d.trans_b))
}

fn attention_shape(d: &AttentionDims) -> String {
    let dropout = d.dropout.as_ref().map_or("no dropout".to_string(), mask_shape);
    format!("batch {}, seq {}, heads {}, head_dim {}, {dropout}", d.batch, d.seq, d.heads, d.head_dim)
}

fn mask_shape(mask: &DropoutMask) -> String {
    format!("dropout threshold {}, key {:?}, offset {}", mask.threshold, mask.key, mask.offset)
}

/// What LayerNorm's backward reads: finite values, and the saved statistics (rstd > 0).
fn layer_norm_backward_ins<S: Clone>(
    dout: &S,
    x: &S,
    gamma: &S,
    saved: &LayerNormOut<S>,
    rows: usize,
    dim: usize,
) -> Vec<In<S>> {
    vec![
        In::finite("dout", dout, rows * dim),
        In::finite("x", x, rows * dim),
        In::finite("gamma", gamma, dim),
        In::finite("mean", &saved.mean, rows),
        In::ruled("rstd", &saved.rstd, rows, Rule::Positive),
    ]
}

/// What LayerNorm's backward writes: finite gradients.
fn layer_norm_grads<S: Clone>(g: &LayerNormGrads<S>, rows: usize, dim: usize) -> Vec<In<S>> {
    vec![
        In::finite("dx", &g.dx, rows * dim),
        In::finite("dgamma", &g.dgamma, dim),
        In::finite("dbeta", &g.dbeta, dim),
    ]
}

#[cfg(test)]
mod tests {
    use tinygpt_tensor::conformance::forwarding::methods_left_to_defaults;

    /// A default left in place would run its composition of ops instead of `B`'s own fast path.
    #[test]
    fn every_backend_method_is_implemented_here() {
        assert_eq!(methods_left_to_defaults(include_str!("backend.rs")), Vec::<&str>::new());
    }
}
