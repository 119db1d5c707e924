//! The backend conformance kit: op tests written once, generic over `B: Backend`, that
//! every kernel crate runs against itself (feature `conformance`).
//!
//! ```ignore
//! // kernels-foo/tests/conformance.rs
//! tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_foo::FooBackend::new());
//! ```
//!
//! expands to one `#[test]` per function in [`checks`]; wrap invocations in modules to
//! run several configurations of one backend. Each check draws seeded inputs from
//! [`crate::Rng`], including awkward sizes (1, odd, off multiples of 4 and 8, seq 1, odd
//! head counts), and compares:
//! - every op with a plain f64 host reference (the private `reference` module), within
//!   the [`Tolerance`] constant named at the call;
//! - every backward op (and `matmul`/`sum_rows` in the roles autograd gives them in
//!   backward passes) also with central finite differences of the backend's *own*
//!   forward op: step [`FD_EPS`], objective accumulated in f64, [`Tolerance::FINITE_DIFF`].
//!
//! Buffer copies (`zeros`, `upload`/`read`, `upload_indices`, `copy`) are checked bit for
//! bit; `copy`'s misuse checks catch panics, so they need unwinding (native tests).

pub mod checks;
mod finite_diff;
mod harness;
mod reference;
mod tolerance;

pub use finite_diff::{FD_EPS, FD_MAX_ELEMENTS};
pub use tolerance::Tolerance;

/// Expands to one `#[test]` per conformance check, each running it on a backend built by
/// evaluating `$backend` (an expression, evaluated once per test).
///
/// ```ignore
/// mod one_thread {
///     tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_cpu::CpuBackend::new(1));
/// }
/// ```
#[macro_export]
macro_rules! backend_conformance_tests {
    ($backend:expr) => {
        $crate::__conformance_tests!(
            $backend;
            zeros,
            upload_read_round_trip,
            indices_round_trip,
            copy,
            copy_is_a_snapshot,
            copy_misuse_panics,
            flush,
            add,
            scale,
            dropout,
            dropout_add,
            dropout_backward,
            sum_rows,
            sum_squares,
            matmul,
            matmul_backward,
            embedding,
            embedding_backward,
            layer_norm,
            layer_norm_backward,
            gelu,
            gelu_backward,
            attention,
            attention_backward,
            attention_dropout,
            attention_dropout_backward,
            cross_entropy,
            cross_entropy_backward,
            adamw,
        );
    };
}

/// Implementation detail of [`backend_conformance_tests`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($backend:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                $crate::conformance::checks::$check(&$backend);
            }
        )*
    };
}
