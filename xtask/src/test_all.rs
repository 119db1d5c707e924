//! `cargo xtask test`: the project's one test command (README, `.ci/run`).
//!
//! `cargo fmt --check` → setup → `cargo test --workspace` → `cargo doc` with no warnings →
//! a publish dry run of every library crate → the ckpt crate's browser-store
//! tests under wasm-bindgen-test in headless Chromium → the conformance kit on kernels-cpu's
//! simd128 variant under Node's WASI → the backend conformance kit on WebGPU
//! in headless Chromium → the page's browser tests (`test-web`).

use std::process::Command;

use crate::util::{parse_options, run, workspace_root};
use crate::{setup, web_test};

pub fn run_task(args: &[String]) -> Result<(), String> {
    parse_options(args, &[])?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Formatting first: it takes a second and fails before minutes of building.
    if crate::util::output_of(&cargo, &["fmt", "--version"]).is_none() {
        run(Command::new("rustup").args(["component", "add", "rustfmt"]))?;
    }
    run(Command::new(&cargo).current_dir(workspace_root()).args(["fmt", "--all", "--", "--check"]))?;
    setup::setup()?;
    // setup installed Python's safetensors, so the export must really be read by it here.
    run(Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["test", "--workspace"])
        .env("TINYGPT_REQUIRE_PYTHON", "1"))?;
    docs_without_warnings(&cargo)?;
    publish_dry_run(&cargo)?;
    ckpt_browser_tests(&cargo)?;
    simd128_conformance_tests(&cargo)?;
    webgpu_conformance_tests(&cargo)?;
    web_test::test_task(&[])
}

/// The API docs build clean: every library crate has `#![warn(missing_docs)]`, and a broken
/// intra-doc link or a stray HTML tag fails here rather than on docs.rs. Rustdoc flags do
/// not touch the test build's artifacts, so this reuses them.
fn docs_without_warnings(cargo: &str) -> Result<(), String> {
    run(Command::new(cargo)
        .current_dir(workspace_root())
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings"))
}

/// Every library crate packaged and built from its package alone, in dependency order
/// (`cargo publish --workspace --dry-run`: what crates.io would receive, versions on the
/// path dependencies, metadata, files inside each crate's folder); cli and worker are
/// `publish = false`. About four minutes on 2 cores (it builds wgpu once more, unoptimised).
fn publish_dry_run(cargo: &str) -> Result<(), String> {
    forget_registry_builds_of_our_crates();
    run(Command::new(cargo).current_dir(workspace_root()).args(["publish", "--workspace", "--dry-run"]))
}

/// The dry run builds each package against the others unpacked from a temporary registry,
/// whose files all carry the tarball's fixed 2006 mtime; so a build of, say, `tinygpt-run
/// 0.1.0` left by an earlier dry run still looks fresh, and the next run compiles its
/// dependents against the old API. Forgetting those builds (their fingerprints) makes cargo
/// rebuild them from the new packages. Only our crates built from a registry copy are
/// touched; nothing is lost but a few seconds of compiling.
fn forget_registry_builds_of_our_crates() {
    forget_unpacked_copies_of_our_crates();
    let target = workspace_root().join("target/debug");
    let Ok(entries) = std::fs::read_dir(target.join("deps")) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let Some(stem) = name.strip_prefix("tinygpt_").and_then(|n| n.strip_suffix(".d")) else { continue };
        let from_registry = std::fs::read_to_string(&path)
            .is_ok_and(|d| d.lines().next().is_some_and(|l| l.contains("/registry/src/")));
        if let (true, Some((krate, hash))) = (from_registry, stem.rsplit_once('-')) {
            let fingerprint = format!("tinygpt-{}-{hash}", krate.replace('_', "-"));
            let _ = std::fs::remove_dir_all(target.join(".fingerprint").join(fingerprint));
        }
    }
}

/// Cargo unpacks each package of the temporary registry into `$CARGO_HOME/registry/src/<the
/// registry's hash>/` once and reuses that copy while its `.cargo-ok` marker is there, so a
/// later dry run from the same target dir would verify against the sources of the earlier
/// one (seen: `tinygpt-model` built against an old `tinygpt-run`). Removing our crates'
/// copies from every registry but crates.io's makes cargo unpack the new packages.
fn forget_unpacked_copies_of_our_crates() {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")));
    let Some(src) = cargo_home.map(|h| h.join("registry/src")) else { return };
    let Ok(registries) = std::fs::read_dir(src) else { return };
    for registry in registries.flatten().map(|e| e.path()) {
        if registry.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("index.crates.io")) {
            continue;
        }
        let Ok(packages) = std::fs::read_dir(&registry) else { continue };
        for package in packages.flatten().map(|e| e.path()) {
            if package.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("tinygpt-")) {
                let _ = std::fs::remove_dir_all(package);
            }
        }
    }
}

/// The ckpt crate's OPFS and IndexedDB stores, tested in Chromium by wasm-bindgen-test
/// (`wasm-bindgen-test-runner` drives Debian's chromedriver; `ckpt/webdriver.json` passes
/// the flags). A target dir of its own keeps these flags from rebuilding anything else.
fn ckpt_browser_tests(cargo: &str) -> Result<(), String> {
    run(Command::new(cargo)
        .current_dir(workspace_root())
        .args(["test", "-p", "tinygpt-ckpt", "--target", "wasm32-unknown-unknown", "--target-dir"])
        .arg(workspace_root().join("target/wasm-test"))
        .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", "wasm-bindgen-test-runner")
        .env("CHROMEDRIVER", "/usr/bin/chromedriver")
        // Each test binary's whole run must fit in the runner's limit (20 s by default);
        // web_page's seven storage tests take ~18 s on an idle 2-core VM, more under load.
        .env("WASM_BINDGEN_TEST_TIMEOUT", "300"))
}

/// The backend conformance kit on the wgpu backend over WebGPU (SwiftShader in headless
/// Chromium, `kernels-wgsl/webdriver.json` passes `--enable-unsafe-webgpu`), every check
/// awaited (kernels-wgsl/tests/browser_conformance.rs). About a minute of tests once
/// built; the runner's default 20 s limit covers the whole run, hence the longer one.
fn webgpu_conformance_tests(cargo: &str) -> Result<(), String> {
    run(Command::new(cargo)
        .current_dir(workspace_root())
        .args(["test", "-p", "tinygpt-kernels-wgsl", "--test", "browser_conformance"])
        .args(["--target", "wasm32-unknown-unknown", "--target-dir"])
        .arg(workspace_root().join("target/wasm-gpu-test"))
        .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", "wasm-bindgen-test-runner")
        .env("CHROMEDRIVER", "/usr/bin/chromedriver")
        .env("WASM_BINDGEN_TEST_TIMEOUT", "900"))
}

/// The conformance kit on kernels-cpu's wasm variants: wasm32-wasip1 builds with +simd128,
/// then with +simd128,+relaxed-simd (that build runs both `simd128` and `simd128-relaxed`),
/// under Node's WASI (kernels-cpu/tests/wasi/run.mjs). One thread only (wasip1 has none)
/// and without the misuse check (it catches a panic; wasm panics abort).
fn simd128_conformance_tests(cargo: &str) -> Result<(), String> {
    setup::rust_target("wasm32-wasip1")?;
    let runner = workspace_root().join("kernels-cpu/tests/wasi/run.mjs");
    for (target_dir, features) in [("wasi-simd", "+simd128"), ("wasi-relaxed-simd", "+simd128,+relaxed-simd")]
    {
        run(Command::new(cargo)
            .current_dir(workspace_root())
            .args(["test", "-p", "tinygpt-kernels-cpu", "--test", "conformance"])
            .args(["--target", "wasm32-wasip1", "--target-dir"])
            .arg(workspace_root().join("target").join(target_dir))
            .args(["--", "one_thread", "--skip", "copy_misuse_panics"])
            .env("RUSTFLAGS", format!("-C target-feature={features}"))
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("CARGO_TARGET_WASM32_WASIP1_RUNNER", format!("node {}", runner.display())))?;
    }
    Ok(())
}
