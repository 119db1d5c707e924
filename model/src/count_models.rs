//! Count models: the validation loss a model gets from token counts alone, as baselines
//! for a fine-tuning result. An adapter that halves a base's loss on a new text may only
//! have learned which tokens that text uses; a unigram (token frequency) and a bigram
//! (next token given this one) count model, fitted on the same train split, say how
//! much of the gain any model gets from counting.
//!
//! Both are smoothed so that no validation token has probability zero: the unigram adds
//! one to every count (Laplace); the bigram blends its counts with the unigram,
//! `p(b | a) = (c(a, b) + β p(b)) / (c(a) + β)` with `β = 1` (a Dirichlet prior centred
//! on the unigram, so a pair seen once moves the estimate and an unseen one falls back to
//! the token's frequency). The loss is the mean `-ln p` over every validation token that
//! has a predecessor in the split, in nats, like the model's cross-entropy.

use std::collections::HashMap;

use crate::data::SplitTokens;

/// The bigram's prior weight on the unigram (see the module docs).
const BIGRAM_PRIOR: f64 = 1.0;

/// Validation losses of the two count models, in nats per token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CountModelLosses {
    /// Token frequencies only.
    pub unigram: f32,
    /// The next token given the current one.
    pub bigram: f32,
}

/// Fits both count models on `train` and scores them on `val` (tokens below `vocab`).
/// `None` when `val` has fewer than two tokens (nothing to predict).
pub fn count_model_losses(
    train: SplitTokens<'_>,
    val: SplitTokens<'_>,
    vocab: usize,
) -> Option<CountModelLosses> {
    if val.len() < 2 {
        return None;
    }
    let train = ids(train);
    let mut unigram = vec![1.0f64; vocab];
    let mut bigram: HashMap<(u32, u32), f64> = HashMap::new();
    let mut context = vec![0.0f64; vocab];
    for (i, &t) in train.iter().enumerate() {
        unigram[t as usize] += 1.0;
        if let Some(&prev) = i.checked_sub(1).and_then(|p| train.get(p)) {
            *bigram.entry((prev, t)).or_default() += 1.0;
            context[prev as usize] += 1.0;
        }
    }
    let total: f64 = unigram.iter().sum();
    let p_unigram = |t: u32| unigram[t as usize] / total;
    let val = ids(val);
    let (mut uni, mut bi) = (0.0f64, 0.0f64);
    for pair in val.windows(2) {
        let (prev, t) = (pair[0], pair[1]);
        let pu = p_unigram(t);
        let pair_count = bigram.get(&(prev, t)).copied().unwrap_or(0.0);
        let pb = (pair_count + BIGRAM_PRIOR * pu) / (context[prev as usize] + BIGRAM_PRIOR);
        uni -= pu.ln();
        bi -= pb.ln();
    }
    let n = (val.len() - 1) as f64;
    Some(CountModelLosses { unigram: (uni / n) as f32, bigram: (bi / n) as f32 })
}

fn ids(tokens: SplitTokens<'_>) -> Vec<u32> {
    match tokens {
        SplitTokens::Bytes(t) => t.iter().map(|&b| b as u32).collect(),
        SplitTokens::Ids(t) => t.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_of_one_repeated_pair_is_nearly_free_for_the_bigram_and_costs_ln2_for_the_unigram() {
        let train: Vec<u8> = b"ab".repeat(5000);
        let val: Vec<u8> = b"ab".repeat(100);
        let losses = count_model_losses(SplitTokens::Bytes(&train), SplitTokens::Bytes(&val), 256).unwrap();
        // Two tokens, equally frequent: ln 2 per token, up to the 254 smoothed others.
        assert!((losses.unigram - std::f32::consts::LN_2).abs() < 0.06, "{losses:?}");
        assert!(losses.bigram < 0.01, "{losses:?}");
    }

    #[test]
    fn an_unseen_token_costs_a_finite_loss() {
        let losses = count_model_losses(SplitTokens::Bytes(b"aaaa"), SplitTokens::Bytes(b"az"), 256).unwrap();
        assert!(losses.unigram.is_finite() && losses.bigram.is_finite(), "{losses:?}");
    }

    #[test]
    fn bpe_ids_and_bytes_with_the_same_values_score_the_same() {
        let text = b"the cat sat on the mat; the rat sat on the hat.".repeat(20);
        let wide: Vec<u32> = text.iter().map(|&b| b as u32).collect();
        let (train, val) = text.split_at(800);
        let (wtrain, wval) = wide.split_at(800);
        let bytes = count_model_losses(SplitTokens::Bytes(train), SplitTokens::Bytes(val), 256);
        let ids = count_model_losses(SplitTokens::Ids(wtrain), SplitTokens::Ids(wval), 256);
        assert_eq!(bytes, ids);
        assert!(bytes.unwrap().bigram < bytes.unwrap().unigram);
    }

    #[test]
    fn a_validation_split_of_one_token_has_nothing_to_score() {
        assert_eq!(count_model_losses(SplitTokens::Bytes(b"abc"), SplitTokens::Bytes(b"a"), 256), None);
    }
}
