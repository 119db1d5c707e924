// Fused (flash-style) causal attention for training: the [T, T] scores and probabilities
// are never written to memory. The forward pass saves each query row's log-sum-exp, from
// which the backward pass recomputes that row's probabilities (see `flash.rs`).
//
// flash_forward:     q, k, v [B, T, C] -> out [B, T, C], saved [B·H·T + B·T·C]
// flash_backward_q:  q, k, v, dout, saved -> dq [B, T, C], delta [B·H·T]
// flash_backward_kv: q, k, v, dout, saved, delta -> dk, dv [B, T, C]
//
// `saved` is what the backward needs of the forward: each row's log-sum-exp (lse, first
// B·H·T values), then a copy of out (the trait's backward is not given out, and
// delta below needs it).
//
// Head h of sequence b (bh = b·H + h) owns columns h·HD .. (h+1)·HD of each row; buffers
// are bound as vec4s (HD4 = HD / 4, a host define, with HD a multiple of 4). For query row
// t and key u <= t of a head, with scale = 1/sqrt(HD):
//   s[t, u]  = (q_t · scale) · k_u   (summed as vec4 lanes over the row, then the lanes)
//   lse[t]   = log Σ_{u <= t} exp(s[t, u]),  P[t, u] = exp(s[t, u] − lse[t])
//   D[t, u]  = dropout_factor(mask, (bh·T + t)·T + u)  (the element's index in the
//              unfused path's probs [B, H, T, T]; 1 without dropout)
//   out_t    = Σ_u P[t, u] D[t, u] v_u
//   delta[t] = dout_t · out_t  (= Σ_u P[t, u] dP[t, u], the softmax backward's row sum)
//   dP[t, u] = (dout_t · v_u) D[t, u],  dS[t, u] = P[t, u] (dP[t, u] − delta[t])
//   dq_t = scale · Σ_u dS[t, u] k_u,  dk_u = Σ_t dS[t, u] (q_t · scale),
//   dv_u = Σ_t P[t, u] D[t, u] dout_t.
// The forward keeps a running max and sum per row (online softmax) over key tiles.
//
// One invocation per row of the workgroup's own side (ROWS query rows forward and for dq,
// ROWS key rows for dk, dv), which it keeps in registers; the other side comes in tiles of
// TILE rows through workgroup memory, read by every invocation at the same address
// (broadcast). Rows an invocation reads that are not in registers (`own`) are padded by one
// vec4 so neighbouring invocations hit different banks. Every sum runs in a fixed order
// (rows ascending, tiles ascending): results are the same run to run, and no float atomics.

// TILE (32, or 16 where workgroup memory is short) is a host define, as HD4.
const ROWS: u32 = 64u;
const PAD4: u32 = HD4 + 1u;

struct Params {
    // B·H·T: query rows of all heads, and where out's copy starts in `saved`.
    rows: u32,
    seq: u32,
    heads: u32,
    // Channels of a row, in vec4s (C / 4).
    c4: u32,
    scale: f32,
    drop_key0: u32,
    drop_key1: u32,
    drop_threshold: u32,
    drop_offset: u32,
    drop_scale: f32,
    drop_on: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> saved: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> saved_in: array<f32>;
@group(0) @binding(9) var<storage, read_write> delta: array<f32>;
@group(0) @binding(10) var<storage, read> delta_in: array<f32>;
@group(0) @binding(11) var<storage, read_write> dq: array<vec4<f32>>;
@group(0) @binding(12) var<storage, read_write> dk: array<vec4<f32>>;
@group(0) @binding(13) var<storage, read_write> dv: array<vec4<f32>>;

var<workgroup> tile_a: array<vec4<f32>, TILE * HD4>;
var<workgroup> tile_b: array<vec4<f32>, TILE * HD4>;
var<workgroup> own: array<vec4<f32>, ROWS * PAD4>;
var<workgroup> row_lse: array<f32, TILE>;
var<workgroup> row_delta: array<f32, TILE>;

// The first vec4 of row t of head bh (t clamped into the sequence: rows past its end are
// computed on a real row and never written).
fn head_row(bh: u32, t: u32) -> u32 {
    return ((bh / p.heads) * p.seq + min(t, p.seq - 1u)) * p.c4 + (bh % p.heads) * HD4;
}

fn drop_factor(bh: u32, t: u32, u: u32) -> f32 {
    let m = DropoutMask(p.drop_key0, p.drop_key1, p.drop_threshold, p.drop_offset, p.drop_scale, p.drop_on);
    return dropout_factor(m, (bh * p.seq + t) * p.seq + u);
}

fn lanes(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// Rows t0 .. t0 + TILE of head bh: k into tile_a, v into tile_b. Every invocation calls
// it; the barriers around it are the caller's.
fn load_keys(bh: u32, t0: u32, lid: u32) {
    for (var i = lid; i < TILE * HD4; i += ROWS) {
        let src = head_row(bh, t0 + i / HD4) + i % HD4;
        tile_a[i] = k[src];
        tile_b[i] = v[src];
    }
}

// Rows t0 .. t0 + TILE of head bh: q · scale into tile_a, dout into tile_b, as load_keys.
fn load_queries(bh: u32, t0: u32, lid: u32) {
    for (var i = lid; i < TILE * HD4; i += ROWS) {
        let src = head_row(bh, t0 + i / HD4) + i % HD4;
        tile_a[i] = q[src] * p.scale;
        tile_b[i] = dout[src];
    }
}

@compute @workgroup_size(ROWS)
fn flash_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let bh = wid.y;
    // The longest rows (last query block) first.
    let q0 = (nwg.x - 1u - wid.x) * ROWS;
    let t = q0 + lid;
    let base = head_row(bh, t);
    var qr: array<vec4<f32>, HD4>;
    var o: array<vec4<f32>, HD4>;
    for (var d = 0u; d < HD4; d++) {
        qr[d] = q[base + d] * p.scale;
        o[d] = vec4<f32>(0.0);
    }
    var m = -3.0e38;
    var l = 0.0;
    let tiles = (min(q0 + ROWS, p.seq) - 1u) / TILE + 1u;
    for (var j = 0u; j < tiles; j++) {
        let k0 = j * TILE;
        workgroupBarrier();
        load_keys(bh, k0, lid);
        workgroupBarrier();
        var s: array<f32, TILE>;
        var mx = m;
        for (var c = 0u; c < TILE; c++) {
            var acc = vec4<f32>(0.0);
            for (var d = 0u; d < HD4; d++) {
                acc = fma(qr[d], tile_a[c * HD4 + d], acc);
            }
            s[c] = select(-3.0e38, lanes(acc), k0 + c <= t);
            mx = max(mx, s[c]);
        }
        let alpha = exp(m - mx);
        l *= alpha;
        for (var d = 0u; d < HD4; d++) {
            o[d] *= alpha;
        }
        for (var c = 0u; c < TILE; c++) {
            let pv = select(0.0, exp(s[c] - mx), k0 + c <= t);
            l += pv;
            let w = vec4<f32>(pv * drop_factor(bh, t, k0 + c));
            for (var d = 0u; d < HD4; d++) {
                o[d] = fma(w, tile_b[c * HD4 + d], o[d]);
            }
        }
        m = mx;
    }
    if (t < p.seq) {
        let inv = 1.0 / l;
        let copy = p.rows + 4u * base;
        for (var d = 0u; d < HD4; d++) {
            let x = o[d] * inv;
            out[base + d] = x;
            for (var e = 0u; e < 4u; e++) {
                saved[copy + 4u * d + e] = x[e];
            }
        }
        saved[bh * p.seq + t] = m + log(l);
    }
}

// dq for ROWS query rows (dout's row in `own`), and each row's delta on the way.
@compute @workgroup_size(ROWS)
fn flash_backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let bh = wid.y;
    let q0 = (nwg.x - 1u - wid.x) * ROWS;
    let t = q0 + lid;
    let base = head_row(bh, t);
    var qr: array<vec4<f32>, HD4>;
    var g: array<vec4<f32>, HD4>;
    var dot_o = vec4<f32>(0.0);
    let copy = p.rows + 4u * base;
    for (var d = 0u; d < HD4; d++) {
        qr[d] = q[base + d] * p.scale;
        g[d] = vec4<f32>(0.0);
        let dy = dout[base + d];
        own[lid * PAD4 + d] = dy;
        let i = copy + 4u * d;
        let o = vec4<f32>(saved_in[i], saved_in[i + 1u], saved_in[i + 2u], saved_in[i + 3u]);
        dot_o = fma(dy, o, dot_o);
    }
    let row = bh * p.seq + min(t, p.seq - 1u);
    let dlt = lanes(dot_o);
    let lse_t = saved_in[row];
    let tiles = (min(q0 + ROWS, p.seq) - 1u) / TILE + 1u;
    for (var j = 0u; j < tiles; j++) {
        let k0 = j * TILE;
        workgroupBarrier();
        load_keys(bh, k0, lid);
        workgroupBarrier();
        for (var c = 0u; c < TILE; c++) {
            var acc = vec4<f32>(0.0);
            var dpa = vec4<f32>(0.0);
            for (var d = 0u; d < HD4; d++) {
                acc = fma(qr[d], tile_a[c * HD4 + d], acc);
                dpa = fma(own[lid * PAD4 + d], tile_b[c * HD4 + d], dpa);
            }
            let u = k0 + c;
            let pr = select(0.0, exp(lanes(acc) - lse_t), u <= t);
            let ds = vec4<f32>(pr * (lanes(dpa) * drop_factor(bh, t, u) - dlt));
            for (var d = 0u; d < HD4; d++) {
                g[d] = fma(ds, tile_a[c * HD4 + d], g[d]);
            }
        }
    }
    if (t < p.seq) {
        for (var d = 0u; d < HD4; d++) {
            dq[base + d] = g[d] * p.scale;
        }
        delta[row] = dlt;
    }
}

// dk and dv for ROWS key rows (k in registers, v's row in `own`), over the query tiles at
// and after the block's first key.
@compute @workgroup_size(ROWS)
fn flash_backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let bh = wid.y;
    let u0 = wid.x * ROWS;
    let u = u0 + lid;
    let base = head_row(bh, u);
    var kr: array<vec4<f32>, HD4>;
    var gk: array<vec4<f32>, HD4>;
    var gv: array<vec4<f32>, HD4>;
    for (var d = 0u; d < HD4; d++) {
        kr[d] = k[base + d];
        own[lid * PAD4 + d] = v[base + d];
        gk[d] = vec4<f32>(0.0);
        gv[d] = vec4<f32>(0.0);
    }
    let tiles = (p.seq - 1u) / TILE + 1u;
    for (var j = u0 / TILE; j < tiles; j++) {
        let t0 = j * TILE;
        workgroupBarrier();
        load_queries(bh, t0, lid);
        if (lid < TILE) {
            let row = bh * p.seq + min(t0 + lid, p.seq - 1u);
            row_lse[lid] = saved_in[row];
            row_delta[lid] = delta_in[row];
        }
        workgroupBarrier();
        for (var c = 0u; c < TILE; c++) {
            var acc = vec4<f32>(0.0);
            var dpa = vec4<f32>(0.0);
            for (var d = 0u; d < HD4; d++) {
                acc = fma(tile_a[c * HD4 + d], kr[d], acc);
                dpa = fma(tile_b[c * HD4 + d], own[lid * PAD4 + d], dpa);
            }
            let t = t0 + c;
            let pr = select(0.0, exp(lanes(acc) - row_lse[c]), u <= t && t < p.seq);
            let f = drop_factor(bh, t, u);
            let w = vec4<f32>(pr * f);
            let ds = vec4<f32>(pr * (lanes(dpa) * f - row_delta[c]));
            for (var d = 0u; d < HD4; d++) {
                gv[d] = fma(w, tile_b[c * HD4 + d], gv[d]);
                gk[d] = fma(ds, tile_a[c * HD4 + d], gk[d]);
            }
        }
    }
    if (u < p.seq) {
        for (var d = 0u; d < HD4; d++) {
            dk[base + d] = gk[d];
            dv[base + d] = gv[d];
        }
    }
}
