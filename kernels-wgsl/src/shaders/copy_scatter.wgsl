// copy_scatter (see copy_many.wgsl).
@group(0) @binding(1) var<storage, read> s: array<u32>;
@group(0) @binding(2) var<storage, read_write> d0: array<u32>;
@group(0) @binding(3) var<storage, read_write> d1: array<u32>;
@group(0) @binding(4) var<storage, read_write> d2: array<u32>;
@group(0) @binding(5) var<storage, read_write> d3: array<u32>;
@group(0) @binding(6) var<storage, read_write> d4: array<u32>;
@group(0) @binding(7) var<storage, read_write> d5: array<u32>;
@group(0) @binding(8) var<storage, read_write> d6: array<u32>;

@compute @workgroup_size(256)
fn copy_scatter(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let at = word_to_copy(wid, nwg, lid);
    if (at.x == NONE) {
        return;
    }
    let v = s[at.y];
    switch (at.x) {
        case 0u: { d0[at.z] = v; }
        case 1u: { d1[at.z] = v; }
        case 2u: { d2[at.z] = v; }
        case 3u: { d3[at.z] = v; }
        case 4u: { d4[at.z] = v; }
        case 5u: { d5[at.z] = v; }
        case 6u: { d6[at.z] = v; }
        default: {}
    }
}
