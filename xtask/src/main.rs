//! Project tasks: `cargo xtask <task>`.
//!
//! - `check-layers`: the crate layering, from `cargo metadata`.
//! - `bench`: native training-step benchmarks, reference vs fast CPU kernels (and PyTorch with `--pytorch PYTHON`).
//! - `bench-gpu`: training-step and matmul benchmarks on the wgpu backend.
//! - `setup`: installs the wasm target, wasm-bindgen-cli, Chromium and the npm packages (only what is missing).
//! - `build-web`: the five wasm builds of the worker and the page, into `dist/`.
//! - `pack-npm [--no-build]`: the npm package `tinygpt-web` (npm/), packed into `target/npm/`.
//! - `serve [--port 8080] [--host 127.0.0.1] [--no-build] [--example]`: builds and serves
//!   `dist/` (`--example`: the example page, installed from the packed package).
//! - `test-web [--no-build] [--filter NAME]`: the page's tests in headless Chromium.
//! - `bench-web [--no-build] [--steps N] [--rounds N] [--pytorch PYTHON]`: training speed of
//!   the five wasm builds in Chromium, each timed over at least N steps (12) and at least 4 s
//!   (`TINYGPT_BENCH_MIN_MS`), every run `--rounds` times (1); with `--pytorch`, each run
//!   followed by the PyTorch twin at its preset and thread count.
//! - `gen-types`: `www/protocol.d.ts` from the worker's protocol types (a test fails when it is stale).
//! - `test`: setup, `cargo test --workspace`, the ckpt browser tests and `test-web`.

mod bench;
mod bench_gpu;
mod gen_types;
mod http;
mod layers;
mod npm_pack;
mod serve;
mod setup;
mod test_all;
mod util;
mod web_build;
mod web_test;

const TASKS: &str =
    "check-layers, bench, bench-gpu, setup, build-web, pack-npm, serve, test-web, bench-web, gen-types, test";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args.split_first().map(|(t, r)| (t.as_str(), r)).unwrap_or(("help", &[]));
    let result = match task {
        "check-layers" => layers::run(rest),
        "bench" => bench::run(rest),
        "bench-gpu" => bench_gpu::run(rest),
        "setup" => setup::run_task(rest),
        "build-web" => web_build::run_task(rest),
        "pack-npm" => npm_pack::run_task(rest),
        "serve" => serve::run_task(rest),
        "test-web" => web_test::test_task(rest),
        "bench-web" => web_test::bench_task(rest),
        "gen-types" => gen_types::run_task(rest),
        "test" => test_all::run_task(rest),
        _ => Err(format!("unknown task {task:?}; tasks: {TASKS}")),
    };
    if let Err(e) = result {
        eprintln!("xtask {task}: {e}");
        std::process::exit(1);
    }
}
