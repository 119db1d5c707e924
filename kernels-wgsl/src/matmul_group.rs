//! [`Backend::matmul_many`] and [`Backend::matmul_sum`] as one dispatch each (see
//! PRODUCTS and TERMS in `shaders/matmul.wgsl`): a transformer's q, k and v projections,
//! their weight gradients and their input gradient. At the shakespeare-char recipe's
//! shape one 16,384 × 384 product is about a wave and a half of the H200's workgroups,
//! and launching three together was meant to keep its compute units busier. Measured
//! there it did not pay (see `Tuning::grouped`), so it is off unless asked for
//! ([`WgpuBackend::with_grouped_matmuls`], `TINYGPT_WGPU_GROUPED=1`); `tests/grouped.rs`
//! runs the conformance checks on it, so it stays correct for adapters where it may pay.
//!
//! A group that would bind more than [`MAX_BINDINGS`] buffers, mixes products with and
//! without a bias, or sums terms with a bias goes through the trait's defaults instead.

use tinygpt_tensor::{Backend, CopyRange, MatmulDims, MatmulTerm};

use crate::matmul::{Gemm, GemmBuffers, Roles, MAX_BINDINGS};
use crate::pool::GpuBuffer;
use crate::WgpuBackend;

type Term<'a> = MatmulTerm<'a, GpuBuffer<f32>>;

/// One buffer when every product or term reads the same one (q, k and v read their
/// input), else each its own.
fn bound(bufs: Vec<&GpuBuffer<f32>>) -> Vec<&GpuBuffer<f32>> {
    if bufs.iter().all(|b| b.same_buffer(bufs[0])) {
        bufs[..1].to_vec()
    } else {
        bufs
    }
}

fn expect_operands(op: &str, terms: &[Term<'_>], dims: MatmulDims) {
    let MatmulDims { m, k, n, .. } = dims;
    for (i, t) in terms.iter().enumerate() {
        for (what, buf, len) in
            [("A", t.a, m * k), ("B", t.b, k * n)].into_iter().chain(t.bias.map(|b| ("bias", b, n)))
        {
            let got = buf.len();
            assert!(got == len, "{op}: {what} of product {i} holds {got} values, the sizes given need {len}");
        }
    }
}

impl WgpuBackend {
    /// `bufs` (each `len` values) side by side in a new buffer, buffer i at i·len.
    fn gather(&self, bufs: &[&GpuBuffer<f32>], len: usize) -> GpuBuffer<f32> {
        let all = self.alloc::<f32>(bufs.len() * len);
        let copies: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(i, src)| CopyRange { src: *src, src_offset: 0, dst: &all, dst_offset: i * len, len })
            .collect();
        self.copy_many(&copies);
        all
    }

    /// `products` in one dispatch (two when split over k), or `None` where the group is
    /// left to the default (see the module docs).
    pub(crate) fn matmul_many_grouped(
        &self,
        products: &[Term<'_>],
        dims: MatmulDims,
    ) -> Option<Vec<GpuBuffer<f32>>> {
        let with_bias = products.iter().filter(|p| p.bias.is_some()).count();
        if !self.grouped_matmuls || products.len() < 2 || (with_bias != 0 && with_bias != products.len()) {
            return None;
        }
        let a = bound(products.iter().map(|p| p.a).collect());
        let b = bound(products.iter().map(|p| p.b).collect());
        let roles = Roles { c: products.len(), a: a.len(), b: b.len(), bias: with_bias > 0 };
        if roles.c > 3 || roles.total() > MAX_BINDINGS {
            return None;
        }
        expect_operands("matmul_many", products, dims);
        let n = dims.n;
        // The biases side by side in one buffer (one binding): product i's at i·n.
        let bias = (with_bias > 0).then(|| {
            self.gather(
                &products.iter().map(|p| p.bias.expect("every product has a bias")).collect::<Vec<_>>(),
                n,
            )
        });
        let g = Gemm { products: products.len(), ..Gemm::plain(dims) };
        let outs: Vec<GpuBuffer<f32>> = products.iter().map(|_| self.alloc(dims.m * n)).collect();
        let c: Vec<&GpuBuffer<f32>> = outs.iter().collect();
        self.gemm_bound(&GemmBuffers { a: &a, b: &b, bias: bias.as_ref(), c: &c }, &g);
        Some(outs)
    }

    /// The sum of `terms` in one dispatch (two when split over k), or `None` where it is
    /// left to the default (see the module docs).
    pub(crate) fn matmul_sum_grouped(&self, terms: &[Term<'_>], dims: MatmulDims) -> Option<GpuBuffer<f32>> {
        if !self.grouped_matmuls || terms.len() < 2 || terms.iter().any(|t| t.bias.is_some()) {
            return None;
        }
        let a = bound(terms.iter().map(|t| t.a).collect());
        let b = bound(terms.iter().map(|t| t.b).collect());
        if (Roles { c: 1, a: a.len(), b: b.len(), bias: false }).total() > MAX_BINDINGS {
            return None;
        }
        expect_operands("matmul_sum", terms, dims);
        let out = self.alloc::<f32>(dims.m * dims.n);
        let g = Gemm { terms: terms.len(), ..Gemm::plain(dims) };
        self.gemm_bound(&GemmBuffers { a: &a, b: &b, bias: None, c: &[&out] }, &g);
        Some(out)
    }
}
