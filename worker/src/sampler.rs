//! Text generation for the worker: a [`Generation`] (the token-at-a-time sampler that
//! `Gpt::generate` runs too, so both give the same tokens) plus what only the worker needs:
//! the text streamed in whole UTF-8 characters, and when sampling began, for tokens per second.
//! Tokens are the model's (bytes, or a BPE base's ids, whose bytes are streamed in turn), so
//! a character split across tokens still arrives whole.

use tinygpt_model::tokenizer::Utf8Stream;
use tinygpt_model::{Generation, Gpt, SampleConfig, Tokenizer};
use tinygpt_tensor::{Backend, TensorError};

use crate::protocol::OutMessage;

#[derive(Debug)]
pub struct Sampler<B: Backend> {
    generation: Generation<B>,
    stream: Utf8Stream,
    text: String,
    /// The clock's milliseconds when the sample was requested.
    pub started_ms: f64,
}

impl<B: Backend> Sampler<B> {
    pub fn new(prompt: &[u8], tokenizer: &Tokenizer, config: SampleConfig, started_ms: f64) -> Self {
        Sampler {
            generation: Generation::with_tokenizer(prompt, tokenizer, config),
            stream: Utf8Stream::new(),
            text: String::new(),
            started_ms,
        }
    }

    pub fn is_done(&self) -> bool {
        self.generation.is_done()
    }

    /// Tokens sampled so far.
    pub fn produced(&self) -> usize {
        self.generation.generated_ids().len()
    }

    /// All text generated so far (prompt excluded).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// `sampleDone` for this sample at `now_ms`: finished, or `cancelled` (by a newer sample
    /// or a new run) with the text produced until then.
    pub fn done_message(&self, now_ms: f64, cancelled: bool) -> OutMessage {
        let seconds = ((now_ms - self.started_ms) / 1e3).max(1e-9);
        OutMessage::SampleDone {
            text: self.text.clone(),
            tokens_per_second: self.produced() as f64 / seconds,
            cancelled,
        }
    }

    /// Samples one token; returns the text it completes (empty inside a multi-byte character,
    /// and the pending rest once the last token is in). Awaits the logits' readback.
    pub async fn advance(&mut self, model: &Gpt<B>) -> Result<String, TensorError> {
        let before = self.generation.generated().len();
        self.generation.next_token_id(model).await?;
        let mut piece = String::new();
        for &byte in &self.generation.generated()[before..] {
            piece.push_str(&self.stream.push(byte));
        }
        if self.is_done() {
            piece.push_str(&self.stream.finish());
        }
        self.text.push_str(&piece);
        Ok(piece)
    }
}
