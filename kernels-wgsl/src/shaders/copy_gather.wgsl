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
    let at = word_to_copy(wid, nwg, lid);
    var v: u32;
    switch (at.x) {
        case 0u: { v = s0[at.y]; }
        case 1u: { v = s1[at.y]; }
        case 2u: { v = s2[at.y]; }
        case 3u: { v = s3[at.y]; }
        case 4u: { v = s4[at.y]; }
        case 5u: { v = s5[at.y]; }
        case 6u: { v = s6[at.y]; }
        default: { return; }
    }
    d[at.z] = v;
}
