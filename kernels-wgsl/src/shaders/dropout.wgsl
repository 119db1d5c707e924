// Dropout with the counter-based mask of dropout_mask.wgsl, one invocation per element V:
// the host prepends `alias V = vec4<f32>;` and `fn factors(i) -> V { return factors4(i); }`
// when the length is a multiple of 4 (len then counts vec4s), else `alias V = f32;` and
// `factors1`. Each element gets its own factor either way.
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
@group(0) @binding(1) var<storage, read> a: array<V>;
@group(0) @binding(2) var<storage, read> b: array<V>;
@group(0) @binding(3) var<storage, read_write> out: array<V>;

const WG: u32 = 256u;

fn mask() -> DropoutMask {
    return DropoutMask(p.key0, p.key1, p.threshold, p.offset, p.scale, 1u);
}

// The factor of element i.
fn factors1(i: u32) -> f32 {
    return dropout_factor(mask(), i);
}

// The factors of elements 4i .. 4i + 3.
fn factors4(i: u32) -> vec4<f32> {
    let m = mask();
    let j = 4u * i;
    return vec4<f32>(dropout_factor(m, j), dropout_factor(m, j + 1u), dropout_factor(m, j + 2u), dropout_factor(m, j + 3u));
}

@compute @workgroup_size(256)
fn dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = a[i] * factors(i);
    }
}

@compute @workgroup_size(256)
fn dropout_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        out[i] = a[i] + b[i] * factors(i);
    }
}
