//! [`Precision`]: how a backend's matrix products round their inputs. A training recipe
//! names it (`--precision`, the page's setting) and the composition root builds its backend
//! with it; everything but the products (master weights, the optimizer, LayerNorm
//! statistics, softmax, cross-entropy, gradient norms) stays f32 either way.

use std::fmt;
use std::str::FromStr;

/// The arithmetic of matrix products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 inputs, f32 accumulation: the reference, bit for bit what the kernels always did.
    #[default]
    F32,
    /// Inputs rounded to f16 as they are staged (the way autocast and tensor cores take
    /// them), products accumulated in f32. Gradients need loss scaling to stay above f16's
    /// smallest values.
    Mixed,
}

impl Precision {
    /// Every precision, in the order a user is offered them.
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::Mixed];

    /// The name in configs, flags and messages: `f32` or `mixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Mixed => "mixed",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not a precision: use f32 or mixed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_f32_is_the_default() {
        for p in Precision::ALL {
            assert_eq!(p.as_str().parse::<Precision>(), Ok(p));
        }
        assert_eq!(Precision::default(), Precision::F32);
        assert!("bf16".parse::<Precision>().unwrap_err().contains("f32 or mixed"));
    }
}
