// AdamW with global-norm clipping and decoupled weight decay, in place.
//
// adamw: param, grad, m, v [len], grad_sumsq [1] -> param, m, v updated in place
//
// g = grad · clip, clip = min(1, max_norm / (sqrt(grad_sumsq) + 1e-6)) (1 without
// clipping), read on the device so a step needs no host sync;
// m = b1 m + (1-b1) g, v = b2 v + (1-b2) g², p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p).
// The bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t come from the host (f64, rounded once).

struct Params {
    len: u32,
    has_clip: u32,
    max_norm: f32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bc1: f32,
    bc2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> grad_sumsq: array<f32>;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn adamw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i >= p.len) {
        return;
    }
    var clip = 1.0;
    if (p.has_clip != 0u) {
        clip = min(1.0, p.max_norm / (sqrt(grad_sumsq[0]) + 1e-6));
    }
    let g = grad[i] * clip;
    let mi = p.beta1 * m[i] + (1.0 - p.beta1) * g;
    let vi = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    let update = (mi / p.bc1) / (sqrt(vi / p.bc2) + p.eps);
    param[i] = param[i] - p.lr * (update + p.weight_decay * param[i]);
}
