// The mixed-precision matmul on cooperative matrices (tensor cores): the products of
// matmul.wgsl's `matmul` (same Params, bindings, layouts, batches, slices of k, bias and
// prior), with op(A) and op(B) rounded to f16 as they are staged and every product summed
// in f32 accumulators of 16 × 16. Causal skips and row sums stay on matmul.wgsl.
//
// matmul_coop: A, B (, bias [n] or prior [m, n]) -> C [m, n]       (SPLIT_K = 1)
//              A, B -> partial [SPLIT_K, m, n] (bound as C)         (SPLIT_K > 1; then
//              matmul.wgsl's matmul_split_sum adds the slices)
//
// The host (`coop.rs`) prepends `enable f16; enable wgpu_cooperative_matrix;` and the
// variant's constants: BM, BN (the workgroup's output tile), BK (depth of one stage, a
// multiple of 16), WM × WN subgroups ("warps") each owning a (BM / WM) × (BN / WN) part of
// the tile in FM × FN accumulators, SG (the adapter's largest subgroup: the workgroup is
// WM·WN·SG invocations, so it holds at least WM·WN subgroups), A_LD, A_SIZE, B_LD, B_SIZE
// (the staged tiles below), TRANS_A, TRANS_B, CHECKED, SPLIT_K, VEC4 and, as in
// matmul.wgsl, `bias_at`, `onto_at`, the operand readers `a_at`, `b_at`, `a4_at`, `b4_at`
// and `narrow`. The lines `// @zero_accumulators`, `// @multiply_stage` and
// `// @write_accumulators` in `matmul_coop` are replaced by generated statements that name
// the FM·FN accumulators one by one (fully unrolled: no accumulator is indexed at run time,
// so none leaves the registers).
//
// Staging: each operand's [rows, BK] (or [BK, cols]) part is copied in its stored
// orientation, so consecutive invocations read consecutive addresses: A plain as
// [BM][A_LD] (row i, depth kk at i·A_LD + kk) read back row-major (`coopLoadT`), A
// transposed as [BK][A_LD] (kk·A_LD + i) read back column-major (`coopLoad`); likewise B
// ([BK][B_LD] plain, row-major; [BN][B_LD] transposed, column-major). Rows are padded by 8
// halves: cooperative loads need 16-byte-aligned rows, and the pad spreads the banks.
// Values are rounded to the nearest f16 on the f32's bits (`narrow`, exact, the same
// rounding as the shader-f16 path, infinity from 65520 on) and then converted, which is
// then exact. Stages alternate between two halves of each tile (one barrier per stage),
// and each invocation fetches the next stage into registers while the current one is
// multiplied.
//
// Summation order: within a slice of k, stage by stage in ascending k, each stage's 16-deep
// products in the order the hardware adds them (f32 accumulators); bias last, as matmul.

struct Params {
    m: u32,
    k: u32,
    n: u32,
    k_chunk: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
    group: u32,
    a_outer: u32,
    a_inner: u32,
    b_outer: u32,
    b_inner: u32,
    c_outer: u32,
    c_inner: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const WARPS: u32 = WM * WN;
const THREADS: u32 = WARPS * SG;
// A warp's part of the tile.
const WTM: u32 = BM / WM;
const WTN: u32 = BN / WN;

var<workgroup> a_tile: array<f16, 2 * A_SIZE>;
var<workgroup> b_tile: array<f16, 2 * B_SIZE>;
// One 16 × 16 accumulator per warp on its way out (row-major), and zeros on the way in.
var<workgroup> c_tile: array<f32, WARPS * 256>;

var<private> a_base: u32;
var<private> b_base: u32;
var<private> c_base: u32;

fn set_batch(z: u32) {
    let outer = z / p.group;
    let inner = z % p.group;
    a_base = outer * p.a_outer + inner * p.a_inner;
    b_base = outer * p.b_outer + inner * p.b_inner;
    c_base = outer * p.c_outer + inner * p.c_inner;
}

// A stage of one operand as stored: ROWS stored rows of LEN contiguous values (A plain: BM
// rows of BK depths; A transposed: BK depths of BM rows; B plain: BK × BN; B transposed:
// BN × BK), moved as vec4s along the stored rows.
const A_ROWS: u32 = select(BM, BK, TRANS_A);
const A_LEN: u32 = select(BK, BM, TRANS_A);
const B_ROWS: u32 = select(BK, BN, TRANS_B);
const B_LEN: u32 = select(BN, BK, TRANS_B);
const A_VECS: u32 = A_ROWS * A_LEN / 4u;
const B_VECS: u32 = B_ROWS * B_LEN / 4u;
const A_VLOADS: u32 = (A_VECS + THREADS - 1u) / THREADS;
const B_VLOADS: u32 = (B_VECS + THREADS - 1u) / THREADS;

struct Stage {
    a: array<vec4<f32>, A_VLOADS>,
    b: array<vec4<f32>, B_VLOADS>,
}

// Four consecutive stored values of A from stored row `row`, column `col` (limits: the
// stored row count and length), zeros outside when CHECKED.
fn fetch_a4(row: u32, col: u32) -> vec4<f32> {
    let rows = select(p.m, p.k, TRANS_A);
    let len = select(p.k, p.m, TRANS_A);
    let at = a_base + row * p.lda + col;
    if (VEC4) {
        return a4_at(at / 4u);
    }
    var v = vec4<f32>(0.0);
    for (var q = 0u; q < 4u; q++) {
        if (!CHECKED || (row < rows && col + q < len)) {
            v[q] = a_at(at + q);
        }
    }
    return v;
}

fn fetch_b4(row: u32, col: u32) -> vec4<f32> {
    let rows = select(p.k, p.n, TRANS_B);
    let len = select(p.n, p.k, TRANS_B);
    let at = b_base + row * p.ldb + col;
    if (VEC4) {
        return b4_at(at / 4u);
    }
    var v = vec4<f32>(0.0);
    for (var q = 0u; q < 4u; q++) {
        if (!CHECKED || (row < rows && col + q < len)) {
            v[q] = b_at(at + q);
        }
    }
    return v;
}

fn fetch_stage(lid: u32, m0: u32, n0: u32, k0: u32) -> Stage {
    var st: Stage;
    // Where the stage starts in the stored layout: (stored row, column).
    let a0 = select(vec2<u32>(m0, k0), vec2<u32>(k0, m0), TRANS_A);
    let b0 = select(vec2<u32>(k0, n0), vec2<u32>(n0, k0), TRANS_B);
    for (var l = 0u; l < A_VLOADS; l++) {
        let e = lid + l * THREADS;
        if (A_VECS % THREADS == 0u || e < A_VECS) {
            st.a[l] = narrow(fetch_a4(a0.x + e / (A_LEN / 4u), a0.y + (e % (A_LEN / 4u)) * 4u));
        }
    }
    for (var l = 0u; l < B_VLOADS; l++) {
        let e = lid + l * THREADS;
        if (B_VECS % THREADS == 0u || e < B_VECS) {
            st.b[l] = narrow(fetch_b4(b0.x + e / (B_LEN / 4u), b0.y + (e % (B_LEN / 4u)) * 4u));
        }
    }
    return st;
}

fn store_stage(lid: u32, a_half: u32, b_half: u32, st: Stage) {
    for (var l = 0u; l < A_VLOADS; l++) {
        let e = lid + l * THREADS;
        if (A_VECS % THREADS == 0u || e < A_VECS) {
            let at = a_half + (e / (A_LEN / 4u)) * A_LD + (e % (A_LEN / 4u)) * 4u;
            let h = vec4<f16>(st.a[l]);
            for (var q = 0u; q < 4u; q++) {
                a_tile[at + q] = h[q];
            }
        }
    }
    for (var l = 0u; l < B_VLOADS; l++) {
        let e = lid + l * THREADS;
        if (B_VECS % THREADS == 0u || e < B_VECS) {
            let at = b_half + (e / (B_LEN / 4u)) * B_LD + (e % (B_LEN / 4u)) * 4u;
            let h = vec4<f16>(st.b[l]);
            for (var q = 0u; q < 4u; q++) {
                b_tile[at + q] = h[q];
            }
        }
    }
}

// The 16 × 16 piece of op(A) at tile row r, depth kk of the stage at a_half.
fn a_frag(a_half: u32, r: u32, kk: u32) -> coop_mat16x16<f16, A> {
    if (TRANS_A) {
        return coopLoad<coop_mat16x16<f16, A>>(&a_tile[a_half + kk * A_LD + r], A_LD);
    }
    return coopLoadT<coop_mat16x16<f16, A>>(&a_tile[a_half + r * A_LD + kk], A_LD);
}

// The 16 × 16 piece of op(B) at depth kk, tile column j.
fn b_frag(b_half: u32, kk: u32, j: u32) -> coop_mat16x16<f16, B> {
    if (TRANS_B) {
        return coopLoad<coop_mat16x16<f16, B>>(&b_tile[b_half + j * B_LD + kk], B_LD);
    }
    return coopLoadT<coop_mat16x16<f16, B>>(&b_tile[b_half + kk * B_LD + j], B_LD);
}

// Stores output (i, j) as matmul.wgsl's `store_c` does.
fn store_c(i: u32, j: u32, value: f32) {
    if (!CHECKED || (i < p.m && j < p.n)) {
        var v = value;
        if (SPLIT_K == 1u) {
            v = onto_at(i * p.n + j, v + bias_at(j));
        }
        c[c_base + i * p.ldc + j] = v;
    }
}

// Writes accumulator (fi, fj) of every warp from c_tile (each warp's 16 × 16, row-major)
// to C, then waits until c_tile may be written again.
fn write_out(lid: u32, m0: u32, n0: u32, fi: u32, fj: u32) {
    workgroupBarrier();
    for (var e = lid; e < WARPS * 256u; e += THREADS) {
        let w = e / 256u;
        let row = m0 + (w / WN) * WTM + fi * 16u + (e % 256u) / 16u;
        let col = n0 + (w % WN) * WTN + fj * 16u + e % 16u;
        store_c(row, col, c_tile[e]);
    }
    workgroupBarrier();
}

@compute @workgroup_size(THREADS)
fn matmul_coop(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
               @builtin(subgroup_id) sid: u32) {
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    let slice = wid.z % SPLIT_K;
    set_batch(wid.z / SPLIT_K);
    c_base += slice * p.m * p.n;
    // (With subgroups smaller than SG there are more than WARPS of them: the extra ones
    // repeat a warp's work and write the same values.)
    let warp = sid % WARPS;
    let wr = (warp / WN) * WTM;
    let wc = (warp % WN) * WTN;
    let k_begin = slice * p.k_chunk;
    let k_end = min(k_begin + p.k_chunk, p.k);

    for (var e = lid; e < WARPS * 256u; e += THREADS) {
        c_tile[e] = 0.0;
    }
    workgroupBarrier();
    // @zero_accumulators

    var next: Stage;
    if (k_begin < k_end) {
        next = fetch_stage(lid, m0, n0, k_begin);
    }
    var a_half = 0u;
    var b_half = 0u;
    for (var k0 = k_begin; k0 < k_end; k0 += BK) {
        store_stage(lid, a_half, b_half, next);
        workgroupBarrier();
        if (k0 + BK < k_end) {
            next = fetch_stage(lid, m0, n0, k0 + BK);
        }
        for (var kk = 0u; kk < BK; kk += 16u) {
            // @multiply_stage
        }
        a_half = A_SIZE - a_half;
        b_half = B_SIZE - b_half;
    }
    // @write_accumulators
}
