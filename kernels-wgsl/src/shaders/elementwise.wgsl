// Pointwise ops, one invocation per element.
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
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
const SQRT_2_OVER_PI: f32 = 0.7978846;
const CUBIC: f32 = 0.044715;

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
        out[i] = 0.5 * x * (1.0 + tanh_stable(u));
    }
}

@compute @workgroup_size(256)
fn gelu_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        let x = a[i];
        let t = tanh_stable(SQRT_2_OVER_PI * (x + CUBIC * x * x * x));
        let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
        out[i] = b[i] * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
}
