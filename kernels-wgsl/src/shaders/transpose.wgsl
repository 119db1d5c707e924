// Transpose: src [rows, cols] -> dst [cols, rows], bit for bit. Workgroup (x, y) moves the
// 32 × 32 block at src rows y·32.., columns x·32.. through workgroup memory (rows padded
// by one value: the column reads hit 32 different banks), so that both the reads from src
// and the writes to dst are along stored rows. 32 × 8 invocations, 4 rows each way.

struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

var<workgroup> block: array<f32, 1056>; // 32 rows of 33

@compute @workgroup_size(32, 8)
fn transpose(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wid.y * 32u;
    let c0 = wid.x * 32u;
    for (var i = 0u; i < 32u; i += 8u) {
        let r = r0 + lid.y + i;
        let c = c0 + lid.x;
        if (r < p.rows && c < p.cols) {
            block[(lid.y + i) * 33u + lid.x] = src[r * p.cols + c];
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < 32u; i += 8u) {
        let c = c0 + lid.y + i;
        let r = r0 + lid.x;
        if (c < p.cols && r < p.rows) {
            dst[c * p.rows + r] = block[lid.x * 33u + lid.y + i];
        }
    }
}
