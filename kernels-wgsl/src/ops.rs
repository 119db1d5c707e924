//! `impl Backend for WgpuBackend`: checks buffer lengths against the sizes passed,
//! allocates outputs from the pool and records the kernels in `shaders/`.

use std::future::Future;

use tinygpt_tensor::{
    assert_copy_in_bounds, AdamWStep, AttentionDims, AttentionGrads, AttentionOut, Backend, DropoutMask,
    LayerNormGrads, LayerNormOut, MatmulDims, TensorError,
};

use crate::pipelines::{Access, Kernel, BLOCK_REDUCE, DROPOUT_MASK};
use crate::pool::GpuBuffer;
use crate::{MatmulPath, WgpuBackend};

use Access::{Read as R, ReadWrite as W};

const ELEMENTWISE: &str = include_str!("shaders/elementwise.wgsl");
const REDUCE: &str = include_str!("shaders/reduce.wgsl");
const SUM_ROWS: &str = include_str!("shaders/sum_rows.wgsl");
const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const EMBEDDING: &str = include_str!("shaders/embedding.wgsl");
const LAYERNORM: &str = include_str!("shaders/layernorm.wgsl");
const ATTENTION: &str = include_str!("shaders/attention.wgsl");
const CROSS_ENTROPY: &str = include_str!("shaders/cross_entropy.wgsl");
const ADAMW: &str = include_str!("shaders/adamw.wgsl");
const COPY: &str = include_str!("shaders/copy.wgsl");
const DROPOUT: &str = include_str!("shaders/dropout.wgsl");

const K_COPY: Kernel = Kernel { parts: &[COPY], entry: "copy", bindings: &[(1, R), (2, W)] };
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
const K_MATMUL_DIRECT: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_direct", bindings: &[(1, R), (2, R), (3, W)] };
const K_MATMUL_DIRECT_BIAS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul_direct", bindings: &[(1, R), (2, R), (3, W), (4, R)] };
const K_MATMUL: Kernel = Kernel { parts: &[MATMUL], entry: "matmul", bindings: &[(1, R), (2, R), (3, W)] };
const K_MATMUL_BIAS: Kernel =
    Kernel { parts: &[MATMUL], entry: "matmul", bindings: &[(1, R), (2, R), (3, W), (4, R)] };
const K_EMBEDDING: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding", bindings: &[(1, R), (2, R), (3, W)] };
const K_EMBEDDING_POSITIONS: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding_positions", bindings: &[(2, R), (5, W)] };
const K_EMBEDDING_BACKWARD: Kernel =
    Kernel { parts: &[EMBEDDING], entry: "embedding_backward", bindings: &[(4, R), (5, W), (3, W)] };
const K_LAYER_NORM: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, LAYERNORM],
    entry: "layer_norm",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W), (6, W)],
};
const K_LAYER_NORM_DX: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, LAYERNORM],
    entry: "layer_norm_dx",
    bindings: &[(7, R), (1, R), (2, R), (8, R), (9, R), (4, W)],
};
const K_LAYER_NORM_DPARAMS: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, LAYERNORM],
    entry: "layer_norm_dparams",
    bindings: &[(7, R), (1, R), (8, R), (9, R), (4, W), (10, W)],
};
const K_ATTENTION: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, DROPOUT_MASK, ATTENTION],
    entry: "attention",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W)],
};
const K_ATTENTION_ROWS: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, DROPOUT_MASK, ATTENTION],
    entry: "attention_rows",
    bindings: &[(6, R), (2, R), (3, R), (7, R), (8, W), (4, W)],
};
const K_ATTENTION_COLS: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, DROPOUT_MASK, ATTENTION],
    entry: "attention_cols",
    bindings: &[(6, R), (1, R), (7, R), (8, W), (4, W), (9, W)],
};
const K_CROSS_ENTROPY_ROWS: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, CROSS_ENTROPY],
    entry: "cross_entropy_rows",
    bindings: &[(1, R), (2, R), (3, W)],
};
const K_CROSS_ENTROPY_BACKWARD: Kernel = Kernel {
    parts: &[BLOCK_REDUCE, CROSS_ENTROPY],
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
/// Longest sequence the attention kernels hold in workgroup memory (`MAX_SEQ` in attention.wgsl).
const MAX_SEQ: usize = 1024;

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

/// A matmul variant: block tile `bm`×`bn` (`tm`×`tn` outputs per invocation), depth `bk`.
#[derive(Clone, Copy)]
struct Tile {
    bm: usize,
    bn: usize,
    bk: usize,
}

const TILE_LARGE: Tile = Tile { bm: 128, bn: 128, bk: 8 };
const TILE_SMALL: Tile = Tile { bm: 64, bn: 64, bk: 8 };
/// `matmul_direct`'s block (it has no stages: `bk` 1).
const TILE_DIRECT: Tile = Tile { bm: 32, bn: 32, bk: 1 };
/// Below this many large tiles a matrix uses small ones, to keep every compute unit busy.
const LARGE_TILE_MIN_GROUPS: usize = 256;

fn pick_tile(m: usize, n: usize) -> Tile {
    if m.div_ceil(TILE_LARGE.bm) * n.div_ceil(TILE_LARGE.bn) >= LARGE_TILE_MIN_GROUPS {
        TILE_LARGE
    } else {
        TILE_SMALL
    }
}

/// The generated constants in front of matmul.wgsl for one variant.
fn matmul_defines(tile: Tile, dims: MatmulDims, bias: bool) -> String {
    let checked =
        !dims.m.is_multiple_of(tile.bm) || !dims.n.is_multiple_of(tile.bn) || !dims.k.is_multiple_of(tile.bk);
    let bias_fn = if bias {
        "@group(0) @binding(4) var<storage, read> bias: array<f32>;\n\
         fn bias_at(j: u32) -> f32 { return bias[j]; }"
    } else {
        "fn bias_at(j: u32) -> f32 { return 0.0; }"
    };
    format!(
        "const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst TM: u32 = {}u;\n\
         const TN: u32 = {}u;\nconst TRANS_A: bool = {};\nconst TRANS_B: bool = {};\n\
         const CHECKED: bool = {checked};\n{bias_fn}",
        tile.bm,
        tile.bn,
        tile.bk,
        // (At least 4: matmul_direct ignores them, but the tiled entry in the same module
        // must stay valid.)
        (tile.bm / 16).max(4),
        (tile.bn / 16).max(4),
        dims.trans_a,
        dims.trans_b,
    )
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
        let params = [u(len), f(alpha)];
        match b {
            Some(b) => self.run_1d(kernel, &params, &[a.bind(), b.bind(), out.bind()], len.div_ceil(WG)),
            None => self.run_1d(kernel, &params, &[a.bind(), out.bind()], len.div_ceil(WG)),
        }
        out
    }
}

impl Backend for WgpuBackend {
    type Storage = GpuBuffer<f32>;
    type Indices = GpuBuffer<u32>;

    fn name(&self) -> String {
        "wgpu".to_string()
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

    fn read(&self, src: &Self::Storage) -> impl Future<Output = Result<Vec<f32>, TensorError>> {
        self.read_buffer(src)
    }

    fn copy(
        &self,
        src: &Self::Storage,
        src_offset: usize,
        dst: &Self::Storage,
        dst_offset: usize,
        len: usize,
    ) {
        assert!(!src.same_buffer(dst), "copy: src and dst must be different buffers");
        assert_copy_in_bounds(src.len(), src_offset, dst.len(), dst_offset, len);
        if len == 0 {
            return;
        }
        let params = [u(len), u(src_offset), u(dst_offset), 0];
        self.run_1d(&K_COPY, &params, &[src.bind(), dst.bind()], len.div_ceil(WG));
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

    fn dropout(&self, x: &Self::Storage, mask: &DropoutMask, len: usize) -> Self::Storage {
        expect_len("dropout", "x", x, len);
        let out = self.alloc(len);
        self.run_1d(&K_DROPOUT, &dropout_params(len, mask), &[x.bind(), out.bind()], len.div_ceil(WG));
        out
    }

    fn dropout_add(
        &self,
        residual: &Self::Storage,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
    ) -> Self::Storage {
        expect_len("dropout_add", "residual", residual, len);
        expect_len("dropout_add", "x", x, len);
        let out = self.alloc(len);
        let bufs = [residual.bind(), x.bind(), out.bind()];
        self.run_1d(&K_DROPOUT_ADD, &dropout_params(len, mask), &bufs, len.div_ceil(WG));
        out
    }

    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        expect_len("sum_rows", "x", x, rows * cols);
        let out = self.alloc(cols);
        self.run_1d(&K_SUM_ROWS, &[u(rows), u(cols)], &[x.bind(), out.bind()], cols.div_ceil(64));
        out
    }

    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        expect_len("sum_squares", "x", x, len);
        self.reduce(x, len, true, 1.0)
    }

    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        let MatmulDims { m, k, n, .. } = dims;
        expect_len("matmul", "A", a, m * k);
        expect_len("matmul", "B", b, k * n);
        if let Some(bias) = bias {
            expect_len("matmul", "bias", bias, n);
        }
        let out = self.alloc(m * n);
        if m * n == 0 {
            return out;
        }
        // k = 0 needs no special case: the kernel's k loop runs no stage and writes the bias.
        let (tile, kernels) = match self.matmul_path {
            MatmulPath::Tiled => (pick_tile(m, n), [&K_MATMUL, &K_MATMUL_BIAS]),
            MatmulPath::Direct => (TILE_DIRECT, [&K_MATMUL_DIRECT, &K_MATMUL_DIRECT_BIAS]),
        };
        let defines = matmul_defines(tile, dims, bias.is_some());
        let grid = [u(n.div_ceil(tile.bn)), u(m.div_ceil(tile.bm)), 1];
        let params = [u(m), u(k), u(n)];
        match bias {
            Some(bias) => {
                self.run(kernels[1], &defines, &params, &[a.bind(), b.bind(), out.bind(), bias.bind()], grid)
            }
            None => self.run(kernels[0], &defines, &params, &[a.bind(), b.bind(), out.bind()], grid),
        }
        out
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
        self.run_1d(&K_EMBEDDING_POSITIONS, &params, &[ids.bind(), lists.bind()], table_rows.div_ceil(64));
        let groups = (table_rows * dim).div_ceil(WG);
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
        self.run_1d(&K_LAYER_NORM, &params, &bufs, rows);
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
    ) -> LayerNormGrads<Self::Storage> {
        expect_len("layer_norm_backward", "dout", dout, rows * dim);
        expect_len("layer_norm_backward", "x", x, rows * dim);
        expect_len("layer_norm_backward", "gamma", gamma, dim);
        expect_len("layer_norm_backward", "mean", &saved.mean, rows);
        expect_len("layer_norm_backward", "rstd", &saved.rstd, rows);
        let (dx, dgamma, dbeta) = (self.alloc(rows * dim), self.alloc(dim), self.alloc(dim));
        let params = [u(rows), u(dim), f(0.0)];
        let (mean, rstd) = (&saved.mean, &saved.rstd);
        let bufs = [dout.bind(), x.bind(), gamma.bind(), mean.bind(), rstd.bind(), dx.bind()];
        self.run_1d(&K_LAYER_NORM_DX, &params, &bufs, rows);
        let bufs = [dout.bind(), x.bind(), mean.bind(), rstd.bind(), dgamma.bind(), dbeta.bind()];
        self.run_1d(&K_LAYER_NORM_DPARAMS, &params, &bufs, dim.div_ceil(64));
        LayerNormGrads { dx, dgamma, dbeta }
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

    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionOut<Self::Storage> {
        let len = dims.batch * dims.seq * dims.channels();
        expect_len("attention", "q", q, len);
        expect_len("attention", "k", k, len);
        expect_len("attention", "v", v, len);
        assert!(dims.seq <= MAX_SEQ, "attention: sequences longer than {MAX_SEQ} are not supported on wgpu");
        let out = self.alloc(len);
        let probs = self.alloc(dims.batch * dims.heads * dims.seq * dims.seq);
        let params = attention_params(dims);
        let rows = dims.batch * dims.heads * dims.seq;
        self.run_1d(&K_ATTENTION, &params, &[q.bind(), k.bind(), v.bind(), out.bind(), probs.bind()], rows);
        AttentionOut { out, probs }
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
        let len = dims.batch * dims.seq * dims.channels();
        for (what, buf) in [("dout", dout), ("q", q), ("k", k), ("v", v)] {
            expect_len("attention_backward", what, buf, len);
        }
        let plen = dims.batch * dims.heads * dims.seq * dims.seq;
        expect_len("attention_backward", "probs", probs, plen);
        assert!(dims.seq <= MAX_SEQ, "attention: sequences longer than {MAX_SEQ} are not supported on wgpu");
        let (dq, dk, dv) = (self.alloc(len), self.alloc(len), self.alloc(len));
        let ds = self.alloc::<f32>(plen);
        let params = attention_params(dims);
        let rows = dims.batch * dims.heads * dims.seq;
        let bufs = [dout.bind(), k.bind(), v.bind(), probs.bind(), ds.bind(), dq.bind()];
        self.run_1d(&K_ATTENTION_ROWS, &params, &bufs, rows);
        let bufs = [dout.bind(), q.bind(), probs.bind(), ds.bind(), dk.bind(), dv.bind()];
        self.run_1d(&K_ATTENTION_COLS, &params, &bufs, rows);
        AttentionGrads { dq, dk, dv }
    }

    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        expect_len("cross_entropy", "logits", logits, rows * vocab);
        expect_len("cross_entropy", "targets", targets, rows);
        let losses = self.alloc::<f32>(rows);
        self.run_1d(
            &K_CROSS_ENTROPY_ROWS,
            &[u(rows), u(vocab)],
            &[logits.bind(), targets.bind(), losses.bind()],
            rows,
        );
        self.reduce(&losses, rows, false, 1.0 / rows as f32)
    }

    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        expect_len("cross_entropy_backward", "logits", logits, rows * vocab);
        expect_len("cross_entropy_backward", "targets", targets, rows);
        expect_len("cross_entropy_backward", "dloss", dloss, 1);
        let out = self.alloc(rows * vocab);
        let bufs = [logits.bind(), targets.bind(), dloss.bind(), out.bind()];
        self.run_1d(&K_CROSS_ENTROPY_BACKWARD, &[u(rows), u(vocab)], &bufs, rows);
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

fn attention_params(dims: AttentionDims) -> [u32; 11] {
    let scale = 1.0 / (dims.head_dim as f32).sqrt();
    let [key0, key1, threshold, offset, drop_scale, on] = match dims.dropout {
        Some(m) => [m.key[0], m.key[1], m.threshold, m.offset, f(m.scale()), 1],
        None => [0, 0, 0, 0, f(1.0), 0],
    };
    [
        u(dims.batch),
        u(dims.seq),
        u(dims.heads),
        u(dims.head_dim),
        f(scale),
        key0,
        key1,
        threshold,
        offset,
        drop_scale,
        on,
    ]
}

/// dropout.wgsl's parameter block: the length and the mask's fields.
fn dropout_params(len: usize, mask: &DropoutMask) -> [u32; 6] {
    [u(len), mask.key[0], mask.key[1], mask.threshold, mask.offset, f(mask.scale())]
}

impl WgpuBackend {
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
