//! `cargo xtask gen-types`: rewrites `www/protocol.d.ts` from the worker's protocol types.
//!
//! The generator is the worker's `protocol::typescript` unit test (ts-rs derives exist in
//! the worker's test builds only, so the wasm module carries none); with
//! `TINYGPT_WRITE_PROTOCOL_TYPES` set it writes the file instead of comparing it, which is
//! what `cargo test -p tinygpt-worker` does on every run, in CI too.

use std::process::Command;

use crate::util::{run, workspace_root};

pub fn run_task(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("gen-types takes no arguments (got {arg:?})"));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo).current_dir(workspace_root()).env("TINYGPT_WRITE_PROTOCOL_TYPES", "1").args([
        "test",
        "-p",
        "tinygpt-worker",
        "--lib",
        "--",
        "protocol::typescript::",
    ]))?;
    eprintln!("xtask: wrote www/protocol.d.ts");
    Ok(())
}
