//! Where one cached decoding step goes on the CPU backend: the whole step, the half-window
//! recompute after a slide (per token it serves), the uncached pass it replaces, and each
//! op of a step timed alone at its shape, one JSON line each (`us`: microseconds per call;
//! `per_token_us`: that times the calls one token makes).
//!
//! ```sh
//! cargo run --release -p tinygpt-model --example decode_profile -- medium 1
//! ```
//!
//! Arguments: a preset (default `medium`) and a thread count (default 1). The cache holds
//! three quarters of a window when a step is timed: the mean a sliding window holds.

use std::time::Instant;

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Gpt, KvCache, Preset};
use tinygpt_tensor::{block_on, Backend, Indices, Rng, Tensor};

/// Microseconds per call of `f`, after a warm-up, over about 0.2 s.
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let started = Instant::now();
    let mut calls = 0;
    while started.elapsed().as_secs_f64() < 0.2 {
        f();
        calls += 1;
    }
    started.elapsed().as_secs_f64() * 1e6 / calls as f64
}

fn report(op: &str, us: f64, calls_per_token: f64) {
    let (us, per_token) = ((us * 100.0).round() / 100.0, (us * calls_per_token * 10.0).round() / 10.0);
    println!("{{\"op\":\"{op}\",\"us\":{us},\"per_token_us\":{per_token}}}");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let preset = Preset::by_name(&args.next().unwrap_or_else(|| "medium".into())).expect("a preset name");
    let threads: usize = args.next().map_or(1, |t| t.parse().expect("a thread count"));
    let backend = CpuBackend::new(threads);
    let c = preset.model.clone();
    let (d, ctx, layers) = (c.d_model, c.context_length, c.n_layers as f64);
    let model = Gpt::init(&backend, c.clone(), &mut Rng::new(1)).expect("a valid preset");
    let tokens: Vec<u8> = b"ROMEO: ".iter().copied().cycle().take(ctx).collect();
    let past = ctx * 3 / 4;

    let mut filled = KvCache::new(&model);
    drop(model.forward_cached(&mut filled, &tokens[..past]));
    let step = time(|| {
        let mut cache = filled.clone();
        drop(block_on(model.forward_cached(&mut cache, &tokens[past..past + 1]).read()));
    });
    report("cached step", step, 1.0);
    let half = ctx / 2;
    let recompute = time(|| {
        let mut cache = KvCache::new(&model);
        drop(model.forward_cached(&mut cache, &tokens[..half]));
    });
    report("half-window recompute", recompute, 1.0 / half as f64);
    let window: Vec<u32> = tokens[..past].iter().map(|&t| t as u32).collect();
    let uncached = time(|| {
        let tape = tinygpt_autograd::Tape::no_grad();
        drop(model.forward(&tape, &Indices::new(&backend, &window), 1, past));
    });
    report("uncached pass", uncached, 1.0);

    let mut rng = Rng::new(2);
    let mut normal = |shape: &[usize]| {
        let len = shape.iter().product();
        let data: Vec<f32> = (0..len).map(|_| rng.normal() as f32 * 0.1).collect();
        Tensor::from_storage(&backend, backend.upload(&data), shape.to_vec())
    };
    let (x, x_mlp) = (normal(&[1, d]), normal(&[1, c.d_mlp]));
    let (w_dd, w_fc_in, w_fc_out, w_head) =
        (normal(&[d, d]), normal(&[c.d_mlp, d]), normal(&[d, c.d_mlp]), normal(&[c.vocab_size, d]));
    let (b_d, b_mlp, gamma, beta) = (normal(&[d]), normal(&[c.d_mlp]), normal(&[d]), normal(&[d]));
    let linear = |x: &Tensor<CpuBackend>, w: &Tensor<CpuBackend>, b: &Tensor<CpuBackend>| {
        time(|| drop(x.matmul(w, Some(b), false, true)))
    };
    report("matmul q/k/v/o", linear(&x, &w_dd, &b_d), 4.0 * layers);
    report("matmul fc_in", linear(&x, &w_fc_in, &b_mlp), layers);
    report("matmul fc_out", linear(&x_mlp, &w_fc_out, &b_d), layers);
    report("matmul head", time(|| drop(x.matmul(&w_head, None, false, true))), 1.0);
    report("layer_norm", time(|| drop(x.layer_norm(&gamma, &beta, 1e-5))), 2.0 * layers + 1.0);
    report("gelu", time(|| drop(x_mlp.gelu())), layers);
    report("add", time(|| drop(x.add(&b_d.reshape([1, d])))), 2.0 * layers + 1.0);
    let (k_cache, v_cache) = (normal(&[ctx, d]), normal(&[ctx, d]));
    let attention = time(|| drop(x.cached_attention(&k_cache, &v_cache, past, c.n_heads)));
    report("cached_attention", attention, layers);
    let copy = time(|| x.copy_into(0, &k_cache, past * d, d));
    report("copy into the cache", copy, 2.0 * layers);
    let table = normal(&[ctx, d]);
    let embed = time(|| drop(table.embedding(&Indices::new(&backend, &[3]))));
    report("embedding", embed, 2.0);
}
