// Matrix multiply with optional transposes and bias, register-tiled; optionally split
// over k, or batched over strided operands (attention's per-head products).
//
// matmul:           A, B (, bias [n] or prior [m, n]) -> C [m, n]    (SPLIT_K = 1)
//                   A, B -> partial [SPLIT_K, m, n] (bound as C)      (SPLIT_K > 1)
// matmul_split_sum: partial [SPLIT_K, m, n] (bound as A) (, bias or prior) -> C [m, n]
//   With ROW_SUMS (TRANS_A, unbatched) matmul also sums each row of op(A) over k (the
//   column sums of A as stored: a linear's bias gradient beside its weight gradient):
//   `store_row_sum(slice, i, v)` writes them to sums [m] (binding 5) unsplit, or after the
//   partials at partial[SPLIT_K·m·n + slice·m + i] split, where matmul_split_sum adds them
//   in slice order into sums (`store_row_sum_final`). The workgroups of the first column
//   tile do it, an invocation per row, k in ascending order.
//   C = (prior +) op(A) · op(B) (+ bias on every row), op(A) [m, k], op(B) [k, n];
//   A is stored [m, k], or [k, m] with TRANS_A; B is stored [k, n], or [n, k] with TRANS_B;
//   stored rows are lda, ldb, ldc values apart (k or m, n or k, and n for a plain product).
//   Batch z (grid z, when not split) multiplies the operands that start at
//   (z / group)·outer + (z % group)·inner of each buffer (its own outer and inner).
//
// The host prepends the variant's constants (see `matmul_defines` in matmul.rs):
//   BM, BN (block tile), BK (depth of one shared-memory stage), TM, TN (outputs per
//   invocation, multiples of 4, dividing BM and BN), TRANS_A, TRANS_B, CHECKED
//   (bounds checks; off only when m, n, k are multiples of BM, BN, BK), SPLIT_K (slices
//   of k, one per grid z), CAUSAL (below), DOUBLE_BUFFER (below), VEC4 (below),
//   ROW_SUMS (above) with `store_row_sum`, `store_row_sum_final` (binding 5 or nothing),
//   `bias_at(j)` (reads binding 4, or returns 0), `onto_at(i, v)` (prior[i] + v with the
//   prior [m, n] at binding 4 for `matmul` with `onto`, or v) and the operands' bindings a (1) and b
//   (2) with their readers `a_at(i)`, `b_at(i)` (the value at i) and `a4_at(v)`,
//   `b4_at(v)` (values 4v..4v+3): arrays of f32, or of vec4 with VEC4; and the precision's
//   `narrow(v: vec4<f32>)`, `narrow1(v: f32)` (below), with NARROWS whether they round.
//
// Precision: `narrow` and `narrow1` are the identity in f32 (the f32 variants compute what
// they always did, bit for bit) and round to the nearest f16 in mixed (on the f32's bits:
// see `NARROW_F16` in matmul.rs for why not through WGSL's f16):
// every value of op(A) and op(B) is rounded as a stage is fetched (matmul_direct: as it is
// loaded), and the products and their sums stay f32 (`fma` on f32), the way autocast and
// tensor cores take their inputs. What is not a product's input is never narrowed: the
// bias, the prior, the split partials (matmul_split_sum reads them through `a_at`, not a
// stage) and the ROW_SUMS, which are a bias gradient, a reduction, and stay the f32 sums of
// the stored values that `sum_rows` gives on the direct path (see `stage_a`). A value from
// 65520 on narrows to infinity, as f16 would (loss scaling keeps gradients inside f16).
//
// CAUSAL skips work that a causal mask makes zero (square per-batch products, m = n or
// m = k = sequence length): 0 none; 1 op(A)[i, kk] = 0 for kk > i (probabilities times
// values), so row block m0 stops at k = m0 + BM; 2 op(A)[i, kk] = 0 for kk < i (their
// transposes), so row block m0 starts at k = m0; 3 outputs C[i, j] with j > i are not
// needed, so tiles wholly above the diagonal are left unwritten. The skipped terms are
// exact zeros: sums equal the full ones.
//
// TY_N × TX_N invocations per workgroup (16 × 16 = 256 for the usual tiles); each stage copies op(A)[BM, BK] and
// op(B)[BK, BN] into workgroup memory, k-major, so an invocation reads its TM values of
// a column of A and TN values of a row of B as vec4s. Each depth's row of a stage is
// padded by one vec4 (A_ROW = BM / 4 + 1 vec4s apart): an operand stored depth-minor
// (A plain, B transposed) is copied in by invocations that differ in depth, and without
// the pad they would all hit the same workgroup-memory bank. While a stage is multiplied, each
// invocation already holds its share of the next stage in registers (fetched from
// storage before the arithmetic, stored after the barrier), so loads overlap the math.
// Invocation (tx, ty) owns rows (r4·TY_N + ty)·4 + 0..3 and columns (c4·TX_N + tx)·4 + 0..3
// (vec4 chunks interleaved across invocations: conflict-free workgroup reads and
// coalesced stores).
//
// Summation order: workgroup z sums k over its slice [z·k_chunk, (z+1)·k_chunk) ∩ [0, k)
// in ascending order, in f32 (k_chunk is a multiple of BK; with SPLIT_K = 1 the slice is
// all of k). matmul_split_sum then adds the SPLIT_K slice sums in slice order, and the
// bias last; unsplit, matmul adds the bias last itself. With a prior (`onto`) the
// result is prior + that sum, the very sum an `add` after the product makes.

struct Params {
    m: u32,
    k: u32,
    n: u32,
    // Length of one slice of k (a multiple of BK; k itself when SPLIT_K = 1).
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

// Invocations across a tile's columns and down its rows (16 × 16 for the usual tiles).
const TX_N: u32 = BN / TN;
const TY_N: u32 = BM / TM;
const THREADS: u32 = TX_N * TY_N;
const RM: u32 = TM / 4u;
const RN: u32 = TN / 4u;
// Values of op(A) and op(B) each invocation moves per stage (at least 1 so that the
// module stays valid for matmul_direct's constants, where BK = 1 and no stage is used).
const A_LOADS: u32 = max(BM * BK / THREADS, 1u);
const B_LOADS: u32 = max(BN * BK / THREADS, 1u);

// Rows of a tile each invocation sums with ROW_SUMS (see `matmul`).
const SUM_ROWS: u32 = (BM + THREADS - 1u) / THREADS;

// vec4s from one depth's row of a stage to the next (see the pad above).
const A_ROW: u32 = BM / 4u + 1u;
const B_ROW: u32 = BN / 4u + 1u;

// With DOUBLE_BUFFER, consecutive stages alternate between two halves of each tile, so a
// stage is copied in while others may still multiply the previous one: one barrier per
// stage instead of two.
const HALVES: u32 = select(1u, 2u, DOUBLE_BUFFER);

var<workgroup> a_tile: array<vec4<f32>, HALVES * BK * A_ROW>;
var<workgroup> b_tile: array<vec4<f32>, HALVES * BK * B_ROW>;

// Where this workgroup's batch starts in A, B and C.
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

// op(A)[i, kk]
fn load_a(i: u32, kk: u32) -> f32 {
    if (CHECKED && (i >= p.m || kk >= p.k)) {
        return 0.0;
    }
    if (TRANS_A) {
        return a_at(a_base + kk * p.lda + i);
    }
    return a_at(a_base + i * p.lda + kk);
}

// op(B)[kk, j]
fn load_b(kk: u32, j: u32) -> f32 {
    if (CHECKED && (kk >= p.k || j >= p.n)) {
        return 0.0;
    }
    if (TRANS_B) {
        return b_at(b_base + j * p.ldb + kk);
    }
    return b_at(b_base + kk * p.ldb + j);
}

// Stores output (i, j): unsplit, the sum plus the bias (`bias_at`), and with ONTO that
// added onto the prior value (`onto_at`, unbatched only); split, a slice's sum as it is.
fn store_c(i: u32, j: u32, value: f32) {
    if (!CHECKED || (i < p.m && j < p.n)) {
        var v = value;
        if (SPLIT_K == 1u) {
            v = onto_at(i * p.n + j, v + bias_at(j));
        }
        c[c_base + i * p.ldc + j] = v;
    }
}

// The (row i, depth kk) of op(A)'s stage that the stage's e-th value is: consecutive e
// follow the stored layout, so consecutive invocations read consecutive addresses.
fn a_slot(e: u32) -> vec2<u32> {
    if (TRANS_A) {
        return vec2<u32>(e % BM, e / BM);
    }
    return vec2<u32>(e / BK, e % BK);
}

// The (column j, depth kk) of op(B)'s stage that the stage's e-th value is.
fn b_slot(e: u32) -> vec2<u32> {
    if (TRANS_B) {
        return vec2<u32>(e / BK, e % BK);
    }
    return vec2<u32>(e % BN, e / BN);
}

// With VEC4 a stage moves as vec4s along each operand's stored rows: four rows of op(A)
// at one depth (TRANS_A), or four depths of one row (plain A); likewise for B. The host
// sets it only where no bound is checked and stored rows and batch starts are whole vec4s,
// so every vec4 lies inside the stage. A_VECS vec4s of op(A) per stage, spread over the
// invocations (the last round only partly used when it does not divide).
const A_VECS: u32 = BM * BK / 4u;
const B_VECS: u32 = BN * BK / 4u;
const A_VLOADS: u32 = max((A_VECS + THREADS - 1u) / THREADS, 1u);
const B_VLOADS: u32 = max((B_VECS + THREADS - 1u) / THREADS, 1u);
// vec4s along one stored row's depths (at least 1: matmul_direct's constants have BK = 1).
const BK4: u32 = max(BK / 4u, 1u);

// op(A) as it goes into a stage: narrowed there, except in a workgroup that sums rows of
// a product that narrows (`raw`: ROW_SUMS and NARROWS, the first column of tiles), whose
// sums read the stage and must add the stored values; that workgroup narrows its stage in
// place once the sums took theirs (`narrow_a_tile`), so every product reads the same
// narrowed values and none narrows in its hot loop (which made mixed's weight gradients,
// `tn` with the bias gradient's row sums, a third of f32's speed on the H200). op(B) is
// always narrowed at the stage.
fn stage_a(v: vec4<f32>, raw: bool) -> vec4<f32> {
    if (raw) {
        return v;
    }
    return narrow(v);
}

fn stage_a1(v: f32, raw: bool) -> f32 {
    if (raw) {
        return v;
    }
    return narrow1(v);
}

// Narrows the half of op(A)'s tile at a_half in place, the workgroup's invocations taking
// every THREADS-th vec4 (the pads too: nothing reads them).
fn narrow_a_tile(lid: u32, a_half: u32) {
    for (var i = lid; i < BK * A_ROW; i += THREADS) {
        a_tile[a_half + i] = narrow(a_tile[a_half + i]);
    }
}

// (row i, depth kk) of the first value of op(A)'s stage vec4 e.
fn a_vec_slot(e: u32) -> vec2<u32> {
    if (TRANS_A) {
        return vec2<u32>((e % (BM / 4u)) * 4u, e / (BM / 4u));
    }
    return vec2<u32>(e / BK4, (e % BK4) * 4u);
}

// (column j, depth kk) of the first value of op(B)'s stage vec4 e.
fn b_vec_slot(e: u32) -> vec2<u32> {
    if (TRANS_B) {
        return vec2<u32>(e / BK4, (e % BK4) * 4u);
    }
    return vec2<u32>((e % (BN / 4u)) * 4u, e / (BN / 4u));
}

// One invocation's share of a stage, held in registers between its fetch and its store.
struct Stage {
    a: array<f32, A_LOADS>,
    b: array<f32, B_LOADS>,
    a4: array<vec4<f32>, A_VLOADS>,
    b4: array<vec4<f32>, B_VLOADS>,
}

// `raw_a`: op(A) staged as stored (see `stage_a`).
fn fetch_stage(lid: u32, m0: u32, n0: u32, k0: u32, raw_a: bool) -> Stage {
    var st: Stage;
    if (VEC4) {
        for (var l = 0u; l < A_VLOADS; l++) {
            let e = lid + l * THREADS;
            if (A_VECS % THREADS == 0u || e < A_VECS) {
                let s = a_vec_slot(e);
                let i = m0 + s.x;
                let kk = k0 + s.y;
                if (TRANS_A) {
                    st.a4[l] = stage_a(a4_at((a_base + kk * p.lda + i) / 4u), raw_a);
                } else {
                    st.a4[l] = stage_a(a4_at((a_base + i * p.lda + kk) / 4u), raw_a);
                }
            }
        }
        for (var l = 0u; l < B_VLOADS; l++) {
            let e = lid + l * THREADS;
            if (B_VECS % THREADS == 0u || e < B_VECS) {
                let s = b_vec_slot(e);
                let j = n0 + s.x;
                let kk = k0 + s.y;
                if (TRANS_B) {
                    st.b4[l] = narrow(b4_at((b_base + j * p.ldb + kk) / 4u));
                } else {
                    st.b4[l] = narrow(b4_at((b_base + kk * p.ldb + j) / 4u));
                }
            }
        }
        return st;
    }
    for (var l = 0u; l < A_LOADS; l++) {
        let s = a_slot(lid + l * THREADS);
        st.a[l] = stage_a1(load_a(m0 + s.x, k0 + s.y), raw_a);
    }
    for (var l = 0u; l < B_LOADS; l++) {
        let s = b_slot(lid + l * THREADS);
        st.b[l] = narrow1(load_b(k0 + s.y, n0 + s.x));
    }
    return st;
}

// Writes a fetched stage into the halves of the workgroup tiles at a_half, b_half.
fn store_stage(lid: u32, a_half: u32, b_half: u32, st: Stage) {
    if (VEC4) {
        for (var l = 0u; l < A_VLOADS; l++) {
            let e = lid + l * THREADS;
            if (A_VECS % THREADS == 0u || e < A_VECS) {
                let s = a_vec_slot(e);
                if (TRANS_A) {
                    a_tile[a_half + s.y * A_ROW + s.x / 4u] = st.a4[l];
                } else {
                    for (var q = 0u; q < 4u; q++) {
                        a_tile[a_half + (s.y + q) * A_ROW + s.x / 4u][s.x % 4u] = st.a4[l][q];
                    }
                }
            }
        }
        for (var l = 0u; l < B_VLOADS; l++) {
            let e = lid + l * THREADS;
            if (B_VECS % THREADS == 0u || e < B_VECS) {
                let s = b_vec_slot(e);
                if (TRANS_B) {
                    for (var q = 0u; q < 4u; q++) {
                        b_tile[b_half + (s.y + q) * B_ROW + s.x / 4u][s.x % 4u] = st.b4[l][q];
                    }
                } else {
                    b_tile[b_half + s.y * B_ROW + s.x / 4u] = st.b4[l];
                }
            }
        }
        return;
    }
    for (var l = 0u; l < A_LOADS; l++) {
        let s = a_slot(lid + l * THREADS);
        a_tile[a_half + s.y * A_ROW + s.x / 4u][s.x % 4u] = st.a[l];
    }
    for (var l = 0u; l < B_LOADS; l++) {
        let s = b_slot(lid + l * THREADS);
        b_tile[b_half + s.y * B_ROW + s.x / 4u][s.x % 4u] = st.b[l];
    }
}

@compute @workgroup_size(THREADS)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    if (CAUSAL == 3u && n0 >= m0 + BM) {
        return;
    }
    let slice = wid.z % SPLIT_K;
    set_batch(wid.z / SPLIT_K);
    c_base += slice * p.m * p.n;
    let tx = lid % TX_N;
    let ty = lid / TX_N;
    var k_begin = slice * p.k_chunk;
    var k_end = min(k_begin + p.k_chunk, p.k);
    if (CAUSAL == 1u) {
        k_end = min(k_end, m0 + BM);
    }
    if (CAUSAL == 2u) {
        k_begin = max(k_begin, m0);
    }
    var acc: array<vec4<f32>, TM * RN>;
    for (var i = 0u; i < TM * RN; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    // ROW_SUMS (see the top): invocation lid of the first column tile adds up rows
    // lid + s·THREADS of each stage of op(A) from workgroup memory, outside the product's
    // own loop (a register or two, no branch in the hot loop). Where products narrow, that
    // workgroup stages op(A) as stored (`raw_a`, the same for all its invocations) and
    // narrows it after the sums.
    let sums_here = ROW_SUMS && wid.x == 0u && lid < BM;
    let raw_a = ROW_SUMS && NARROWS && wid.x == 0u;
    var row_sum: array<f32, SUM_ROWS>;
    for (var s = 0u; s < SUM_ROWS; s++) {
        row_sum[s] = 0.0;
    }

    // This invocation's share of the stage at k_begin (none when k is empty).
    var next: Stage;
    if (k_begin < k_end) {
        next = fetch_stage(lid, m0, n0, k_begin, raw_a);
    }

    // The half of the tiles this stage uses (always 0 without DOUBLE_BUFFER).
    var a_half = 0u;
    var b_half = 0u;
    for (var k0 = k_begin; k0 < k_end; k0 += BK) {
        store_stage(lid, a_half, b_half, next);
        workgroupBarrier();

        // The next stage's loads are in flight while this one is multiplied.
        let k1 = k0 + BK;
        if (k1 < k_end) {
            next = fetch_stage(lid, m0, n0, k1, raw_a);
        }
        if (sums_here) {
            for (var s = 0u; s < SUM_ROWS; s++) {
                let r = lid + s * THREADS;
                if (SUM_ROWS == 1u || r < BM) {
                    for (var kk = 0u; kk < BK; kk++) {
                        row_sum[s] += a_tile[a_half + kk * A_ROW + r / 4u][r % 4u];
                    }
                }
            }
        }
        if (raw_a) {
            workgroupBarrier();
            narrow_a_tile(lid, a_half);
            workgroupBarrier();
        }

        for (var kk = 0u; kk < BK; kk++) {
            var av: array<vec4<f32>, RM>;
            var bv: array<vec4<f32>, RN>;
            for (var r4 = 0u; r4 < RM; r4++) {
                av[r4] = a_tile[a_half + kk * A_ROW + r4 * TY_N + ty];
            }
            for (var c4 = 0u; c4 < RN; c4++) {
                bv[c4] = b_tile[b_half + kk * B_ROW + c4 * TX_N + tx];
            }
            for (var r = 0u; r < TM; r++) {
                let ar = vec4<f32>(av[r / 4u][r % 4u]);
                for (var c4 = 0u; c4 < RN; c4++) {
                    acc[r * RN + c4] = fma(ar, bv[c4], acc[r * RN + c4]);
                }
            }
        }
        if (DOUBLE_BUFFER) {
            // The next stage goes to the other half; every invocation has passed this
            // stage's barrier, so none still reads the half written two stages from now.
            a_half = BK * A_ROW - a_half;
            b_half = BK * B_ROW - b_half;
        } else {
            workgroupBarrier();
        }
    }

    if (sums_here) {
        for (var s = 0u; s < SUM_ROWS; s++) {
            let r = lid + s * THREADS;
            if (r < BM && (!CHECKED || m0 + r < p.m)) {
                store_row_sum(slice, m0 + r, row_sum[s]);
            }
        }
    }

    // Unsplit: C with the bias. Split: this slice's sums, at slice z of the partials.
    for (var r = 0u; r < TM; r++) {
        let row = m0 + ((r / 4u) * TY_N + ty) * 4u + r % 4u;
        for (var c4 = 0u; c4 < RN; c4++) {
            let col0 = n0 + (c4 * TX_N + tx) * 4u;
            let v = acc[r * RN + c4];
            for (var cc = 0u; cc < 4u; cc++) {
                store_c(row, col0 + cc, v[cc]);
            }
        }
    }
}

// C[i] = Σ_z partial[z, i] over the SPLIT_K slices in order, then + bias; one invocation
// per output (the partials arrive through binding 1; never batched); with ROW_SUMS, then
// one per row sum.
@compute @workgroup_size(256)
fn matmul_split_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * 256u + lid;
    let len = p.m * p.n;
    if (i >= len) {
        // (With ROW_SUMS the grid also covers the m row sums after the products.)
        let j = i - len;
        if (ROW_SUMS && j < p.m) {
            let base = SPLIT_K * len;
            var s = a_at(base + j);
            for (var z = 1u; z < SPLIT_K; z++) {
                s += a_at(base + z * p.m + j);
            }
            store_row_sum_final(j, s);
        }
        return;
    }
    var sum = a_at(i);
    for (var z = 1u; z < SPLIT_K; z++) {
        sum += a_at(z * len + i);
    }
    c[i] = onto_at(i, sum + bias_at(i % p.n));
}

// The same product without workgroup memory or barriers, for software adapters (lavapipe,
// SwiftShader), where a barrier costs more than the loads it saves. Invocation (tx, ty)
// of an 8×8 workgroup computes the 4×4 outputs at rows m0 + ty·4 + 0..3 and columns
// n0 + tx·4 + 0..3 straight from storage (BM = BN = 32); each a sum over all of k in
// ascending order, bias last; op(A), op(B) narrowed as loaded. Never split; batched like matmul; CAUSAL is ignored (the
// terms it would skip are zeros).
@compute @workgroup_size(64)
fn matmul_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    set_batch(wid.z);
    let row0 = wid.y * 32u + (lid / 8u) * 4u;
    let col0 = wid.x * 32u + (lid % 8u) * 4u;
    var acc: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        acc[r] = vec4<f32>(0.0);
    }
    for (var kk = 0u; kk < p.k; kk++) {
        let bv = narrow(vec4<f32>(load_b(kk, col0), load_b(kk, col0 + 1u), load_b(kk, col0 + 2u), load_b(kk, col0 + 3u)));
        for (var r = 0u; r < 4u; r++) {
            acc[r] = fma(vec4<f32>(narrow1(load_a(row0 + r, kk))), bv, acc[r]);
        }
    }
    for (var r = 0u; r < 4u; r++) {
        for (var cc = 0u; cc < 4u; cc++) {
            store_c(row0 + r, col0 + cc, acc[r][cc]);
        }
    }
}
