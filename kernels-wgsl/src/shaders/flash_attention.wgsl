// Flash attention for training (FlashAttention-2's schedule, one invocation per row): causal
// multi-head attention whose forward keeps each score row's log-sum-exp instead of the
// [T, T] probabilities, and whose backward recomputes the probabilities a key (or query)
// tile at a time from q, k and that log-sum-exp. No buffer of B·H·T·T values exists.
//
//   flash_forward:      q, k, v [B, T, C] -> out [B, T, C],
//                       saved = lse [B·H·T] ++ out [B, T, C] (a copy, for D below)
//   flash_backward_dq:  dout, q, k, v, saved -> dq [B, T, C], delta [B·H·T]
//   flash_backward_dkdv: dout, q, k, v, saved, delta -> dk, dv [B, T, C]
//
// Maths (attention.wgsl's, the same mask): with s[t, u] = scale · (q_t · k_u) for u ≤ t,
// lse_t = log Σ_u e^{s[t, u]}, P = e^{s − lse}, the dropout factor D[t, u] =
// dropout_factor(mask, (bh·T + t)·T + u) (its index in attention.wgsl's probs, so the mask
// is the unfused path's bit for bit) and W = P ⊙ D:
//   out_t = Σ_u W[t, u] v_u;  dP[t, u] = (dout_t · v_u) · D[t, u];
//   Δ_t = dout_t · out_t (= Σ_u P dP, FlashAttention-2's D, named delta here);
//   dS = P (dP − Δ_t) · scale;  dq_t = Σ_u dS k_u;  dk_u = Σ_t dS q_t;  dv_u = Σ_t W dout_t.
// Every product's inputs pass through `narrow` (generated: the nearest f16 on mixed
// precision, as matmul.wgsl stages its tiles; the identity otherwise) and sum in f32, as the
// unfused mixed path rounds its matmuls' operands (q, k; W, v; dout, v; dS, k; dS, q;
// W, dout); the softmax, Δ and the row statistics stay f32.
//
// Layout: workgroup (x, bh) owns rows x·BR .. x·BR + BR of head bh = b·H + h; invocation
// `lid` owns one row (a query row in the forward and dq, a key row in dk/dv) with its
// head-sized vectors in registers (HD4 vec4s, zero past head_dim). The other side streams
// through workgroup memory BC rows at a time (tile_a, tile_b), already narrowed. Causal
// work is skipped by tiles: queries stop at their block's last row, keys start at theirs.
// The forward's softmax is online per key (a rescale only when a row's max grows).
// Generated constants in front: BR (= the workgroup size), BC, HD4, and `narrow`.

struct Params {
    seq: u32,
    heads: u32,
    head_dim: u32,
    channels: u32,
    scale: f32,
    drop_key0: u32,
    drop_key1: u32,
    drop_threshold: u32,
    drop_offset: u32,
    drop_scale: f32,
    drop_on: u32,
    // B·H·T: where the copy of out starts in `saved`.
    lse_len: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
// Forward's outputs.
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> saved_out: array<f32>;
// Backward's inputs and outputs.
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> saved: array<f32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;
@group(0) @binding(9) var<storage, read_write> delta_out: array<f32>;
@group(0) @binding(10) var<storage, read> delta: array<f32>;
@group(0) @binding(11) var<storage, read_write> dk: array<f32>;
@group(0) @binding(12) var<storage, read_write> dv: array<f32>;

// The streamed side: BC rows of HD4 vec4s each; tile_r holds (lse, Δ) of streamed query rows.
var<workgroup> tile_a: array<vec4<f32>, BC * HD4>;
var<workgroup> tile_b: array<vec4<f32>, BC * HD4>;
var<workgroup> tile_r: array<vec2<f32>, BC>;

fn drop_mask() -> DropoutMask {
    return DropoutMask(p.drop_key0, p.drop_key1, p.drop_threshold, p.drop_offset, p.drop_scale, p.drop_on);
}

// Which head and rows workgroup `wid` owns.
struct Block {
    bh: u32,
    // First element of the head's row 0 in [B, T, C]: (b·T)·C + h·hd.
    base: u32,
    first: u32,
}

fn block_of(wid: vec3<u32>) -> Block {
    let b = wid.y / p.heads;
    let h = wid.y % p.heads;
    return Block(wid.y, b * p.seq * p.channels + h * p.head_dim, wid.x * BR);
}

// Element offset of row t of the block's head.
fn row_at(blk: Block, t: u32) -> u32 {
    return blk.base + t * p.channels;
}

// Index of (t, u) in the unfused path's probs, for the dropout mask.
fn mask_index(blk: Block, t: u32, u: u32) -> u32 {
    return (blk.bh * p.seq + t) * p.seq + u;
}

// Lanes 4·c .. 4·c + 3 of a head row that starts at element `at`: their indices (clamped
// into the row) and which lie below head_dim; `lanes` zeroes the others. One reader per
// buffer, as WGSL passes no pointers to storage.
fn lane_index(at: u32, c: u32) -> vec4<u32> {
    return min(vec4<u32>(at + c * 4u) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(at + p.head_dim - 1u));
}

fn lanes(c: u32, x: vec4<f32>) -> vec4<f32> {
    let valid = vec4<u32>(c * 4u) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.head_dim);
    return select(vec4<f32>(0.0), x, valid);
}

fn q4(at: u32, c: u32) -> vec4<f32> {
    let i = lane_index(at, c);
    return lanes(c, vec4<f32>(q[i.x], q[i.y], q[i.z], q[i.w]));
}

fn k4(at: u32, c: u32) -> vec4<f32> {
    let i = lane_index(at, c);
    return lanes(c, vec4<f32>(k[i.x], k[i.y], k[i.z], k[i.w]));
}

fn v4(at: u32, c: u32) -> vec4<f32> {
    let i = lane_index(at, c);
    return lanes(c, vec4<f32>(v[i.x], v[i.y], v[i.z], v[i.w]));
}

fn dout4(at: u32, c: u32) -> vec4<f32> {
    let i = lane_index(at, c);
    return lanes(c, vec4<f32>(dout[i.x], dout[i.y], dout[i.z], dout[i.w]));
}

// The forward's copy of out, after the lse_len log-sum-exps in `saved`.
fn saved_out4(at: u32, c: u32) -> vec4<f32> {
    let i = lane_index(p.lse_len + at, c);
    return lanes(c, vec4<f32>(saved[i.x], saved[i.y], saved[i.z], saved[i.w]));
}

// A score's (or dP's) dot product is summed per lane over the head's vec4s, then across the
// lanes in this order: four independent chains instead of one, where one invocation's
// scores wait on nothing else; every kernel recomputes the scores in this same order.
fn lane_sum(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// Stages rows first .. first + BC of k (tile_a) and v (tile_b), narrowed; zero past T.
// Every invocation calls it (it holds the barriers).
fn stage_keys(blk: Block, first: u32, lid: u32) {
    workgroupBarrier();
    for (var i = lid; i < BC * HD4; i += BR) {
        let u = first + i / HD4;
        let c = i % HD4;
        var a = vec4<f32>(0.0);
        var b = vec4<f32>(0.0);
        if (u < p.seq) {
            a = narrow(k4(row_at(blk, u), c));
            b = narrow(v4(row_at(blk, u), c));
        }
        tile_a[i] = a;
        tile_b[i] = b;
    }
    workgroupBarrier();
}

@compute @workgroup_size(BR)
fn flash_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let blk = block_of(wid);
    let t = blk.first + lid;
    let live = t < p.seq;
    let at = row_at(blk, min(t, p.seq - 1u));
    var qr: array<vec4<f32>, HD4>;
    var o: array<vec4<f32>, HD4>;
    for (var c = 0u; c < HD4; c++) {
        qr[c] = narrow(q4(at, c));
        o[c] = vec4<f32>(0.0);
    }
    let mask = drop_mask();
    var mx = -3.4e38;
    var l = 0.0;
    let keys = min(blk.first + BR, p.seq);
    for (var u0 = 0u; u0 < keys; u0 += BC) {
        stage_keys(blk, u0, lid);
        // This row's keys in the tile: u0 .. min(u0 + BC, t + 1).
        var n = 0u;
        if (live && t >= u0) {
            n = min(BC, t + 1u - u0);
        }
        for (var j = 0u; j < n; j++) {
            var sv = vec4<f32>(0.0);
            for (var c = 0u; c < HD4; c++) {
                sv += qr[c] * tile_a[j * HD4 + c];
            }
            let s = lane_sum(sv) * p.scale;
            if (s > mx) {
                let corr = exp(mx - s);
                l *= corr;
                for (var c = 0u; c < HD4; c++) {
                    o[c] *= corr;
                }
                mx = s;
            }
            let e = exp(s - mx);
            l += e;
            let w = narrow1(e * dropout_factor(mask, mask_index(blk, t, u0 + j)));
            for (var c = 0u; c < HD4; c++) {
                o[c] += w * tile_b[j * HD4 + c];
            }
        }
    }
    if (!live) {
        return;
    }
    let inv = 1.0 / l;
    for (var c = 0u; c < HD4; c++) {
        let x = o[c] * inv;
        for (var e = 0u; e < 4u; e++) {
            if (c * 4u + e < p.head_dim) {
                out[at + c * 4u + e] = x[e];
                saved_out[p.lse_len + at + c * 4u + e] = x[e];
            }
        }
    }
    saved_out[blk.bh * p.seq + t] = mx + log(l);
}

// Stages query rows first .. first + BC: q (tile_a) and dout (tile_b) narrowed, and each
// row's (lse, Δ) in tile_r; zero past T. Every invocation calls it (it holds the barriers).
fn stage_queries(blk: Block, first: u32, lid: u32) {
    workgroupBarrier();
    for (var i = lid; i < BC * HD4; i += BR) {
        let t = first + i / HD4;
        let c = i % HD4;
        var a = vec4<f32>(0.0);
        var b = vec4<f32>(0.0);
        if (t < p.seq) {
            a = narrow(q4(row_at(blk, t), c));
            b = narrow(dout4(row_at(blk, t), c));
        }
        tile_a[i] = a;
        tile_b[i] = b;
    }
    for (var j = lid; j < BC; j += BR) {
        let t = first + j;
        var r = vec2<f32>(0.0);
        if (t < p.seq) {
            let g = blk.bh * p.seq + t;
            r = vec2<f32>(saved[g], delta[g]);
        }
        tile_r[j] = r;
    }
    workgroupBarrier();
}

// dq of the block's query rows, and their Δ for flash_backward_dkdv.
@compute @workgroup_size(BR)
fn flash_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let blk = block_of(wid);
    let t = blk.first + lid;
    let live = t < p.seq;
    let tc = min(t, p.seq - 1u);
    let at = row_at(blk, tc);
    var qr: array<vec4<f32>, HD4>;
    var dr: array<vec4<f32>, HD4>;
    var acc: array<vec4<f32>, HD4>;
    var dlt = 0.0;
    for (var c = 0u; c < HD4; c++) {
        qr[c] = narrow(q4(at, c));
        let d = dout4(at, c);
        dr[c] = narrow(d);
        dlt += dot(d, saved_out4(at, c));
        acc[c] = vec4<f32>(0.0);
    }
    let lse = saved[blk.bh * p.seq + tc];
    let mask = drop_mask();
    let keys = min(blk.first + BR, p.seq);
    for (var u0 = 0u; u0 < keys; u0 += BC) {
        stage_keys(blk, u0, lid);
        var n = 0u;
        if (live && t >= u0) {
            n = min(BC, t + 1u - u0);
        }
        for (var j = 0u; j < n; j++) {
            var sv = vec4<f32>(0.0);
            var dv4 = vec4<f32>(0.0);
            for (var c = 0u; c < HD4; c++) {
                sv += qr[c] * tile_a[j * HD4 + c];
                dv4 += dr[c] * tile_b[j * HD4 + c];
            }
            let pr = exp(lane_sum(sv) * p.scale - lse);
            let dp = lane_sum(dv4) * dropout_factor(mask, mask_index(blk, t, u0 + j));
            let w = narrow1(pr * (dp - dlt) * p.scale);
            for (var c = 0u; c < HD4; c++) {
                acc[c] += w * tile_a[j * HD4 + c];
            }
        }
    }
    if (!live) {
        return;
    }
    for (var c = 0u; c < HD4; c++) {
        for (var e = 0u; e < 4u; e++) {
            if (c * 4u + e < p.head_dim) {
                dq[at + c * 4u + e] = acc[c][e];
            }
        }
    }
    delta_out[blk.bh * p.seq + t] = dlt;
}

// dk and dv of the block's key rows, over the query rows at and after each.
@compute @workgroup_size(BR)
fn flash_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let blk = block_of(wid);
    let u = blk.first + lid;
    let live = u < p.seq;
    let at = row_at(blk, min(u, p.seq - 1u));
    var kr: array<vec4<f32>, HD4>;
    var vr: array<vec4<f32>, HD4>;
    var gk: array<vec4<f32>, HD4>;
    var gv: array<vec4<f32>, HD4>;
    for (var c = 0u; c < HD4; c++) {
        kr[c] = narrow(k4(at, c));
        vr[c] = narrow(v4(at, c));
        gk[c] = vec4<f32>(0.0);
        gv[c] = vec4<f32>(0.0);
    }
    let mask = drop_mask();
    for (var t0 = blk.first; t0 < p.seq; t0 += BC) {
        stage_queries(blk, t0, lid);
        // This key's query rows in the tile: max(u, t0) .. min(t0 + BC, T).
        var j0 = BC;
        var n = 0u;
        if (live) {
            j0 = select(0u, u - t0, u > t0);
            n = min(BC, p.seq - t0);
        }
        for (var j = j0; j < n; j++) {
            var sv = vec4<f32>(0.0);
            var dv4 = vec4<f32>(0.0);
            for (var c = 0u; c < HD4; c++) {
                sv += tile_a[j * HD4 + c] * kr[c];
                dv4 += tile_b[j * HD4 + c] * vr[c];
            }
            let r = tile_r[j];
            let pr = exp(lane_sum(sv) * p.scale - r.x);
            let dp = lane_sum(dv4);
            let f = dropout_factor(mask, mask_index(blk, t0 + j, u));
            let ds = narrow1(pr * (dp * f - r.y) * p.scale);
            let w = narrow1(pr * f);
            for (var c = 0u; c < HD4; c++) {
                gk[c] += ds * tile_a[j * HD4 + c];
                gv[c] += w * tile_b[j * HD4 + c];
            }
        }
    }
    if (!live) {
        return;
    }
    for (var c = 0u; c < HD4; c++) {
        for (var e = 0u; e < 4u; e++) {
            if (c * 4u + e < p.head_dim) {
                dk[at + c * 4u + e] = gk[c][e];
                dv[at + c * 4u + e] = gv[c][e];
            }
        }
    }
}
