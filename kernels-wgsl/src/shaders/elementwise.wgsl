// Pointwise ops, one invocation per element V: the host prepends `alias V = vec4<f32>;`
// when the length is a multiple of 4 (len then counts vec4s: one 16-byte access per
// operand and invocation), else `alias V = f32;`. The same arithmetic either way, lane by
// lane.
//
// add:           a, b [len] -> out [len]
// scale:         a [len], alpha -> out [len]
// gelu:          a = x [len] -> out [len]
// gelu_backward: a = x, b = dout [len] -> out = dx [len]
// (the GELU formulas are gelu.wgsl's, which the host puts before this file)

struct Params {
    len: u32,
    alpha: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<V>;
@group(0) @binding(2) var<storage, read> b: array<V>;
@group(0) @binding(3) var<storage, read_write> out: array<V>;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = a[i] + b[i];
    }
}

@compute @workgroup_size(256)
fn scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = p.alpha * a[i];
    }
}

@compute @workgroup_size(256)
fn gelu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = gelu_v(a[i]);
    }
}

@compute @workgroup_size(256)
fn gelu_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = b[i] * gelu_slope_v(a[i]);
    }
}
