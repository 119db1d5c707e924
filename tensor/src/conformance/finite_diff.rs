//! Central finite differences of a backend's own forward op.
//!
//! A backward op is checked by turning its forward op into a scalar objective
//! `L(x) = Σ w ⊙ forward(x)` (random `w`, summed in f64; see `harness::weighted_sum`),
//! so that the backward op fed `dout = w` must return `∂L/∂x`. Each probed element is
//! moved to the f32 values `x⁺ = x + eps` and `x⁻ = x - eps`, and the numeric derivative
//! is `(L(x⁺) - L(x⁻)) / (x⁺ - x⁻)` with the actually representable step in the
//! denominator.

use crate::conformance::Tolerance;
use crate::Rng;

/// The finite-difference step: large enough that the f32 rounding of the forward op,
/// divided by `2·eps`, stays below 1e-4 on the kit's inputs; small enough that the
/// `O(eps²)` truncation error of the central difference does too.
pub const FD_EPS: f32 = 1e-2;

/// At most this many elements of each input are probed (chosen at random), which keeps
/// the kit fast while still touching every kind of position across the cases.
pub const FD_MAX_ELEMENTS: usize = 24;

/// Checks `analytic` (the backward op's gradient with respect to `x`) against central
/// differences of `objective` around `x`, within [`Tolerance::FINITE_DIFF`]. The
/// objective is async because it reads the backend's output back.
pub(crate) async fn check_gradient(
    what: &str,
    x: &[f32],
    analytic: &[f32],
    rng: &mut Rng,
    objective: impl AsyncFn(&[f32]) -> f64,
) {
    assert_eq!(
        analytic.len(),
        x.len(),
        "{what}: gradient has {} values for {} inputs",
        analytic.len(),
        x.len()
    );
    let elements: Vec<usize> = if x.len() <= FD_MAX_ELEMENTS {
        (0..x.len()).collect()
    } else {
        (0..FD_MAX_ELEMENTS).map(|_| rng.below(x.len() as u64) as usize).collect()
    };
    let tol = Tolerance::FINITE_DIFF;
    let mut probe = x.to_vec();
    for i in elements {
        let (plus, minus) = (x[i] + FD_EPS, x[i] - FD_EPS);
        probe[i] = plus;
        let l_plus = objective(&probe).await;
        probe[i] = minus;
        let l_minus = objective(&probe).await;
        probe[i] = x[i];
        let numeric = (l_plus - l_minus) / (plus as f64 - minus as f64);
        let got = analytic[i] as f64;
        assert!(
            tol.accepts(got, numeric),
            "{what}: gradient[{i}] = {got}, finite differences give {numeric} (eps {FD_EPS}, {tol:?})"
        );
    }
}
