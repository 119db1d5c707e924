//! Host side of `shaders/copy_many.wgsl`: [`tinygpt_tensor::Backend::copy`] as one
//! dispatch per [`PIECES`] copies where they share their destination (a gather) or their
//! source (a scatter), instead of one dispatch, behind its own barrier, per copy. At the
//! shakespeare-char recipe's shape the optimizer's ~200 copies a step took 1.45 ms of
//! GPU time this way (NVIDIA H200), mostly waiting between tiny dispatches.

use tinygpt_tensor::{assert_copy_in_bounds, CopyRange};

use crate::ops::COPY;
use crate::pipelines::{Access, Kernel};
use crate::pool::{Bind, GpuBuffer};
use crate::WgpuBackend;

use Access::{Read as R, ReadWrite as W};

const COPY_MANY: &str = include_str!("shaders/copy_many.wgsl");
const COPY_GATHER: &str = include_str!("shaders/copy_gather.wgsl");
const COPY_SCATTER: &str = include_str!("shaders/copy_scatter.wgsl");

/// Copies per dispatch: with the other side's one buffer that is 8 storage bindings, the
/// WebGPU default per shader stage.
const PIECES: usize = 7;
const WG: usize = 256;

const K_COPY: Kernel = Kernel { parts: &[COPY], entry: "copy", bindings: &[(1, R), (2, W)] };
const K_GATHER: Kernel = Kernel {
    parts: &[COPY_MANY, COPY_GATHER],
    entry: "copy_gather",
    bindings: &[(1, R), (2, R), (3, R), (4, R), (5, R), (6, R), (7, R), (8, W)],
};
const K_SCATTER: Kernel = Kernel {
    parts: &[COPY_MANY, COPY_SCATTER],
    entry: "copy_scatter",
    bindings: &[(1, R), (2, W), (3, W), (4, W), (5, W), (6, W), (7, W), (8, W)],
};

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a size beyond u32 reached a GPU kernel")
}

impl WgpuBackend {
    pub(crate) fn copy_grouped(&self, copies: &[CopyRange<'_, GpuBuffer<f32>>]) {
        for c in copies {
            assert!(!c.src.same_buffer(c.dst), "copy: src and dst must be different buffers");
            assert_copy_in_bounds(c.src.len(), c.src_offset, c.dst.len(), c.dst_offset, c.len);
        }
        let mut rest = copies;
        while let Some(first) = rest.first() {
            // The longest run from here sharing the first's destination, or its source
            // (then into distinct buffers: a writable binding may not alias another).
            let window = &rest[..rest.len().min(PIECES)];
            let gather = window.iter().take_while(|c| c.dst.same_buffer(first.dst)).count();
            let scatter = window
                .iter()
                .enumerate()
                .take_while(|(i, c)| {
                    c.src.same_buffer(first.src) && window[..*i].iter().all(|o| !o.dst.same_buffer(c.dst))
                })
                .count();
            let n = gather.max(scatter);
            if n < 2 {
                self.copy_one(first);
            } else {
                self.copy_pieces(&rest[..n], gather >= scatter);
            }
            rest = &rest[n.max(1)..];
        }
    }

    /// A range alone: one dispatch of the plain copy kernel (none when empty).
    fn copy_one(&self, c: &CopyRange<'_, GpuBuffer<f32>>) {
        if c.len == 0 {
            return;
        }
        let params = [u(c.len), u(c.src_offset), u(c.dst_offset), 0];
        self.run_1d(&K_COPY, &params, &[c.src.bind(), c.dst.bind()], c.len.div_ceil(WG));
    }

    /// One dispatch of up to [`PIECES`] copies into one buffer (`gather`) or out of one.
    fn copy_pieces(&self, pieces: &[CopyRange<'_, GpuBuffer<f32>>], gather: bool) {
        let mut params = vec![u(pieces.len()), 0, 0, 0];
        let mut groups = 0;
        for c in pieces {
            params.extend([u(groups), u(c.len), u(c.src_offset), u(c.dst_offset)]);
            groups += c.len.div_ceil(WG);
        }
        if groups == 0 {
            return;
        }
        // Unused slots: a source slot repeats the first source (read-only bindings may
        // alias); a destination slot gets a buffer of its own that no piece names.
        let spares: Vec<GpuBuffer<f32>> =
            if gather { Vec::new() } else { (pieces.len()..PIECES).map(|_| self.alloc::<f32>(1)).collect() };
        let mut binds: Vec<Bind<'_>> = Vec::with_capacity(PIECES + 1);
        if gather {
            binds.extend(pieces.iter().map(|c| c.src.bind()));
            binds.extend((pieces.len()..PIECES).map(|_| pieces[0].src.bind()));
            binds.push(pieces[0].dst.bind());
        } else {
            binds.push(pieces[0].src.bind());
            binds.extend(pieces.iter().map(|c| c.dst.bind()));
            binds.extend(spares.iter().map(GpuBuffer::bind));
        }
        let kernel = if gather { &K_GATHER } else { &K_SCATTER };
        self.run_1d(kernel, &params, &binds, groups);
    }
}
