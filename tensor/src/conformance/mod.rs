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
//!   the [`Tolerance`] constant named at the call, or for values that come out of matrix
//!   products within [`Tolerance::products`] for the precision the kit runs at
//!   (`precision:` in [`crate::backend_conformance_tests`]; f32 unless named);
//! - every backward op (and `matmul`/`sum_rows` in the roles autograd gives them in
//!   backward passes) also with central finite differences of the backend's *own*
//!   forward op: step [`FD_EPS`], objective accumulated in f64, [`Tolerance::FINITE_DIFF`].
//!
//! Every op's inputs are read back after the call and must hold what was uploaded, bit for
//! bit (an op writes only its outputs). Buffer copies (`zeros`, `upload`/`read`,
//! `upload_indices`, `copy`) are checked bit for bit; `copy`'s misuse checks
//! catch panics, so they need unwinding (native tests only).
//!
//! A failure is one line that a backend author can act on: the op, its shape (the sizes,
//! or the `…Dims` value), the output or operand, how many values failed, and the worst one
//! with its index, the backend's value, the reference's, the error and the error allowed,
//! e.g. `matmul MatmulDims { m: 5, k: 9, n: 17, trans_a: false, trans_b: true }: 3 of 85
//! values outside Tolerance { abs: 0.0001, rel: 0.0001 }; worst at [12]: got 1.5, want
//! 1.25, error 2.500e-1 (allowed 2.250e-4)`.
//!
//! Every check is an `async fn` that awaits its readbacks: natively the macro drives it
//! with `block_on`, in a browser [`crate::backend_conformance_browser_tests`] awaits it.

pub mod checks;
pub mod determinism;
mod finite_diff;
mod harness;
mod reference;
mod tolerance;

pub use finite_diff::{FD_EPS, FD_MAX_ELEMENTS};
pub use tolerance::Tolerance;

/// Expands to one `#[test]` per conformance check, each running it on a backend built by
/// evaluating `$backend` (an expression, evaluated once per test) and driving the check
/// (an `async fn`) with [`crate::block_on`].
///
/// ```ignore
/// mod one_thread {
///     tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_cpu::CpuBackend::new(1));
/// }
/// ```
///
/// Attributes before `=>` go on every test, e.g. to mark a configuration this machine
/// cannot run as ignored (so the count shows it did not run, instead of passing empty):
///
/// ```ignore
/// tinygpt_tensor::backend_conformance_tests!(
///     #[cfg_attr(not(has_avx512), ignore = "no AVX-512 here")] => CpuBackend::new(1)
/// );
/// ```
///
/// `precision: P` (a [`crate::Precision`] variant, attributes after a comma) checks a
/// backend whose matrix products compute in `P`: every check runs, the ones whose values
/// come out of products within [`Tolerance::products`] for `P` (and, in `Mixed`, without
/// finite differences through them: see [`checks::matmul_backward`]). Without it the
/// precision is `F32`, whose tolerances are the constants above, exactly.
///
/// ```ignore
/// mod mixed {
///     tinygpt_tensor::backend_conformance_tests!(precision: Mixed => mixed_backend());
/// }
/// ```
#[macro_export]
macro_rules! backend_conformance_tests {
    ($(#[$attr:meta])* => $backend:expr) => {
        $crate::__conformance_tests!(native [$(#[$attr])*] F32, $backend);
    };
    (precision: $precision:ident $(, #[$attr:meta])* => $backend:expr) => {
        $crate::__conformance_tests!(native [$(#[$attr])*] $precision, $backend);
    };
    ($backend:expr) => {
        $crate::__conformance_tests!(native [] F32, $backend);
    };
}

/// Expands to a `#[test]` that runs every op kind on the backend `$make` (a closure from a
/// thread count) builds for each count in `$threads` and requires the same bits from each
/// (see [`crate::conformance::determinism`]): for backends that promise results independent of thread count.
///
/// ```ignore
/// tinygpt_tensor::backend_determinism_tests!(|threads| FooBackend::new(threads), [1, 2, 3]);
/// ```
#[macro_export]
macro_rules! backend_determinism_tests {
    ($make:expr, $threads:expr) => {
        #[test]
        fn same_bits_at_every_thread_count() {
            $crate::block_on($crate::conformance::determinism::same_bits_across_threads($make, &$threads));
        }
    };
}

/// Expands to one `#[wasm_bindgen_test]` `async fn` per conformance check that can run in a
/// browser, each awaiting the check, so WebGPU readbacks complete as the event loop turns
/// (`block_on` would spin forever there). `$backend` is evaluated inside the async test
/// and may `.await` (e.g. `WgpuBackend::new_async().await.unwrap()`). The caller needs the
/// `wasm-bindgen-test` crate. Left out: the checks that catch panics (`copy_misuse_panics`),
/// as wasm32 aborts on a panic.
#[macro_export]
macro_rules! backend_conformance_browser_tests {
    (precision: $precision:ident => $backend:expr) => {
        $crate::__conformance_tests!(browser [] $precision, $backend);
    };
    ($backend:expr) => {
        $crate::__conformance_tests!(browser [] F32, $backend);
    };
}

/// Implementation detail of [`backend_conformance_tests`] and
/// [`backend_conformance_browser_tests`]: the one list of checks, split by whether a check
/// needs unwinding panics.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($mode:ident $attrs:tt $precision:ident, $backend:expr) => {
        $crate::__conformance_tests!(@unwinding $mode $attrs $precision, $backend; copy_misuse_panics);
        $crate::__conformance_tests!(@portable $mode $attrs $precision, $backend;
            zeros,
            upload_read_round_trip,
            indices_round_trip,
            copy,
            copy_is_a_snapshot,
            copy_list,
            flush,
            add,
            scale,
            dropout,
            dropout_add,
            dropout_backward,
            sum_rows,
            sum_squares,
            matmul,
            matmul_sum_rows,
            matmul_onto,
            matmul_backward,
            embedding,
            embedding_backward,
            layer_norm,
            layer_norm_backward,
            layer_norm_backward_onto,
            gelu,
            gelu_backward,
            attention,
            attention_backward,
            cached_attention,
            attention_dropout,
            attention_dropout_backward,
            attention_for_training,
            attention_backward_saved,
            cross_entropy,
            cross_entropy_backward,
            cross_entropy_for_training,
            wide_vocab_head,
            adamw,
        );
    };
    (@one [$(#[$attr:meta])*] $precision:ident $check:ident, $backend:expr) => {
        $(#[$attr])*
        #[test]
        fn $check() {
            let backend = $backend;
            $crate::block_on($crate::conformance::checks::$check(&backend, $crate::Precision::$precision));
        }
    };
    (@$kind:ident native $attrs:tt $precision:ident, $backend:expr; $($check:ident),* $(,)?) => {
        $(
            $crate::__conformance_tests!(@one $attrs $precision $check, $backend);
        )*
    };
    (@unwinding browser $attrs:tt $precision:ident, $backend:expr; $($check:ident),* $(,)?) => {};
    (@portable browser $attrs:tt $precision:ident, $backend:expr; $($check:ident),* $(,)?) => {
        $(
            #[wasm_bindgen_test::wasm_bindgen_test]
            async fn $check() {
                let backend = $backend;
                $crate::conformance::checks::$check(&backend, $crate::Precision::$precision).await;
            }
        )*
    };
}
