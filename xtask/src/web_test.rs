//! `cargo xtask test-web` and `cargo xtask bench-web`: the page in headless Chromium.
//!
//! Both build `dist/` (unless `--no-build`), serve it on a free loopback port from this
//! process, and run a Node script that drives Debian's Chromium with playwright-core
//! (`tests-web/`). The server lives as long as this process, so it stops with it.
//! `test-web` also packs the npm package (`npm_pack`; with `--no-build`, only when `dist/`
//! is newer than the tarball), installs the example page from it and serves that folder on
//! a second port of the same server (`TINYGPT_EXAMPLE_URL`, for tests-web/npm.test.mjs).
//! The page's server also serves ckpt's small GPT-2 folder at `/fixtures/hf_gpt2/`, for the
//! page to load by URL, and counts those requests (`/__requests`); and `target/bench/` at
//! `/fixtures/bench/`, where bench/make_gpt2_folder.py writes the random-weight GPT-2-124M
//! folder the tab's LoRA benchmark loads (`TINYGPT_BENCH_LORA_BASE_URL`, tests-web/bench.mjs).

use std::process::Command;

use crate::util::{parse_options, run, workspace_root};
use crate::{http, npm_pack, web_build};

/// Where the test server serves the small GPT-2 folder (`/fixtures/hf_gpt2/`; its request
/// counts at `/__requests`).
pub const HF_GPT2_MOUNT: &str = "fixtures/hf_gpt2";

/// Where the test server serves `target/bench/` (models too large to commit, made by bench/
/// scripts for benchmarks).
pub const BENCH_MOUNT: &str = "fixtures/bench";

/// Where screenshots and other test artifacts land.
pub const ARTIFACTS: &str = "target/web-artifacts";

pub fn test_task(args: &[String]) -> Result<(), String> {
    let opts = parse_options(args, &["--no-build", "--filter"])?;
    let filter = opts.iter().find(|(n, _)| *n == "--filter").map(|(_, v)| v.to_string());
    let mut node = Command::new("node");
    node.args(["--test", "--test-concurrency=1", "--test-reporter=spec"]);
    if let Some(f) = filter {
        node.arg(format!("--test-name-pattern={f}"));
    }
    node.arg("tests-web/");
    with_server(&opts, node, true)
}

/// `--steps`, `--rounds` and `--pytorch` reach tests-web/bench.mjs as its environment
/// variables (documented there).
pub fn bench_task(args: &[String]) -> Result<(), String> {
    let opts = parse_options(args, &["--no-build", "--steps", "--rounds", "--pytorch"])?;
    let mut node = Command::new("node");
    node.arg("tests-web/bench.mjs");
    for (option, variable) in [
        ("--steps", "TINYGPT_BENCH_STEPS"),
        ("--rounds", "TINYGPT_BENCH_ROUNDS"),
        ("--pytorch", "TINYGPT_BENCH_PYTORCH"),
    ] {
        if let Some((_, value)) = opts.iter().find(|(n, _)| *n == option) {
            node.env(variable, value);
        }
    }
    with_server(&opts, node, false)
}

/// Runs `node` against `dist/` served on a free port (and, with `example`, the example page
/// installed from the packed package on another).
fn with_server(opts: &[(&str, &str)], mut node: Command, example: bool) -> Result<(), String> {
    let build = !opts.iter().any(|(n, _)| *n == "--no-build");
    if build {
        web_build::build()?;
    }
    if example {
        let tarball = if build { npm_pack::pack()? } else { npm_pack::pack_if_stale()? };
        let site = npm_pack::install_example(&tarball)?;
        let server = http::start_with_mounts(&site, "127.0.0.1", 0, &fixture_mounts()?)?;
        eprintln!("xtask: serving the example page at http://{}/", server.addr);
        node.env("TINYGPT_EXAMPLE_URL", format!("http://{}/", server.addr));
    }
    let root = workspace_root();
    if !root.join("node_modules/playwright-core").is_dir() {
        return Err("node_modules/playwright-core is missing: run `npm ci` (or `cargo xtask setup`)".into());
    }
    let server = http::start_with_mounts(&web_build::dist_dir(), "127.0.0.1", 0, &fixture_mounts()?)?;
    let artifacts = root.join(ARTIFACTS);
    std::fs::create_dir_all(&artifacts).map_err(|e| e.to_string())?;
    eprintln!("xtask: serving dist/ at http://{}/", server.addr);
    run(node
        .current_dir(&root)
        .env("TINYGPT_URL", format!("http://{}/", server.addr))
        .env("TINYGPT_ARTIFACTS", &artifacts)
        .env(
            "TINYGPT_CHROMIUM",
            std::env::var("TINYGPT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        ))
}

/// The GPT-2 fixture folder, which tests-web/gpt2.test.mjs (the page) and npm.test.mjs (the
/// example page) load by URL, each from its own origin; and `target/bench/` (made here when
/// missing, as the server serves folders that exist).
fn fixture_mounts() -> Result<[(&'static str, std::path::PathBuf); 2], String> {
    let bench = workspace_root().join("target/bench");
    std::fs::create_dir_all(&bench).map_err(|e| format!("cannot make {}: {e}", bench.display()))?;
    Ok([(HF_GPT2_MOUNT, workspace_root().join("ckpt/tests/fixtures/hf_gpt2")), (BENCH_MOUNT, bench)])
}
