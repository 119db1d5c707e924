//! Straightforward f64 host implementations of every backend op: the oracle the checks
//! compare against. They take the same f32 inputs a backend gets and favour plain
//! index arithmetic over speed.

pub(crate) mod adamw;
pub(crate) mod attention;
pub(crate) mod dense;
pub(crate) mod layers;
