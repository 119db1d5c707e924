// Causal multi-head self-attention.
//
// attention:       q, k, v [B, T, C] -> out [B, T, C], probs [B, H, T, T]
// attention_rows:  dout, q, k, v, probs -> ds [B, H, T, T] (scratch), dq [B, T, C]
// attention_cols:  dout, q, probs, ds -> dk, dv [B, T, C]
//
// C = H · hd; head h owns columns h·hd .. (h+1)·hd. With S = q·kᵀ · scale (scale =
// 1/sqrt(hd)) and P = softmax over u <= t (zero above the diagonal):
//   out_t = Σ_u P[t,u] v_u,   dP[t,u] = dout_t · v_u,
//   dS[t,u] = P[t,u] (dP[t,u] - Σ_u' P[t,u'] dP[t,u']) · scale,
//   dq_t = Σ_u dS[t,u] k_u,  dk_u = Σ_{t>=u} dS[t,u] q_t,  dv_u = Σ_{t>=u} P[t,u] dout_t.
// With dropout (`drop_on` = 1), P[t,u] weighs v_u as P[t,u]·D[t,u], D the dropout factor of
// probs element (bh·T + t)·T + u (dropout_mask.wgsl); `probs` keeps P itself, and the
// backward redraws D: dP[t,u] = (dout_t · v_u)·D[t,u], dv_u = Σ_t P[t,u]·D[t,u] dout_t.
// One workgroup per (batch, head, row t) for the forward and the row pass, per
// (batch, head, column u) for the column pass; sums over u or t run in ascending order
// per invocation. No atomics: the two backward passes write disjoint outputs.

struct Params {
    batch: u32,
    seq: u32,
    heads: u32,
    head_dim: u32,
    scale: f32,
    drop_key0: u32,
    drop_key1: u32,
    drop_threshold: u32,
    drop_offset: u32,
    drop_scale: f32,
    drop_on: u32,
}

fn drop_mask() -> DropoutMask {
    return DropoutMask(p.drop_key0, p.drop_key1, p.drop_threshold, p.drop_offset, p.drop_scale, p.drop_on);
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> probs: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> saved_probs: array<f32>;
@group(0) @binding(8) var<storage, read_write> ds: array<f32>;
@group(0) @binding(9) var<storage, read_write> out2: array<f32>;

// The longest sequence a workgroup holds in workgroup memory (checked on the host).
const MAX_SEQ: u32 = 1024u;
var<workgroup> row: array<f32, 1024>;
var<workgroup> row2: array<f32, 1024>;

struct Slot {
    // (batch · heads + head)
    bh: u32,
    // row t (forward, row pass) or column u (column pass)
    pos: u32,
    // offset of (batch, position 0) plus the head's first column in a [B, T, C] buffer
    base: u32,
    channels: u32,
    live: bool,
}

fn slot_of(g: u32) -> Slot {
    var s: Slot;
    s.live = g < p.batch * p.heads * p.seq;
    let gg = select(0u, g, s.live);
    s.pos = gg % p.seq;
    s.bh = gg / p.seq;
    let b = s.bh / p.heads;
    let h = s.bh % p.heads;
    s.channels = p.heads * p.head_dim;
    s.base = b * p.seq * s.channels + h * p.head_dim;
    return s;
}

fn dot_qk(q_off: u32, k_off: u32) -> f32 {
    var acc = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        acc += q[q_off + d] * k[k_off + d];
    }
    return acc;
}

fn dot_dout_v(dout_off: u32, v_off: u32) -> f32 {
    var acc = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        acc += dout[dout_off + d] * v[v_off + d];
    }
    return acc;
}

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let s = slot_of(flat_group(wid, nwg));
    let t = s.pos;
    let q_off = s.base + t * s.channels;
    var mx = -3.4e38;
    if (s.live) {
        for (var u = lid; u <= t; u += BLOCK) {
            let sc = dot_qk(q_off, s.base + u * s.channels) * p.scale;
            row[u] = sc;
            mx = max(mx, sc);
        }
    }
    mx = block_max(lid, mx);
    var sum = 0.0;
    if (s.live) {
        for (var u = lid; u <= t; u += BLOCK) {
            let e = exp(row[u] - mx);
            row[u] = e;
            sum += e;
        }
    }
    let inv = 1.0 / block_sum(lid, sum);
    if (s.live) {
        let p_off = (s.bh * p.seq + t) * p.seq;
        for (var u = lid; u < p.seq; u += BLOCK) {
            var pv = 0.0;
            if (u <= t) {
                pv = row[u] * inv;
                row[u] = pv * dropout_factor(drop_mask(), p_off + u);
            }
            probs[p_off + u] = pv;
        }
    }
    workgroupBarrier();
    if (s.live) {
        for (var d = lid; d < p.head_dim; d += BLOCK) {
            var acc = 0.0;
            for (var u = 0u; u <= t; u++) {
                acc += row[u] * v[s.base + u * s.channels + d];
            }
            out[q_off + d] = acc;
        }
    }
}

// dq goes to `out`.
@compute @workgroup_size(64)
fn attention_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let s = slot_of(flat_group(wid, nwg));
    let t = s.pos;
    let t_off = s.base + t * s.channels;
    let p_off = (s.bh * p.seq + t) * p.seq;
    var weighted = 0.0;
    if (s.live) {
        for (var u = lid; u <= t; u += BLOCK) {
            let dp = dot_dout_v(t_off, s.base + u * s.channels) * dropout_factor(drop_mask(), p_off + u);
            row[u] = dp;
            weighted += saved_probs[p_off + u] * dp;
        }
    }
    weighted = block_sum(lid, weighted);
    if (s.live) {
        for (var u = lid; u <= t; u += BLOCK) {
            let d = saved_probs[p_off + u] * (row[u] - weighted) * p.scale;
            row[u] = d;
            ds[p_off + u] = d;
        }
    }
    workgroupBarrier();
    if (s.live) {
        for (var d = lid; d < p.head_dim; d += BLOCK) {
            var acc = 0.0;
            for (var u = 0u; u <= t; u++) {
                acc += row[u] * k[s.base + u * s.channels + d];
            }
            out[t_off + d] = acc;
        }
    }
}

// dk goes to `out`, dv to `out2`.
@compute @workgroup_size(64)
fn attention_cols(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let s = slot_of(flat_group(wid, nwg));
    let u = s.pos;
    if (s.live) {
        for (var t = u + lid; t < p.seq; t += BLOCK) {
            let idx = (s.bh * p.seq + t) * p.seq + u;
            row[t] = ds[idx];
            row2[t] = saved_probs[idx] * dropout_factor(drop_mask(), idx);
        }
    }
    workgroupBarrier();
    if (s.live) {
        for (var d = lid; d < p.head_dim; d += BLOCK) {
            var dk = 0.0;
            var dv = 0.0;
            for (var t = u; t < p.seq; t++) {
                let off = s.base + t * s.channels + d;
                dk += row[t] * q[off];
                dv += row2[t] * dout[off];
            }
            out[s.base + u * s.channels + d] = dk;
            out2[s.base + u * s.channels + d] = dv;
        }
    }
}
