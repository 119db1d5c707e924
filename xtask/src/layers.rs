//! `cargo xtask check-layers`: the crate layering, checked from `cargo metadata` instead of hoped for.
//! (Filled in by the lead.)

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("check-layers: not written yet".into())
}
