//! The pending command encoder: ops append dispatches here and nothing reaches the GPU
//! until [`Recorder::submit`] (called by `read`, `upload` when commands are pending,
//! `flush`, and when the parameter arena is full).
//!
//! Kernel parameters go into 256-byte slots of one uniform buffer (the arena), bound with
//! a dynamic offset, so a dispatch creates no buffer; the slots are written to the device
//! in one `write_buffer` just before the submission that reads them (queue order makes
//! the write land after the previous submission is done with the arena). Bind groups are
//! cached by layout and the exact buffers bound; pooled buffers keep their ids, so a
//! training step that repeats the previous one's allocations reuses every bind group.

use std::collections::HashMap;

use crate::pipelines::{Pipeline, PARAM_BYTES};
use crate::pool::{Bind, Counters};
use crate::profile::Profiler;

/// Parameter slots per submission; a full arena submits early.
const ARENA_SLOTS: u64 = 4096;
/// Cached bind groups before the cache is cleared (a guard against unbounded growth when
/// buffers keep changing; a steady training loop stays far below it).
const MAX_BIND_GROUPS: usize = 1 << 14;

#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    layout: u64,
    buffers: Vec<(u64, u64)>,
}

pub(crate) struct Recorder {
    // Declared before `encoder`: a pass must end before its encoder goes.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    arena: wgpu::Buffer,
    stride: u64,
    params: Vec<u8>,
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
    /// Commands recorded since the last submission.
    pending: usize,
    max_groups_per_dim: u32,
    /// Per-dispatch timestamps, on a device opened with them (see `profile.rs`).
    pub profiler: Option<Profiler>,
    /// Dispatches after which the recorder submits by itself (0: never), and the count
    /// since the last submission: a long step then runs on the GPU while the host is
    /// still recording its end.
    submit_every: usize,
    dispatches: usize,
}

impl Recorder {
    pub fn new(device: &wgpu::Device, counters: &Counters, submit_every: usize) -> Self {
        let limits = device.limits();
        let stride = PARAM_BYTES.max(limits.min_uniform_buffer_offset_alignment as u64);
        Counters::bump(&counters.buffers);
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("tinygpt kernel parameters"),
            size: stride * ARENA_SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder {
            pass: None,
            encoder: None,
            arena,
            stride,
            params: Vec::with_capacity((stride * 64) as usize),
            bind_groups: HashMap::new(),
            pending: 0,
            max_groups_per_dim: limits.max_compute_workgroups_per_dimension,
            profiler: None,
            submit_every,
            dispatches: 0,
        }
    }

    /// Whether commands wait for a submission.
    pub fn has_pending(&self) -> bool {
        self.pending > 0
    }

    /// A grid of `groups` workgroups: `[groups, 1, 1]`, or folded into two dimensions when
    /// `groups` passes the adapter's per-dimension limit (kernels undo it with `flat_group`).
    pub fn grid_1d(&self, groups: usize) -> [u32; 3] {
        let max = self.max_groups_per_dim as usize;
        if groups <= max {
            return [groups as u32, 1, 1];
        }
        let y = groups.div_ceil(max);
        assert!(y <= max, "a launch of {groups} workgroups is beyond this adapter's grid");
        [groups.div_ceil(y) as u32, y as u32, 1]
    }

    fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("tinygpt ops") })
        })
    }

    /// The encoder for a copy or clear (ending the open compute pass first).
    pub fn transfer(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        self.pending += 1;
        self.encoder(device)
    }

    /// Records one dispatch of `pipeline` over `grid` workgroups, with `params` (32-bit
    /// words) in its parameter block and `buffers` at its storage bindings, in order.
    /// `label` names it in a profile (called only while profiling).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        counters: &Counters,
        pipeline: &Pipeline,
        params: &[u32],
        buffers: &[Bind<'_>],
        grid: [u32; 3],
        label: impl FnOnce() -> String,
    ) {
        assert_eq!(buffers.len(), pipeline.bindings.len(), "kernel binding count");
        assert!(params.len() * 4 <= PARAM_BYTES as usize, "kernel parameter block too large");
        if grid.contains(&0) {
            return;
        }
        let profiling = self.profiler.as_ref().is_some_and(|p| p.enabled);
        if self.params.len() as u64 >= self.stride * ARENA_SLOTS
            || (profiling && !self.profiler.as_ref().is_some_and(Profiler::has_room))
        {
            self.submit(queue, counters);
        }
        let offset = self.params.len() as u64;
        self.params.extend(params.iter().flat_map(|w| w.to_le_bytes()));
        self.params.resize((offset + self.stride) as usize, 0);

        let key =
            BindKey { layout: pipeline.layout_id, buffers: buffers.iter().map(|b| (b.id, b.size)).collect() };
        if !self.bind_groups.contains_key(&key) {
            if self.bind_groups.len() >= MAX_BIND_GROUPS {
                self.bind_groups.clear();
            }
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.arena,
                    offset: 0,
                    size: wgpu::BufferSize::new(PARAM_BYTES),
                }),
            }];
            entries.extend(pipeline.bindings.iter().zip(buffers).map(|(&(binding, _), b)| {
                wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: b.buffer,
                        offset: 0,
                        size: wgpu::BufferSize::new(b.size),
                    }),
                }
            }));
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.layout,
                entries: &entries,
            });
            Counters::bump(&counters.bind_groups);
            self.bind_groups.insert(key.clone(), group);
        }
        if self.pass.is_none() {
            let pass = self
                .encoder(device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None })
                .forget_lifetime();
            self.pass = Some(pass);
        }
        let group = &self.bind_groups[&key];
        let pass = self.pass.as_mut().expect("compute pass just opened");
        let profiler = self.profiler.as_mut().filter(|_| profiling);
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, group, &[offset as u32]);
        match profiler {
            Some(profiler) => {
                profiler.begin(pass, label());
                pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
                profiler.end(pass);
            }
            None => pass.dispatch_workgroups(grid[0], grid[1], grid[2]),
        }
        self.pending += 1;
        self.dispatches += 1;
        Counters::bump(&counters.dispatches);
        if self.submit_every > 0 && self.dispatches >= self.submit_every {
            self.submit(queue, counters);
        }
    }

    /// Sends everything recorded so far to the GPU (parameters first).
    pub fn submit(&mut self, queue: &wgpu::Queue, counters: &Counters) {
        self.pass = None;
        if let Some(mut encoder) = self.encoder.take() {
            if !self.params.is_empty() {
                queue.write_buffer(&self.arena, 0, &self.params);
            }
            if let Some(profiler) = &self.profiler {
                profiler.resolve(&mut encoder);
            }
            queue.submit([encoder.finish()]);
            Counters::bump(&counters.submissions);
            if let Some(profiler) = &mut self.profiler {
                profiler.collect();
            }
        }
        self.params.clear();
        self.pending = 0;
        self.dispatches = 0;
    }
}
