//! Autoregressive generation: temperature and top-k sampling over the next-byte logits.

use tinygpt_autograd::Tape;
use tinygpt_tensor::{Backend, Indices, Rng, TensorError};

use crate::gpt::Gpt;

/// How to sample. `temperature == 0` is greedy (argmax); `top_k == 0` keeps every token.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleConfig {
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_k: usize,
    pub seed: u64,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig { max_tokens: 300, temperature: 0.8, top_k: 40, seed: 1337 }
    }
}

/// Picks the next token from one row of logits (see [`SampleConfig`]). Ties in top-k keep the
/// lower token id; the draw is one `rng.uniform()` against the cumulative probabilities.
pub fn pick_token(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u8 {
    let argmax =
        || logits.iter().enumerate().fold(0, |best, (i, &l)| if l > logits[best] { i } else { best }) as u8;
    if temperature <= 0.0 {
        return argmax();
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if top_k > 0 {
        order.truncate(top_k.min(logits.len()));
    }
    let max = logits[order[0]] as f64;
    let weights: Vec<f64> =
        order.iter().map(|&i| ((logits[i] as f64 - max) / temperature as f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut target = rng.uniform() * total;
    for (&i, w) in order.iter().zip(&weights) {
        target -= w;
        if target < 0.0 {
            return i as u8;
        }
    }
    order[order.len() - 1] as u8
}

/// Generation one token at a time, so callers can stream it and interleave it with other
/// work (the web worker answers pause and stop between tokens). The context is the last
/// `context_length` tokens, prompt included; an empty prompt starts from a newline, a
/// natural document boundary; one `Rng::new(seed)` drives the whole sample.
#[derive(Clone, Debug)]
pub struct Generation {
    config: SampleConfig,
    tokens: Vec<u8>,
    produced: usize,
    rng: Rng,
}

impl Generation {
    pub fn new(prompt: &[u8], config: SampleConfig) -> Self {
        let tokens = if prompt.is_empty() { vec![b'\n'] } else { prompt.to_vec() };
        let rng = Rng::new(config.seed);
        Generation { config, tokens, produced: 0, rng }
    }

    /// Whether `max_tokens` have been produced.
    pub fn is_done(&self) -> bool {
        self.produced >= self.config.max_tokens
    }

    /// The bytes produced so far (prompt excluded).
    pub fn generated(&self) -> &[u8] {
        &self.tokens[self.tokens.len() - self.produced..]
    }

    /// Samples the next token (one forward pass over the context window).
    pub async fn next_token<B: Backend>(&mut self, model: &Gpt<B>) -> Result<u8, TensorError> {
        let (ctx, vocab) = (model.config().context_length, model.config().vocab_size);
        let window = &self.tokens[self.tokens.len().saturating_sub(ctx)..];
        let ids: Vec<u32> = window.iter().map(|&b| b as u32).collect();
        let backend = model.params().tensors()[0].backend().clone();
        let tape = Tape::no_grad();
        let fwd = model.forward(&tape, &Indices::new(&backend, &ids), 1, ids.len());
        let logits = fwd.logits.value().read().await?;
        let last = &logits[(ids.len() - 1) * vocab..ids.len() * vocab];
        let token = pick_token(last, self.config.temperature, self.config.top_k, &mut self.rng);
        self.tokens.push(token);
        self.produced += 1;
        Ok(token)
    }
}

impl<B: Backend> Gpt<B> {
    /// Generates up to `config.max_tokens` bytes after `prompt` (see [`Generation`]), calling
    /// `on_token` with each as it is sampled; `on_token` returning false stops early.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_argmax_and_top_1_matches_it() {
        let logits = [0.1, 2.0, -1.0, 1.9];
        assert_eq!(pick_token(&logits, 0.0, 0, &mut Rng::new(1)), 1);
        assert_eq!(pick_token(&logits, 1.0, 1, &mut Rng::new(1)), 1);
    }

    #[test]
    fn top_k_never_samples_outside_the_k_best() {
        let logits: Vec<f32> = (0..256).map(|i| (i % 17) as f32 * 0.1).collect();
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let t = pick_token(&logits, 1.5, 5, &mut rng) as usize;
            assert_eq!(t % 17, 16, "token {t} is outside the top 5");
        }
    }
}
