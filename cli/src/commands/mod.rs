pub mod bench;
pub mod checkpoints;
pub mod debug_state;
pub mod eval;
pub mod lora;
pub mod sample;
pub mod train;
pub mod transfer;
