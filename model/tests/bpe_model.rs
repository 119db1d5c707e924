//! A model over a BPE vocabulary: GPT-2-124M's shape validates and counts as GPT-2 does,
//! the memory estimate sees its 50,257-wide head, and generation through the tokenizer
//! gives the same tokens cached and uncached, counts tokens, and decodes them to bytes.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{
    largest_tensor, training_memory_bytes, Gpt, ModelConfig, Params, SampleConfig, Tokenizer,
};
use tinygpt_model::{Generation, Preset};
use tinygpt_tensor::{block_on, Rng};

const VOCAB: &[u8] = include_bytes!("fixtures/bpe/vocab.json");
const MERGES: &[u8] = include_bytes!("fixtures/bpe/merges.txt");

fn gpt2_124m() -> ModelConfig {
    ModelConfig { tokenizer: "bpe-0123456789abcdef".into(), ..ModelConfig::gpt2_124m_shape() }
}

#[test]
fn gpt2_124m_validates_with_gpt2s_parameter_count_and_its_head_in_the_estimate() {
    let c = gpt2_124m();
    c.validate().unwrap();
    assert_eq!(c.param_count(), 124_439_808);
    assert_eq!(largest_tensor(&c, 4), ("logits", 4 * 1024 * 50_257));
    let bytes_vocab = ModelConfig { vocab_size: 256, tokenizer: "byte-v1".into(), ..c.clone() };
    let extra = training_memory_bytes(&c, 4) - training_memory_bytes(&bytes_vocab, 4);
    // 16 bytes per extra embedding parameter, plus logits and their softmax (2·B·T·V f32s,
    // doubled for gradients).
    let dv = 50_257 - 256;
    assert_eq!(extra, 16 * (dv * 768) as u64 + 4 * 2 * (2 * 4 * 1024 * dv) as u64);
}

fn model(b: &CpuBackend) -> (Gpt<CpuBackend>, Tokenizer) {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let c = ModelConfig {
        vocab_size: tok.vocab_size(),
        tokenizer: tok.name().into(),
        context_length: 12,
        n_layers: 2,
        n_heads: 2,
        d_model: 16,
        d_mlp: 64,
        ..Preset::by_name("tiny").unwrap().model
    };
    let mut rng = Rng::new(3);
    let flat: Vec<f32> = (0..c.param_count()).map(|_| (rng.normal() * 0.3) as f32).collect();
    (Gpt::new(c.clone(), Params::from_flat(b, &c, &flat).unwrap()).unwrap(), tok)
}

#[test]
fn generation_through_the_bpe_counts_tokens_and_gives_their_bytes() {
    let b = CpuBackend::new(1);
    let (m, tok) = model(&b);
    let greedy = SampleConfig { temperature: 0.0, max_tokens: 30, ..SampleConfig::default() };
    let run = |cached: bool| {
        let config = SampleConfig { cached, ..greedy.clone() };
        let mut g = Generation::with_tokenizer(b"ROMEO: But soft", &tok, config);
        while !g.is_done() {
            block_on(g.next_token_id(&m)).unwrap();
        }
        (g.generated_ids().to_vec(), g.generated().to_vec())
    };
    let (ids, bytes) = run(true);
    // 30 tokens through a 12-position window: it slides, cached and uncached alike.
    assert!((30..=33).contains(&ids.len()), "{}", ids.len());
    assert_eq!(run(false), (ids.clone(), bytes.clone()));
    assert_eq!(tok.decode(&ids), bytes);
    assert!(ids.iter().any(|&i| i > 255), "{ids:?}");
    let streamed = block_on(m.generate_with(&tok, b"ROMEO: But soft", &greedy, |_| true)).unwrap();
    assert_eq!(streamed, bytes);

    // Sampling draws ids across the whole vocabulary.
    let hot = SampleConfig { temperature: 2.0, top_k: 0, max_tokens: 40, ..greedy.clone() };
    let mut g = Generation::with_tokenizer(b"", &tok, hot);
    while !g.is_done() {
        block_on(g.next_token_id(&m)).unwrap();
    }
    assert!(g.generated_ids().iter().any(|&i| i >= 256));
    assert!(g.generated_ids().iter().all(|&i| i < 1000));
}

#[test]
fn a_stop_sequence_inside_a_token_ends_generation_after_it() {
    let b = CpuBackend::new(1);
    let (m, tok) = model(&b);
    let free = SampleConfig { temperature: 0.0, max_tokens: 20, ..SampleConfig::default() };
    let all = block_on(m.generate_with(&tok, b"ROMEO:", &free, |_| true)).unwrap();
    // Stop at the second and third bytes of what the free run produced.
    let stop = all[1..3].to_vec();
    let config = SampleConfig { stop: vec![stop.clone()], ..free };
    let mut g = Generation::with_tokenizer(b"ROMEO:", &tok, config);
    while !g.is_done() {
        block_on(g.next_token_id(&m)).unwrap();
    }
    let out = g.generated();
    assert!(out.windows(2).any(|w| w == stop.as_slice()), "{out:?}");
    assert!(all.starts_with(out) && out.len() < all.len(), "{out:?} vs {all:?}");
}
