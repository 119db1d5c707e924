//! Fused (flash-style) causal attention for training (`shaders/flash_attention.wgsl`):
//! [`tinygpt_tensor::Backend::attention_for_training`] saves each query row's log-sum-exp
//! `[B·H·T]` (and a copy of the output) instead of the `[B, H, T, T]` probabilities, and the backward pass recomputes
//! the probabilities tile by tile. One dispatch forward (instead of the scores product, the
//! softmax and the weighted product over materialised probabilities) and two backward
//! (`dq` with each row's `dout · out` on the way, then `dk`, `dv`) instead of five.
//!
//! Off by default ([`WgpuBackend::with_fused_attention`], `TINYGPT_WGPU_FUSED_ATTENTION=1`):
//! on the H200 at the shakespeare-char recipe's shape these kernels took 13.2 ms a step
//! against 4.9 for the probabilities' path (BENCHMARKS.md). An invocation owns a whole row
//! and reads the other side's rows from workgroup memory, four multiply-adds per vec4
//! read, where the batched matmuls' 8 × 8 register tiles do sixteen; the backward kernels
//! also read a row of their own (not a broadcast) per pair of rows. Register tiles of
//! several rows per invocation (as matmul.wgsl) are what would make them pay.
//!
//! Shapes it does not take (a head width that is not a multiple of 4 or is over 64, or a
//! device with too little workgroup memory), and every shape when off, keep the trait's
//! default, the probabilities; the backward tells the two apart by the same rule.

use tinygpt_tensor::{AttentionDims, AttentionGrads, AttentionSaved};

use crate::pipelines::{Access, Kernel, DROPOUT_MASK};
use crate::pool::GpuBuffer;
use crate::WgpuBackend;

use Access::{Read as R, ReadWrite as W};

const FLASH: &str = include_str!("shaders/flash_attention.wgsl");

const K_FLASH_FORWARD: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_forward",
    bindings: &[(1, R), (2, R), (3, R), (4, W), (5, W)],
};
const K_FLASH_BACKWARD_Q: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_backward_q",
    bindings: &[(1, R), (2, R), (3, R), (6, R), (8, R), (9, W), (11, W)],
};
const K_FLASH_BACKWARD_KV: Kernel = Kernel {
    parts: &[DROPOUT_MASK, FLASH],
    entry: "flash_backward_kv",
    bindings: &[(1, R), (2, R), (3, R), (6, R), (8, R), (10, R), (12, W), (13, W)],
};

/// Rows of a workgroup's own side (`ROWS` in the shader).
const ROWS: usize = 64;
/// Rows of a tile of the other side (`TILE`): the first that fits the device's workgroup
/// memory (lavapipe and browsers offer 32 KiB, too little for 32 at head width 64).
const TILES: [usize; 2] = [32, 16];
/// The widest head the kernels keep in registers.
const MAX_HEAD_DIM: usize = 64;

/// Workgroup memory the backward kernels use at head width `hd` with tiles of `tile` rows:
/// two tiles, the own rows (padded by a vec4) and two rows of per-query values.
fn workgroup_bytes(hd: usize, tile: usize) -> usize {
    4 * (2 * tile * hd + ROWS * (hd + 4) + 2 * tile)
}

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

impl WgpuBackend {
    /// Whether the fused kernels take attention of these dims (see the module docs).
    pub(crate) fn flash_fits(&self, dims: &AttentionDims) -> bool {
        let hd = dims.head_dim;
        let groups = self.gpu.device.limits().max_compute_workgroups_per_dimension as usize;
        self.fused_attention
            && hd.is_multiple_of(4)
            && (4..=MAX_HEAD_DIM).contains(&hd)
            && dims.seq >= 1
            && self.flash_tile(hd).is_some()
            && dims.batch * dims.heads <= groups
            // Element indices of the probabilities (the dropout mask's numbering) fit a u32.
            && (dims.batch * dims.heads) as u64 * dims.seq as u64 * dims.seq as u64 <= u32::MAX as u64
    }

    /// The tile rows for head width `hd` on this device (see [`TILES`]).
    fn flash_tile(&self, hd: usize) -> Option<usize> {
        let limit = self.gpu.device.limits().max_compute_workgroup_storage_size as usize;
        let fits = |tile: usize| workgroup_bytes(hd, tile) <= limit;
        match self.gpu.tuning.flash_tile {
            Some(tile) => fits(tile).then_some(tile),
            None => TILES.into_iter().find(|&tile| fits(tile)),
        }
    }

    /// The kernels' parameter block (the mask's fields as in attention.wgsl) and defines.
    fn flash_params(&self, dims: &AttentionDims) -> ([u32; 11], String) {
        let scale = 1.0 / (dims.head_dim as f32).sqrt();
        let [key0, key1, threshold, offset, drop_scale, on] = match dims.dropout {
            Some(m) => [m.key[0], m.key[1], m.threshold, m.offset, m.scale().to_bits(), 1],
            None => [0, 0, 0, 0, 1f32.to_bits(), 0],
        };
        let params = [
            u(dims.batch * dims.heads * dims.seq),
            u(dims.seq),
            u(dims.heads),
            u(dims.channels() / 4),
            scale.to_bits(),
            key0,
            key1,
            threshold,
            offset,
            drop_scale,
            on,
        ];
        let tile = self.flash_tile(dims.head_dim).expect("flash_fits checked the tile");
        (params, format!("const HD4: u32 = {}u;\nconst TILE: u32 = {tile}u;", dims.head_dim / 4))
    }

    /// The fused forward: `out`, and as `saved` the rows' log-sum-exps `[B·H·T]` followed
    /// by a copy of `out` (see flash_attention.wgsl).
    pub(crate) fn flash_forward(
        &self,
        q: &GpuBuffer<f32>,
        k: &GpuBuffer<f32>,
        v: &GpuBuffer<f32>,
        dims: AttentionDims,
    ) -> AttentionSaved<GpuBuffer<f32>> {
        let rows = dims.batch * dims.heads * dims.seq;
        let out = self.alloc(dims.batch * dims.seq * dims.channels());
        let saved = self.alloc(rows + out.len());
        let (params, defines) = self.flash_params(&dims);
        let grid = [u(dims.seq.div_ceil(ROWS)), u(dims.batch * dims.heads), 1];
        let bufs = [q.bind(), k.bind(), v.bind(), out.bind(), saved.bind()];
        self.run(&K_FLASH_FORWARD, &defines, &params, &bufs, grid);
        AttentionSaved { out, saved }
    }

    /// The fused backward from what [`WgpuBackend::flash_forward`] saved.
    pub(crate) fn flash_backward(
        &self,
        dout: &GpuBuffer<f32>,
        q: &GpuBuffer<f32>,
        k: &GpuBuffer<f32>,
        v: &GpuBuffer<f32>,
        saved: &GpuBuffer<f32>,
        dims: AttentionDims,
    ) -> AttentionGrads<GpuBuffer<f32>> {
        let len = dims.batch * dims.seq * dims.channels();
        let (dq, dk, dv) = (self.alloc(len), self.alloc(len), self.alloc(len));
        let delta = self.alloc::<f32>(dims.batch * dims.heads * dims.seq);
        let (params, defines) = self.flash_params(&dims);
        let grid = [u(dims.seq.div_ceil(ROWS)), u(dims.batch * dims.heads), 1];
        let bufs = [q.bind(), k.bind(), v.bind(), dout.bind(), saved.bind(), delta.bind(), dq.bind()];
        self.run(&K_FLASH_BACKWARD_Q, &defines, &params, &bufs, grid);
        let bufs =
            [q.bind(), k.bind(), v.bind(), dout.bind(), saved.bind(), delta.bind(), dk.bind(), dv.bind()];
        self.run(&K_FLASH_BACKWARD_KV, &defines, &params, &bufs, grid);
        AttentionGrads { dq, dk, dv }
    }
}
