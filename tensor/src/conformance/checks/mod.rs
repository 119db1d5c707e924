//! The checks, one public function per op, each generic over the backend. The
//! [`crate::backend_conformance_tests`] macro turns each into a `#[test]`.

mod adamw;
mod attention;
mod copy;
mod cross_entropy;
mod dropout;
mod elementwise;
mod embedding;
mod flush;
mod gelu;
mod layernorm;
mod matmul;
mod memory;
mod wide_vocab;

pub use adamw::adamw;
pub use attention::{
    attention, attention_backward, attention_backward_saved, attention_for_training, cached_attention,
};
pub use copy::{copy, copy_is_a_snapshot, copy_list, copy_misuse_panics};
pub use cross_entropy::{cross_entropy, cross_entropy_backward, cross_entropy_for_training};
pub use dropout::{attention_dropout, attention_dropout_backward, dropout, dropout_add, dropout_backward};
pub use elementwise::{add, scale, sum_rows, sum_squares};
pub use embedding::{embedding, embedding_backward};
pub use flush::flush;
pub use gelu::{gelu, gelu_backward};
pub use layernorm::{layer_norm, layer_norm_backward, layer_norm_backward_onto};
pub use matmul::{matmul, matmul_backward, matmul_onto, matmul_sum_rows};
pub use memory::{indices_round_trip, upload_read_round_trip, zeros};
pub use wide_vocab::{wide_vocab_head, GPT2_VOCAB};
