//! `copy`, of one range and of lists: bit-for-bit, in place on the destination, inside its bounds.
//!
//! A copy is not arithmetic, so results are compared bit for bit against what the backend
//! itself reads back from the source (a backend that quiets NaNs on upload still passes).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::conformance::harness::{assert_unchanged, normal, read};
use crate::{AdamWStep, Backend, CopyRange, Precision, Rng};

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
pub async fn copy<B: Backend>(backend: &B, _precision: Precision) {
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
        backend.copy(&[CopyRange::new(&src, src_offset, &dst, dst_offset, len)]);

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
pub async fn copy_is_a_snapshot<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xC0_5A);
    let len = 1000;
    let init = normal(&mut rng, len, 1.0);
    let (param, snapshot) = (backend.upload(&init), backend.zeros(len));
    backend.copy(&[CopyRange::new(&param, 0, &snapshot, 0, len)]);
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
pub async fn copy_misuse_panics<B: Backend>(backend: &B, _precision: Precision) {
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
        let range = CopyRange::new(from, src_offset, &dst, dst_offset, len);
        let outcome = catch_unwind(AssertUnwindSafe(|| backend.copy(&[range])));
        assert!(outcome.is_err(), "copy with {name} did not panic");
    }
    assert_unchanged(backend, &src, &src_data, "copy misuse: source").await;
    assert_unchanged(backend, &dst, &dst_data, "copy misuse: destination").await;
}

/// A list of ranges equals its copies done one by one: a gather of pieces of many buffers into
/// one (the optimizer's gradients into its flat buffer), the scatter back out of one, and
/// a list with neither shape; more pieces than a GPU dispatch binds, empty pieces among
/// them, lengths across the parallel chunk size; untouched ranges stay as they were.
pub async fn copy_list<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xC0_3A7);
    let lens = [1, 384, 0, 1537, 7, 300, 70_001, 64, 2, 999, 5];
    let total: usize = lens.iter().sum();
    let starts: Vec<usize> = lens.iter().scan(3, |at, &l| Some(std::mem::replace(at, *at + l + 1))).collect();
    let flat_len = starts.last().unwrap() + lens.last().unwrap() + 2;
    let pieces: Vec<(Vec<f32>, B::Storage)> = lens
        .iter()
        .map(|&l| {
            let data = source(&mut rng, l + 4);
            let buffer = backend.upload(&data);
            (data, buffer)
        })
        .collect();

    // Gather: piece i's [2..2 + len] into flat[starts[i]..].
    let flat_data = normal(&mut rng, flat_len, 1.0);
    let flat = backend.upload(&flat_data);
    let mut held_pieces = Vec::new();
    for (_, b) in &pieces {
        held_pieces.push(read(backend, b, "piece").await);
    }
    let flat_held = read(backend, &flat, "flat").await;
    let gather: Vec<CopyRange<'_, B::Storage>> = (0..lens.len())
        .map(|i| CopyRange {
            src: &pieces[i].1,
            src_offset: 2,
            dst: &flat,
            dst_offset: starts[i],
            len: lens[i],
        })
        .collect();
    backend.copy(&gather);
    let mut want = flat_held.clone();
    for i in 0..lens.len() {
        want[starts[i]..][..lens[i]].copy_from_slice(&held_pieces[i][2..][..lens[i]]);
    }
    assert_eq!(bits(&read(backend, &flat, "flat").await), bits(&want), "copy list gather of {total} values");

    // Scatter: flat[starts[i]..] back into piece i at offset 1 (a fresh source).
    let source_data = source(&mut rng, flat_len);
    let src = backend.upload(&source_data);
    let src_held = read(backend, &src, "src").await;
    let scatter: Vec<CopyRange<'_, B::Storage>> = (0..lens.len())
        .map(|i| CopyRange {
            src: &src,
            src_offset: starts[i],
            dst: &pieces[i].1,
            dst_offset: 1,
            len: lens[i],
        })
        .collect();
    backend.copy(&scatter);
    for i in 0..lens.len() {
        let mut want = held_pieces[i].clone();
        want[1..][..lens[i]].copy_from_slice(&src_held[starts[i]..][..lens[i]]);
        let got = read(backend, &pieces[i].1, "piece").await;
        assert_eq!(bits(&got), bits(&want), "copy list scatter: piece {i} ({} values)", lens[i]);
    }
    assert_unchanged(backend, &src, &src_held, "copy list scatter: source").await;

    // Neither: pairs of distinct buffers.
    let (a, b) = (backend.upload(&source(&mut rng, 50)), backend.upload(&normal(&mut rng, 60, 1.0)));
    let (c, d) = (backend.upload(&source(&mut rng, 70)), backend.upload(&normal(&mut rng, 80, 1.0)));
    let (a_held, b_held, c_held, d_held) = (
        read(backend, &a, "a").await,
        read(backend, &b, "b").await,
        read(backend, &c, "c").await,
        read(backend, &d, "d").await,
    );
    backend.copy(&[
        CopyRange { src: &a, src_offset: 5, dst: &b, dst_offset: 10, len: 40 },
        CopyRange { src: &c, src_offset: 0, dst: &d, dst_offset: 9, len: 70 },
    ]);
    let (mut b_want, mut d_want) = (b_held.clone(), d_held.clone());
    b_want[10..50].copy_from_slice(&a_held[5..45]);
    d_want[9..79].copy_from_slice(&c_held);
    assert_eq!(bits(&read(backend, &b, "b").await), bits(&b_want), "copy list: a into b");
    assert_eq!(bits(&read(backend, &d, "d").await), bits(&d_want), "copy list: c into d");
}
