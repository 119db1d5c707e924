//! What a buffer's values must satisfy, and the one-line description of the first breach.

/// The range an op's operand must lie in. Every rule but [`Rule::Any`] demands finite
/// values: a NaN or an infinity is never a legitimate activation, gradient or moment here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Any bit pattern, NaN included: data that is only moved (`copy`), whose values the
    /// op that made them answers for.
    Any,
    /// Any finite value.
    Finite,
    /// A finite value ≥ 0 (a loss, a sum of squares, a second moment).
    NonNegative,
    /// A finite value > 0 (LayerNorm's reciprocal standard deviation).
    Positive,
    /// A probability: finite and within [0, 1] (attention's softmax).
    Probability,
}

impl Rule {
    fn admits(self, x: f32) -> bool {
        match self {
            Rule::Any => true,
            Rule::Finite => x.is_finite(),
            Rule::NonNegative => x.is_finite() && x >= 0.0,
            Rule::Positive => x.is_finite() && x > 0.0,
            Rule::Probability => (0.0..=1.0).contains(&x),
        }
    }

    fn wanted(self) -> &'static str {
        match self {
            Rule::Any => "anything",
            Rule::Finite => "finite",
            Rule::NonNegative => "finite and ≥ 0",
            Rule::Positive => "finite and > 0",
            Rule::Probability => "a probability in [0, 1]",
        }
    }

    /// `None` when every value passes; otherwise how many fail, the first few offenders
    /// with their indices (relative to `first_index`), and what was wanted.
    pub fn breach(self, values: &[f32], first_index: usize) -> Option<String> {
        const SHOWN: usize = 3;
        let mut bad = values.iter().enumerate().filter(|(_, &x)| !self.admits(x));
        let shown: Vec<String> =
            bad.by_ref().take(SHOWN).map(|(i, x)| format!("{x} at index {}", first_index + i)).collect();
        if shown.is_empty() {
            return None;
        }
        let count = shown.len() + bad.count();
        Some(format!("{count} of {} values are not {} ({})", values.len(), self.wanted(), shown.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;

    #[test]
    fn names_the_count_and_the_first_offenders() {
        let values = [0.5, f32::NAN, 2.0, -1.0, f32::INFINITY, 0.0, 3.0];
        assert_eq!(
            Rule::Finite.breach(&values, 0).unwrap(),
            "2 of 7 values are not finite (NaN at index 1, inf at index 4)"
        );
        assert_eq!(
            Rule::Probability.breach(&values, 10).unwrap(),
            "5 of 7 values are not a probability in [0, 1] (NaN at index 11, 2 at index 12, -1 at index 13)"
        );
        assert_eq!(
            Rule::Positive.breach(&[1.0, 0.0], 0).unwrap(),
            "1 of 2 values are not finite and > 0 (0 at index 1)"
        );
        assert!(Rule::NonNegative.breach(&[0.0, 1.0], 0).is_none());
    }
}
