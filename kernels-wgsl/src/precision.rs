//! Which arithmetic the matmul runs ([`MatmulPrecision`]), chosen once when the device
//! opens: the precision asked for, what the adapter offers, and the start-up self-test
//! (`self_test.rs`) decide it, and the report says why in one line.
//!
//! The order of preference for [`Precision::Mixed`] is the issue's: the cooperative-matrix
//! kernel (`coop.rs`) when the adapter offers a 16×16×16 f16×f16→f32 configuration and
//! wgpu the features it needs, once its own start-up self-test passed, else the
//! `shader-f16` path (the
//! f32 kernels with their inputs rounded to f16 as they are staged, see
//! `shaders/matmul.wgsl`), else f32. The `shader-f16` path is offered where the adapter has
//! the feature, and the device asks for it, as the issue orders them (f16 storage, the next
//! seam, needs it); this seam rounds on the f32's bits (`NARROW_F16` in `matmul.rs`), which
//! no driver can fold away.

use std::fmt;

use tinygpt_tensor::Precision;

use crate::coop::{self, CoopPlan};
use crate::self_test;
use crate::tuning::{self, CoopSetting};
use crate::WgpuBackend;

/// The kernel family behind the matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulKernels {
    /// f32 inputs, f32 accumulation: what `f32` always runs, and `mixed`'s fallback.
    F32,
    /// The f32 kernels with op(A), op(B) rounded to the nearest f16 as they are staged, on
    /// adapters with the `shader-f16` feature; products and sums stay f32.
    ShaderF16,
    /// Cooperative-matrix (tensor-core) tiles of f16 inputs accumulating in f32
    /// (`shaders/matmul_coop.wgsl`); the products it does not take (causal skips, row
    /// sums) run on the shader-f16 kernels.
    CooperativeMatrix,
}

impl MatmulKernels {
    /// The name in reports: `f32`, `shader-f16`, `cooperative-matrix`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatmulKernels::F32 => "f32",
            MatmulKernels::ShaderF16 => "shader-f16",
            MatmulKernels::CooperativeMatrix => "cooperative-matrix",
        }
    }

    /// The precision these kernels compute in.
    pub fn precision(self) -> Precision {
        match self {
            MatmulKernels::F32 => Precision::F32,
            MatmulKernels::ShaderF16 | MatmulKernels::CooperativeMatrix => Precision::Mixed,
        }
    }
}

impl fmt::Display for MatmulKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the matmul runs and why, for `tinygpt bench`/`train` and the page's capability
/// panel. Its `Display` is the one line to print:
/// `shader-f16: f16 inputs, f32 accumulation (no cooperative matrix on llvmpipe; …)` or
/// `f32: mixed was asked for but the adapter has no shader-f16`.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulPrecision {
    /// What the composition root asked for.
    pub requested: Precision,
    /// What runs.
    pub kernels: MatmulKernels,
    /// Why, for a person: the sentence after `kernels: ` in the line.
    pub reason: String,
    /// The start-up self-test's worst error of the mixed matmul against the f32 one, in
    /// units of its f16 rounding scale (see `self_test.rs`); `None` when it did not run
    /// (f32 was asked for, or the adapter has no `shader-f16`).
    pub self_test_worst: Option<f64>,
}

impl MatmulPrecision {
    /// The precision the matmul computes in (`requested` unless it fell back).
    pub fn precision(&self) -> Precision {
        self.kernels.precision()
    }

    /// `f32` as asked for.
    pub(crate) fn f32_as_asked() -> Self {
        MatmulPrecision {
            requested: Precision::F32,
            kernels: MatmulKernels::F32,
            reason: "f32 inputs, f32 accumulation (as asked)".into(),
            self_test_worst: None,
        }
    }

    /// `mixed` falling back to f32 because of `why`.
    pub(crate) fn fallback(why: String) -> Self {
        MatmulPrecision {
            requested: Precision::Mixed,
            kernels: MatmulKernels::F32,
            reason: why,
            self_test_worst: None,
        }
    }
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kernels, self.reason)
    }
}

/// Whether the mixed matmul may run on cooperative matrices on `adapter` ([`coop::plan`]),
/// unless `TINYGPT_WGPU_COOP` says otherwise ([`CoopSetting`]).
pub(crate) fn coop_plan(adapter: &wgpu::Adapter) -> Result<CoopPlan, String> {
    let properties = adapter.cooperative_matrix_properties();
    let offer = coop::CoopOffer::of(adapter, &properties);
    let anyway = |large, emulated| CoopPlan {
        subgroup: offer.subgroup_max_size.clamp(1, 128),
        large,
        always_large: large && emulated,
        emulated,
    };
    match tuning::coop_setting() {
        Some(CoopSetting::Off) => Err("turned off by TINYGPT_WGPU_COOP=off".into()),
        Some(CoopSetting::Force) => Ok(coop::plan(&offer).unwrap_or(anyway(false, false))),
        Some(CoopSetting::Emulate { large }) => Ok(anyway(large, true)),
        None => coop::plan(&offer),
    }
}

/// Decides what `f32` (a new device's f32 handle) runs for `requested`, given whether the
/// cooperative-matrix kernel may run (`coop`, from [`coop_plan`]): see the module doc.
/// Returns the report and the plan of the cooperative-matrix kernel when it is chosen.
pub(crate) async fn choose(
    f32: &WgpuBackend,
    requested: Precision,
    adapter: &wgpu::Adapter,
    coop: Result<CoopPlan, String>,
) -> (MatmulPrecision, Option<CoopPlan>) {
    if requested == Precision::F32 {
        return (MatmulPrecision::f32_as_asked(), None);
    }
    let name = &f32.gpu.adapter.name;
    if !f32.gpu.adapter.shader_f16 {
        let why = coop_note(adapter, name);
        return (
            MatmulPrecision::fallback(format!("mixed was asked for but {name} has no shader-f16 ({why})")),
            None,
        );
    }
    let coop_note = match coop {
        Ok(plan) => {
            // The small tile on the self-test's products first, then (where it fits) the
            // large one on the same products, so that no variant runs unchecked.
            let run = |p: CoopPlan| {
                let tensor = WgpuBackend { mixed: true, coop: Some(p), ..f32.clone() };
                async move { self_test::check_mixed(f32, &tensor).await }
            };
            match run(CoopPlan { large: false, always_large: false, ..plan }).await {
                Ok(small_worst) => {
                    let (plan, worst, tiles) = if plan.large {
                        match run(CoopPlan { always_large: true, ..plan }).await {
                            Ok(w) => (plan, w.max(small_worst), "128×128 and 64×64 tiles".to_string()),
                            Err(why) => (
                                CoopPlan { large: false, always_large: false, ..plan },
                                small_worst,
                                format!("64×64 tiles: the 128×128 one failed its self-test ({why})"),
                            ),
                        }
                    } else {
                        (plan, small_worst, "64×64 tiles".to_string())
                    };
                    let chosen = MatmulPrecision {
                        requested,
                        kernels: MatmulKernels::CooperativeMatrix,
                        reason: format!(
                            "f16 inputs in 16×16×16 cooperative matrices, f32 accumulation ({tiles}, subgroups of \
                             up to {}{}; start-up self-test passed: worst error {worst:.2} units of 2⁻¹¹·√Σ(ab)², \
                             bound {})",
                            plan.subgroup,
                            if plan.emulated { ", EMULATED for tests (TINYGPT_WGPU_COOP)" } else { "" },
                            self_test::BOUND
                        ),
                        self_test_worst: Some(worst),
                    };
                    return (chosen, Some(plan));
                }
                Err(why) => format!("the cooperative-matrix matmul failed its start-up self-test ({why})"),
            }
        }
        Err(why) if why.is_empty() => coop_note(adapter, name),
        Err(why) => format!("no cooperative-matrix matmul on {name}: {why}"),
    };
    let mixed = WgpuBackend { mixed: true, coop: None, ..f32.clone() };
    let chosen = match self_test::check_mixed(f32, &mixed).await {
        Ok(worst) => MatmulPrecision {
            requested,
            kernels: MatmulKernels::ShaderF16,
            reason: format!(
                "f16 inputs, f32 accumulation ({coop_note}; start-up self-test passed: worst error {worst:.2} \
                 units of 2⁻¹¹·√Σ(ab)², bound {})",
                self_test::BOUND
            ),
            self_test_worst: Some(worst),
        },
        Err(why) => MatmulPrecision::fallback(format!(
            "the shader-f16 matmul failed its start-up self-test ({why}; {coop_note})"
        )),
    };
    (chosen, None)
}

/// Why no cooperative-matrix kernel runs on `adapter`, as [`coop::plan`] says it.
fn coop_note(adapter: &wgpu::Adapter, name: &str) -> String {
    let properties = adapter.cooperative_matrix_properties();
    match coop::plan(&coop::CoopOffer::of(adapter, &properties)) {
        Ok(_) => format!("{name} offers cooperative matrices"),
        Err(why) => format!("no cooperative-matrix matmul on {name}: {why}"),
    }
}
