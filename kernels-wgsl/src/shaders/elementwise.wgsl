// Pointwise ops, one invocation per element V: the host prepends `alias V = vec4<f32>;`
// when the length is a multiple of 4 (len then counts vec4s: one 16-byte access per
// operand and invocation), else `alias V = f32;`. The same arithmetic either way, lane by
// lane.
//
// add:           a, b [len] -> out [len]
// scale:         a [len], alpha -> out [len]
// gelu:          a = x [len] -> out [len]
// gelu_backward: a = x, b = dout [len] -> out = dx [len]
//
// gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/π) (x + 0.044715 x³)

struct Params {
    len: u32,
    alpha: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<V>;
@group(0) @binding(2) var<storage, read> b: array<V>;
@group(0) @binding(3) var<storage, read_write> out: array<V>;

const WG: u32 = 256u;
const SQRT_2_OVER_PI: f32 = 0.7978846;
const CUBIC: f32 = 0.044715;

// common.wgsl's `tanh_stable`, lane by lane.
fn tanh_v(u: V) -> V {
    let e = exp(-2.0 * abs(u));
    return sign(u) * (1.0 - e) / (1.0 + e);
}

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
        let x = a[i];
        let u = SQRT_2_OVER_PI * (x + CUBIC * x * x * x);
        out[i] = 0.5 * x * (1.0 + tanh_v(u));
    }
}

@compute @workgroup_size(256)
fn gelu_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        let x = a[i];
        let t = tanh_v(SQRT_2_OVER_PI * (x + CUBIC * x * x * x));
        let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
        out[i] = b[i] * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
}
