// Matrix multiply with optional transposes and bias, register-tiled.
//
// matmul: A, B (, bias [n]) -> C [m, n]
//   C = op(A) · op(B) (+ bias on every row), op(A) [m, k], op(B) [k, n];
//   A is stored [m, k], or [k, m] with TRANS_A; B is stored [k, n], or [n, k] with TRANS_B.
//
// The host prepends the variant's constants (see `matmul_defines` in ops.rs):
//   BM, BN (block tile), BK (depth of one shared-memory stage), TM, TN (outputs per
//   invocation, multiples of 4, BM = 16·TM, BN = 16·TN), TRANS_A, TRANS_B, CHECKED
//   (bounds checks; off only when m, n, k are multiples of BM, BN, BK) and `bias_at(j)`
//   (reads binding 4, or returns 0 without a bias).
//
// 256 invocations (16 × 16) per workgroup; each stage copies op(A)[BM, BK] and
// op(B)[BK, BN] into workgroup memory, k-major, so an invocation reads its TM values of
// a column of A and TN values of a row of B as vec4s. Invocation (tx, ty) owns rows
// (r4·16 + ty)·4 + 0..3 and columns (c4·16 + tx)·4 + 0..3 (vec4 chunks interleaved across
// invocations: conflict-free workgroup reads and coalesced stores). Each output is a sum
// over k in ascending order, in f32, with the bias added last.

struct Params {
    m: u32,
    k: u32,
    n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const THREADS: u32 = 256u;
const RM: u32 = TM / 4u;
const RN: u32 = TN / 4u;

var<workgroup> a_tile: array<vec4<f32>, BK * BM / 4u>;
var<workgroup> b_tile: array<vec4<f32>, BK * BN / 4u>;

// op(A)[i, kk]
fn load_a(i: u32, kk: u32) -> f32 {
    if (CHECKED && (i >= p.m || kk >= p.k)) {
        return 0.0;
    }
    if (TRANS_A) {
        return a[kk * p.m + i];
    }
    return a[i * p.k + kk];
}

// op(B)[kk, j]
fn load_b(kk: u32, j: u32) -> f32 {
    if (CHECKED && (kk >= p.k || j >= p.n)) {
        return 0.0;
    }
    if (TRANS_B) {
        return b[j * p.k + kk];
    }
    return b[kk * p.n + j];
}

@compute @workgroup_size(256)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc: array<vec4<f32>, TM * RN>;
    for (var i = 0u; i < TM * RN; i++) {
        acc[i] = vec4<f32>(0.0);
    }

    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        // Stage op(A)[m0.., k0..] and op(B)[k0.., n0..]; consecutive invocations read
        // consecutive addresses of the stored layout.
        for (var l = 0u; l < BM * BK / THREADS; l++) {
            let e = lid + l * THREADS;
            var i: u32;
            var kk: u32;
            if (TRANS_A) {
                kk = e / BM;
                i = e % BM;
            } else {
                i = e / BK;
                kk = e % BK;
            }
            a_tile[(kk * BM + i) / 4u][i % 4u] = load_a(m0 + i, k0 + kk);
        }
        for (var l = 0u; l < BN * BK / THREADS; l++) {
            let e = lid + l * THREADS;
            var j: u32;
            var kk: u32;
            if (TRANS_B) {
                j = e / BK;
                kk = e % BK;
            } else {
                kk = e / BN;
                j = e % BN;
            }
            b_tile[(kk * BN + j) / 4u][j % 4u] = load_b(k0 + kk, n0 + j);
        }
        workgroupBarrier();

        for (var kk = 0u; kk < BK; kk++) {
            var av: array<vec4<f32>, RM>;
            var bv: array<vec4<f32>, RN>;
            for (var r4 = 0u; r4 < RM; r4++) {
                av[r4] = a_tile[kk * (BM / 4u) + r4 * 16u + ty];
            }
            for (var c4 = 0u; c4 < RN; c4++) {
                bv[c4] = b_tile[kk * (BN / 4u) + c4 * 16u + tx];
            }
            for (var r = 0u; r < TM; r++) {
                let ar = vec4<f32>(av[r / 4u][r % 4u]);
                for (var c4 = 0u; c4 < RN; c4++) {
                    acc[r * RN + c4] = fma(ar, bv[c4], acc[r * RN + c4]);
                }
            }
        }
        workgroupBarrier();
    }

    for (var r = 0u; r < TM; r++) {
        let row = m0 + ((r / 4u) * 16u + ty) * 4u + r % 4u;
        for (var c4 = 0u; c4 < RN; c4++) {
            let col0 = n0 + (c4 * 16u + tx) * 4u;
            let v = acc[r * RN + c4];
            for (var cc = 0u; cc < 4u; cc++) {
                let col = col0 + cc;
                if (!CHECKED || (row < p.m && col < p.n)) {
                    c[row * p.n + col] = v[cc] + bias_at(col);
                }
            }
        }
    }
}

// The same product without workgroup memory or barriers, for software adapters (lavapipe,
// SwiftShader), where a barrier costs more than the loads it saves. Invocation (tx, ty)
// of an 8×8 workgroup computes the 4×4 outputs at rows m0 + ty·4 + 0..3 and columns
// n0 + tx·4 + 0..3 straight from storage (BM = BN = 32); each a sum over k in ascending
// order, bias last.
@compute @workgroup_size(64)
fn matmul_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = wid.y * 32u + (lid / 8u) * 4u;
    let col0 = wid.x * 32u + (lid % 8u) * 4u;
    var acc: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        acc[r] = vec4<f32>(0.0);
    }
    for (var kk = 0u; kk < p.k; kk++) {
        let bv = vec4<f32>(load_b(kk, col0), load_b(kk, col0 + 1u), load_b(kk, col0 + 2u), load_b(kk, col0 + 3u));
        for (var r = 0u; r < 4u; r++) {
            acc[r] = fma(vec4<f32>(load_a(row0 + r, kk)), bv, acc[r]);
        }
    }
    for (var r = 0u; r < 4u; r++) {
        let row = row0 + r;
        for (var cc = 0u; cc < 4u; cc++) {
            let col = col0 + cc;
            if (!CHECKED || (row < p.m && col < p.n)) {
                c[row * p.n + col] = acc[r][cc] + bias_at(col);
            }
        }
    }
}
