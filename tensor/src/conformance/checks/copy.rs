//! `copy`: bit-for-bit, in place on the destination, inside its bounds.
//!
//! A copy is not arithmetic, so results are compared bit for bit against what the backend
//! itself reads back from the source (a backend that quiets NaNs on upload still passes).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::conformance::harness::{assert_unchanged, normal, read};
use crate::{AdamWStep, Backend, Rng};

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Source values with the special ones first: signed zeros, a subnormal, infinities, NaN.
fn source(rng: &mut Rng, len: usize) -> Vec<f32> {
    let special = [-0.0, 0.0, 1e-40, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, f32::MIN];
    let mut data = normal(rng, len, 1.0);
    let n = len.min(special.len());
    data[..n].copy_from_slice(&special[..n]);
    data
}

/// Copies of every range shape (whole buffer, one value, empty, up to either end, across
/// the parallel chunk size) write exactly `dst[dst_offset..][..len]`, leave the source and
/// the rest of the destination alone, and show through every handle of the destination.
pub async fn copy<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0xC0_BEEF);
    // (src_len, src_offset, dst_len, dst_offset, len)
    let cases = [
        (1, 0, 1, 0, 1),
        (9, 0, 9, 0, 9),
        (9, 8, 9, 0, 1),
        (9, 0, 9, 8, 1),
        (9, 3, 5, 5, 0),
        (9, 9, 9, 0, 0),
        (33, 7, 40, 13, 26),
        (20_001, 1, 30_000, 9_999, 20_000),
        (40_000, 3_333, 20_001, 0, 20_001),
    ];
    for (src_len, src_offset, dst_len, dst_offset, len) in cases {
        let what = format!("copy [{src_len}][{src_offset}..+{len}] -> [{dst_len}][{dst_offset}..]");
        let (src_data, dst_data) = (source(&mut rng, src_len), normal(&mut rng, dst_len, 1.0));
        let (src, dst) = (backend.upload(&src_data), backend.upload(&dst_data));
        let (src_held, dst_held) = (read(backend, &src, "src").await, read(backend, &dst, "dst").await);
        let alias = dst.clone();
        backend.copy(&src, src_offset, &dst, dst_offset, len);

        let mut want = dst_held.clone();
        want[dst_offset..dst_offset + len].copy_from_slice(&src_held[src_offset..src_offset + len]);
        assert_eq!(bits(&read(backend, &dst, "dst").await), bits(&want), "{what}: destination");
        assert_eq!(bits(&read(backend, &alias, "dst").await), bits(&want), "{what}: via a cloned handle");
        assert_unchanged(backend, &src, &src_held, &format!("{what}: source")).await;
    }
}

/// A copy is a snapshot: an in-place update of the source after the copy (here an AdamW
/// step, the optimizer's pattern) does not reach the destination, and the destination can
/// then itself be updated in place without touching the source.
pub async fn copy_is_a_snapshot<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0xC0_5A);
    let len = 1000;
    let init = normal(&mut rng, len, 1.0);
    let (param, snapshot) = (backend.upload(&init), backend.zeros(len));
    backend.copy(&param, 0, &snapshot, 0, len);
    let held = read(backend, &param, "param").await;

    let hp = AdamWStep {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.0,
        step: 1,
        max_grad_norm: None,
    };
    let grad = backend.upload(&normal(&mut rng, len, 1.0));
    let (m, v) = (backend.zeros(len), backend.zeros(len));
    backend.adamw(&param, &grad, &m, &v, &backend.upload(&[1.0]), &hp, len);
    assert_ne!(bits(&read(backend, &param, "param").await), bits(&held), "adamw moved the source");
    assert_unchanged(backend, &snapshot, &held, "copy: the destination after the source changed").await;

    let (m, v) = (backend.zeros(len), backend.zeros(len));
    backend.adamw(&snapshot, &grad, &m, &v, &backend.upload(&[1.0]), &hp, len);
    assert_eq!(
        bits(&read(backend, &snapshot, "snapshot").await),
        bits(&read(backend, &param, "param").await),
        "the same AdamW step on the snapshot gives the same bits"
    );
}

/// The contract's mistakes panic before anything is written: a range past either end (by
/// one value, and by an offset that would overflow), and a buffer copied into itself.
/// Needs unwinding panics (native tests).
pub async fn copy_misuse_panics<B: Backend>(backend: &B) {
    let (src_data, dst_data) = ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0]);
    let (src, dst) = (backend.upload(&src_data), backend.upload(&dst_data));
    let misuses: [(&str, &B::Storage, usize, usize, usize); 6] = [
        ("src range past the end", &src, 1, 0, 4),
        ("dst range past the end", &src, 0, 1, 3),
        ("src offset past the end", &src, 5, 0, 0),
        ("dst offset past the end", &src, 0, 4, 0),
        ("overflowing offset", &src, usize::MAX, 0, 2),
        ("a buffer into itself", &dst, 0, 1, 1),
    ];
    for (name, from, src_offset, dst_offset, len) in misuses {
        let outcome =
            catch_unwind(AssertUnwindSafe(|| backend.copy(from, src_offset, &dst, dst_offset, len)));
        assert!(outcome.is_err(), "copy with {name} did not panic");
    }
    assert_unchanged(backend, &src, &src_data, "copy misuse: source").await;
    assert_unchanged(backend, &dst, &dst_data, "copy misuse: destination").await;
}
