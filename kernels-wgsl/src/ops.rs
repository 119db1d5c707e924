//! `impl Backend for WgpuBackend`: checks buffer lengths against the sizes passed,
//! allocates outputs from the pool and records the kernels in `shaders/`.

use std::future::Future;

use tinygpt_tensor::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut, Backend, CachedAttentionDims,
    CopyRange, CrossEntropyOut, DropoutMask, LayerNormGrads, LayerNormOut, MatmulDims, MatmulFused,
    MatmulOut, TensorError,
};

use crate::matmul::{Causal, Gemm, Operand};
use crate::pipelines::{Access, Kernel, BLOCK_REDUCE, DROPOUT_MASK};
use crate::pool::{Bind, GpuBuffer};
use crate::reductions::RowReductions;
use crate::{MatmulPath, WgpuBackend};

use Access::{Read as R, ReadWrite as W};

const ELEMENTWISE: &str = include_str!("shaders/elementwise.wgsl");
const REDUCE: &str = include_str!("shaders/reduce.wgsl");
const SUM_ROWS: &str = include_str!("shaders/sum_rows.wgsl");
const EMBEDDING: &str = include_str!("shaders/embedding.wgsl");
const LAYERNORM: &str = include_str!("shaders/layernorm.wgsl");
const ATTENTION: &str = include_str!("shaders/attention.wgsl");
const ATTENTION_CACHED: &str = include_str!("shaders/attention_cached.wgsl");
const CROSS_ENTROPY: &str = include_str!("shaders/cross_entropy.wgsl");
const ADAMW: &str = include_str!("shaders/adamw.wgsl");
pub(crate) const COPY: &str = include_str!("shaders/copy.wgsl");
const DROPOUT: &str = include_str!("shaders/dropout.wgsl");
/// attention.wgsl's `store_dropped`: into binding 3 for the dropout kernels, nowhere for
/// the others (a binding an entry point reaches must be in its layout).
const STORE_DROPPED: &str = "@group(0) @binding(3) var<storage, read_write> dropped: array<f32>;
fn store_dropped(i: u32, v: f32) { dropped[i] = v; }";
const STORE_NOTHING: &str = "fn store_dropped(i: u32, v: f32) {}";

const K_FILL: Kernel = Kernel { parts: &[COPY], entry: "fill", bindings: &[(2, W)] };
const K_ADD: Kernel = Kernel { parts: &[ELEMENTWISE], entry: "add", bindings: &[(1, R), (2, R), (3, W)] };
const K_SCALE: Kernel = Kernel { parts: &[ELEMENTWISE], entry: "scale", bindings: &[(1, R), (3, W)] };
const K_DROPOUT: Kernel =
    Kernel { parts: &[DROPOUT_MASK, DROPOUT], entry: "dropout", bindings: &[(1, R), (3, W)] };
const K_DROPOUT_ADD: Kernel =
    Kernel { parts: &[DROPOUT_MASK, DROPOUT], entry: "dropout_add", bindings: &[(1, R), (2, R), (3, W)] };
const K_GELU: Kernel = Kernel { parts: &[ELEMENTWISE], entry: "gelu", bindings: &[(1, R), (3, W)] };
const K_GELU_BACKWARD: Kernel =
    Kernel { parts: &[ELEMENTWISE], entry: "gelu_backward", bindings: &[(1, R), (2, R), (3, W)] };
const K_SUM_CHUNKS: Kernel =
    Kernel { parts: &[BLOCK_REDUCE, REDUCE], entry: "sum_chunks", bindings: &[(1, R), (2, W)] };
const K_SUM_ROWS: Kernel = Kernel { parts: &[SUM_ROWS], entry: "sum_rows", bindings: &[(1, R), (2, W)] };
const K_SUM_ROW_CHUNKS: Kernel =
    Kernel { parts: &[SUM_ROWS], entry: "sum_row_chunks", bindings: &[(1, R), (2, W)] };
const K_EMBEDDING: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding", bindings: &[(1, R), (2, R), (3, W)] };
const K_EMBEDDING_POSITIONS: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding_positions", bindings: &[(2, R), (5, W)] };
const K_EMBEDDING_BACKWARD: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding_backward", bindings: &[(4, R), (5, W), (3, W)] };
/// Rows per workgroup of layernorm.wgsl's row passes (its `ROWS`).
const LAYER_NORM_ROWS: usize = 8;
/// layernorm.wgsl's `dx_onto`: dx as it is, or added onto binding 11. Every entry point of
/// the module is compiled with one of them (the module must declare what `layer_norm_dx`
/// calls); only `layer_norm_dx` itself ever takes `LN_DX_ONTO`, whose binding 11 tells
/// its pipeline from the plain one's (see `Pipelines::get`).
const LN_DX_PLAIN: &str = "fn dx_onto(i: u32, v: f32) -> f32 { return v; }";
const LN_DX_ONTO: &str = "@group(0) @binding(11) var<storage, read> onto: array<f32>;\n\
    fn dx_onto(i: u32, v: f32) -> f32 { return onto[i] + v; }";
const K_LAYER_NORM: Kernel = Kernel {
    parts: &[LAYERNORM, LN_DX_PLAIN],
    entry: "layer_norm",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W), (6, W)],
};
const K_LAYER_NORM_DX: Kernel = Kernel {
    parts: &[LAYERNORM, LN_DX_PLAIN],
    entry: "layer_norm_dx",
    bindings: &[(7, R), (1, R), (2, R), (8, R), (9, R), (4, W)],
};
const K_LAYER_NORM_DX_ONTO: Kernel = Kernel {
    parts: &[LAYERNORM, LN_DX_ONTO],
    entry: "layer_norm_dx",
    bindings: &[(7, R), (1, R), (2, R), (8, R), (9, R), (11, R), (4, W)],
};
const K_LAYER_NORM_DPARAMS: Kernel = Kernel {
    parts: &[LAYERNORM, LN_DX_PLAIN],
    entry: "layer_norm_dparams",
    bindings: &[(7, R), (1, R), (8, R), (9, R), (4, W), (10, W)],
};
// The row kernels (LayerNorm's row passes, the attention softmax, cross-entropy) take
// their reductions from the defines: `self.rows.lanes()` or `self.rows.block()`
// (reductions.rs).
const K_ATTENTION_CACHED: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, ATTENTION_CACHED],
    entry: "attention_cached",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W)],
};
const K_ATTENTION_SOFTMAX: Kernel = Kernel {
    parts: &[DROPOUT_MASK, ATTENTION, STORE_NOTHING],
    entry: "attention_softmax",
    bindings: &[(1, W)],
};
const K_ATTENTION_SOFTMAX_DROPOUT: Kernel = Kernel {
    parts: &[DROPOUT_MASK, ATTENTION, STORE_DROPPED],
    entry: "attention_softmax_dropout",
    bindings: &[(1, W), (3, W)],
};
const K_ATTENTION_SOFTMAX_BACKWARD: Kernel = Kernel {
    parts: &[DROPOUT_MASK, ATTENTION, STORE_NOTHING],
    entry: "attention_softmax_backward",
    bindings: &[(1, W), (2, R)],
};
const K_ATTENTION_SOFTMAX_BACKWARD_DROPOUT: Kernel = Kernel {
    parts: &[DROPOUT_MASK, ATTENTION, STORE_DROPPED],
    entry: "attention_softmax_backward_dropout",
    bindings: &[(1, W), (2, R), (3, W)],
};
const K_CROSS_ENTROPY_ROWS: Kernel =
    Kernel { parts: &[CROSS_ENTROPY], entry: "cross_entropy_rows", bindings: &[(1, R), (2, R), (3, W)] };
const K_CROSS_ENTROPY_BACKWARD: Kernel = Kernel {
    parts: &[CROSS_ENTROPY],
    entry: "cross_entropy_backward",
    bindings: &[(1, R), (2, R), (4, R), (3, W)],
};
const K_ADAMW: Kernel =
    Kernel { parts: &[ADAMW], entry: "adamw", bindings: &[(1, W), (2, R), (3, W), (4, W), (5, R)] };

/// Invocations per workgroup of the 1-D kernels.
const WG: usize = 256;
/// Elements per workgroup of a `sum_chunks` pass: fixed, so the summation order depends
/// on the length alone.
const SUM_CHUNK: usize = 1 << 16;
/// Rows per chunk of the column sums (`CHUNK` in sum_rows.wgsl and layernorm.wgsl).
const COLUMN_SUM_CHUNK: usize = 64;

/// Panics with the op's name when a buffer's length disagrees with the sizes passed.
fn expect_len<T>(op: &str, what: &str, buf: &GpuBuffer<T>, len: usize) {
    let got = buf.len();
    assert!(got == len, "{op}: {what} holds {got} values, the sizes given need {len}");
}

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

fn f(v: f32) -> u32 {
    v.to_bits()
}

impl WgpuBackend {
    /// `scale · Σ f(x)` over `[len]` into a new `[1]`, where `f` squares with `square`:
    /// chunk sums, then (for long inputs) the sum of those.
    fn reduce(&self, x: &GpuBuffer<f32>, len: usize, square: bool, scale: f32) -> GpuBuffer<f32> {
        let out = self.alloc(1);
        if len <= SUM_CHUNK {
            let params = [u(len), u(len.max(1)), square as u32, f(scale)];
            self.run_1d(&K_SUM_CHUNKS, &params, &[x.bind(), out.bind()], 1);
            return out;
        }
        let chunks = len.div_ceil(SUM_CHUNK);
        let partial = self.alloc::<f32>(chunks);
        self.run_1d(
            &K_SUM_CHUNKS,
            &[u(len), u(SUM_CHUNK), square as u32, f(1.0)],
            &[x.bind(), partial.bind()],
            chunks,
        );
        self.run_1d(&K_SUM_CHUNKS, &[u(chunks), u(chunks), 0, f(scale)], &[partial.bind(), out.bind()], 1);
        out
    }

    fn elementwise(
        &self,
        kernel: &Kernel,
        a: &GpuBuffer<f32>,
        b: Option<&GpuBuffer<f32>>,
        alpha: f32,
        len: usize,
    ) -> GpuBuffer<f32> {
        let out = self.alloc(len);
        // A vec4 per invocation where the length allows (see elementwise.wgsl).
        let (defines, units) =
            if len.is_multiple_of(4) { ("alias V = vec4<f32>;", len / 4) } else { ("alias V = f32;", len) };
        let params = [u(units), f(alpha)];
        let grid = self.recorder().grid_1d(units.div_ceil(WG));
        match b {
            Some(b) => self.run(kernel, defines, &params, &[a.bind(), b.bind(), out.bind()], grid),
            None => self.run(kernel, defines, &params, &[a.bind(), out.bind()], grid),
        }
        out
    }
}

impl WgpuBackend {
    /// Records dropout.wgsl's `kernel` over `len` elements, a vec4 per invocation where
    /// `len` is a multiple of 4.
    fn run_pointwise_dropout(&self, kernel: &Kernel, mask: &DropoutMask, buffers: &[Bind<'_>], len: usize) {
        let (defines, units) = if len.is_multiple_of(4) {
            ("alias V = vec4<f32>;\nfn factors(i: u32) -> V { return factors4(i); }", len / 4)
        } else {
            ("alias V = f32;\nfn factors(i: u32) -> V { return factors1(i); }", len)
        };
        let mut params = dropout_params(len, mask);
        params[0] = u(units);
        let grid = self.recorder().grid_1d(units.div_ceil(WG));
        self.run(kernel, defines, &params, buffers, grid);
    }

    /// Adds up the `chunks` row-chunk sums in `partial` ([chunks, cols]) into `out`, unless
    /// there is one chunk, which the first pass already wrote to `out` itself.
    fn sum_row_chunks(&self, partial: &GpuBuffer<f32>, out: &GpuBuffer<f32>, chunks: usize, cols: usize) {
        if chunks > 1 {
            self.run_1d(
                &K_SUM_ROW_CHUNKS,
                &[u(chunks), u(cols)],
                &[partial.bind(), out.bind()],
                cols.div_ceil(32),
            );
        }
    }
}

impl Backend for WgpuBackend {
    type Storage = GpuBuffer<f32>;
    type Indices = GpuBuffer<u32>;

    fn name(&self) -> String {
        "wgpu".to_string()
    }

    /// The largest storage binding over 4 (every buffer is bound whole), or what
    /// [`WgpuBackend::with_max_binding_for_tests`] forced.
    fn max_tensor_len(&self) -> usize {
        (self.max_binding() / 4) as usize
    }

    fn zeros(&self, len: usize) -> Self::Storage {
        let out = self.alloc(len);
        self.run_1d(&K_FILL, &[u(len), 0, 0, 0], &[out.bind()], len.div_ceil(WG));
        out
    }

    fn upload(&self, data: &[f32]) -> Self::Storage {
        let out = self.alloc(data.len());
        self.write(&out, bytemuck::cast_slice(data));
        out
    }

    fn upload_indices(&self, data: &[u32]) -> Self::Indices {
        let out = self.alloc(data.len());
        self.write(&out, bytemuck::cast_slice(data));
        out
    }

    /// The mapped staging buffer's values come back as a fresh list, which replaces `dst`'s.
    fn read(&self, src: &Self::Storage, dst: &mut Vec<f32>) -> impl Future<Output = Result<(), TensorError>> {
        let read = self.read_buffer(src);
        async move {
            *dst = read.await?;
            Ok(())
        }
    }

    fn copy(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        self.copy_grouped(copies)
    }

    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        self.sync()
    }

    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("add", "a", a, len);
        expect_len("add", "b", b, len);
        self.elementwise(&K_ADD, a, Some(b), 0.0, len)
    }

    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage {
        expect_len("scale", "a", a, len);
        self.elementwise(&K_SCALE, a, None, alpha, len)
    }

    fn dropout(
        &self,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
        onto: Option<&Self::Storage>,
    ) -> Self::Storage {
        expect_len("dropout", "x", x, len);
        let out = self.alloc(len);
        match onto {
            Some(onto) => {
                expect_len("dropout", "onto", onto, len);
                let bufs = [onto.bind(), x.bind(), out.bind()];
                self.run_pointwise_dropout(&K_DROPOUT_ADD, mask, &bufs, len);
            }
            None => self.run_pointwise_dropout(&K_DROPOUT, mask, &[x.bind(), out.bind()], len),
        }
        out
    }

    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        expect_len("sum_rows", "x", x, rows * cols);
        let out = self.alloc(cols);
        let chunks = rows.div_ceil(COLUMN_SUM_CHUNK).max(1);
        let partial = if chunks > 1 { self.alloc(chunks * cols) } else { out.clone() };
        let grid = [u(cols.div_ceil(64)), u(chunks), 1];
        self.run(&K_SUM_ROWS, "", &[u(rows), u(cols)], &[x.bind(), partial.bind()], grid);
        self.sum_row_chunks(&partial, &out, chunks, cols);
        out
    }

    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("sum_squares", "x", x, len);
        self.reduce(x, len, true, 1.0)
    }

    /// One kernel adds one extra term to its tile (a bias or `onto`), or writes `A`'s column
    /// sums beside the product (`gemm_row_sums`, tiled paths only); other combinations are
    /// composed (`matmul_unfused`).
    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
        fused: MatmulFused<'_, Self::Storage>,
    ) -> MatmulOut<Self::Storage> {
        let MatmulDims { m, k, n, trans_a, .. } = dims;
        expect_len("matmul", "A", a, m * k);
        expect_len("matmul", "B", b, k * n);
        match fused {
            MatmulFused { bias, onto: None, sum_rows: false } => {
                if let Some(bias) = bias {
                    expect_len("matmul", "bias", bias, n);
                }
                let out = self.alloc(m * n);
                self.gemm(a, b, bias, &out, &Gemm::plain(dims));
                MatmulOut { out, sums: None }
            }
            MatmulFused { bias: None, onto: Some(onto), sum_rows: false } => {
                expect_len("matmul", "onto", onto, m * n);
                let out = self.alloc(m * n);
                self.gemm_onto(a, b, onto, &out, &Gemm::plain(dims));
                MatmulOut { out, sums: None }
            }
            MatmulFused { bias: None, onto: None, sum_rows: true }
                if trans_a && self.matmul_path != MatmulPath::Direct && n != 0 =>
            {
                let (out, sums) = (self.alloc(m * n), self.alloc(m));
                self.gemm_row_sums(a, b, &out, &sums, &Gemm::plain(dims));
                MatmulOut { out, sums: Some(sums) }
            }
            _ => tinygpt_tensor::matmul_unfused(self, a, b, dims, fused),
        }
    }

    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage {
        expect_len("embedding", "ids", ids, n);
        let table_rows = table.len().checked_div(dim).unwrap_or(0);
        let out = self.alloc(n * dim);
        let params = [u(n), u(dim), u(table_rows)];
        self.run_1d(&K_EMBEDDING, &params, &[table.bind(), ids.bind(), out.bind()], (n * dim).div_ceil(WG));
        out
    }

    fn embedding_backward(
        &self,
        dout: &Self::Storage,
        ids: &Self::Indices,
        n: usize,
        table_rows: usize,
        dim: usize,
    ) -> Self::Storage {
        expect_len("embedding_backward", "dout", dout, n * dim);
        expect_len("embedding_backward", "ids", ids, n);
        let out = self.alloc(table_rows * dim);
        let params = [u(n), u(dim), u(table_rows)];
        let lists = self.alloc::<u32>(table_rows * (n + 1));
        self.run_1d(&K_EMBEDDING_POSITIONS, &params, &[ids.bind(), lists.bind()], table_rows);
        // A workgroup per 16 columns of a table row (see embedding.wgsl).
        let groups = table_rows * dim.div_ceil(16);
        self.run_1d(&K_EMBEDDING_BACKWARD, &params, &[dout.bind(), lists.bind(), out.bind()], groups);
        out
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
        let (out, mean, rstd) = (self.alloc(rows * dim), self.alloc(rows), self.alloc(rows));
        let params = [u(rows), u(dim), f(eps)];
        let bufs = [x.bind(), gamma.bind(), beta.bind(), out.bind(), mean.bind(), rstd.bind()];
        let grid = self.recorder().grid_1d(rows.div_ceil(LAYER_NORM_ROWS));
        self.run(&K_LAYER_NORM, self.rows.lanes(), &params, &bufs, grid);
        LayerNormOut { out, mean, rstd }
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
            expect_len("layer_norm_backward", "onto", onto, rows * dim);
        }
        self.layer_norm_backward_with(onto, dout, x, gamma, saved, rows, dim)
    }

    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("gelu", "x", x, len);
        self.elementwise(&K_GELU, x, None, 0.0, len)
    }

    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("gelu_backward", "x", x, len);
        expect_len("gelu_backward", "dout", dout, len);
        self.elementwise(&K_GELU_BACKWARD, x, Some(dout), 0.0, len)
    }

    /// Kept for the backward, flash attention's state where it fits (`flash_attention.rs`),
    /// else the probabilities zeroed only as far as this backend's backward reads them.
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
        // Keeping nothing runs the training forward and drops what it kept.
        let res = match keep {
            AttentionKeep::Probs => self.attention_probs(q, k, v, dims, true),
            _ if self.flash_attention_fits(dims) => {
                let len = dims.batch * dims.seq * dims.channels();
                for (what, buf) in [("q", q), ("k", k), ("v", v)] {
                    expect_len("attention", what, buf, len);
                }
                self.flash_attention_forward(q, k, v, dims)
            }
            _ => self.attention_probs(q, k, v, dims, false),
        };
        AttentionOut { saved: res.saved.filter(|_| keep != AttentionKeep::Nothing), ..res }
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
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("dout", dout), ("q", q), ("k", k), ("v", v)] {
            expect_len("attention_backward", what, buf, len);
        }
        if keep == AttentionKeep::Backward && self.flash_attention_fits(dims) {
            return self.flash_attention_backward(dout, q, k, v, saved, dims);
        }
        let probs = saved;
        let plen = dims.batch * dims.heads * dims.seq * dims.seq;
        expect_len("attention_backward", "probs", probs, plen);
        let (dq, dk, dv) = (self.alloc(len), self.alloc(len), self.alloc(len));
        let ds = self.alloc::<f32>(plen);
        // dS and P ⊙ D are this op's own: zeros only where the products read them.
        let per_head = self.causal_zeros(PerHead::new(dims));
        // dP = dout·vᵀ into ds, dS from it in place, then the three products. With dropout
        // the mask is redrawn: dP ⊙ D, and dv = (P ⊙ D)ᵀ·dout from a buffer of its own.
        self.gemm(dout, v, None, &ds, &per_head.scores());
        let params = &per_head.softmax_params;
        let weights = if dims.dropout.is_some() {
            let dropped = self.alloc(plen);
            let bufs = [ds.bind(), probs.bind(), dropped.bind()];
            self.run_rows(&K_ATTENTION_SOFTMAX_BACKWARD_DROPOUT, params, &bufs, per_head.rows);
            dropped
        } else {
            self.run_rows(&K_ATTENTION_SOFTMAX_BACKWARD, params, &[ds.bind(), probs.bind()], per_head.rows);
            probs.clone()
        };
        self.gemm(&ds, k, None, &dq, &per_head.weighted(false));
        self.gemm(&ds, q, None, &dk, &per_head.weighted(true));
        self.gemm(&weights, dout, None, &dv, &per_head.weighted(true));
        AttentionGrads { dq, dk, dv }
    }

    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
        save: bool,
    ) -> CrossEntropyOut<Self::Storage> {
        // Nothing is saved: the backward finds each row's normaliser again.
        let _ = save;
        expect_len("cross_entropy", "logits", logits, rows * vocab);
        expect_len("cross_entropy", "targets", targets, rows);
        let losses = self.alloc::<f32>(rows);
        self.run_rows(
            &K_CROSS_ENTROPY_ROWS,
            &[u(rows), u(vocab)],
            &[logits.bind(), targets.bind(), losses.bind()],
            rows,
        );
        CrossEntropyOut { loss: self.reduce(&losses, rows, false, 1.0 / rows as f32), saved: None }
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
        // The forward saves nothing (see `cross_entropy`).
        let _ = saved;
        expect_len("cross_entropy_backward", "logits", logits, rows * vocab);
        expect_len("cross_entropy_backward", "targets", targets, rows);
        expect_len("cross_entropy_backward", "dloss", dloss, 1);
        let out = self.alloc(rows * vocab);
        let bufs = [logits.bind(), targets.bind(), dloss.bind(), out.bind()];
        self.run_rows(&K_CROSS_ENTROPY_BACKWARD, &[u(rows), u(vocab)], &bufs, rows);
        out
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
        for (what, buf) in [("param", param), ("grad", grad), ("m", m), ("v", v)] {
            expect_len("adamw", what, buf, len);
        }
        expect_len("adamw", "grad_sumsq", grad_sumsq, 1);
        assert!(hp.step >= 1, "adamw: step is 1-based (bias correction), got 0");
        let t = hp.step as i32;
        let bc1 = (1.0 - (hp.beta1 as f64).powi(t)) as f32;
        let bc2 = (1.0 - (hp.beta2 as f64).powi(t)) as f32;
        let params = [
            u(len),
            hp.max_grad_norm.is_some() as u32,
            f(hp.max_grad_norm.unwrap_or(0.0)),
            f(hp.lr),
            f(hp.beta1),
            f(hp.beta2),
            f(hp.eps),
            f(hp.weight_decay),
            f(bc1),
            f(bc2),
        ];
        let bufs = [param.bind(), grad.bind(), m.bind(), v.bind(), grad_sumsq.bind()];
        self.run_1d(&K_ADAMW, &params, &bufs, len.div_ceil(WG));
    }
}

impl WgpuBackend {
    /// [`Backend::attention`]; the probabilities are zero to the end of each row with
    /// `full_zeros` (the trait's contract), or only as far as the products read them (the
    /// training pair's saved state, which only this backend's backward reads).
    fn attention_probs(
        &self,
        q: &GpuBuffer<f32>,
        k: &GpuBuffer<f32>,
        v: &GpuBuffer<f32>,
        dims: AttentionDims,
        full_zeros: bool,
    ) -> AttentionOut<GpuBuffer<f32>> {
        let len = dims.batch * dims.seq * dims.channels();
        expect_len("attention", "q", q, len);
        expect_len("attention", "k", k, len);
        expect_len("attention", "v", v, len);
        let out = self.alloc(len);
        let probs = self.alloc(dims.batch * dims.heads * dims.seq * dims.seq);
        let per_head = PerHead::new(dims);
        let per_head = if full_zeros { per_head } else { self.causal_zeros(per_head) };
        // S = q·kᵀ into probs (the diagonal and below), softmax in place, out = P·v; with
        // dropout, out = (P ⊙ D)·v, P ⊙ D in a buffer of its own (probs stays P).
        self.gemm(q, k, None, &probs, &per_head.scores());
        let params = &per_head.softmax_params;
        let weights = if dims.dropout.is_some() {
            let dropped = self.alloc(probs.len());
            let bufs = [probs.bind(), dropped.bind()];
            self.run_rows(&K_ATTENTION_SOFTMAX_DROPOUT, params, &bufs, per_head.rows);
            dropped
        } else {
            self.run_rows(&K_ATTENTION_SOFTMAX, params, &[probs.bind()], per_head.rows);
            probs.clone()
        };
        self.gemm(&weights, v, None, &out, &per_head.weighted(false));
        AttentionOut { out, saved: Some(probs) }
    }

    /// Attention of new positions against a key/value cache (`q` `[rows, C]`, the caches
    /// `[capacity, C]`).
    fn cached_attention(
        &self,
        q: &GpuBuffer<f32>,
        k_cache: &GpuBuffer<f32>,
        v_cache: &GpuBuffer<f32>,
        dims: CachedAttentionDims,
    ) -> GpuBuffer<f32> {
        let c = dims.channels();
        expect_len("attention", "q", q, dims.rows * c);
        expect_len("attention", "k (the key cache)", k_cache, dims.capacity * c);
        expect_len("attention", "v (the value cache)", v_cache, dims.capacity * c);
        let out = self.alloc(dims.rows * c);
        let groups = dims.rows * dims.heads;
        let scores = self.alloc::<f32>(groups * dims.capacity);
        let scale = 1.0 / (dims.head_dim as f32).sqrt();
        let params =
            [u(dims.rows), u(dims.past), u(dims.heads), u(dims.head_dim), u(dims.capacity), f(scale)];
        let bufs = [q.bind(), k_cache.bind(), v_cache.bind(), out.bind(), scores.bind()];
        self.run_1d(&K_ATTENTION_CACHED, &params, &bufs, groups);
        out
    }
}

/// dropout.wgsl's parameter block: the length and the mask's fields.
fn dropout_params(len: usize, mask: &DropoutMask) -> [u32; 6] {
    [u(len), mask.key[0], mask.key[1], mask.threshold, mask.offset, f(mask.scale())]
}

/// Attention's per-head products as batched matmuls, one batch per (sequence, head): a
/// head's q, k, v, out (and their gradients) are [T, hd] slices of [B, T, C] rows
/// (row stride C, head h at column h·hd); its scores, probabilities and their gradients
/// are [T, T] blocks of [B, H, T, T].
struct PerHead {
    dims: AttentionDims,
    /// Rows of all heads' [T, T] blocks, B·H·T, and the softmax kernels' parameters
    /// (with the dropout mask's fields, see attention.wgsl).
    rows: usize,
    softmax_params: [u32; 10],
}

impl PerHead {
    fn new(dims: AttentionDims) -> Self {
        let rows = dims.batch * dims.heads * dims.seq;
        let scale = 1.0 / (dims.head_dim as f32).sqrt();
        let [key0, key1, threshold, offset, drop_scale, on] = match dims.dropout {
            Some(m) => [m.key[0], m.key[1], m.threshold, m.offset, f(m.scale()), 1],
            None => [0, 0, 0, 0, f(1.0), 0],
        };
        let softmax_params =
            [u(rows), u(dims.seq), f(scale), key0, key1, threshold, offset, drop_scale, on, u(dims.seq)];
        PerHead { dims, rows, softmax_params }
    }

    /// The same with the softmax kernels' zeros written only within `block`-position
    /// blocks of the diagonal (attention.wgsl).
    fn zeros_within(mut self, block: usize) -> Self {
        self.softmax_params[9] = u(block.clamp(1, self.dims.seq));
        self
    }

    /// A [T, hd] slice of a [B, T, C] buffer.
    fn token_rows(&self) -> Operand {
        let AttentionDims { seq, head_dim, .. } = self.dims;
        let c = self.dims.channels();
        Operand { ld: c, outer: seq * c, inner: head_dim }
    }

    /// A [T, T] block of a [B, H, T, T] buffer.
    fn square(&self) -> Operand {
        let t = self.dims.seq;
        Operand { ld: t, outer: self.dims.heads * t * t, inner: t * t }
    }

    fn gemm(&self, m: usize, n: usize, k: usize, a: Operand, b: Operand, c: Operand) -> Gemm {
        Gemm {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            batch: self.dims.batch * self.dims.heads,
            group: self.dims.heads,
            a,
            b,
            c,
            causal: Causal::None,
        }
    }

    /// [T, T] = x·yᵀ of two [T, hd] slices (S = q·kᵀ, dP = dout·vᵀ), written on and
    /// below the diagonal only (all the softmax kernels read).
    fn scores(&self) -> Gemm {
        let (t, hd) = (self.dims.seq, self.dims.head_dim);
        let x = self.token_rows();
        Gemm { trans_b: true, causal: Causal::SkipAboveDiagonal, ..self.gemm(t, t, hd, x, x, self.square()) }
    }

    /// [T, hd] = W·x of a causal [T, T] block and a [T, hd] slice (out = P·v, dq = dS·k),
    /// or with `transposed` Wᵀ·x (dk = dSᵀ·q, dv = Pᵀ·dout).
    fn weighted(&self, transposed: bool) -> Gemm {
        let (t, hd) = (self.dims.seq, self.dims.head_dim);
        let x = self.token_rows();
        let causal = if transposed { Causal::KFromRow } else { Causal::KUpToRow };
        Gemm { trans_a: transposed, causal, ..self.gemm(t, hd, t, self.square(), x, x) }
    }
}

impl WgpuBackend {
    /// LayerNorm's backward, `dx` added onto `onto` when given.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward_with(
        &self,
        onto: Option<&GpuBuffer<f32>>,
        dout: &GpuBuffer<f32>,
        x: &GpuBuffer<f32>,
        gamma: &GpuBuffer<f32>,
        saved: &LayerNormOut<GpuBuffer<f32>>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<GpuBuffer<f32>> {
        expect_len("layer_norm_backward", "dout", dout, rows * dim);
        expect_len("layer_norm_backward", "x", x, rows * dim);
        expect_len("layer_norm_backward", "gamma", gamma, dim);
        expect_len("layer_norm_backward", "mean", &saved.mean, rows);
        expect_len("layer_norm_backward", "rstd", &saved.rstd, rows);
        let (dx, dgamma, dbeta) = (self.alloc(rows * dim), self.alloc(dim), self.alloc(dim));
        let params = [u(rows), u(dim), f(0.0)];
        let (mean, rstd) = (&saved.mean, &saved.rstd);
        let grid = self.recorder().grid_1d(rows.div_ceil(LAYER_NORM_ROWS));
        let mut bufs = vec![dout.bind(), x.bind(), gamma.bind(), mean.bind(), rstd.bind()];
        let kernel = match onto {
            Some(onto) => {
                bufs.push(onto.bind());
                &K_LAYER_NORM_DX_ONTO
            }
            None => &K_LAYER_NORM_DX,
        };
        bufs.push(dx.bind());
        self.run(kernel, self.rows.lanes(), &params, &bufs, grid);
        let chunks = rows.div_ceil(COLUMN_SUM_CHUNK).max(1);
        let (partial_g, partial_b) = if chunks > 1 {
            (self.alloc(chunks * dim), self.alloc(chunks * dim))
        } else {
            (dgamma.clone(), dbeta.clone())
        };
        let bufs = [dout.bind(), x.bind(), mean.bind(), rstd.bind(), partial_g.bind(), partial_b.bind()];
        let grid = [u(dim.div_ceil(64)), u(chunks), 1];
        self.run(&K_LAYER_NORM_DPARAMS, RowReductions::Workgroup.lanes(), &params, &bufs, grid);
        self.sum_row_chunks(&partial_g, &dgamma, chunks, dim);
        self.sum_row_chunks(&partial_b, &dbeta, chunks, dim);
        LayerNormGrads { dx, dgamma, dbeta }
    }

    /// `per_head` with zeros only as far as its causal products read (`causal_block`).
    fn causal_zeros(&self, per_head: PerHead) -> PerHead {
        match self.causal_block(&per_head.weighted(false)) {
            Some(block) => per_head.zeros_within(block),
            None => per_head,
        }
    }

    /// Queues a host write into `dst`. Recorded commands are submitted first: a queued
    /// write lands before the next submission, and `dst` (recycled by the pool) may still
    /// be read by commands recorded earlier.
    fn write<T>(&self, dst: &GpuBuffer<T>, bytes: &[u8]) {
        {
            let mut rec = self.recorder();
            if rec.has_pending() {
                rec.submit(&self.gpu.queue, &self.gpu.counters);
            }
        }
        if !bytes.is_empty() {
            self.gpu.queue.write_buffer(dst.buffer(), 0, bytes);
        }
    }
}
