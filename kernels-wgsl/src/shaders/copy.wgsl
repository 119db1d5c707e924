// Buffer copies and fills as kernels, so they stay inside the open compute pass (a
// transfer command would end it; a training step makes hundreds of these).
//
// copy: src[src_offset + i] -> dst[dst_offset + i], i < len (32-bit words, bit for bit)
// fill: dst[i] = value, i < len

struct Params {
    len: u32,
    src_offset: u32,
    dst_offset: u32,
    value: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        dst[p.dst_offset + i] = src[p.src_offset + i];
    }
}

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WG + lid;
    if (i < p.len) {
        dst[i] = p.value;
    }
}
