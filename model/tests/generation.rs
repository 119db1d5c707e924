//! Incremental decoding on the CPU backend: the key/value cache gives the logits and the
//! tokens the whole-window forward pass gives, across window slides. (kernels-wgsl's
//! tests/generation.rs checks the same on the GPU.)

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::tokenizer::Utf8Stream;
use tinygpt_model::{Generation, Gpt, KvCache, ModelConfig, Params, SampleConfig};
use tinygpt_tensor::{block_on, Backend, Rng};

/// ctx 16, so a 60-token sample slides its window several times.
fn config() -> ModelConfig {
    ModelConfig {
        context_length: 16,
        n_layers: 2,
        n_heads: 2,
        d_model: 16,
        d_mlp: 64,
        ..ModelConfig::reference()
    }
}

/// Weights with std 0.3 (not init's 0.02): logits far apart, so greedy choices are not
/// near-ties that rounding could flip.
fn model<B: Backend>(backend: &B) -> Gpt<B> {
    let c = config();
    let mut rng = Rng::new(11);
    let flat: Vec<f32> = (0..c.param_count()).map(|_| (rng.normal() * 0.3) as f32).collect();
    Gpt::new(c.clone(), Params::from_flat(backend, &c, &flat).unwrap()).unwrap()
}

fn sample<B: Backend>(model: &Gpt<B>, prompt: &[u8], config: &SampleConfig, cached: bool) -> Vec<u8> {
    let config = SampleConfig { cached, ..config.clone() };
    block_on(model.generate(prompt, &config, |_| true)).unwrap()
}

#[test]
fn cached_logits_match_the_whole_window() {
    let backend = CpuBackend::new(2);
    let model = model(&backend);
    let tokens: Vec<u8> = b"The cache holds k and v".to_vec();
    let mut cache = KvCache::new(&model);
    // A prefill of 5, then one position at a time up to the full window.
    let mut got = vec![block_on(model.forward_cached(&mut cache, &tokens[..5]).read()).unwrap()];
    for t in 5..16 {
        got.push(block_on(model.forward_cached(&mut cache, &tokens[t..t + 1]).read()).unwrap());
    }
    assert_eq!(cache.room(), 0);
    let tape = tinygpt_autograd::Tape::no_grad();
    let ids: Vec<u32> = tokens[..16].iter().map(|&b| b as u32).collect();
    let full = model.forward(&tape, &tinygpt_tensor::Indices::new(&backend, &ids), 1, 16).logits;
    let full = block_on(full.value().read()).unwrap();
    for (i, row) in got.iter().enumerate() {
        let t = i + 4;
        let want = &full[t * 256..(t + 1) * 256];
        let worst = row.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-5, "position {t}: cached and whole-window logits differ by {worst}");
    }
}

#[test]
fn greedy_and_sampled_text_are_the_same_with_and_without_the_cache() {
    let backend = CpuBackend::new(2);
    let model = model(&backend);
    let greedy = SampleConfig { max_tokens: 60, temperature: 0.0, ..SampleConfig::default() };
    let sampled =
        SampleConfig { max_tokens: 60, temperature: 0.9, top_k: 50, top_p: 0.95, seed: 3, ..greedy.clone() };
    // A short prompt, and one longer than the window.
    for prompt in [&b"ab"[..], b"a prompt longer than the sixteen-byte window"] {
        for config in [&greedy, &sampled] {
            let (with, without) =
                (sample(&model, prompt, config, true), sample(&model, prompt, config, false));
            assert!((60..=63).contains(&with.len()), "{}", with.len());
            assert_eq!(with, without, "prompt {prompt:?}, {config:?}");
        }
    }
}

#[test]
fn stop_sequences_end_the_output_and_characters_are_never_cut() {
    let backend = CpuBackend::new(1);
    let model = model(&backend);
    let base =
        SampleConfig { max_tokens: 60, temperature: 1.0, top_k: 0, seed: 9, ..SampleConfig::default() };
    let free = sample(&model, b"x", &base, true);
    // Stop at the bytes the free run produced at 10..12: it ends right after them.
    let stop = free[10..12].to_vec();
    let first = free.windows(2).position(|w| w == stop.as_slice()).unwrap();
    let stopped = sample(&model, b"x", &SampleConfig { stop: vec![stop.clone()], ..base.clone() }, true);
    assert_eq!(stopped, free[..first + 2]);
    // Whatever the budget, the output ends on a character boundary (or invalid bytes, never
    // a lead byte waiting for its continuation).
    for max_tokens in 1..40 {
        let mut g = Generation::new(b"x", SampleConfig { max_tokens, ..base.clone() });
        while !g.is_done() {
            block_on(g.next_token(&model)).unwrap();
        }
        let out = g.generated();
        assert!(out.len() >= max_tokens && out.len() <= max_tokens + 3);
        // Nothing is left waiting for continuation bytes (unless the 3-byte grace ran out).
        let mut stream = Utf8Stream::new();
        out.iter().for_each(|&b| drop(stream.push(b)));
        assert!(stream.finish().is_empty() || out.len() == max_tokens + 3, "{max_tokens}: {out:?}");
    }
}

#[test]
fn the_cache_runs_about_two_positions_per_token_and_the_window_runs_them_all() {
    let backend = CpuBackend::new(1);
    let model = model(&backend);
    let positions = |cached| {
        let config = SampleConfig { max_tokens: 64, temperature: 0.0, cached, ..SampleConfig::default() };
        let mut g = Generation::new(b"ab", config);
        while !g.is_done() {
            block_on(g.next_token(&model)).unwrap();
        }
        (g.positions_run(), g.generated().len())
    };
    // ctx 16: a slide keeps 8 positions, recomputed once, then one position per token.
    let ((cached, tokens), (uncached, _)) = (positions(true), positions(false));
    assert!(cached <= 2 + 2 * tokens, "{cached} positions for {tokens} cached tokens");
    assert!(uncached >= 8 * tokens, "{uncached} positions for {tokens} uncached tokens");
}
