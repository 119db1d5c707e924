// Dropout with the counter-based mask of dropout_mask.wgsl, one invocation per element.
//
// dropout:     a = x [len] -> out [len]                out[i] = x[i] · factor(i)
// dropout_add: a = residual, b = x [len] -> out [len]  out[i] = residual[i] + x[i] · factor(i)

struct Params {
    len: u32,
    key0: u32,
    key1: u32,
    threshold: u32,
    offset: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;

fn mask() -> DropoutMask {
    return DropoutMask(p.key0, p.key1, p.threshold, p.offset, p.scale, 1u);
}

@compute @workgroup_size(256)
fn dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = a[i] * dropout_factor(mask(), i);
    }
}

@compute @workgroup_size(256)
fn dropout_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = a[i] + b[i] * dropout_factor(mask(), i);
    }
}
