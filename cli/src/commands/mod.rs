pub mod bench;
pub mod checkpoints;
pub mod eval;
pub mod sample;
pub mod train;
pub mod transfer;
