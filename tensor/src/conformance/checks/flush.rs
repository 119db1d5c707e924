//! `flush`: completes with `Ok` on a healthy device, whether work is queued or not, and
//! every write before it is visible after it.

use crate::conformance::harness::normal;
use crate::{read_vec, Backend, CopyRange, Precision, Rng};

/// `flush` is harmless: values read after it equal those read without it.
pub async fn flush<B: Backend>(backend: &B, _precision: Precision) {
    let name = backend.name();
    backend.flush().await.unwrap_or_else(|e| panic!("{name}: flush with nothing queued failed: {e}"));

    let mut rng = Rng::new(0xF1_0511);
    let len = 20_001;
    let (a, b) = (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
    let sum = backend.add(&backend.upload(&a), &backend.upload(&b), len);
    let dst = backend.zeros(len);
    backend.copy(&[CopyRange::new(&sum, 0, &dst, 0, len)]);
    backend.flush().await.unwrap_or_else(|e| panic!("{name}: flush after queued ops failed: {e}"));
    backend.flush().await.unwrap_or_else(|e| panic!("{name}: a second flush failed: {e}"));

    let read =
        async |s: &B::Storage| read_vec(backend, s).await.unwrap_or_else(|e| panic!("{name}: read: {e}"));
    let (got, want) = (read(&dst).await, read(&sum).await);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&got) == bits(&want), "{name}: the copy queued before a flush was not there after it");
    let added =
        want.iter().zip(a.iter().zip(&b)).all(|(s, (x, y))| (s - (x + y)).abs() <= 1e-6 * (1.0 + s.abs()));
    assert!(added, "{name}: the add queued before a flush did not give a + b");
}
