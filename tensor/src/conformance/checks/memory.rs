//! Buffers in and out: `zeros`, `upload`/`read`, `upload_indices`.
//!
//! These are copies, not arithmetic, so they are compared bit for bit.

use crate::conformance::harness::{normal, read};
use crate::{Backend, Precision, Rng};

/// `zeros(len)` reads back as `len` values of +0.0.
pub async fn zeros<B: Backend>(backend: &B, _precision: Precision) {
    for len in [1, 7, 1000, 20_001] {
        let z = read(backend, &backend.zeros(len), "zeros").await;
        assert_eq!(z.len(), len, "zeros({len}) read back {} values", z.len());
        assert!(z.iter().all(|v| v.to_bits() == 0), "zeros({len}): a value is not +0.0");
    }
}

/// `read(upload(x))` gives `x` bit for bit, special values included (NaN only needs to stay
/// a NaN), into a new list and into one that held other values, longer or shorter (which
/// it replaces).
pub async fn upload_read_round_trip<B: Backend>(backend: &B, _precision: Precision) {
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        f32::MIN_POSITIVE,
        1e-40, // subnormal
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut rng = Rng::new(0x5EED_0001);
    for len in [1, 5, 33, 1027, 20_001] {
        let mut data = normal(&mut rng, len, 1.0);
        let n = len.min(special.len());
        data[..n].copy_from_slice(&special[..n]);
        let buffer = backend.upload(&data);
        let back = read(backend, &buffer, "upload/read").await;
        assert_eq!(back.len(), len, "upload/read of {len} values gave {}", back.len());
        let mut into = vec![0.5; if len % 2 == 0 { len + 3 } else { len / 2 }];
        backend
            .read(&buffer, &mut into)
            .await
            .unwrap_or_else(|e| panic!("read of {len} values into a used list: {e}"));
        assert_eq!(into.len(), len, "read of {len} values into a used list left {} values", into.len());
        for (how, back) in [("upload/read", &back), ("upload/read into a used list", &into)] {
            for (i, (&got, &want)) in back.iter().zip(&data).enumerate() {
                let same = if want.is_nan() { got.is_nan() } else { got.to_bits() == want.to_bits() };
                assert!(same, "{how} of {len} values: [{i}] was {want:e}, read back {got:e}");
            }
        }
    }
}

/// `upload_indices` keeps every id: looking ids up in a table whose row `r` holds `r`
/// gives the ids back (exactly, as they are small integers).
pub async fn indices_round_trip<B: Backend>(backend: &B, _precision: Precision) {
    let rows = 300;
    let table: Vec<f32> = (0..rows).map(|r| r as f32).collect();
    let table = backend.upload(&table);
    let mut rng = Rng::new(0x5EED_0002);
    let mut ids: Vec<u32> = vec![0, rows as u32 - 1, 1, rows as u32 - 1, 0];
    ids.extend((0..1000).map(|_| rng.below(rows as u64) as u32));
    for n in [1, 5, ids.len()] {
        let got =
            read(backend, &backend.embedding(&table, &backend.upload_indices(&ids[..n]), n, 1), "ids").await;
        let want: Vec<f32> = ids[..n].iter().map(|&id| id as f32).collect();
        assert!(
            got == want,
            "upload_indices of {n} ids: lookups gave {:?}…, want {:?}…",
            &got[..5.min(n)],
            &want[..5.min(n)]
        );
    }
}
