pub mod bench;
pub mod eval;
pub mod sample;
pub mod train;
pub mod transfer;
