//! Flash attention for training on mixed precision (issue 34): the training pair
//! (`attention` keeping `AttentionKeep::Backward`, and its `attention_backward`) without the `[B, H, T, T]`
//! probabilities, which the unfused path writes, drops out and reads back several times
//! (the recipe's softmax, probabilities and dropout were about 4.9 ms of a 33 ms H200
//! step). Kernels and maths: `shaders/flash_attention.wgsl`.
//!
//! Used only on [`Precision::Mixed`](tinygpt_tensor::Precision) devices whose matmul runs
//! the `shader-f16` path (`WgpuBackend::mixed`): `f32` keeps the unfused kernels bit for
//! bit (`tests/f32_bits.rs`). The products round their inputs to f16 as the mixed matmul
//! does (`NARROW_F16`) and sum in f32; the softmax and its statistics stay f32.
//!
//! `saved` is `[B·H·T]` log-sum-exps followed by a copy of `out` `[B, T, C]`: the backward's
//! `Δ_t = dout_t · out_t` needs `out`, which the trait's backward is not given. That copy
//! is `C / (H·T)` of the probabilities' size (1/256 at the recipe's shape).
//!
//! When it runs ([`FlashAttention`]): by default only where the unfused pair cannot, i.e.
//! where its `[B, H, T, T]` probabilities exceed the device's largest storage binding. On
//! an H200 at the recipe's shape these kernels (one query or key row per invocation, no
//! tensor cores) took 17.1 ms a forward and backward pair against the unfused kernels'
//! 0.76 ms (`examples/attention_time.rs`; BENCHMARKS.md), so where both can run the
//! unfused pair is the faster. `TINYGPT_WGPU_FLASH_ATTENTION=on|off` (read once per
//! process; not in a browser) or [`WgpuBackend::with_flash_attention`] choose otherwise;
//! like `tuning.rs`'s knobs, that changes speed and memory, and the results only within
//! the tests' tolerances.
//!
//! The backward is two kernels, so no two workgroups add into one value (WGSL has no float
//! atomics) and the results do not depend on scheduling: `flash_backward_dq` (a query row
//! per invocation, which also writes `Δ`), then `flash_backward_dkdv` (a key row per
//! invocation). Each recomputes the scores it needs, as FlashAttention-2's backward does.

use tinygpt_tensor::{AttentionDims, AttentionGrads, AttentionOut};

use crate::matmul::NARROW_F16;
use crate::pipelines::{Access, Kernel, DROPOUT_MASK};
use crate::pool::GpuBuffer;
use crate::WgpuBackend;

use Access::{Read as R, ReadWrite as W};

const FLASH: &str = include_str!("shaders/flash_attention.wgsl");

const K_FORWARD: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_forward",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W)],
};
const K_BACKWARD_DQ: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_backward_dq",
    bindings: &[(1, R), (2, R), (3, R), (6, R), (7, R), (8, W), (9, W)],
};
const K_BACKWARD_DKDV: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_backward_dkdv",
    bindings: &[(1, R), (2, R), (3, R), (6, R), (7, R), (10, R), (11, W), (12, W)],
};

/// Rows per workgroup (one per invocation): the kernels' `BR`.
const ROWS: usize = 64;
/// The widest head the kernels take: an invocation holds up to four head-sized vectors in
/// registers (`HD4` vec4s each), and wider heads would spill them.
pub(crate) const MAX_HEAD_DIM: usize = 128;
/// The most streamed rows per tile (`BC`); fewer where workgroup memory is short.
const MAX_TILE: usize = 32;

/// The generated constants of one head width on one device.
struct Shape {
    hd4: usize,
    tile: usize,
}

impl Shape {
    /// `BC` is the largest power of two up to [`MAX_TILE`] whose two tiles of `BC` rows
    /// (`HD4` vec4s each) and `BC` `(lse, Δ)` pairs fit the device's workgroup memory
    /// (WebGPU's default is 16 KiB: 16 rows of a 64-wide head).
    fn new(head_dim: usize, workgroup_bytes: usize) -> Self {
        let hd4 = head_dim.div_ceil(4);
        let bytes = |tile: usize| tile * (2 * hd4 * 16 + 8);
        let mut tile = MAX_TILE;
        while tile > 1 && bytes(tile) > workgroup_bytes {
            tile /= 2;
        }
        Shape { hd4, tile }
    }

    fn defines(&self) -> String {
        format!(
            "const BR: u32 = {ROWS}u;\nconst BC: u32 = {}u;\nconst HD4: u32 = {}u;\n{NARROW_F16}",
            self.tile, self.hd4
        )
    }
}

/// The kernels' parameter block (flash_attention.wgsl's `Params`).
fn params(dims: AttentionDims) -> [u32; 12] {
    let scale = 1.0 / (dims.head_dim as f32).sqrt();
    let [key0, key1, threshold, offset, drop_scale, on] = match dims.dropout {
        Some(m) => [m.key[0], m.key[1], m.threshold, m.offset, m.scale().to_bits(), 1],
        None => [0, 0, 0, 0, 1f32.to_bits(), 0],
    };
    let lse_len = dims.batch * dims.heads * dims.seq;
    [dims.seq, dims.heads, dims.head_dim, dims.channels()]
        .map(u)
        .into_iter()
        .chain([scale.to_bits(), key0, key1, threshold, offset, drop_scale, on, u(lse_len)])
        .collect::<Vec<_>>()
        .try_into()
        .expect("twelve parameters")
}

/// When the training attention pair runs flash attention on a mixed-precision device
/// (see the module doc; `f32` never does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlashAttention {
    /// Only where the unfused pair's probabilities exceed one storage binding.
    #[default]
    WhereNeeded,
    /// Wherever the kernels can run the shape.
    Always,
    /// Never: the unfused pair, or the GPU's out-of-memory error where it cannot run.
    Never,
}

impl FlashAttention {
    /// `TINYGPT_WGPU_FLASH_ATTENTION` (`on`, `off`; anything else or unset: where needed),
    /// read once per process. A browser has no environment: where needed.
    pub(crate) fn from_env() -> FlashAttention {
        #[cfg(not(target_arch = "wasm32"))]
        {
            static MODE: std::sync::OnceLock<FlashAttention> = std::sync::OnceLock::new();
            *MODE.get_or_init(|| match std::env::var("TINYGPT_WGPU_FLASH_ATTENTION").as_deref() {
                Ok("on") => FlashAttention::Always,
                Ok("off") => FlashAttention::Never,
                _ => FlashAttention::WhereNeeded,
            })
        }
        #[cfg(target_arch = "wasm32")]
        FlashAttention::WhereNeeded
    }
}

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

impl WgpuBackend {
    /// Whether the training pair runs flash attention for `dims`: on the mixed path, where
    /// [`FlashAttention`] wants it, for heads up to [`MAX_HEAD_DIM`] wide, a grid the device can launch, and a dropout index
    /// (the element's in the unfused `[B, H, T, T]`) that fits a u32 as the unfused path's
    /// does. The forward and the backward ask the same question, so they agree.
    pub(crate) fn flash_attention_fits(&self, dims: AttentionDims) -> bool {
        let max_grid = self.gpu.adapter.max_compute_workgroups_per_dimension as usize;
        let pairs = dims.batch * dims.heads;
        let probs_bytes = (pairs as u64) * (dims.seq as u64).pow(2) * 4;
        let wanted = match self.flash {
            FlashAttention::Always => true,
            FlashAttention::WhereNeeded => probs_bytes > self.max_binding(),
            FlashAttention::Never => false,
        };
        self.mixed
            && wanted
            && dims.seq > 0
            && pairs > 0
            && (1..=MAX_HEAD_DIM).contains(&dims.head_dim)
            && pairs <= max_grid
            && dims.seq.div_ceil(ROWS) <= max_grid
            && (pairs as u64) * (dims.seq as u64).pow(2) <= u32::MAX as u64
    }

    /// The same device with flash attention chosen by `mode` instead of
    /// `TINYGPT_WGPU_FLASH_ATTENTION` (tests and timing examples).
    pub fn with_flash_attention(&self, mode: FlashAttention) -> Self {
        WgpuBackend { flash: mode, ..self.clone() }
    }

    fn flash_shape(&self, dims: AttentionDims) -> Shape {
        Shape::new(dims.head_dim, self.gpu.device.limits().max_compute_workgroup_storage_size as usize)
    }

    fn flash_grid(dims: AttentionDims) -> [u32; 3] {
        [u(dims.seq.div_ceil(ROWS)), u(dims.batch * dims.heads), 1]
    }

    /// The forward: `out` and `saved` (see the module doc). Lengths checked by the caller;
    /// [`WgpuBackend::flash_attention_fits`] holds.
    pub(crate) fn flash_attention_forward(
        &self,
        q: &GpuBuffer<f32>,
        k: &GpuBuffer<f32>,
        v: &GpuBuffer<f32>,
        dims: AttentionDims,
    ) -> AttentionOut<GpuBuffer<f32>> {
        let len = dims.batch * dims.seq * dims.channels();
        let out = self.alloc(len);
        let saved = self.alloc(dims.batch * dims.heads * dims.seq + len);
        let bufs = [q.bind(), k.bind(), v.bind(), out.bind(), saved.bind()];
        let defines = self.flash_shape(dims).defines();
        self.run(&K_FORWARD, &defines, &params(dims), &bufs, Self::flash_grid(dims));
        AttentionOut { out, saved: Some(saved) }
    }

    /// The backward from [`WgpuBackend::flash_attention_forward`]'s `saved`.
    pub(crate) fn flash_attention_backward(
        &self,
        dout: &GpuBuffer<f32>,
        q: &GpuBuffer<f32>,
        k: &GpuBuffer<f32>,
        v: &GpuBuffer<f32>,
        saved: &GpuBuffer<f32>,
        dims: AttentionDims,
    ) -> AttentionGrads<GpuBuffer<f32>> {
        let len = dims.batch * dims.seq * dims.channels();
        let lse_len = dims.batch * dims.heads * dims.seq;
        let got = saved.len();
        assert!(
            got == lse_len + len,
            "attention_backward: saved holds {got} values, flash attention's for {dims:?} are {}",
            lse_len + len
        );
        let (dq, dk, dv, delta) =
            (self.alloc(len), self.alloc(len), self.alloc(len), self.alloc::<f32>(lse_len));
        let (defines, params, grid) =
            (self.flash_shape(dims).defines(), params(dims), Self::flash_grid(dims));
        let bufs = [q.bind(), k.bind(), v.bind(), dout.bind(), saved.bind(), dq.bind(), delta.bind()];
        self.run(&K_BACKWARD_DQ, &defines, &params, &bufs, grid);
        let bufs =
            [q.bind(), k.bind(), v.bind(), dout.bind(), saved.bind(), delta.bind(), dk.bind(), dv.bind()];
        self.run(&K_BACKWARD_DKDV, &defines, &params, &bufs, grid);
        AttentionGrads { dq, dk, dv }
    }
}

#[cfg(test)]
mod tests {
    use super::Shape;

    #[test]
    fn tiles_fit_workgroup_memory() {
        // The recipe's 64-wide head: 16 rows in WebGPU's default 16 KiB, 32 in an H200's 48.
        assert_eq!(Shape::new(64, 16384).tile, 16);
        assert_eq!(Shape::new(64, 49152).tile, 32);
        assert_eq!(Shape::new(7, 16384).hd4, 2);
        assert!(Shape::new(128, 16384).tile * (2 * 32 * 16 + 8) <= 16384);
    }
}
