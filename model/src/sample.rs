//! Autoregressive generation: temperature, top-k and top-p sampling over the next-byte
//! logits, stop sequences, and incremental decoding with a key/value cache.
//!
//! The window: the model sees at most `context_length` tokens. A prompt longer than that
//! is cut to its last `context_length` tokens. When a new token would overflow the window,
//! it slides: the window restarts at the last `context_length / 2` tokens, whose keys and
//! values are recomputed (one pass over them), and decoding goes on one position per token
//! until it is full again. Sliding by half a window instead of one token keeps the cost of
//! a token one position on average; a one-token slide would recompute the whole window for
//! every token once it is full, since every position shifts. The uncached path uses the
//! very same window, so cached and uncached generation give the same tokens (tested on
//! every backend).

use tinygpt_autograd::Tape;
use tinygpt_tensor::{Backend, Indices, Rng, Tensor, TensorError};

use crate::gpt::Gpt;
use crate::kv_cache::KvCache;
use crate::tokenizer::Tokenizer;

/// How to sample. `temperature == 0` is greedy (argmax); `top_k == 0` keeps every token;
/// `top_p == 1` keeps every token (else the smallest set of most likely tokens whose
/// probabilities sum to at least `top_p`, after top-k). Generation ends after `max_tokens`
/// bytes (plus at most 3, to finish a UTF-8 character it is inside: output is never cut in
/// the middle of a character) or right after it produces one of the `stop` sequences (which
/// ends the output). `cached` decodes with the key/value cache (the default); off, every
/// token runs the whole window (the same tokens, slower; for benchmarks and tests).
#[derive(Clone, Debug, PartialEq)]
pub struct SampleConfig {
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Softmax temperature; 0 picks the most likely token.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1: all).
    pub top_p: f32,
    /// Seeds the sampler.
    pub seed: u64,
    /// Generation ends after any of these byte strings.
    pub stop: Vec<Vec<u8>>,
    /// Use the key/value cache (same tokens, faster).
    pub cached: bool,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            max_tokens: 300,
            temperature: 0.8,
            top_k: 40,
            top_p: 1.0,
            seed: 1337,
            stop: Vec::new(),
            cached: true,
        }
    }
}

impl SampleConfig {
    /// The first setting no sampler can use, as a one-line message naming it.
    pub fn check(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(format!("temperature must be 0 or more, got {}", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top_p must be above 0 and at most 1, got {}", self.top_p));
        }
        if self.stop.iter().any(Vec::is_empty) {
            return Err("a stop sequence must not be empty".into());
        }
        Ok(())
    }
}

/// Picks the next byte from one row of byte-v1 logits: [`pick_token_id`] as a byte.
pub fn pick_token(logits: &[f32], config: &SampleConfig, rng: &mut Rng) -> u8 {
    pick_token_id(logits, config, rng) as u8
}

/// Picks the next token from one row of logits, any vocabulary (see [`SampleConfig`]).
/// Ties keep the lower token id; the draw is one `rng.uniform()` against the cumulative
/// probabilities.
pub fn pick_token_id(logits: &[f32], config: &SampleConfig, rng: &mut Rng) -> u32 {
    let argmax =
        || logits.iter().enumerate().fold(0, |best, (i, &l)| if l > logits[best] { i } else { best }) as u32;
    if config.temperature <= 0.0 {
        return argmax();
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if config.top_k > 0 {
        order.truncate(config.top_k.min(logits.len()));
    }
    let max = logits[order[0]] as f64;
    let mut weights: Vec<f64> =
        order.iter().map(|&i| ((logits[i] as f64 - max) / config.temperature as f64).exp()).collect();
    if config.top_p < 1.0 {
        let total: f64 = weights.iter().sum();
        let (mut mass, mut keep) = (0.0, 0);
        while keep < weights.len() && (keep == 0 || mass < config.top_p as f64 * total) {
            mass += weights[keep];
            keep += 1;
        }
        weights.truncate(keep);
    }
    let total: f64 = weights.iter().sum();
    let mut target = rng.uniform() * total;
    for (&i, w) in order.iter().zip(&weights) {
        target -= w;
        if target < 0.0 {
            return i as u32;
        }
    }
    order[weights.len() - 1] as u32
}

/// Whether `bytes` ends inside a UTF-8 character (a lead byte still waiting for some of its
/// continuation bytes).
fn ends_inside_a_character(bytes: &[u8]) -> bool {
    for back in 1..=bytes.len().min(4) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for its lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return back < needed;
    }
    false
}

/// The longest a character's completion may extend a sample past `max_tokens`.
const MAX_CHARACTER_TAIL: usize = 3;

/// Generation one token at a time, so callers can stream it and interleave it with other
/// work (the web worker answers pause and stop between tokens). An empty prompt starts
/// from a newline, a natural document boundary; one `Rng::new(seed)` drives the whole
/// sample; the window slides as the module docs say. With `cached`, the key/value cache
/// belongs to the model of the first [`Generation::next_token`]: keep to that model.
///
/// With a BPE tokenizer ([`Generation::with_tokenizer`]) `max_tokens` counts tokens, a
/// token adds its bytes to [`Generation::generated`], and a stop sequence ends generation
/// after the token that completes it (whose bytes may run past it).
#[derive(Clone, Debug)]
pub struct Generation<B: Backend> {
    config: SampleConfig,
    tokenizer: Tokenizer,
    tokens: Vec<u32>,
    /// The generated tokens' bytes.
    bytes: Vec<u8>,
    prompt_len: usize,
    /// Where the window starts in `tokens`.
    start: usize,
    rng: Rng,
    cache: Option<KvCache<B>>,
    stopped: bool,
    /// Positions run through the model so far (see [`Generation::positions_run`]).
    positions: usize,
}

impl<B: Backend> Generation<B> {
    /// A generation continuing `prompt` (byte-v1).
    pub fn new(prompt: &[u8], config: SampleConfig) -> Self {
        Self::with_tokenizer(prompt, &Tokenizer::Byte, config)
    }

    /// A generation continuing `prompt`, encoded with `tokenizer` (the model's).
    pub fn with_tokenizer(prompt: &[u8], tokenizer: &Tokenizer, config: SampleConfig) -> Self {
        let tokens = tokenizer.encode(if prompt.is_empty() { b"\n" } else { prompt });
        let rng = Rng::new(config.seed);
        let prompt_len = tokens.len();
        Generation {
            config,
            tokenizer: tokenizer.clone(),
            prompt_len,
            tokens,
            bytes: Vec::new(),
            start: 0,
            rng,
            cache: None,
            stopped: false,
            positions: 0,
        }
    }

    /// Whether the sample is complete: `max_tokens` produced (and no character left half
    /// done), or a stop sequence produced.
    pub fn is_done(&self) -> bool {
        let produced = self.tokens.len() - self.prompt_len;
        self.stopped
            || produced >= self.config.max_tokens.saturating_add(MAX_CHARACTER_TAIL)
            || (produced >= self.config.max_tokens && !ends_inside_a_character(self.generated()))
    }

    /// The bytes produced so far (prompt excluded).
    pub fn generated(&self) -> &[u8] {
        &self.bytes
    }

    /// The token ids produced so far (prompt excluded).
    pub fn generated_ids(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }

    /// Positions run through the model so far: with the cache one per token plus the kept
    /// window after each slide; without it the whole window for every token. The work a
    /// token costs, in the units a benchmark should compare.
    pub fn positions_run(&self) -> usize {
        self.positions
    }

    /// Samples the next byte-v1 token: [`Generation::next_token_id`] as a byte.
    pub async fn next_token(&mut self, model: &Gpt<B>) -> Result<u8, TensorError> {
        Ok(self.next_token_id(model).await? as u8)
    }

    /// Samples the next token: one position through the model with the cache (after a
    /// slide, the kept window), else the whole window. Reads back one row of logits.
    pub async fn next_token_id(&mut self, model: &Gpt<B>) -> Result<u32, TensorError> {
        let ctx = model.config().context_length;
        let n = self.tokens.len();
        if n - self.start > ctx {
            // The first window of a long prompt is its last ctx tokens; later slides keep half.
            let keep = if n == self.prompt_len { ctx } else { (ctx / 2).max(1) };
            self.start = n - keep;
            if let Some(cache) = &mut self.cache {
                cache.clear();
            }
        }
        let logits = if self.config.cached {
            let cache = self.cache.get_or_insert_with(|| KvCache::new(model));
            let from = self.start + cache.len();
            self.positions += n - from;
            model.forward_cached_ids(cache, &self.tokens[from..n])
        } else {
            self.positions += n - self.start;
            last_logits(model, &self.tokens[self.start..n])
        };
        let row = logits.read().await?;
        let token = pick_token_id(&row, &self.config, &mut self.rng);
        self.tokens.push(token);
        let before = self.bytes.len();
        self.tokenizer.push_bytes(token, &mut self.bytes);
        // A stop sequence that this token's bytes complete (for bytes: the output ends with it).
        let added = self.bytes.len() - before;
        let bytes = &self.bytes;
        self.stopped = self.config.stop.iter().any(|s| {
            let from = before.saturating_sub(s.len() - 1);
            added > 0 && bytes[from..].windows(s.len()).any(|w| w == s.as_slice())
        });
        Ok(token)
    }
}

/// The uncached path: the whole window through the model, only the last row of the
/// logits copied out (and so read back).
fn last_logits<B: Backend>(model: &Gpt<B>, ids: &[u32]) -> Tensor<B> {
    let vocab = model.config().vocab_size;
    let backend = model.params().tensors()[0].backend();
    let tape = Tape::no_grad();
    let fwd = model.forward(&tape, &Indices::new(backend, ids), 1, ids.len());
    let row = Tensor::zeros(backend, [vocab]);
    fwd.logits.value().copy_into((ids.len() - 1) * vocab, &row, 0, vocab);
    row
}

impl<B: Backend> Gpt<B> {
    /// Generates after `prompt` until `config` says it is done (see [`Generation`]), calling
    /// `on_token` with each byte as it is sampled; `on_token` returning false stops early.
    /// Returns the new bytes.
    pub async fn generate(
        &self,
        prompt: &[u8],
        config: &SampleConfig,
        mut on_token: impl FnMut(u8) -> bool,
    ) -> Result<Vec<u8>, TensorError> {
        let mut generation = Generation::new(prompt, config.clone());
        while !generation.is_done() {
            let token = generation.next_token(self).await?;
            if !on_token(token) {
                break;
            }
        }
        Ok(generation.generated().to_vec())
    }

    /// [`Gpt::generate`] with the model's `tokenizer`: `on_bytes` gets each token's bytes
    /// (possibly part of a character: `Utf8Stream` joins them); returns the new bytes.
    pub async fn generate_with(
        &self,
        tokenizer: &Tokenizer,
        prompt: &[u8],
        config: &SampleConfig,
        mut on_bytes: impl FnMut(&[u8]) -> bool,
    ) -> Result<Vec<u8>, TensorError> {
        let mut generation = Generation::with_tokenizer(prompt, tokenizer, config.clone());
        while !generation.is_done() {
            let before = generation.generated().len();
            generation.next_token_id(self).await?;
            if !on_bytes(&generation.generated()[before..]) {
                break;
            }
        }
        Ok(generation.generated().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(temperature: f32, top_k: usize, top_p: f32) -> SampleConfig {
        SampleConfig { temperature, top_k, top_p, ..SampleConfig::default() }
    }

    #[test]
    fn greedy_takes_the_argmax_and_top_1_matches_it() {
        let logits = [0.1, 2.0, -1.0, 1.9];
        assert_eq!(pick_token(&logits, &config(0.0, 0, 1.0), &mut Rng::new(1)), 1);
        assert_eq!(pick_token(&logits, &config(1.0, 1, 1.0), &mut Rng::new(1)), 1);
    }

    #[test]
    fn top_k_never_samples_outside_the_k_best() {
        let logits: Vec<f32> = (0..256).map(|i| (i % 17) as f32 * 0.1).collect();
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let t = pick_token(&logits, &config(1.5, 5, 1.0), &mut rng) as usize;
            assert_eq!(t % 17, 16, "token {t} is outside the top 5");
        }
    }

    #[test]
    fn top_p_keeps_the_smallest_set_reaching_p() {
        // Probabilities 0.5, 0.3, 0.2 (and nothing else).
        let mut logits = vec![-1e9f32; 256];
        for (i, p) in [(7usize, 0.5f64), (3, 0.3), (9, 0.2)] {
            logits[i] = p.ln() as f32;
        }
        let mut rng = Rng::new(5);
        let mut seen = [0usize; 256];
        for _ in 0..3000 {
            seen[pick_token(&logits, &config(1.0, 0, 0.75), &mut rng) as usize] += 1;
        }
        assert_eq!(seen[9], 0, "0.5 + 0.3 reach 0.75: token 9 is out");
        assert!(seen[7] > 1500 && seen[3] > 800, "{} {}", seen[7], seen[3]);
        for _ in 0..200 {
            assert_eq!(pick_token(&logits, &config(1.0, 0, 0.4), &mut rng), 7);
        }
    }

    #[test]
    fn a_tail_inside_a_character_is_recognised() {
        assert!(!ends_inside_a_character(b"abc"));
        assert!(ends_inside_a_character(&"é".as_bytes()[..1]));
        assert!(!ends_inside_a_character("é".as_bytes()));
        assert!(ends_inside_a_character(&"✓".as_bytes()[..2]));
        assert!(ends_inside_a_character(&"a😀".as_bytes()[..4]));
        assert!(!ends_inside_a_character("a😀".as_bytes()));
        assert!(!ends_inside_a_character(&[0x80, 0x80]), "stray continuation bytes finish nothing");
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(SampleConfig { top_p: 0.0, ..SampleConfig::default() }
            .check()
            .unwrap_err()
            .contains("top_p"));
        let empty = SampleConfig { stop: vec![vec![]], ..SampleConfig::default() };
        assert!(empty.check().unwrap_err().contains("stop"));
        assert!(SampleConfig { temperature: -1.0, ..SampleConfig::default() }.check().is_err());
    }
}
