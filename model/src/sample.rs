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

impl<B: Backend> Gpt<B> {
    /// Generates up to `config.max_tokens` bytes after `prompt`, calling `on_token` with each
    /// one as it is sampled; `on_token` returning false stops early. Returns the new bytes.
    /// The context is the last `context_length` tokens (prompt included).
    pub async fn generate(
        &self,
        prompt: &[u8],
        config: &SampleConfig,
        mut on_token: impl FnMut(u8) -> bool,
    ) -> Result<Vec<u8>, TensorError> {
        let ctx = self.config().context_length;
        let backend = self.params().tensors()[0].backend().clone();
        let mut rng = Rng::new(config.seed);
        // An empty prompt starts from a newline, a natural document boundary.
        let mut tokens: Vec<u8> = if prompt.is_empty() { vec![b'\n'] } else { prompt.to_vec() };
        let mut out = Vec::with_capacity(config.max_tokens);
        for _ in 0..config.max_tokens {
            let window = &tokens[tokens.len().saturating_sub(ctx)..];
            let ids: Vec<u32> = window.iter().map(|&b| b as u32).collect();
            let tape = Tape::no_grad();
            let fwd = self.forward(&tape, &Indices::new(&backend, &ids), 1, ids.len());
            let logits = fwd.logits.value().read().await?;
            let vocab = self.config().vocab_size;
            let last = &logits[(ids.len() - 1) * vocab..ids.len() * vocab];
            let token = pick_token(last, config.temperature, config.top_k, &mut rng);
            tokens.push(token);
            out.push(token);
            if !on_token(token) {
                break;
            }
        }
        Ok(out)
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
