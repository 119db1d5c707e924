//! Scalar math written for the auto-vectoriser: plain arithmetic and bit casts, no libm
//! calls, so a loop over slices that calls these compiles to vector code at the width of
//! the `#[target_feature]` entry point it is inlined into.

/// `e^x` for `x` clamped to [-87, 88] (so `2^n` stays a normal f32): `x = n ln2 + r`,
/// `|r| <= ln2/2`, `e^r` by its degree-6 Taylor polynomial (error < 1.3e-7 relative).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    /// 1.5 · 2^23: adding it rounds to an integer held in the low mantissa bits.
    const ROUNDER: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let n_int = (shifted.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    p * f32::from_bits(((n_int + 127) << 23) as u32)
}
