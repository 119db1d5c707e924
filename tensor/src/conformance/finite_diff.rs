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
/// objective is async because it reads the backend's output back. Every probed element is
/// checked before failing, and the report names `what` (op, shape, gradient), how many
/// failed and the worst: its index, both gradients, the error and the error allowed.
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
    let probed = elements.len();
    let (mut failures, mut worst) = (0, None::<(usize, f64, f64, f64)>);
    for i in elements {
        let (plus, minus) = (x[i] + FD_EPS, x[i] - FD_EPS);
        probe[i] = plus;
        let l_plus = objective(&probe).await;
        probe[i] = minus;
        let l_minus = objective(&probe).await;
        probe[i] = x[i];
        let numeric = (l_plus - l_minus) / (plus as f64 - minus as f64);
        let got = analytic[i] as f64;
        if !tol.accepts(got, numeric) {
            failures += 1;
            let excess = (got - numeric).abs() - tol.rel * numeric.abs();
            let excess = if excess.is_nan() { f64::INFINITY } else { excess };
            if !matches!(worst, Some(w) if w.3 >= excess) {
                worst = Some((i, got, numeric, excess));
            }
        }
    }
    if let Some((i, got, numeric, _)) = worst {
        panic!(
            "{what}: {failures} of {probed} probed gradient values disagree with finite differences (eps {FD_EPS}, {tol:?}); worst at [{i}]: backward gives {got}, finite differences {numeric}, error {:.3e} (allowed {:.3e})",
            (got - numeric).abs(),
            tol.abs + tol.rel * numeric.abs()
        );
    }
}
