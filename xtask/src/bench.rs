//! `cargo xtask bench`: native training-step benchmarks as JSON lines. (Filled in by the lead.)

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("bench: not written yet".into())
}
