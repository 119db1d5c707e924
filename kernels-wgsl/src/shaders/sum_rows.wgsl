// Column sums, the bias gradient.
//
// sum_rows: x [rows, cols] -> out [cols]
//
// A workgroup owns 64 columns; its 4 lanes of 64 invocations each sum every 4th row
// (ascending), then the 4 partial sums are added in lane order.

struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(64, 4)
fn sum_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_id) l: vec3<u32>) {
    let col = flat_group(wid, nwg) * 64u + l.x;
    var acc = 0.0;
    if (col < p.cols) {
        for (var r = l.y; r < p.rows; r += 4u) {
            acc += x[r * p.cols + col];
        }
    }
    partial[l.y * 64u + l.x] = acc;
    workgroupBarrier();
    if (l.y == 0u && col < p.cols) {
        out[col] = partial[l.x] + partial[64u + l.x] + partial[128u + l.x] + partial[192u + l.x];
    }
}
