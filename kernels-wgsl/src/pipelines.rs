//! Kernels (WGSL source + entry point + bindings) and the cache of their compiled
//! pipelines and bind-group layouts.
//!
//! Binding 0 of every kernel is its parameter block, a uniform with a dynamic offset into
//! the recorder's arena; the others are storage buffers, listed per kernel with their
//! access. A shader's source is `common.wgsl`, then the kernel's own parts, with any
//! generated constants (matmul's variants) or variant parts (the row reductions, see
//! `reductions.rs`) in front.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::pool::Counters;

pub(crate) const COMMON: &str = include_str!("shaders/common.wgsl");
pub(crate) const BLOCK_REDUCE: &str = include_str!("shaders/block_reduce.wgsl");
/// Dropout's mask rule, shared by the kernels that drop out (dropout, attention).
pub(crate) const DROPOUT_MASK: &str = include_str!("shaders/dropout_mask.wgsl");

/// Bytes of one kernel's parameter block (and the arena's slot stride, at least).
pub(crate) const PARAM_BYTES: u64 = 256;

/// How a kernel uses a storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    Read,
    ReadWrite,
}

/// A compute entry point and what it binds.
pub(crate) struct Kernel {
    /// Source pieces after `common.wgsl`, in order.
    pub parts: &'static [&'static str],
    pub entry: &'static str,
    /// Storage bindings (number, access), in the order `dispatch` receives buffers.
    pub bindings: &'static [(u32, Access)],
}

pub(crate) struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: Arc<wgpu::BindGroupLayout>,
    /// Identifies `layout` in bind-group cache keys.
    pub layout_id: u64,
    pub bindings: &'static [(u32, Access)],
}

/// A bind-group layout (with its cache id) and the pipeline layout made of it.
type Layout = (u64, Arc<wgpu::BindGroupLayout>, Arc<wgpu::PipelineLayout>);

/// What names a kernel's pipelines, with their defines: its entry point and its bindings.
/// Kernels that share an entry point differ in their defines or in their bindings (and
/// the parts that declare them: LayerNorm's dx with and without `onto`).
type KernelKey = (&'static str, &'static [(u32, Access)]);

pub(crate) struct Pipelines {
    device: wgpu::Device,
    counters: Arc<Counters>,
    /// Per kernel, its pipelines by defines: a dispatch looks its pipeline up without
    /// building a key.
    pipelines: Mutex<HashMap<KernelKey, HashMap<String, Arc<Pipeline>>>>,
    layouts: Mutex<HashMap<Vec<(u32, Access)>, Layout>>,
    next_layout: AtomicU64,
}

impl Pipelines {
    pub fn new(device: wgpu::Device, counters: Arc<Counters>) -> Self {
        Pipelines {
            device,
            counters,
            pipelines: Mutex::new(HashMap::new()),
            layouts: Mutex::new(HashMap::new()),
            next_layout: AtomicU64::new(1),
        }
    }

    /// The pipeline for `kernel` with `defines` (WGSL declarations) in front, compiled once.
    pub fn get(&self, kernel: &Kernel, defines: &str) -> Arc<Pipeline> {
        let key = (kernel.entry, kernel.bindings);
        if let Some(p) =
            self.pipelines.lock().expect("pipeline cache lock").get(&key).and_then(|by| by.get(defines))
        {
            return Arc::clone(p);
        }
        let (layout_id, layout, pipeline_layout) = self.layout(kernel.bindings);
        let mut source = String::from(defines);
        source.push('\n');
        source.push_str(COMMON);
        for part in kernel.parts {
            source.push('\n');
            source.push_str(part);
        }
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(kernel.entry),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        // SAFETY: `create_shader_module_trusted` drops the checks naga would add to every
        // array index, integer division and loop. Our kernels index only inside the
        // buffers `ops.rs` checked the lengths of (ids and targets excepted: the trait's
        // contract puts them inside their table), divide by sizes that are never 0 when a
        // kernel runs, and every loop is bounded by a size. The checks cost the software
        // adapters several times the kernels' own work.
        let module =
            unsafe { self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) };
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(kernel.entry),
            // Every kernel writes its workgroup memory before reading it; zeroing it first
            // would cost each workgroup a pass over it and a barrier.
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Counters::bump(&self.counters.pipelines);
        let p = Arc::new(Pipeline { pipeline, layout, layout_id, bindings: kernel.bindings });
        let mut cache = self.pipelines.lock().expect("pipeline cache lock");
        cache.entry(key).or_default().insert(defines.to_string(), Arc::clone(&p));
        p
    }

    fn layout(&self, bindings: &[(u32, Access)]) -> Layout {
        let mut cache = self.layouts.lock().expect("layout cache lock");
        if let Some((id, l, pl)) = cache.get(bindings) {
            return (*id, Arc::clone(l), Arc::clone(pl));
        }
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            count: None,
        }];
        entries.extend(bindings.iter().map(|&(binding, access)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: access == Access::Read },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }));
        let layout =
            Arc::new(self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &entries,
            }));
        let pipeline_layout = Arc::new(self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        }));
        let id = self.next_layout.fetch_add(1, Ordering::Relaxed);
        cache.insert(bindings.to_vec(), (id, Arc::clone(&layout), Arc::clone(&pipeline_layout)));
        (id, layout, pipeline_layout)
    }
}
