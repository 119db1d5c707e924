//! GPU time per kernel, for finding where a training step spends its time (native only,
//! opt-in: [`crate::WgpuBackend::new_profiled`]).
//!
//! When enabled, the recorder brackets every dispatch with two timestamps written inside
//! the compute pass. Each submission then resolves its timestamps into a buffer, copies
//! them to a host-readable one and waits for them, so profiling serialises the host and
//! the GPU: use it for the breakdown, and time the step without it. A dispatch's time is
//! from the end of the work before it to its own end (Vulkan writes these timestamps at
//! the bottom of the pipe), so it includes the barrier and ramp-up in front of it.
//!
//! Timestamps group by a label: the kernel's entry point and what sets its cost (for
//! matmul the layout, sizes and tile; for the others the grid it ran over).

use std::collections::HashMap;

/// How many timestamps one submission can hold (wgpu's largest query set): two per
/// dispatch, so a recorder submits early after `QUERIES / 2` profiled dispatches.
const QUERIES: u32 = wgpu::QUERY_SET_MAX_QUERIES;

/// Total GPU time of the dispatches that shared one label.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The kernel's label.
    pub label: String,
    /// Dispatches.
    pub calls: u64,
    /// GPU time, in nanoseconds, summed.
    pub nanos: f64,
}

/// The features a profiled device needs.
pub(crate) fn features() -> wgpu::Features {
    wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
}

/// What a dispatch is filed under: `matmul nt 2048x256x256 bm64` (layout, m × n × k and
/// block tile, read back from the generated constants) or `attention grid 16384x1x1`.
pub(crate) fn label(entry: &str, defines: &str, params: &[u32], grid: [u32; 3]) -> String {
    if entry.starts_with("matmul") && params.len() >= 3 {
        let flag = |name: &str| defines.contains(&format!("{name}: bool = true"));
        let layout = match (flag("TRANS_A"), flag("TRANS_B")) {
            (false, false) => "nn",
            (false, true) => "nt",
            (true, false) => "tn",
            (true, true) => "tt",
        };
        let tile = defines
            .lines()
            .find_map(|l| l.strip_prefix("const BM: u32 = "))
            .map_or("?", |v| v.trim_end_matches("u;"));
        let split = defines
            .lines()
            .find_map(|l| l.strip_prefix("const SPLIT_K: u32 = "))
            .map(|v| v.trim_end_matches("u;"))
            .filter(|&v| v != "1")
            .map_or(String::new(), |v| format!(" split{v}"));
        return format!("{entry} {layout} {}x{}x{} bm{tile}{split}", params[0], params[2], params[1]);
    }
    format!("{entry} grid {}x{}x{}", grid[0], grid[1], grid[2])
}

pub(crate) struct Profiler {
    device: wgpu::Device,
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    nanos_per_tick: f64,
    /// Labels of the dispatches timed in the submission being recorded, in order.
    pending: Vec<String>,
    totals: HashMap<String, (u64, f64)>,
    pub enabled: bool,
}

impl Profiler {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Self {
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("tinygpt profile"),
            ty: wgpu::QueryType::Timestamp,
            count: QUERIES,
        });
        let bytes = QUERIES as u64 * wgpu::QUERY_SIZE as u64;
        let buffer = |usage, label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Profiler {
            device: device.clone(),
            resolved: buffer(
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                "profile resolve",
            ),
            readback: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, "profile readback"),
            queries,
            nanos_per_tick: queue.get_timestamp_period() as f64,
            pending: Vec::new(),
            totals: HashMap::new(),
            enabled: false,
        }
    }

    /// Whether another dispatch's two timestamps still fit in this submission.
    pub fn has_room(&self) -> bool {
        (self.pending.len() as u32 + 1) * 2 <= QUERIES
    }

    /// The timestamp in front of a dispatch; [`Profiler::end`] writes the one after it.
    pub fn begin(&mut self, pass: &mut wgpu::ComputePass<'static>, label: String) {
        pass.write_timestamp(&self.queries, self.pending.len() as u32 * 2);
        self.pending.push(label);
    }

    pub fn end(&mut self, pass: &mut wgpu::ComputePass<'static>) {
        pass.write_timestamp(&self.queries, self.pending.len() as u32 * 2 - 1);
    }

    /// Records the copy of this submission's timestamps to the host-readable buffer (the
    /// compute pass must have ended).
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        if self.pending.is_empty() {
            return;
        }
        let n = self.pending.len() as u32 * 2;
        encoder.resolve_query_set(&self.queries, 0..n, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(
            &self.resolved,
            0,
            &self.readback,
            0,
            n as u64 * wgpu::QUERY_SIZE as u64,
        );
    }

    /// After the submission holding [`Profiler::resolve`]'s copy: waits for it and adds
    /// each dispatch's time to its label's total.
    pub fn collect(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let bytes = self.pending.len() as u64 * 2 * wgpu::QUERY_SIZE as u64;
        self.readback.map_async(wgpu::MapMode::Read, 0..bytes, |_| {});
        if self.device.poll(wgpu::PollType::wait_indefinitely()).is_ok() {
            if let Ok(view) = self.readback.get_mapped_range(0..bytes) {
                let ticks: &[u64] = bytemuck::cast_slice(&view);
                for (label, pair) in self.pending.iter().zip(ticks.chunks_exact(2)) {
                    let nanos = pair[1].saturating_sub(pair[0]) as f64 * self.nanos_per_tick;
                    let total = self.totals.entry(label.clone()).or_insert((0, 0.0));
                    total.0 += 1;
                    total.1 += nanos;
                }
            }
            self.readback.unmap();
        }
        self.pending.clear();
    }

    /// The totals since the last call, largest first.
    pub fn take(&mut self) -> Vec<KernelTime> {
        let mut out: Vec<KernelTime> =
            self.totals.drain().map(|(label, (calls, nanos))| KernelTime { label, calls, nanos }).collect();
        out.sort_by(|a, b| b.nanos.total_cmp(&a.nanos));
        out
    }
}
