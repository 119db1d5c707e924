//! The wgpu kernels against the CPU reference at the model's sizes, which the
//! conformance kit's small cases do not reach: matmul's unchecked fast path and its large
//! tiles, the two-pass sum, attention over long rows, the byte vocabulary.
//!
//! Tolerance: 1e-4 of the output's scale (its largest magnitude), plus 1e-4 relative.
//! Both backends sum in f32 (matmul, attention dot products) or the CPU in f64 (row
//! statistics); on these inputs (values of order 1, sums of at most 512 terms) f32
//! rounding is around 1e-6 of the scale, far inside the bound.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_kernels_wgsl::{MatmulPath, WgpuBackend};
use tinygpt_tensor::{
    block_on, read_vec, AttentionDims, AttentionKeep, Backend, DropoutMask, MatmulDims, MatmulFused, Rng,
};

const TOL: f64 = 1e-4;

fn normal(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.normal() as f32).collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f64, |m, &v| m.max(v.abs() as f64)).max(1e-30);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w as f64).abs();
        assert!(
            err <= TOL * scale + TOL * (w as f64).abs(),
            "{what}: [{i}] wgpu {g}, cpu {w} (output scale {scale})"
        );
    }
}

struct Pair {
    gpu: WgpuBackend,
    cpu: CpuBackend,
}

impl Pair {
    fn new() -> Option<Self> {
        Some(Pair { gpu: shared_backend()?, cpu: CpuBackend::new(2) })
    }

    fn gpu_read(&self, s: &<WgpuBackend as Backend>::Storage) -> Vec<f32> {
        block_on(read_vec(&self.gpu, s)).expect("wgpu readback")
    }

    fn cpu_read(&self, s: &<CpuBackend as Backend>::Storage) -> Vec<f32> {
        block_on(read_vec(&self.cpu, s)).expect("cpu readback")
    }
}

#[test]
fn matmul_at_model_and_tile_sizes() {
    let Some(p) = Pair::new() else { return };
    let mut rng = Rng::new(11);
    // Aligned to the 64-wide tiles (unchecked path), the model's widths, odd sizes, and two
    // outputs big enough for the 128-wide tiles (aligned, and not).
    let shapes = [
        (128, 64, 128),
        (64, 72, 192),
        (512, 40, 512),
        (1024, 96, 96),
        (96, 1024, 384),
        (130, 67, 257),
        (2048, 16, 2048),
        (2050, 9, 2047),
        // A weight gradient's shape: few large tiles, k long enough that they split k
        // (`plan_tiled`), unaligned.
        (650, 4700, 390),
    ];
    for (m, k, n) in shapes {
        // The big products are slow on a software adapter: two layouts, bias only, there.
        let big = m * n > 1 << 20 || k > 4096;
        let layouts: &[(bool, bool)] = if big {
            &[(false, true), (true, false)]
        } else {
            &[(false, false), (false, true), (true, false), (true, true)]
        };
        for &(trans_a, trans_b) in layouts {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b, bias) = (normal(&mut rng, m * k), normal(&mut rng, k * n), normal(&mut rng, n));
            let biases: &[bool] = if big { &[true] } else { &[false, true] };
            // Tiled with the default split, tiled forced into 2 and 5 slices of k, direct.
            let paths =
                [(MatmulPath::Tiled, None), (MatmulPath::Tiled, Some(2)), (MatmulPath::Tiled, Some(5))];
            let paths = if big { &paths[..1] } else { &paths[..] };
            let paths = paths.iter().copied().chain([(MatmulPath::Direct, None)]);
            let variants = biases.iter().flat_map(|&b| paths.clone().map(move |path| (b, path)));
            for (with_bias, (path, split)) in variants {
                let gpu = p.gpu.with_matmul_path(path).with_matmul_split_k(split);
                let g = gpu
                    .matmul(
                        &p.gpu.upload(&a),
                        &p.gpu.upload(&b),
                        dims,
                        MatmulFused::bias(with_bias.then(|| p.gpu.upload(&bias)).as_ref()),
                    )
                    .out;
                let c = p
                    .cpu
                    .matmul(
                        &p.cpu.upload(&a),
                        &p.cpu.upload(&b),
                        dims,
                        MatmulFused::bias(with_bias.then(|| p.cpu.upload(&bias)).as_ref()),
                    )
                    .out;
                assert_close(
                    &format!("matmul {dims:?} bias {with_bias} {path:?} split {split:?}"),
                    &p.gpu_read(&g),
                    &p.cpu_read(&c),
                );
            }
        }
    }
}

/// The per-shape rules of the tiled path at shapes like the shakespeare-char recipe's
/// (`matmul.rs`'s `pick_tile`, `transposes_b`, `plan_tiled`): narrow outputs of many rows
/// (the narrow tile for `nn`; `nt` transposes B and runs plain), aligned and not, and
/// weight gradients of few tiles over a long k (the split tile), aligned and not, also
/// with their bias gradients fused (`matmul_sum_rows`); and each added onto a prior
/// (`matmul_onto`).
#[test]
fn matmul_tile_rules_at_the_recipes_shapes() {
    let Some(p) = Pair::new() else { return };
    let mut rng = Rng::new(13);
    let cases = [
        (16384, 24, 384, false, false),
        (16384, 24, 384, false, true),
        (16390, 20, 260, false, false),
        (16390, 20, 260, false, true),
        (384, 8192, 384, true, false),
        (250, 6000, 300, true, false),
    ];
    for (m, k, n, trans_a, trans_b) in cases {
        let dims = MatmulDims { m, k, n, trans_a, trans_b };
        let (a, b, bias) = (normal(&mut rng, m * k), normal(&mut rng, k * n), normal(&mut rng, n));
        let gpu = p.gpu.with_matmul_path(MatmulPath::Tiled);
        let g = gpu
            .matmul(&p.gpu.upload(&a), &p.gpu.upload(&b), dims, MatmulFused::bias(Some(&p.gpu.upload(&bias))))
            .out;
        let c = p
            .cpu
            .matmul(&p.cpu.upload(&a), &p.cpu.upload(&b), dims, MatmulFused::bias(Some(&p.cpu.upload(&bias))))
            .out;
        assert_close(&format!("matmul {dims:?}"), &p.gpu_read(&g), &p.cpu_read(&c));
        // Added onto a prior in the product's last pass (split or not): the bits of the
        // product, then `add`.
        let prior = p.gpu.upload(&normal(&mut rng, m * n));
        let (ga, gb) = (p.gpu.upload(&a), p.gpu.upload(&b));
        let fused = p.gpu_read(
            &gpu.matmul(&ga, &gb, dims, MatmulFused { onto: Some(&prior), ..MatmulFused::bias(None) }).out,
        );
        let unfused =
            p.gpu_read(&gpu.add(&prior, &gpu.matmul(&ga, &gb, dims, MatmulFused::none()).out, m * n));
        let differs = fused.iter().zip(&unfused).position(|(f, u)| f.to_bits() != u.to_bits());
        assert_eq!(differs, None, "matmul_onto {dims:?}: not the bits of matmul then add");
        if trans_a {
            // A weight gradient with its bias gradient fused (split over k here).
            let (g, g_sums) = {
                let o = gpu.matmul(
                    &p.gpu.upload(&a),
                    &p.gpu.upload(&b),
                    dims,
                    MatmulFused { sum_rows: true, ..MatmulFused::none() },
                );
                (o.out, o.sums.unwrap())
            };
            let c = p.cpu.matmul(&p.cpu.upload(&a), &p.cpu.upload(&b), dims, MatmulFused::none()).out;
            let c_sums = p.cpu.sum_rows(&p.cpu.upload(&a), k, m);
            assert_close(&format!("matmul_sum_rows {dims:?}"), &p.gpu_read(&g), &p.cpu_read(&c));
            assert_close(
                &format!("matmul_sum_rows {dims:?} sums"),
                &p.gpu_read(&g_sums),
                &p.cpu_read(&c_sums),
            );
        }
    }
}

#[test]
fn long_sums_and_wide_rows() {
    let Some(p) = Pair::new() else { return };
    let mut rng = Rng::new(12);
    for len in [65_536, 65_537, 300_001] {
        let x = normal(&mut rng, len);
        let g = p.gpu_read(&p.gpu.sum_squares(&p.gpu.upload(&x), len));
        let c = p.cpu_read(&p.cpu.sum_squares(&p.cpu.upload(&x), len));
        assert_close(&format!("sum_squares [{len}]"), &g, &c);
    }
    let (rows, cols) = (2048, 384);
    let x = normal(&mut rng, rows * cols);
    let g = p.gpu_read(&p.gpu.sum_rows(&p.gpu.upload(&x), rows, cols));
    let c = p.cpu_read(&p.cpu.sum_rows(&p.cpu.upload(&x), rows, cols));
    assert_close("sum_rows [2048, 384]", &g, &c);

    for (rows, dim) in [(1024, 96), (512, 256), (3, 300)] {
        let (x, gamma, beta, dy) = (
            normal(&mut rng, rows * dim),
            normal(&mut rng, dim),
            normal(&mut rng, dim),
            normal(&mut rng, rows * dim),
        );
        let (gx, gg, gb, gdy) =
            (p.gpu.upload(&x), p.gpu.upload(&gamma), p.gpu.upload(&beta), p.gpu.upload(&dy));
        let (cx, cg, cb, cdy) =
            (p.cpu.upload(&x), p.cpu.upload(&gamma), p.cpu.upload(&beta), p.cpu.upload(&dy));
        let gs = p.gpu.layer_norm(&gx, &gg, &gb, rows, dim, 1e-5);
        let cs = p.cpu.layer_norm(&cx, &cg, &cb, rows, dim, 1e-5);
        assert_close("layer_norm out", &p.gpu_read(&gs.out), &p.cpu_read(&cs.out));
        let gd = p.gpu.layer_norm_backward(&gdy, &gx, &gg, &gs, rows, dim, None);
        let cd = p.cpu.layer_norm_backward(&cdy, &cx, &cg, &cs, rows, dim, None);
        assert_close("layer_norm dx", &p.gpu_read(&gd.dx), &p.cpu_read(&cd.dx));
        assert_close("layer_norm dgamma", &p.gpu_read(&gd.dgamma), &p.cpu_read(&cd.dgamma));
        assert_close("layer_norm dbeta", &p.gpu_read(&gd.dbeta), &p.cpu_read(&cd.dbeta));
    }

    let (rows, vocab) = (1024, 256);
    let logits: Vec<f32> = normal(&mut rng, rows * vocab).iter().map(|v| 3.0 * v).collect();
    let targets: Vec<u32> = (0..rows).map(|_| rng.below(vocab as u64) as u32).collect();
    let (gl, gt) = (p.gpu.upload(&logits), p.gpu.upload_indices(&targets));
    let (cl, ct) = (p.cpu.upload(&logits), p.cpu.upload_indices(&targets));
    let g = p.gpu_read(&p.gpu.cross_entropy(&gl, &gt, rows, vocab, false).loss);
    let c = p.cpu_read(&p.cpu.cross_entropy(&cl, &ct, rows, vocab, false).loss);
    assert_close("cross_entropy", &g, &c);
    let g = p.gpu_read(&p.gpu.cross_entropy_backward(&gl, &gt, None, &p.gpu.upload(&[1.0]), rows, vocab));
    let c = p.cpu_read(&p.cpu.cross_entropy_backward(&cl, &ct, None, &p.cpu.upload(&[1.0]), rows, vocab));
    assert_close("cross_entropy_backward", &g, &c);

    let (n, table_rows, dim) = (2048, 256, 96);
    let ids: Vec<u32> = (0..n).map(|_| rng.below(table_rows as u64) as u32).collect();
    let dout = normal(&mut rng, n * dim);
    let g = p.gpu.embedding_backward(&p.gpu.upload(&dout), &p.gpu.upload_indices(&ids), n, table_rows, dim);
    let c = p.cpu.embedding_backward(&p.cpu.upload(&dout), &p.cpu.upload_indices(&ids), n, table_rows, dim);
    assert_close("embedding_backward", &p.gpu_read(&g), &p.cpu_read(&c));
}

#[test]
fn attention_at_model_sizes() {
    let Some(p) = Pair::new() else { return };
    let mut rng = Rng::new(13);
    for dims in [
        AttentionDims { batch: 2, seq: 64, heads: 3, head_dim: 32, dropout: None, cache: None },
        AttentionDims { batch: 1, seq: 300, heads: 2, head_dim: 16, dropout: None, cache: None },
        // Rows longer than the softmax kernels keep in registers, with dropout.
        AttentionDims {
            batch: 1,
            seq: 300,
            heads: 2,
            head_dim: 16,
            dropout: Some(DropoutMask::new(0.2, 1337, 5, 3, 0)),
            cache: None,
        },
    ] {
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v, d) =
            (normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len));
        let (gq, gk, gv) = (p.gpu.upload(&q), p.gpu.upload(&k), p.gpu.upload(&v));
        let (cq, ck, cv) = (p.cpu.upload(&q), p.cpu.upload(&k), p.cpu.upload(&v));
        let ca = p.cpu.attention(&cq, &ck, &cv, dims, AttentionKeep::Probs);
        let cg =
            p.cpu.attention_backward(&p.cpu.upload(&d), &cq, &ck, &cv, ca.kept(), dims, AttentionKeep::Probs);
        // Attention's products are batched matmuls: check both kernels (the tiled one skips
        // the tiles and stages that the causal mask zeroes).
        for path in [MatmulPath::Tiled, MatmulPath::Direct] {
            let gpu = p.gpu.with_matmul_path(path);
            let what = |name: &str| format!("attention {name} {dims:?} {path:?}");
            let ga = gpu.attention(&gq, &gk, &gv, dims, AttentionKeep::Probs);
            assert_close(&what("out"), &p.gpu_read(&ga.out), &p.cpu_read(&ca.out));
            assert_close(&what("probs"), &p.gpu_read(ga.kept()), &p.cpu_read(ca.kept()));
            let gg =
                gpu.attention_backward(&gpu.upload(&d), &gq, &gk, &gv, ga.kept(), dims, AttentionKeep::Probs);
            assert_close(&what("dq"), &p.gpu_read(&gg.dq), &p.cpu_read(&cg.dq));
            assert_close(&what("dk"), &p.gpu_read(&gg.dk), &p.cpu_read(&cg.dk));
            assert_close(&what("dv"), &p.gpu_read(&gg.dv), &p.cpu_read(&cg.dv));
        }
    }
}

/// The training pair (`attention_for_training`, whose probabilities hold zeros above the
/// diagonal only as far as the tiled products read them, and `attention_backward_saved`)
/// against the CPU reference at the model's sizes: the recipe's head width 64 over 256
/// positions and the presets' 16 and 32, with the recipe's dropout on the probabilities
/// (the same mask bits: a different mask would move the outputs by far more than the
/// tolerance), and bit for bit the same when run twice.
#[test]
fn training_attention_at_model_sizes() {
    let Some(p) = Pair::new() else { return };
    let mut rng = Rng::new(17);
    let mask = Some(DropoutMask::new(0.2, 1337, 5, 3, 0));
    for dims in [
        AttentionDims { batch: 2, seq: 256, heads: 2, head_dim: 64, dropout: mask, cache: None },
        AttentionDims { batch: 1, seq: 300, heads: 2, head_dim: 16, dropout: mask, cache: None },
        AttentionDims { batch: 2, seq: 96, heads: 3, head_dim: 32, dropout: None, cache: None },
    ] {
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v, d) =
            (normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len));
        let (gq, gk, gv, gd) = (p.gpu.upload(&q), p.gpu.upload(&k), p.gpu.upload(&v), p.gpu.upload(&d));
        let (cq, ck, cv) = (p.cpu.upload(&q), p.cpu.upload(&k), p.cpu.upload(&v));
        let ca = p.cpu.attention(&cq, &ck, &cv, dims, AttentionKeep::Probs);
        let cg =
            p.cpu.attention_backward(&p.cpu.upload(&d), &cq, &ck, &cv, ca.kept(), dims, AttentionKeep::Probs);
        let gpu = &p.gpu;
        let run = || {
            let ga = gpu.attention(&gq, &gk, &gv, dims, AttentionKeep::Backward);
            let gg = gpu.attention_backward(&gd, &gq, &gk, &gv, ga.kept(), dims, AttentionKeep::Backward);
            [ga.out, gg.dq, gg.dk, gg.dv].map(|s| p.gpu_read(&s))
        };
        let first = run();
        let want = [&ca.out, &cg.dq, &cg.dk, &cg.dv].map(|s| p.cpu_read(s));
        for ((name, got), want) in ["out", "dq", "dk", "dv"].iter().zip(&first).zip(&want) {
            assert_close(&format!("attention_for_training {name} {dims:?}"), got, want);
        }
        assert!(first == run(), "attention_for_training {dims:?}: a second run gave other bits");
    }
}
