//! A NaN planted in one op's input is reported as that op's, with its sizes and the
//! offending value, even though earlier ops in the chain ran cleanly and later ones spread it.

use tinygpt_kernels_checked::Checked;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::{block_on, read_vec, Backend, BadValue, MatmulDims, MatmulFused, Rng, TensorError};

const ROWS: usize = 6;
const DIM: usize = 8;

/// matmul → layer_norm (with `gamma`) → gelu → cross_entropy, and the loss read back.
fn run_chain(backend: &Checked<CpuBackend>, gamma: &[f32]) -> Result<Vec<f32>, TensorError> {
    let mut rng = Rng::new(7);
    let x = backend.upload(&(0..ROWS * DIM).map(|_| rng.normal() as f32).collect::<Vec<_>>());
    let w = backend.upload(&(0..DIM * DIM).map(|_| rng.normal() as f32 * 0.3).collect::<Vec<_>>());
    let h = backend
        .matmul(
            &x,
            &w,
            MatmulDims { m: ROWS, k: DIM, n: DIM, trans_a: false, trans_b: true },
            MatmulFused::none(),
        )
        .out;
    let normed = backend.layer_norm(&h, &backend.upload(gamma), &backend.zeros(DIM), ROWS, DIM, 1e-5);
    let act = backend.gelu(&normed.out, ROWS * DIM);
    let targets = backend.upload_indices(&[0, 1, 2, 3, 4, 5]);
    let loss = backend.cross_entropy(&act, &targets, ROWS, DIM, false).loss;
    block_on(read_vec(backend, &loss))
}

#[test]
fn a_clean_chain_reads_back_its_loss() {
    let backend = Checked::new(CpuBackend::new(1));
    let loss = run_chain(&backend, &[1.0; DIM]).expect("no breach in a clean chain");
    assert!(loss[0].is_finite() && loss[0] > 0.0);
    assert!(backend.breach().is_none());
}

#[test]
fn a_nan_in_layer_norms_gain_names_layer_norm() {
    let backend = Checked::new(CpuBackend::new(1));
    let mut gamma = [1.0; DIM];
    gamma[5] = f32::NAN;
    let err = run_chain(&backend, &gamma).expect_err("the planted NaN is found");
    let TensorError::BadValue(bad) = &err else { panic!("{err}") };
    let BadValue { op, index, shape, operand, detail } = &**bad;
    assert_eq!(op, "layer_norm");
    assert_eq!(*index, 1, "the second op of the chain (the matmul before it ran cleanly)");
    assert_eq!(shape, "rows 6, dim 8, eps 0.00001");
    assert_eq!(operand, "input gamma");
    assert_eq!(detail, "1 of 8 values are not finite (NaN at index 5)");
    assert_eq!(
        err.to_string(),
        "the checked backend stopped at op #1 `layer_norm` (rows 6, dim 8, eps 0.00001): input gamma: \
         1 of 8 values are not finite (NaN at index 5)"
    );
}

#[test]
fn an_op_that_makes_an_infinity_is_named_as_its_source() {
    let backend = Checked::new(CpuBackend::new(1));
    let big = backend.upload(&[3e38, 1.0]);
    let doubled = backend.add(&big, &big, 2);
    let _later = backend.scale(&doubled, 0.5, 2);
    let err = block_on(backend.flush()).expect_err("the overflow is found");
    let TensorError::BadValue(bad) = err else { panic!("{err}") };
    let BadValue { op, operand, detail, .. } = *bad;
    assert_eq!((op.as_str(), operand.as_str()), ("add", "output out"));
    assert_eq!(detail, "1 of 2 values are not finite (inf at index 0)");
}

#[test]
fn a_buffer_shorter_than_its_shape_panics_naming_the_op() {
    let backend = Checked::new(CpuBackend::new(1));
    let x = backend.upload(&[1.0; 5]);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backend.sum_rows(&x, 2, 3)))
        .expect_err("a shape mistake panics");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    assert_eq!(message, "sum_rows: input x holds 5 values, the sizes given need 6");
    assert!(backend.breach().is_none(), "a shape mistake is not a bad value");
}
