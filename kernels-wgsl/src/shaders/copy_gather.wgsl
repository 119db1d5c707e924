// copy_gather (see copy_many.wgsl).
@group(0) @binding(1) var<storage, read> s0: array<u32>;
@group(0) @binding(2) var<storage, read> s1: array<u32>;
@group(0) @binding(3) var<storage, read> s2: array<u32>;
@group(0) @binding(4) var<storage, read> s3: array<u32>;
@group(0) @binding(5) var<storage, read> s4: array<u32>;
@group(0) @binding(6) var<storage, read> s5: array<u32>;
@group(0) @binding(7) var<storage, read> s6: array<u32>;
@group(0) @binding(8) var<storage, read_write> d: array<u32>;

@compute @workgroup_size(256)
fn copy_gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let at = locate(flat_group(wid, nwg), lid);
    let piece = p.pieces[at.x];
    let i = at.y;
    if (i >= piece.len) {
        return;
    }
    let src_at = piece.src_offset + i;
    var v: u32;
    switch (at.x) {
        case 0u: { v = s0[src_at]; }
        case 1u: { v = s1[src_at]; }
        case 2u: { v = s2[src_at]; }
        case 3u: { v = s3[src_at]; }
        case 4u: { v = s4[src_at]; }
        case 5u: { v = s5[src_at]; }
        default: { v = s6[src_at]; }
    }
    d[piece.dst_offset + i] = v;
}
