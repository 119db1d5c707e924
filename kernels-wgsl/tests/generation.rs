//! Incremental decoding on the GPU: with the key/value cache (`cached_attention`, one
//! position per token) greedy generation gives the tokens the whole-window pass gives, on
//! this backend, across window slides; and its logits are the CPU backend's.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_model::{Gpt, KvCache, ModelConfig, Params, SampleConfig};
use tinygpt_tensor::{block_on, Backend, Rng};

/// ctx 16 (a 60-token sample slides its window several times); weights with std 0.3, so
/// greedy choices are not near-ties that rounding could flip.
fn model<B: Backend>(backend: &B) -> Gpt<B> {
    let c = ModelConfig {
        context_length: 16,
        n_layers: 2,
        n_heads: 2,
        d_model: 16,
        d_mlp: 64,
        ..ModelConfig::reference()
    };
    let mut rng = Rng::new(11);
    let flat: Vec<f32> = (0..c.param_count()).map(|_| (rng.normal() * 0.3) as f32).collect();
    Gpt::new(c.clone(), Params::from_flat(backend, &c, &flat).unwrap()).unwrap()
}

#[test]
fn greedy_with_the_cache_is_greedy_without_it() {
    let Some(gpu) = shared_backend() else { return };
    let model = model(&gpu);
    let greedy = SampleConfig { max_tokens: 60, temperature: 0.0, ..SampleConfig::default() };
    for prompt in [&b"ab"[..], b"a prompt longer than the sixteen-byte window"] {
        let run = |cached| {
            block_on(model.generate(prompt, &SampleConfig { cached, ..greedy.clone() }, |_| true)).unwrap()
        };
        assert_eq!(run(true), run(false), "prompt {prompt:?}");
    }
}

/// Logits within 1e-4 of the CPU backend's at every position of a prefill then steps.
#[test]
fn cached_logits_are_the_cpu_backends() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(2);
    let (on_gpu, on_cpu) = (model(&gpu), model(&cpu));
    let (mut gpu_cache, mut cpu_cache) = (KvCache::new(&on_gpu), KvCache::new(&on_cpu));
    let tokens = b"incremental decoding!";
    for (from, to) in [(0, 7), (7, 8), (8, 9), (9, 16)] {
        let g = block_on(on_gpu.forward_cached(&mut gpu_cache, &tokens[from..to]).read()).unwrap();
        let c = block_on(on_cpu.forward_cached(&mut cpu_cache, &tokens[from..to]).read()).unwrap();
        let worst = g.iter().zip(&c).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-4, "positions {from}..{to}: wgpu and cpu logits differ by {worst}");
    }
}
