// Test-only stand-ins for the cooperative-matrix built-ins matmul_coop.wgsl uses, so that
// its staging, fragment addressing, subgroup tiling and write-out run (and are checked
// against the CPU) on adapters without cooperative matrices (`TINYGPT_WGPU_COOP=emulate`,
// see `coop.rs`). Spread over a subgroup as the hardware's are: lane l of a subgroup of s
// owns elements l, l + s, … of each 16 × 16 accumulator (row-major, e = 16·r + c), kept in
// workgroup memory (one slot per warp and accumulator), so no invocation holds a whole
// matrix. A fragment of op(A) or op(B) is where it lies in the staged tile (it is read
// before the next barrier, as the real fragment would be), read as SPIR-V's
// `OpCooperativeMatrixLoadKHR` does: row-major (`coopLoadT`), element (r, c) at
// `at + r·stride + c`; column-major (`coopLoad`), at `at + c·stride + r`. Products are
// f16 × f16 summed in f32, k ascending.

struct EmuA {
    at: u32,
    stride: u32,
    row_major: bool,
}

struct EmuB {
    at: u32,
    stride: u32,
    row_major: bool,
}

var<workgroup> emu_acc: array<f32, WARPS * EMU_ACCS * 256>;
var<private> emu_lane: u32;
var<private> emu_size: u32;

fn emu_at(row_major: bool, at: u32, stride: u32, r: u32, c: u32) -> u32 {
    return select(at + c * stride + r, at + r * stride + c, row_major);
}

fn emu_load_a(row_major: bool, at: u32, stride: u32) -> EmuA {
    return EmuA(at, stride, row_major);
}

fn emu_load_b(row_major: bool, at: u32, stride: u32) -> EmuB {
    return EmuB(at, stride, row_major);
}

// Accumulator `slot` of `warp`, zeroed; its value is where it lies in emu_acc.
fn emu_zero(warp: u32, slot: u32) -> u32 {
    let base = (warp * EMU_ACCS + slot) * 256u;
    for (var e = emu_lane; e < 256u; e += emu_size) {
        emu_acc[base + e] = 0.0;
    }
    return base;
}

fn emu_mma(a: EmuA, b: EmuB, c: u32) -> u32 {
    for (var e = emu_lane; e < 256u; e += emu_size) {
        let i = e / 16u;
        let j = e % 16u;
        var s = emu_acc[c + e];
        for (var kk = 0u; kk < 16u; kk++) {
            let av = f32(a_tile[emu_at(a.row_major, a.at, a.stride, i, kk)]);
            let bv = f32(b_tile[emu_at(b.row_major, b.at, b.stride, kk, j)]);
            s = fma(av, bv, s);
        }
        emu_acc[c + e] = s;
    }
    return c;
}

fn emu_store(m: u32, at: u32) {
    for (var e = emu_lane; e < 256u; e += emu_size) {
        c_tile[at + e] = emu_acc[m + e];
    }
}
