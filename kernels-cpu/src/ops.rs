//! `impl Backend for CpuBackend`: checks buffer lengths against the sizes passed, takes
//! the buffers' locks and calls the kernels in `crate::kernels`.

use std::future::{ready, Future};

use tinygpt_tensor::{
    assert_copy_in_bounds, AdamWStep, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut, Backend,
    CachedAttentionDims, CopyRange, CrossEntropyOut, DropoutMask, LayerNormGrads, LayerNormOut, MatmulDims,
    MatmulFused, MatmulOut, TensorError,
};

use crate::kernels::adamw::{self, AdamWBufs};
use crate::kernels::attention::{self, AttentionGradBufs};
use crate::kernels::layernorm::{self, RowStats};
use crate::kernels::{cached_attention, copy, cross_entropy, dropout, elementwise, embedding, gelu, matmul};
use crate::spin_pool::SendPtr;
use crate::storage::CpuBuffer;
use crate::{fast, CpuBackend};

/// The most ranges one [`Backend::copy`] call shares between threads (the optimizer
/// passes 32 at a time); a longer list copies in turn.
const MAX_SPANS: usize = 64;

/// Panics with the op's name when a buffer's length disagrees with the sizes passed.
fn expect_len<T>(op: &str, what: &str, buf: &CpuBuffer<T>, len: usize) {
    let got = buf.len();
    assert!(got == len, "{op}: {what} holds {got} values, the sizes given need {len}");
}

fn scalar(op: &str, what: &str, buf: &CpuBuffer<f32>) -> f32 {
    expect_len(op, what, buf, 1);
    buf.read()[0]
}

impl Backend for CpuBackend {
    type Storage = CpuBuffer<f32>;
    type Indices = CpuBuffer<u32>;

    fn name(&self) -> String {
        "cpu".to_string()
    }

    /// Host memory has no per-buffer limit short of Rust's own (`isize::MAX` bytes).
    fn max_tensor_len(&self) -> usize {
        isize::MAX as usize / 4
    }

    fn zeros(&self, len: usize) -> Self::Storage {
        self.wrap(self.zeroed(len))
    }

    fn upload(&self, data: &[f32]) -> Self::Storage {
        let mut out = self.uninit(data.len());
        out.copy_from_slice(data);
        self.wrap(out)
    }

    fn upload_indices(&self, data: &[u32]) -> Self::Indices {
        self.wrap_indices(data)
    }

    fn read(&self, src: &Self::Storage, dst: &mut Vec<f32>) -> impl Future<Output = Result<(), TensorError>> {
        ready(src.try_read_into(dst).ok_or_else(|| self.poisoned()))
    }

    /// The optimizer's gather (one destination) and scatter (one source) share the copying
    /// between the threads (`kernels/copy.rs`); other lists, and short ones, copy in turn.
    fn copy(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        for c in copies {
            assert!(!c.src.same_buffer(c.dst), "copy: src and dst must be different buffers");
            assert_copy_in_bounds(c.src.len(), c.src_offset, c.dst.len(), c.dst_offset, c.len);
        }
        let Some(first) = copies.first() else { return };
        let one_dst = copies.iter().all(|c| c.dst.same_buffer(first.dst));
        let one_src = copies.iter().all(|c| c.src.same_buffer(first.src));
        let total: usize = copies.iter().map(|c| c.len).sum();
        if total <= copy::PIECE
            || copies.len() > MAX_SPANS
            || !(one_dst || one_src)
            || self.par.threads() == 1
        {
            for c in copies {
                let src = c.src.read();
                copy::copy(&mut c.dst.write()[c.dst_offset..][..c.len], &src[c.src_offset..][..c.len]);
            }
            return;
        }
        // On the stack, so a training step's copies allocate nothing (tests/allocations.rs).
        let mut lens = [0; MAX_SPANS];
        for (len, c) in lens.iter_mut().zip(copies) {
            *len = c.len;
        }
        let lens = &lens[..copies.len()];
        if one_dst {
            // Every source is another buffer than this one (asserted above), so the parts'
            // read locks never wait on this write lock.
            let mut dst = first.dst.write();
            let out = SendPtr(dst.as_mut_ptr());
            copy::copy_many(&self.par, lens, |i, at, len| {
                let c = &copies[i];
                let src = c.src.read();
                let src = &src[c.src_offset + at..][..len];
                // SAFETY: the range lies in `dst` (asserted above), which is another buffer than
                // `src`, and no other range writes it (`copy`'s contract), so no other part
                // touches it meanwhile.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), out.get().add(c.dst_offset + at), len) }
            });
        } else {
            let src = first.src.read();
            let src = &src[..];
            copy::copy_many(&self.par, lens, |i, at, len| {
                let c = &copies[i];
                copy::copy(&mut c.dst.write()[c.dst_offset + at..][..len], &src[c.src_offset + at..][..len]);
            });
        }
    }

    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        // Every op has already run to completion on the calling thread (or its pool) by
        // the time it returns, and a host buffer cannot be lost.
        ready(Ok(()))
    }

    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("add", "a", a, len);
        expect_len("add", "b", b, len);
        self.produce_all(len, |out| elementwise::add(&self.par, out, &a.read(), &b.read()))
    }

    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage {
        expect_len("scale", "a", a, len);
        self.produce_all(len, |out| elementwise::scale(&self.par, out, &a.read(), alpha))
    }

    fn dropout(
        &self,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
        onto: Option<&Self::Storage>,
    ) -> Self::Storage {
        expect_len("dropout", "x", x, len);
        let Some(onto) = onto else {
            return self.produce(len, |out| dropout::dropout(&self.par, out, &x.read(), mask));
        };
        expect_len("dropout", "onto", onto, len);
        self.produce(len, |out| dropout::dropout_add(&self.par, out, &onto.read(), &x.read(), mask))
    }

    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        expect_len("sum_rows", "x", x, rows * cols);
        let Some(fast) = self.fast else {
            return self.produce(cols, |out| elementwise::sum_rows(&self.par, out, &x.read(), rows, cols));
        };
        let mut partials = self.uninit(fast::sum_rows_partials_len(rows, cols));
        let out =
            self.produce_all(cols, |out| fast::sum_rows(fast, &self.par, out, &mut partials, &x.read()));
        self.recycle(partials);
        out
    }

    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("sum_squares", "x", x, len);
        let pieces = elementwise::sum_squares_pieces(len);
        let sum = self.with_sums(pieces, |partial| elementwise::sum_squares(&self.par, &x.read(), partial));
        self.produce_all(1, |out| out[0] = sum)
    }

    /// The fast variants fuse a bias and `onto` into the product (`fast::matmul`); `A`'s
    /// column sums, and `onto` on the reference kernels, are composed (`matmul_unfused`).
    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
        fused: MatmulFused<'_, Self::Storage>,
    ) -> MatmulOut<Self::Storage> {
        if fused.sum_rows || (fused.onto.is_some() && self.fast.is_none()) {
            return tinygpt_tensor::matmul_unfused(self, a, b, dims, fused);
        }
        if let Some(onto) = fused.onto {
            expect_len("matmul", "onto", onto, dims.m * dims.n);
        }
        let bias = fused.bias.map(|b| b.read());
        let onto = fused.onto.map(|o| o.read());
        let (a, b, bias) = (&a.read(), &b.read(), bias.as_deref().map(|b| &b[..]));
        let onto = onto.as_deref().map(|o| &o[..]);
        let out = match self.fast {
            // Every output is set to its bias (or 0, or `onto`) before the products are added.
            Some(fast) => self.produce_all(dims.m * dims.n, |out| {
                fast::matmul(fast, &self.par, out, a, b, bias, onto, dims)
            }),
            None => {
                self.produce(dims.m * dims.n, |out| matmul::matmul_forward(&self.par, out, a, b, bias, dims))
            }
        };
        MatmulOut { out, sums: None }
    }

    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage {
        expect_len("embedding", "ids", ids, n);
        self.produce(n * dim, |out| {
            embedding::embedding_forward(&self.par, out, &table.read(), &ids.read(), dim)
        })
    }

    fn embedding_backward(
        &self,
        dout: &Self::Storage,
        ids: &Self::Indices,
        n: usize,
        table_rows: usize,
        dim: usize,
    ) -> Self::Storage {
        expect_len("embedding_backward", "ids", ids, n);
        expect_len("embedding_backward", "dout", dout, n * dim);
        self.produce(table_rows * dim, |dtable| {
            embedding::embedding_backward(dtable, &dout.read(), &ids.read(), dim)
        })
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
        expect_len("layer_norm", "x", x, rows * dim);
        expect_len("layer_norm", "gamma", gamma, dim);
        expect_len("layer_norm", "beta", beta, dim);
        if let Some(fast) = self.fast {
            let (mut out, mut mean, mut rstd) =
                (self.uninit(rows * dim), self.uninit(rows), self.uninit(rows));
            let (x, gamma, beta) = (&x.read(), &gamma.read(), &beta.read());
            fast::layer_norm_forward(fast, &self.par, &mut out, &mut mean, &mut rstd, x, gamma, beta, eps);
            return LayerNormOut { out: self.wrap(out), mean: self.wrap(mean), rstd: self.wrap(rstd) };
        }
        let mut out = self.zeroed(rows * dim);
        let stats = layernorm::layernorm_forward(
            &self.par,
            &mut out,
            &x.read(),
            &gamma.read(),
            &beta.read(),
            dim,
            eps,
        );
        LayerNormOut {
            out: self.wrap(out),
            mean: self.produce_all(rows, |m| m.copy_from_slice(&stats.mean)),
            rstd: self.produce_all(rows, |r| r.copy_from_slice(&stats.rstd)),
        }
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
        if let Some(onto) = onto {
            if self.fast.is_none() {
                return tinygpt_tensor::layer_norm_backward_unfused(
                    self, dout, x, gamma, saved, rows, dim, onto,
                );
            }
            expect_len("layer_norm_backward", "onto", onto, rows * dim);
        }
        expect_len("layer_norm_backward", "dout", dout, rows * dim);
        expect_len("layer_norm_backward", "x", x, rows * dim);
        expect_len("layer_norm_backward", "saved mean", &saved.mean, rows);
        expect_len("layer_norm_backward", "saved rstd", &saved.rstd, rows);
        if let Some(fast) = self.fast {
            return self.fast_layer_norm_backward(fast, onto, dout, x, gamma, saved);
        }
        let stats = RowStats { mean: saved.mean.read().clone(), rstd: saved.rstd.read().clone() };
        let (mut dx, mut dgamma, mut dbeta) = (self.zeroed(rows * dim), self.zeroed(dim), self.zeroed(dim));
        layernorm::layernorm_backward(
            &self.par,
            &mut dx,
            &mut dgamma,
            &mut dbeta,
            &dout.read(),
            &x.read(),
            &gamma.read(),
            &stats,
            dim,
        );
        LayerNormGrads { dx: self.wrap(dx), dgamma: self.wrap(dgamma), dbeta: self.wrap(dbeta) }
    }

    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("gelu", "x", x, len);
        self.produce_all(len, |out| match self.fast {
            Some(fast) => fast::gelu_forward(fast, &self.par, out, &x.read()),
            None => gelu::gelu_forward(&self.par, out, &x.read()),
        })
    }

    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("gelu_backward", "x", x, len);
        expect_len("gelu_backward", "dout", dout, len);
        self.produce_all(len, |dx| match self.fast {
            Some(fast) => fast::gelu_backward(fast, &self.par, dx, &x.read(), &dout.read()),
            None => gelu::gelu_backward(&self.par, dx, &x.read(), &dout.read()),
        })
    }

    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
        keep: AttentionKeep,
    ) -> AttentionOut<Self::Storage> {
        if let Some(cached) = dims.cached(keep) {
            return AttentionOut { out: self.cached_attention(q, k, v, cached), saved: None };
        }
        // Keeping nothing runs the training forward (the fast variants' flash attention
        // writes no probabilities) and drops what it kept.
        let (out, saved) = match (keep, self.fast) {
            (AttentionKeep::Backward | AttentionKeep::Nothing, Some(fast)) => {
                self.flash_attention(fast, q, k, v, dims)
            }
            _ => self.attention_probs(q, k, v, dims),
        };
        AttentionOut { out, saved: (keep != AttentionKeep::Nothing).then_some(saved) }
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
        if let (AttentionKeep::Backward, Some(fast)) = (keep, self.fast) {
            return self.flash_attention_backward(fast, dout, q, k, v, saved, dims);
        }
        let probs = saved;
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("dout", dout), ("q", q), ("k", k), ("v", v)] {
            expect_len("attention_backward", what, buf, len);
        }
        expect_len("attention_backward", "probs", probs, dims.batch * dims.heads * dims.seq * dims.seq);
        let (mut dq, mut dk, mut dv) = (self.zeroed(len), self.zeroed(len), self.zeroed(len));
        attention::attention_backward(
            &self.par,
            AttentionGradBufs { dq: &mut dq, dk: &mut dk, dv: &mut dv },
            &dout.read(),
            &q.read(),
            &k.read(),
            &v.read(),
            &probs.read(),
            dims,
        );
        AttentionGrads { dq: self.wrap(dq), dk: self.wrap(dk), dv: self.wrap(dv) }
    }

    /// The fast variants, asked to save, keep each row's softmax normaliser for the backward
    /// (`2 * rows` values); the reference saves nothing.
    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
        save: bool,
    ) -> CrossEntropyOut<Self::Storage> {
        expect_len("cross_entropy", "logits", logits, rows * vocab);
        expect_len("cross_entropy", "targets", targets, rows);
        let (true, Some(fast)) = (save, self.fast) else {
            let loss =
                cross_entropy::cross_entropy_forward(&self.par, &logits.read(), &targets.read(), vocab);
            return CrossEntropyOut { loss: self.produce_all(1, |out| out[0] = loss), saved: None };
        };
        let mut saved = self.uninit(2 * rows);
        let loss = self.with_sums(fast::cross_entropy_blocks(rows), |sums| {
            fast::cross_entropy(fast, &self.par, &mut saved, sums, &logits.read(), &targets.read(), vocab)
        });
        CrossEntropyOut { loss: self.produce_all(1, |out| out[0] = loss), saved: Some(self.wrap(saved)) }
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
        expect_len("cross_entropy_backward", "logits", logits, rows * vocab);
        expect_len("cross_entropy_backward", "targets", targets, rows);
        let dloss = scalar("cross_entropy_backward", "dloss", dloss);
        let (Some(fast), Some(saved)) = (self.fast, saved) else {
            return self.produce(rows * vocab, |d| {
                cross_entropy::cross_entropy_backward(
                    &self.par,
                    d,
                    &logits.read(),
                    &targets.read(),
                    dloss,
                    vocab,
                )
            });
        };
        expect_len("cross_entropy_backward", "saved normalisers", saved, 2 * rows);
        self.produce_all(rows * vocab, |d| {
            let (logits, targets, saved) = (&logits.read(), &targets.read(), &saved.read());
            fast::cross_entropy_backward(fast, &self.par, d, logits, targets, saved, dloss, vocab)
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
        let named = [("param", param), ("grad", grad), ("m", m), ("v", v)];
        for (i, (what, buf)) in named.iter().enumerate() {
            expect_len("adamw", what, buf, len);
            for (other, buf2) in &named[i + 1..] {
                assert!(!buf.same_buffer(buf2), "adamw: {what} and {other} must be different buffers");
            }
        }
        let sumsq = scalar("adamw", "grad_sumsq", grad_sumsq);
        let (mut param, mut m, mut v) = (param.write(), m.write(), v.write());
        let bufs = AdamWBufs { param: &mut param, m: &mut m, v: &mut v };
        adamw::adamw(&self.par, bufs, &grad.read(), sumsq, hp);
    }
}

impl CpuBackend {
    /// The reference attention: the output and the probabilities (what its backward reads).
    fn attention_probs(
        &self,
        q: &CpuBuffer<f32>,
        k: &CpuBuffer<f32>,
        v: &CpuBuffer<f32>,
        dims: AttentionDims,
    ) -> (CpuBuffer<f32>, CpuBuffer<f32>) {
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("q", q), ("k", k), ("v", v)] {
            expect_len("attention", what, buf, len);
        }
        let mut out = self.zeroed(len);
        let mut probs = self.zeroed(dims.batch * dims.heads * dims.seq * dims.seq);
        attention::attention_forward(&self.par, &mut out, &mut probs, &q.read(), &k.read(), &v.read(), dims);
        (self.wrap(out), self.wrap(probs))
    }

    /// Attention of new positions against a key/value cache (`q` `[rows, C]`, the caches
    /// `[capacity, C]`).
    fn cached_attention(
        &self,
        q: &CpuBuffer<f32>,
        k_cache: &CpuBuffer<f32>,
        v_cache: &CpuBuffer<f32>,
        dims: CachedAttentionDims,
    ) -> CpuBuffer<f32> {
        let c = dims.channels();
        expect_len("attention", "q", q, dims.rows * c);
        expect_len("attention", "k (the key cache)", k_cache, dims.capacity * c);
        expect_len("attention", "v (the value cache)", v_cache, dims.capacity * c);
        // Every output is written (each head's columns start from zero in the kernels).
        let (q, k, v) = (&q.read(), &k_cache.read(), &v_cache.read());
        self.produce_all(dims.rows * c, |out| match self.fast {
            Some(fast) => fast::cached_attention(fast, &self.par, out, q, k, v, dims),
            None => cached_attention::cached_attention(out, q, k, v, dims),
        })
    }

    /// The fast variants' attention for training: flash-style, saving the log-sum-exp of
    /// each score row (`[B, H, T]`) instead of the probabilities.
    fn flash_attention(
        &self,
        fast: &fast::FastKernels,
        q: &CpuBuffer<f32>,
        k: &CpuBuffer<f32>,
        v: &CpuBuffer<f32>,
        dims: AttentionDims,
    ) -> (CpuBuffer<f32>, CpuBuffer<f32>) {
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("q", q), ("k", k), ("v", v)] {
            expect_len("attention", what, buf, len);
        }
        let (mut out, mut lse) = (self.uninit(len), self.uninit(dims.batch * dims.heads * dims.seq));
        let (q, k, v) = (&q.read(), &k.read(), &v.read());
        fast::attention_forward(fast, &self.par, &mut out, &mut lse, q, k, v, dims);
        (self.wrap(out), self.wrap(lse))
    }

    /// The backward of [`CpuBackend::flash_attention`], from its saved log-sum-exps.
    #[allow(clippy::too_many_arguments)]
    fn flash_attention_backward(
        &self,
        fast: &fast::FastKernels,
        dout: &CpuBuffer<f32>,
        q: &CpuBuffer<f32>,
        k: &CpuBuffer<f32>,
        v: &CpuBuffer<f32>,
        saved: &CpuBuffer<f32>,
        dims: AttentionDims,
    ) -> AttentionGrads<CpuBuffer<f32>> {
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("dout", dout), ("q", q), ("k", k), ("v", v)] {
            expect_len("attention_backward", what, buf, len);
        }
        expect_len("attention_backward", "saved log-sum-exp", saved, dims.batch * dims.heads * dims.seq);
        let (mut dq, mut dk, mut dv) = (self.uninit(len), self.uninit(len), self.uninit(len));
        let (dout, q, k, v, lse) = (&dout.read(), &q.read(), &k.read(), &v.read(), &saved.read());
        fast::attention_backward(fast, &self.par, [&mut dq, &mut dk, &mut dv], dout, q, k, v, lse, dims);
        AttentionGrads { dq: self.wrap(dq), dk: self.wrap(dk), dv: self.wrap(dv) }
    }

    /// The fast variants' LayerNorm backward, with `dx` added onto `onto` as it is written
    /// when there is one (lengths checked by the caller).
    fn fast_layer_norm_backward(
        &self,
        fast: &fast::FastKernels,
        onto: Option<&CpuBuffer<f32>>,
        dout: &CpuBuffer<f32>,
        x: &CpuBuffer<f32>,
        gamma: &CpuBuffer<f32>,
        saved: &LayerNormOut<CpuBuffer<f32>>,
    ) -> LayerNormGrads<CpuBuffer<f32>> {
        let (rows, dim) = (saved.mean.len(), gamma.len());
        let (mut dx, mut dgamma, mut dbeta) = (self.uninit(rows * dim), self.uninit(dim), self.uninit(dim));
        let mut partials = self.uninit(fast::layer_norm_partials_len(rows, dim));
        let (dout, x, gamma) = (&dout.read(), &x.read(), &gamma.read());
        let (mean, rstd) = (&saved.mean.read(), &saved.rstd.read());
        let onto = onto.map(|onto| onto.read());
        let bufs = [&mut dx[..], &mut dgamma[..], &mut dbeta[..], &mut partials[..]];
        fast::layer_norm_backward(
            fast,
            &self.par,
            bufs,
            dout,
            x,
            gamma,
            mean,
            rstd,
            onto.as_deref().map(|o| &o[..]),
        );
        self.recycle(partials);
        LayerNormGrads { dx: self.wrap(dx), dgamma: self.wrap(dgamma), dbeta: self.wrap(dbeta) }
    }
}
