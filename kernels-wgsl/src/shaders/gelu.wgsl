// GELU (tanh form) and its slope, over `V` (f32 or vec4<f32>, lane by lane): the host
// prepends the alias. One copy of the formulas for the pointwise kernels
// (elementwise.wgsl) and the matmul epilogues that fuse them (matmul.wgsl's `put_c`).
//
// gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/π) (x + 0.044715 x³)
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh²(u)) · sqrt(2/π) (1 + 3 · 0.044715 x²)

const SQRT_2_OVER_PI: f32 = 0.7978846;
const CUBIC: f32 = 0.044715;

// tanh through exp(-2|u|): finite for every input (exp never overflows).
fn tanh_v(u: V) -> V {
    let e = exp(-2.0 * abs(u));
    return sign(u) * (1.0 - e) / (1.0 + e);
}

fn gelu_v(x: V) -> V {
    let u = SQRT_2_OVER_PI * (x + CUBIC * x * x * x);
    return 0.5 * x * (1.0 + tanh_v(u));
}

fn gelu_slope_v(x: V) -> V {
    let t = tanh_v(SQRT_2_OVER_PI * (x + CUBIC * x * x * x));
    let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}
