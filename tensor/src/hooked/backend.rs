//! `Backend for Hooked<B, H>`: per op, what it reads and writes (its operands, with the
//! part of each that matters and the rule its values satisfy), what its outputs are when
//! skipped, and its sizes in words; the work itself is always `B`'s.

use std::future::Future;

use crate::backend::Backend;
use crate::dims::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut, CopyRange, CrossEntropyOut,
    LayerNormGrads, LayerNormOut, MatmulDims, MatmulFused, MatmulOut,
};
use crate::dropout::DropoutMask;
use crate::error::TensorError;
use crate::hooked::{Hook, Hooked, Operand as In, Rule};

impl<B: Backend, H: Hook<B>> Backend for Hooked<B, H> {
    type Storage = B::Storage;
    type Indices = B::Indices;

    fn name(&self) -> String {
        self.hook.name(&self.inner)
    }

    // ---- memory -------------------------------------------------------------------

    fn max_tensor_len(&self) -> usize {
        self.memory("max_tensor_len").max_tensor_len()
    }
    fn zeros(&self, len: usize) -> Self::Storage {
        self.memory("zeros").zeros(len)
    }
    fn upload(&self, data: &[f32]) -> Self::Storage {
        self.memory("upload").upload(data)
    }
    fn upload_indices(&self, data: &[u32]) -> Self::Indices {
        self.memory("upload_indices").upload_indices(data)
    }
    fn read(&self, src: &Self::Storage, dst: &mut Vec<f32>) -> impl Future<Output = Result<(), TensorError>> {
        let read = self.memory("read").read(src, dst);
        let verdict = self.hook.verdict();
        async move {
            verdict?;
            read.await
        }
    }
    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        let flush = self.memory("flush").flush();
        async move {
            flush.await?;
            self.hook.verdict()
        }
    }
    fn copy(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        let ranges = |which: fn(&CopyRange<'_, Self::Storage>) -> In<Self::Storage>| {
            copies.iter().map(which).collect::<Vec<_>>()
        };
        self.writes(
            "copy",
            &|| ranges(|c| In::range("src", c.src, c.src_offset, c.len)),
            &|| copy_shape(copies),
            |b| b.copy(copies),
            &|| ranges(|c| In::range("dst", c.dst, c.dst_offset, c.len)),
        )
    }

    // ---- elementwise and reductions ------------------------------------------------

    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage {
        self.computes(
            "add",
            &|| vec![In::finite("a", a, len), In::finite("b", b, len)],
            &|| format!("len {len}"),
            |be| be.add(a, b, len),
            |placeholder| placeholder(len),
            |y| vec![In::finite("out", y, len)],
        )
    }
    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage {
        self.computes(
            "scale",
            &|| vec![In::finite("a", a, len)],
            &|| format!("len {len}, alpha {alpha}"),
            |b| b.scale(a, alpha, len),
            |placeholder| placeholder(len),
            |y| vec![In::finite("out", y, len)],
        )
    }
    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        self.computes(
            "sum_rows",
            &|| vec![In::finite("x", x, rows * cols)],
            &|| format!("rows {rows}, cols {cols}"),
            |b| b.sum_rows(x, rows, cols),
            |placeholder| placeholder(cols),
            |y| vec![In::finite("out", y, cols)],
        )
    }
    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        self.computes(
            "sum_squares",
            &|| vec![In::finite("x", x, len)],
            &|| format!("len {len}"),
            |b| b.sum_squares(x, len),
            |placeholder| placeholder(1),
            |y| vec![In::ruled("out", y, 1, Rule::NonNegative)],
        )
    }
    fn dropout(
        &self,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
        onto: Option<&Self::Storage>,
    ) -> Self::Storage {
        self.computes(
            "dropout",
            &|| {
                let mut ins = vec![In::finite("x", x, len)];
                ins.extend(onto.map(|onto| In::finite("onto", onto, len)));
                ins
            },
            &|| format!("len {len}, {}", mask_shape(mask)),
            |b| b.dropout(x, mask, len, onto),
            |placeholder| placeholder(len),
            |y| vec![In::finite("out", y, len)],
        )
    }

    // ---- dense -----------------------------------------------------------------------

    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
        fused: MatmulFused<'_, Self::Storage>,
    ) -> MatmulOut<Self::Storage> {
        let MatmulDims { m, n, .. } = dims;
        self.computes(
            "matmul",
            &|| matmul_inputs(a, b, dims, fused),
            &|| matmul_shape(&dims, fused),
            |be| be.matmul(a, b, dims, fused),
            |placeholder| MatmulOut { out: placeholder(m * n), sums: fused.sum_rows.then(|| placeholder(m)) },
            |y| {
                let mut outs = vec![In::finite("out", &y.out, m * n)];
                outs.extend(y.sums.iter().map(|sums| In::finite("sums", sums, m)));
                outs
            },
        )
    }
    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage {
        self.computes(
            "embedding",
            &|| vec![In::whole("table", table)],
            &|| format!("n {n}, dim {dim}"),
            |b| b.embedding(table, ids, n, dim),
            |placeholder| placeholder(n * dim),
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
        self.computes(
            "embedding_backward",
            &|| vec![In::finite("dout", dout, n * dim)],
            &|| format!("n {n}, table_rows {table_rows}, dim {dim}"),
            |b| b.embedding_backward(dout, ids, n, table_rows, dim),
            |placeholder| placeholder(table_rows * dim),
            |y| vec![In::finite("dtable", y, table_rows * dim)],
        )
    }

    // ---- fused layers ----------------------------------------------------------------

    fn layer_norm(
        &self,
        x: &Self::Storage,
        gamma: &Self::Storage,
        beta: &Self::Storage,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> LayerNormOut<Self::Storage> {
        self.computes(
            "layer_norm",
            &|| {
                vec![
                    In::finite("x", x, rows * dim),
                    In::finite("gamma", gamma, dim),
                    In::finite("beta", beta, dim),
                ]
            },
            &|| format!("rows {rows}, dim {dim}, eps {eps}"),
            |b| b.layer_norm(x, gamma, beta, rows, dim, eps),
            |placeholder| LayerNormOut {
                out: placeholder(rows * dim),
                mean: placeholder(rows),
                rstd: placeholder(rows),
            },
            |y| {
                vec![
                    In::finite("out", &y.out, rows * dim),
                    In::finite("mean", &y.mean, rows),
                    In::ruled("rstd", &y.rstd, rows, Rule::Positive),
                ]
            },
        )
    }
    fn layer_norm_backward(
        &self,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
        onto: Option<&Self::Storage>,
    ) -> LayerNormGrads<Self::Storage> {
        self.computes(
            "layer_norm_backward",
            &|| layer_norm_backward_inputs(dout, x, gamma, saved, rows, dim, onto),
            &|| format!("rows {rows}, dim {dim}{}", if onto.is_some() { ", onto" } else { "" }),
            |b| b.layer_norm_backward(dout, x, gamma, saved, rows, dim, onto),
            |placeholder| LayerNormGrads {
                dx: placeholder(rows * dim),
                dgamma: placeholder(dim),
                dbeta: placeholder(dim),
            },
            |g| {
                vec![
                    In::finite("dx", &g.dx, rows * dim),
                    In::finite("dgamma", &g.dgamma, dim),
                    In::finite("dbeta", &g.dbeta, dim),
                ]
            },
        )
    }
    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        self.computes(
            "gelu",
            &|| vec![In::finite("x", x, len)],
            &|| format!("len {len}"),
            |b| b.gelu(x, len),
            |placeholder| placeholder(len),
            |y| vec![In::finite("out", y, len)],
        )
    }
    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage {
        self.computes(
            "gelu_backward",
            &|| vec![In::finite("x", x, len), In::finite("dout", dout, len)],
            &|| format!("len {len}"),
            |b| b.gelu_backward(x, dout, len),
            |placeholder| placeholder(len),
            |y| vec![In::finite("dx", y, len)],
        )
    }

    // `saved` kept for the backward is opaque (probabilities or log-sum-exps, the inner
    // backend's choice), so only its values are checked, not its length; skipped, it is
    // the softmax's size, so even a backend that keeps less gets enough.
    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
        keep: AttentionKeep,
    ) -> AttentionOut<Self::Storage> {
        let (values, scores) = attention_sizes(&dims);
        // With a cache, only its written rows are read (the rest may hold anything).
        let read = dims.cache.map_or(values, |cache| (cache.past + dims.seq) * dims.channels());
        self.computes(
            "attention",
            &|| {
                let kv = [In::finite("k", k, read), In::finite("v", v, read)];
                [In::finite("q", q, values)].into_iter().chain(kv).collect()
            },
            &|| attention_shape(&dims, keep),
            |b| b.attention(q, k, v, dims, keep),
            |placeholder| AttentionOut {
                out: placeholder(values),
                saved: (keep != AttentionKeep::Nothing).then(|| placeholder(scores)),
            },
            |y| {
                let saved = y.saved.iter().map(|saved| attention_saved(saved, keep, scores));
                [In::finite("out", &y.out, values)].into_iter().chain(saved).collect()
            },
        )
    }
    fn attention_backward(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        saved: &Self::Storage,
        dims: AttentionDims,
        keep: AttentionKeep,
    ) -> AttentionGrads<Self::Storage> {
        let (values, scores) = attention_sizes(&dims);
        self.computes(
            "attention_backward",
            &|| {
                let mut ins = attention_backward_inputs(dout, q, k, v, values);
                ins.push(attention_saved(saved, keep, scores));
                ins
            },
            &|| attention_shape(&dims, keep),
            |b| b.attention_backward(dout, q, k, v, saved, dims, keep),
            |placeholder| AttentionGrads {
                dq: placeholder(values),
                dk: placeholder(values),
                dv: placeholder(values),
            },
            |g| {
                vec![
                    In::finite("dq", &g.dq, values),
                    In::finite("dk", &g.dk, values),
                    In::finite("dv", &g.dv, values),
                ]
            },
        )
    }
    // The saved state is opaque (the inner backend's row statistics, or nothing), so only
    // its values are checked, not its length.
    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
        save: bool,
    ) -> CrossEntropyOut<Self::Storage> {
        self.computes(
            "cross_entropy",
            &|| vec![In::finite("logits", logits, rows * vocab)],
            &|| format!("rows {rows}, vocab {vocab}{}", if save { ", saving" } else { "" }),
            |b| b.cross_entropy(logits, targets, rows, vocab, save),
            |placeholder| CrossEntropyOut { loss: placeholder(1), saved: None },
            |y| {
                let mut outs = vec![In::ruled("loss", &y.loss, 1, Rule::NonNegative)];
                outs.extend(y.saved.iter().map(|saved| In::whole("saved", saved)));
                outs
            },
        )
    }
    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        saved: Option<&Self::Storage>,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        self.computes(
            "cross_entropy_backward",
            &|| {
                let mut ins = vec![In::finite("logits", logits, rows * vocab), In::finite("dloss", dloss, 1)];
                ins.extend(saved.map(|saved| In::whole("saved", saved)));
                ins
            },
            &|| format!("rows {rows}, vocab {vocab}"),
            |b| b.cross_entropy_backward(logits, targets, saved, dloss, rows, vocab),
            |placeholder| placeholder(rows * vocab),
            |y| vec![In::finite("dlogits", y, rows * vocab)],
        )
    }

    // ---- optimizer -------------------------------------------------------------------

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
        self.writes(
            "adamw",
            &|| {
                vec![
                    In::finite("param", param, len),
                    In::finite("grad", grad, len),
                    In::finite("m", m, len),
                    In::ruled("v", v, len, Rule::NonNegative),
                    In::ruled("grad_sumsq", grad_sumsq, 1, Rule::NonNegative),
                ]
            },
            &|| format!("len {len}, {hp:?}"),
            |b| b.adamw(param, grad, m, v, grad_sumsq, hp, len),
            &|| {
                vec![
                    In::finite("param", param, len),
                    In::finite("m", m, len),
                    In::ruled("v", v, len, Rule::NonNegative),
                ]
            },
        )
    }
}

/// One range in words (`"9 values from offset 3 to offset 0"`), a list by its size.
fn copy_shape<S>(copies: &[CopyRange<'_, S>]) -> String {
    match copies {
        [c] => format!("{} values from offset {} to offset {}", c.len, c.src_offset, c.dst_offset),
        _ => format!("{} ranges, {} values", copies.len(), copies.iter().map(|c| c.len).sum::<usize>()),
    }
}

/// A matrix product's inputs in argument order: `a`, `b`, then the fused `bias` and `onto`.
fn matmul_inputs<S: Clone>(a: &S, b: &S, dims: MatmulDims, fused: MatmulFused<'_, S>) -> Vec<In<S>> {
    let MatmulDims { m, k, n, .. } = dims;
    let mut ins = vec![In::finite("a", a, m * k), In::finite("b", b, k * n)];
    ins.extend(fused.bias.map(|bias| In::finite("bias", bias, n)));
    ins.extend(fused.onto.map(|onto| In::finite("onto", onto, m * n)));
    ins
}

fn matmul_shape<S>(d: &MatmulDims, fused: MatmulFused<'_, S>) -> String {
    let layout = |t: bool| if t { 't' } else { 'n' };
    let mut shape =
        format!("m {}, k {}, n {}, layout {}{}", d.m, d.k, d.n, layout(d.trans_a), layout(d.trans_b));
    // (A bias is the plain product's, as the kernels count it: only the other fusions are named.)
    for (name, on) in [("onto", fused.onto.is_some()), ("sum_rows", fused.sum_rows)] {
        if on {
            shape += &format!(", {name}");
        }
    }
    shape
}

/// Values in each of q, k, v and out (`[batch, seq, channels]`), and in probs
/// (`[batch, heads, seq, seq]`).
fn attention_sizes(dims: &AttentionDims) -> (usize, usize) {
    (dims.batch * dims.seq * dims.channels(), dims.batch * dims.heads * dims.seq * dims.seq)
}

/// Attention's backward's inputs in argument order: `dout`, q, k, v.
fn attention_backward_inputs<S: Clone>(dout: &S, q: &S, k: &S, v: &S, values: usize) -> Vec<In<S>> {
    [("dout", dout), ("q", q), ("k", k), ("v", v)].map(|(name, x)| In::finite(name, x, values)).into()
}

/// Attention's kept state: probabilities of their documented size, or opaque.
fn attention_saved<S: Clone>(saved: &S, keep: AttentionKeep, scores: usize) -> In<S> {
    match keep {
        AttentionKeep::Probs => In::ruled("probs", saved, scores, Rule::Probability),
        AttentionKeep::Backward | AttentionKeep::Nothing => In::whole("saved", saved),
    }
}

fn attention_shape(d: &AttentionDims, keep: AttentionKeep) -> String {
    let dropout = d.dropout.as_ref().map_or("no dropout".to_string(), mask_shape);
    let (batch, seq, heads, head_dim) = (d.batch, d.seq, d.heads, d.head_dim);
    let cache = d.cache.map_or(String::new(), |c| format!(", cache past {} capacity {}", c.past, c.capacity));
    format!("batch {batch}, seq {seq}, heads {heads}, head_dim {head_dim}, {dropout}, keep {keep:?}{cache}")
}

fn mask_shape(mask: &DropoutMask) -> String {
    format!("dropout threshold {}, key {:?}, offset {}", mask.threshold, mask.key, mask.offset)
}

/// What LayerNorm's backward reads: finite values, the saved statistics (rstd > 0), and
/// `onto` when given.
fn layer_norm_backward_inputs<S: Clone>(
    dout: &S,
    x: &S,
    gamma: &S,
    saved: &LayerNormOut<S>,
    rows: usize,
    dim: usize,
    onto: Option<&S>,
) -> Vec<In<S>> {
    let mut ins = vec![
        In::finite("dout", dout, rows * dim),
        In::finite("x", x, rows * dim),
        In::finite("gamma", gamma, dim),
        In::finite("mean", &saved.mean, rows),
        In::ruled("rstd", &saved.rstd, rows, Rule::Positive),
    ];
    ins.extend(onto.map(|onto| In::finite("onto", onto, rows * dim)));
    ins
}
