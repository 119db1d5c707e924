// Column sums (the bias gradient), in two passes so that tall inputs spread over many
// workgroups.
//
// sum_rows:       x [rows, cols] -> partial [chunks, cols], chunks = ceil(rows / CHUNK):
//                 the sums over each chunk of CHUNK rows (the result itself when chunks = 1)
// sum_row_chunks: partial [chunks, cols] -> out [cols]: the chunk sums (order below)
//
// A sum_rows workgroup owns 64 columns of one chunk; its 4 lanes of 64 invocations each
// sum every 4th row of the chunk (ascending), then the 4 lane sums are added in lane
// order. layer_norm_dparams (layernorm.wgsl) makes its partial sums the same way and
// shares sum_row_chunks.

struct Params {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const CHUNK: u32 = 64u;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(64, 4)
fn sum_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let col = wid.x * 64u + l.x;
    let chunk = wid.y;
    let end = min((chunk + 1u) * CHUNK, p.rows);
    var acc = 0.0;
    if (col < p.cols) {
        for (var r = chunk * CHUNK + l.y; r < end; r += 4u) {
            acc += x[r * p.cols + col];
        }
    }
    partial[l.y * 64u + l.x] = acc;
    workgroupBarrier();
    if (l.y == 0u && col < p.cols) {
        out[chunk * p.cols + col] =
            partial[l.x] + partial[64u + l.x] + partial[128u + l.x] + partial[192u + l.x];
    }
}

// Here p.rows is the number of chunks. A workgroup owns 32 columns; its 8 lanes of 32
// invocations each sum every 8th chunk (ascending), then the 8 lane sums are added in
// lane order (a single sequential pass over hundreds of chunks is latency-bound).
@compute @workgroup_size(32, 8)
fn sum_row_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_id) l: vec3<u32>) {
    let col = flat_group(wid, nwg) * 32u + l.x;
    var acc = 0.0;
    if (col < p.cols) {
        for (var c = l.y; c < p.rows; c += 8u) {
            acc += x[c * p.cols + col];
        }
    }
    partial[l.y * 32u + l.x] = acc;
    workgroupBarrier();
    if (l.y == 0u && col < p.cols) {
        var sum = partial[l.x];
        for (var lane = 1u; lane < 8u; lane++) {
            sum += partial[lane * 32u + l.x];
        }
        out[col] = sum;
    }
}
