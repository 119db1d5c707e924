//! `matmul_many` and `matmul_sum`: groups of products of one shape, in every transpose
//! layout, with and without biases, with operands shared between products (as the q, k
//! and v projections share their input) and not, and groups larger than a GPU backend
//! binds in one dispatch. Each against the f64 reference and against what the trait's
//! defaults give on this backend (one `matmul` per product, the terms added in order),
//! both within [`Tolerance::ACCUMULATED`].

use crate::conformance::harness::{assert_unchanged, normal, read};
use crate::conformance::reference::dense;
use crate::conformance::Tolerance;
use crate::{Backend, MatmulDims, MatmulTerm, Rng};

/// `(m, k, n, products)`: ones, sizes off multiples of 4 and 8, exact 4x8 tiles, a long
/// k, whole 64 × 64 tiles (a GPU's unchecked, vec4 path), and from 1 to 5 products.
const SHAPES: [(usize, usize, usize, usize); 8] = [
    (1, 1, 1, 1),
    (3, 5, 7, 2),
    (5, 9, 17, 3),
    (8, 16, 24, 3),
    (33, 70, 9, 3),
    (13, 7, 33, 4),
    (4, 300, 33, 5),
    (64, 72, 128, 3),
];

/// Which operand the products of a group share (none, `a` or `b`).
#[derive(Clone, Copy, Debug)]
enum Shared {
    Neither,
    A,
    B,
}

fn layouts() -> impl Iterator<Item = (bool, bool)> {
    [(false, false), (false, true), (true, false), (true, true)].into_iter()
}

/// One group's host values: per product `a`, `b` and `bias` (shared operands repeated).
struct Group {
    a: Vec<Vec<f32>>,
    b: Vec<Vec<f32>>,
    bias: Vec<Vec<f32>>,
}

fn group(rng: &mut Rng, dims: MatmulDims, products: usize, shared: Shared) -> Group {
    let (a0, b0) = (normal(rng, dims.m * dims.k, 1.0), normal(rng, dims.k * dims.n, 1.0));
    let a = (0..products)
        .map(|_| if matches!(shared, Shared::A) { a0.clone() } else { normal(rng, dims.m * dims.k, 1.0) })
        .collect();
    let b = (0..products)
        .map(|_| if matches!(shared, Shared::B) { b0.clone() } else { normal(rng, dims.k * dims.n, 1.0) })
        .collect();
    let bias = (0..products).map(|_| normal(rng, dims.n, 1.0)).collect();
    Group { a, b, bias }
}

/// A group's buffers, per product (a shared operand is one buffer, the same handle in
/// every product).
struct Uploaded<S> {
    a: Vec<S>,
    b: Vec<S>,
    bias: Vec<S>,
}

fn upload<B: Backend>(backend: &B, g: &Group, shared: Shared) -> Uploaded<B::Storage> {
    let up = |values: &[Vec<f32>], one: bool| -> Vec<B::Storage> {
        if one {
            let first = backend.upload(&values[0]);
            values.iter().map(|_| first.clone()).collect()
        } else {
            values.iter().map(|v| backend.upload(v)).collect()
        }
    };
    Uploaded {
        a: up(&g.a, matches!(shared, Shared::A)),
        b: up(&g.b, matches!(shared, Shared::B)),
        bias: g.bias.iter().map(|v| backend.upload(v)).collect(),
    }
}

fn terms<'a, S>(a: &'a [S], b: &'a [S], bias: Option<&'a [S]>) -> Vec<MatmulTerm<'a, S>> {
    (0..a.len()).map(|i| MatmulTerm { a: &a[i], b: &b[i], bias: bias.map(|v| &v[i]) }).collect()
}

/// Every case of the kit, as `(dims, products, shared, with_bias)`.
fn cases() -> impl Iterator<Item = (MatmulDims, usize, Shared, bool)> {
    SHAPES.into_iter().flat_map(|(m, k, n, products)| {
        layouts().flat_map(move |(trans_a, trans_b)| {
            [Shared::Neither, Shared::A, Shared::B].into_iter().flat_map(move |shared| {
                [false, true]
                    .map(move |bias| (MatmulDims { m, k, n, trans_a, trans_b }, products, shared, bias))
            })
        })
    })
}

/// `matmul_many` against the reference and against one `matmul` per product.
pub async fn matmul_many<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0x3A70);
    for (dims, products, shared, with_bias) in cases() {
        let g = group(&mut rng, dims, products, shared);
        let Uploaded { a: ua, b: ub, bias: ubias } = upload(backend, &g, shared);
        let ts = terms(&ua, &ub, with_bias.then_some(&ubias[..]));
        let outs = backend.matmul_many(&ts, dims);
        assert_eq!(
            outs.len(),
            products,
            "matmul_many {dims:?}: {} outputs for {products} products",
            outs.len()
        );
        for (i, out) in outs.iter().enumerate() {
            let what = format!(
                "matmul_many {dims:?} ({products} products, {shared:?} shared, bias {with_bias}) product {i}"
            );
            let got = read(backend, out, &what).await;
            let bias = with_bias.then_some(&g.bias[i][..]);
            Tolerance::ACCUMULATED.assert_close(&what, &got, &dense::matmul(&g.a[i], &g.b[i], bias, dims));
            let one = read(backend, &backend.matmul(ts[i].a, ts[i].b, ts[i].bias, dims), &what).await;
            let one: Vec<f64> = one.iter().map(|&v| v as f64).collect();
            Tolerance::ACCUMULATED.assert_close(&format!("{what} against matmul"), &got, &one);
        }
        for i in 0..products {
            assert_unchanged(backend, &ua[i], &g.a[i], "matmul_many a").await;
            assert_unchanged(backend, &ub[i], &g.b[i], "matmul_many b").await;
        }
    }
}

/// `matmul_sum` against the reference and against the trait's default (the products of
/// `matmul` added in order).
pub async fn matmul_sum<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0x3A75);
    for (dims, products, shared, with_bias) in cases() {
        let g = group(&mut rng, dims, products, shared);
        let Uploaded { a: ua, b: ub, bias: ubias } = upload(backend, &g, shared);
        let ts = terms(&ua, &ub, with_bias.then_some(&ubias[..]));
        let what = format!("matmul_sum {dims:?} ({products} terms, {shared:?} shared, bias {with_bias})");
        let got = read(backend, &backend.matmul_sum(&ts, dims), &what).await;
        let mut want = vec![0f64; dims.m * dims.n];
        for i in 0..products {
            let bias = with_bias.then_some(&g.bias[i][..]);
            for (w, v) in want.iter_mut().zip(dense::matmul(&g.a[i], &g.b[i], bias, dims)) {
                *w += v;
            }
        }
        Tolerance::ACCUMULATED.assert_close(&what, &got, &want);
        let len = dims.m * dims.n;
        let mut sum = backend.matmul(ts[0].a, ts[0].b, ts[0].bias, dims);
        for t in &ts[1..] {
            sum = backend.add(&sum, &backend.matmul(t.a, t.b, t.bias, dims), len);
        }
        let default: Vec<f64> = read(backend, &sum, &what).await.iter().map(|&v| v as f64).collect();
        Tolerance::ACCUMULATED.assert_close(&format!("{what} against matmul and add"), &got, &default);
        for i in 0..products {
            assert_unchanged(backend, &ua[i], &g.a[i], "matmul_sum a").await;
            assert_unchanged(backend, &ub[i], &g.b[i], "matmul_sum b").await;
        }
    }
}
