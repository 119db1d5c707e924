//! `cargo xtask test`: the project's one test command (README, `.ci/run`).
//!
//! `cargo fmt --check` → setup → `cargo test --workspace` → `cargo doc` with no warnings →
//! a publish dry run of every library crate → the ckpt crate's browser-store
//! tests under wasm-bindgen-test in headless Chromium → the conformance kit on kernels-cpu's
//! simd128 variant under Node's WASI → the backend conformance kit on WebGPU
//! in headless Chromium → the web build and the npm package (`pack-npm`) → the page's
//! browser tests (`test-web`, the example page on the packed package among them).
//!
//! After the workspace tests and after each WASI run it prints which of kernels-cpu's kernel
//! variants the conformance kit checked, read from the test lines themselves (passed,
//! ignored because this CPU lacks the instructions, failed), so a variant that did not run
//! is named as such rather than hidden in a green count.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::util::{parse_options, run, workspace_root};
use crate::{npm_pack, setup, web_build, web_test};

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
    let workspace = run_keeping_stdout(
        Command::new(&cargo)
            .current_dir(workspace_root())
            .args(["test", "--workspace"])
            .env("TINYGPT_REQUIRE_PYTHON", "1"),
    );
    let (Ok(stdout) | Err((_, stdout))) = &workspace;
    print_cpu_variants_checked("cargo test --workspace", stdout);
    workspace.map_err(|(e, _)| e)?;
    docs_without_warnings(&cargo)?;
    publish_dry_run(&cargo)?;
    ckpt_browser_tests(&cargo)?;
    simd128_conformance_tests(&cargo)?;
    webgpu_conformance_tests(&cargo)?;
    web_build::build()?;
    npm_pack::pack()?;
    web_test::test_task(&["--no-build".into()])
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
        let result = run_keeping_stdout(
            Command::new(cargo)
                .current_dir(workspace_root())
                .args(["test", "-p", "tinygpt-kernels-cpu", "--test", "conformance"])
                .args(["--target", "wasm32-wasip1", "--target-dir"])
                .arg(workspace_root().join("target").join(target_dir))
                .args(["--", "one_thread", "--skip", "copy_misuse_panics"])
                .env("RUSTFLAGS", format!("-C target-feature={features}"))
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env("CARGO_TARGET_WASM32_WASIP1_RUNNER", format!("node {}", runner.display())),
        );
        let (Ok(stdout) | Err((_, stdout))) = &result;
        print_cpu_variants_checked(&format!("wasm32-wasip1 {features}"), stdout);
        result.map_err(|(e, _)| e)?;
    }
    Ok(())
}

/// The module of each of kernels-cpu's kernel variants in its conformance tests
/// (`tests/conformance.rs`), and the variant's name.
const CPU_VARIANT_MODULES: [(&str, &str); 5] = [
    ("reference", "reference"),
    ("avx2_fma", "avx2-fma"),
    ("avx512", "avx512"),
    ("simd128", "simd128"),
    ("simd128_relaxed", "simd128-relaxed"),
];

/// Prints [`cpu_variant_lines`] of `stdout`, under a heading naming the `run`.
fn print_cpu_variants_checked(run: &str, stdout: &str) {
    println!("xtask: CPU kernel variants checked by kernels-cpu's conformance tests ({run}):");
    let lines = cpu_variant_lines(stdout);
    for line in &lines {
        println!("xtask:   {line}");
    }
    // optim's allocation test runs the variant `Kernels::Fast` picks, the best one this CPU
    // has (the same probe that decides which conformance tests above are not ignored).
    let allocations = "test a_steady_state_step_on_the_fast_kernels_allocates_nothing ... ";
    if let Some(outcome) = stdout.lines().find_map(|l| l.strip_prefix(allocations)) {
        let best = ["avx512", "avx2-fma"]
            .into_iter()
            .find(|v| lines.iter().any(|l| l.starts_with(v) && l.contains("checked: ")))
            .unwrap_or("none");
        println!("xtask:   optim/tests/allocations.rs on {best} (the best variant above): {outcome}");
    }
}

/// For each of kernels-cpu's kernel variants, how many of its conformance tests passed,
/// were ignored (with libtest's reason) or failed in `stdout` (libtest's lines `test
/// <variant>::<threads>::<check> ... ok`); a variant with no test line was not compiled
/// for this target.
fn cpu_variant_lines(stdout: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for (module, name) in CPU_VARIANT_MODULES {
        let (mut passed, mut failed, mut ignored) = (0, 0, Vec::new());
        for line in stdout.lines() {
            let Some(rest) = line.strip_prefix("test ").and_then(|l| l.strip_prefix(module)) else {
                continue;
            };
            let is_kit = ["::one_thread::", "::three_threads::"].iter().any(|t| rest.starts_with(t));
            let Some((_, outcome)) = rest.split_once(" ... ").filter(|_| is_kit) else { continue };
            match outcome {
                "ok" => passed += 1,
                "FAILED" => failed += 1,
                o if o.starts_with("ignored") => ignored.push(o.trim_start_matches("ignored, ").to_string()),
                _ => {}
            }
        }
        let outcome = match (passed, failed, ignored.len()) {
            (0, 0, 0) => "not run (not compiled for this target)".to_string(),
            (p, 0, 0) => format!("checked: {p} tests passed"),
            (0, 0, n) => format!("NOT checked: {n} tests ignored ({})", ignored[0]),
            (p, f, n) => format!("{p} tests passed, {f} FAILED, {n} ignored"),
        };
        lines.push(format!("{name:<16} {outcome}"));
    }
    lines
}

/// Runs `cmd` with its stdout passed through line by line and also kept: the output, or
/// the error and the output.
fn run_keeping_stdout(cmd: &mut Command) -> Result<String, (String, String)> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask: running {shown}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| (format!("cannot start {shown}: {e}"), String::new()))?;
    let mut kept = String::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
    }
    match child.wait() {
        Ok(status) if status.success() => Ok(kept),
        Ok(status) => Err((format!("{shown} failed with {status}"), kept)),
        Err(e) => Err((format!("cannot wait for {shown}: {e}"), kept)),
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_variant_lines;

    #[test]
    fn the_variant_summary_counts_what_ran() {
        let stdout = "running 5 tests\n\
            test reference::one_thread::gelu ... ok\n\
            test reference::three_threads::gelu ... ok\n\
            test avx2_fma::one_thread::gelu ... FAILED\n\
            test avx512::one_thread::gelu ... ignored, this CPU has no AVX-512F\n\
            test avx512::three_threads::gelu ... ignored, this CPU has no AVX-512F\n\
            test other::reference::one_thread::gelu ... ok\n";
        let lines = cpu_variant_lines(stdout);
        assert_eq!(lines[0], "reference        checked: 2 tests passed");
        assert_eq!(lines[1], "avx2-fma         0 tests passed, 1 FAILED, 0 ignored");
        assert_eq!(lines[2], "avx512           NOT checked: 2 tests ignored (this CPU has no AVX-512F)");
        assert_eq!(lines[3], "simd128          not run (not compiled for this target)");
        assert_eq!(lines.len(), 5);
    }
}
