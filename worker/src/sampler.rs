//! Text generation a token at a time, so it streams and shares the worker with training.
//!
//! Same rule as `Gpt::generate`: the context is the last `context_length` tokens (an empty
//! prompt starts from a newline), each token is `pick_token` of the last position's logits
//! with one `Rng::new(seed)` for the whole sample.

use tinygpt_autograd::Tape;
use tinygpt_model::tokenizer::Utf8Stream;
use tinygpt_model::{pick_token, Gpt, SampleConfig};
use tinygpt_tensor::{block_on, Backend, Indices, Rng, TensorError};

#[derive(Debug)]
pub struct Sampler {
    config: SampleConfig,
    tokens: Vec<u8>,
    produced: usize,
    rng: Rng,
    stream: Utf8Stream,
    text: String,
    pub started_ms: f64,
}

impl Sampler {
    pub fn new(prompt: &[u8], config: SampleConfig, started_ms: f64) -> Self {
        let tokens = if prompt.is_empty() { vec![b'\n'] } else { prompt.to_vec() };
        let rng = Rng::new(config.seed);
        Sampler {
            config,
            tokens,
            produced: 0,
            rng,
            stream: Utf8Stream::new(),
            text: String::new(),
            started_ms,
        }
    }

    pub fn is_done(&self) -> bool {
        self.produced >= self.config.max_tokens
    }

    pub fn produced(&self) -> usize {
        self.produced
    }

    /// The sampled bytes (tokens) so far, prompt excluded.
    pub fn generated(&self) -> &[u8] {
        &self.tokens[self.tokens.len() - self.produced..]
    }

    /// All text generated so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Samples one token; returns the text it completes (empty inside a multi-byte character,
    /// and the pending rest once the last token is in).
    pub fn advance<B: Backend>(&mut self, model: &Gpt<B>) -> Result<String, TensorError> {
        let ctx = model.config().context_length;
        let vocab = model.config().vocab_size;
        let window = &self.tokens[self.tokens.len().saturating_sub(ctx)..];
        let ids: Vec<u32> = window.iter().map(|&b| b as u32).collect();
        let backend = model.params().tensors()[0].backend().clone();
        let tape = Tape::no_grad();
        let fwd = model.forward(&tape, &Indices::new(&backend, &ids), 1, ids.len());
        let logits = block_on(fwd.logits.value().read())?;
        let last = &logits[(ids.len() - 1) * vocab..ids.len() * vocab];
        let token = pick_token(last, self.config.temperature, self.config.top_k, &mut self.rng);
        self.tokens.push(token);
        self.produced += 1;
        let mut piece = self.stream.push(token);
        if self.is_done() {
            piece.push_str(&self.stream.finish());
        }
        self.text.push_str(&piece);
        Ok(piece)
    }
}
