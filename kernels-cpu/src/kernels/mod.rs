//! The scalar reference kernels, one file per op family. They work on host slices and
//! know nothing of handles or locks; `crate::backend` wires them to the `Backend` trait.

pub(crate) mod adamw;
pub(crate) mod attention;
pub(crate) mod cached_attention;
pub(crate) mod copy;
pub(crate) mod cross_entropy;
pub(crate) mod dropout;
pub(crate) mod elementwise;
pub(crate) mod embedding;
pub(crate) mod gelu;
pub(crate) mod layernorm;
pub(crate) mod matmul;
