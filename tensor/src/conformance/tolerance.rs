//! How close a backend must come to the f64 reference.

use crate::Precision;

/// A backend value `got` passes against the reference `want` when
/// `|got - want| <= abs + rel * |want|` (NaN never passes).
///
/// The constants below are the kit's whole contract on accuracy. They are sized for an
/// f32 backend that accumulates in f32 (as a GPU does) on the kit's inputs: values of
/// order 1 and sums of at most a few hundred terms, where f32 rounding (2^-24 ≈ 6e-8 per
/// operation) stays one to two orders of magnitude inside them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute error always accepted.
    pub abs: f64,
    /// Error accepted relative to the reference value's magnitude.
    pub rel: f64,
}

impl Tolerance {
    /// One f32 operation per element (add, scale): a single rounding.
    pub const POINTWISE: Tolerance = Tolerance { abs: 1e-7, rel: 1e-6 };
    /// A handful of f32 operations around a transcendental (GELU and its derivative,
    /// where `1 + tanh(u)` cancels for negative inputs).
    pub const TRANSCENDENTAL: Tolerance = Tolerance { abs: 1e-5, rel: 1e-4 };
    /// Sums of up to a few hundred f32 products (matmul, attention, LayerNorm,
    /// cross-entropy, column sums).
    pub const ACCUMULATED: Tolerance = Tolerance { abs: 1e-4, rel: 1e-4 };
    /// A fused op against the ops it fuses, on the same backend, where a compiler may round
    /// the same handful of f32 multiply-adds differently in the two pipelines (WGSL allows
    /// contraction; NVIDIA's Vulkan driver does it): a few roundings of terms of order one.
    pub const REROUNDED: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };
    /// AdamW parameters and moments after a few steps (f32 update vs f64 reference).
    pub const OPTIMIZER: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };
    /// An analytic gradient against central finite differences of the backend's own f32
    /// forward op with step [`crate::conformance::FD_EPS`]: covers the `O(eps²)`
    /// truncation error and the f32 noise of the forward divided by `2·eps`.
    pub const FINITE_DIFF: Tolerance = Tolerance { abs: 1e-3, rel: 1e-2 };

    /// f16's unit roundoff, 2⁻¹¹: the largest relative error of rounding to nearest f16.
    pub const F16_ROUNDOFF: f64 = 1.0 / 2048.0;

    /// Values that come out of matrix products on a backend computing in `precision`,
    /// where `depth` is the inner dimension (k) of the products behind a value, added up
    /// along a chain of them (attention's `head_dim + seq`).
    ///
    /// [`Precision::F32`]: [`Tolerance::ACCUMULATED`], exactly (the f32 kit is unchanged).
    ///
    /// [`Precision::Mixed`] rounds each input of a product to f16 (relative error up to
    /// `u = 2⁻¹¹`) and sums in f32, so a term `a·b` moves by up to `2u·|a·b|`, in random
    /// directions: the error of a sum of `depth` terms of order 1 (the kit's inputs are
    /// N(0, 1) draws or probabilities) has a standard deviation near `0.6·√depth·u`, and
    /// the worst of a few thousand checked values stays under `4·√depth·u`: the `abs` term,
    /// about √K·2⁻¹¹ as issue 34 states it, times 4. A single term (`depth` 1, or a value
    /// that one large product dominates) is off by at most `2u` relative: the `rel` term.
    /// Both come on top of [`Tolerance::ACCUMULATED`]'s f32 allowance. The bound assumes
    /// conversion to *nearest* f16 (lavapipe's; WGSL also allows rounding toward zero,
    /// which about doubles the error, and a backend's start-up self-test accepts it).
    /// What mixed keeps in f32 (bias gradients' row sums, LayerNorm, softmax,
    /// cross-entropy, the optimizer) keeps the f32 tolerances.
    pub fn products(precision: Precision, depth: usize) -> Tolerance {
        let acc = Tolerance::ACCUMULATED;
        match precision {
            Precision::F32 => acc,
            Precision::Mixed => Tolerance {
                abs: acc.abs + 4.0 * (depth.max(1) as f64).sqrt() * Self::F16_ROUNDOFF,
                rel: acc.rel + 2.0 * Self::F16_ROUNDOFF,
            },
        }
    }

    /// Whether `got` is within `abs + rel · |want|` of `want`.
    pub fn accepts(&self, got: f64, want: f64) -> bool {
        (got - want).abs() <= self.abs + self.rel * want.abs()
    }

    /// Panics unless every `got[i]` is accepted against `want[i]`. The message is the kit's
    /// report: `what` (the checks pass the op, its shape and the output), how many values
    /// failed, and the worst one — its index, the value, the reference, the error and the
    /// error allowed there. A NaN counts as the worst.
    pub fn assert_close(&self, what: &str, got: &[f32], want: &[f64]) {
        assert_eq!(
            got.len(),
            want.len(),
            "{what}: backend gave {} values, reference {}",
            got.len(),
            want.len()
        );
        let mut failures = 0;
        let (mut worst, mut worst_excess) = (None, f64::NEG_INFINITY);
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let g = g as f64;
            if !self.accepts(g, w) {
                failures += 1;
                let excess = (g - w).abs() - self.rel * w.abs();
                let excess = if excess.is_nan() { f64::INFINITY } else { excess };
                if excess > worst_excess {
                    (worst, worst_excess) = (Some(i), excess);
                }
            }
        }
        if let Some(i) = worst {
            panic!(
                "{what}: {failures} of {} values outside {self:?}; worst at [{i}]: got {}, want {}, error {:.3e} (allowed {:.3e})",
                got.len(),
                got[i],
                want[i],
                (got[i] as f64 - want[i]).abs(),
                self.abs + self.rel * want[i].abs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tolerance;

    #[test]
    fn bounds_are_abs_plus_rel_and_nan_never_passes() {
        let tol = Tolerance { abs: 0.1, rel: 0.01 };
        assert!(tol.accepts(10.19, 10.0));
        assert!(!tol.accepts(10.21, 10.0));
        assert!(!tol.accepts(f64::NAN, 0.0));
        assert!(!tol.accepts(0.0, f64::NAN));
    }

    #[test]
    fn f32_products_keep_the_f32_tolerance_and_mixed_ones_grow_with_root_k() {
        use crate::Precision;
        for k in [0, 1, 7, 300] {
            assert_eq!(Tolerance::products(Precision::F32, k), Tolerance::ACCUMULATED);
        }
        let (one, hundred) =
            (Tolerance::products(Precision::Mixed, 1), Tolerance::products(Precision::Mixed, 100));
        let acc = Tolerance::ACCUMULATED;
        assert_eq!(one.rel, acc.rel + 2.0 / 2048.0);
        assert!((hundred.abs - acc.abs - 40.0 / 2048.0).abs() < 1e-12);
        assert!((one.abs - acc.abs - 4.0 / 2048.0).abs() < 1e-12);
    }

    #[test]
    #[should_panic(expected = "2 of 3 values outside")]
    fn assert_close_reports_failures_including_nan() {
        Tolerance::POINTWISE.assert_close("test", &[1.0, f32::NAN, 2.0], &[1.0, 1.0, 1.0]);
    }

    #[test]
    fn the_report_names_the_op_the_shape_and_the_worst_error() {
        let report = std::panic::catch_unwind(|| {
            Tolerance::POINTWISE.assert_close("add [3]", &[1.0, 1.5, 3.0], &[1.0, 1.0, 1.0]);
        })
        .unwrap_err();
        let report = report.downcast_ref::<String>().unwrap();
        assert!(report.starts_with("add [3]: 2 of 3 values outside"), "{report}");
        assert!(report.contains("worst at [2]: got 3, want 1, error 2.000e0 (allowed 1.100e-6)"), "{report}");
    }
}
