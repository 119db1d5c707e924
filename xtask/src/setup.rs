//! `cargo xtask setup`: installs what the web build and the browser tests need, and only
//! what is missing, so running it again is cheap (CI runs it on every clean checkout).
//!
//! - the `wasm32-unknown-unknown` target (rustup);
//! - the pinned nightly of the threads build, with `rust-src` and the wasm target (rustup,
//!   about 20 s; see `web_build::THREADS_TOOLCHAIN`);
//! - `wasm-bindgen-cli` at Cargo.lock's wasm-bindgen version (`cargo install`, no `--locked`:
//!   that pins a webpki-roots release the registry here lacks);
//! - Debian's `chromium`, `chromium-driver`, `mesa-vulkan-drivers` and `time` (apt-get);
//! - the npm packages in `package-lock.json` (`npm ci`): uPlot and playwright-core;
//! - Python's `safetensors` and `numpy` (pip), with which a test reads our `.safetensors` export.

use std::process::Command;

use crate::util::{
    installed_wasm_bindgen_version, locked_wasm_bindgen_version, output_of, parse_options, run,
    workspace_root,
};

/// `time` is GNU time, with which cli/tests/bounds.rs measures a refused import's peak memory.
const APT_PACKAGES: [&str; 4] = ["chromium", "chromium-driver", "mesa-vulkan-drivers", "time"];

pub fn run_task(args: &[String]) -> Result<(), String> {
    parse_options(args, &[])?;
    setup()
}

pub fn setup() -> Result<(), String> {
    web_build_tools()?;
    apt_packages()?;
    python_packages()?;
    eprintln!("xtask setup: everything is installed");
    Ok(())
}

/// What `build-web` (and so `serve`) needs: the wasm target, wasm-bindgen-cli and the npm
/// packages, so a new user's first `cargo xtask serve` works with only Rust and Node.
/// The browser (apt) is for the tests only.
pub fn web_build_tools() -> Result<(), String> {
    wasm_target()?;
    threads_toolchain()?;
    wasm_bindgen_cli()?;
    npm_packages()
}

fn wasm_target() -> Result<(), String> {
    rust_target("wasm32-unknown-unknown")
}

/// Adds a rustup target unless it is installed already.
pub fn rust_target(target: &str) -> Result<(), String> {
    let installed = output_of("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if installed.lines().any(|l| l.trim() == target) {
        return Ok(());
    }
    run(Command::new("rustup").args(["target", "add", target]))
}

/// The nightly the `simd-threads` web build needs (`-Z build-std` rebuilds std with
/// atomics from `rust-src`), in the minimal profile.
fn threads_toolchain() -> Result<(), String> {
    let toolchain = crate::web_build::THREADS_TOOLCHAIN;
    let listed = output_of("rustup", &["toolchain", "list"]).unwrap_or_default();
    if listed.lines().any(|l| l.starts_with(toolchain)) {
        let components = output_of("rustup", &["component", "list", "--installed", "--toolchain", toolchain])
            .unwrap_or_default();
        let targets = output_of("rustup", &["target", "list", "--installed", "--toolchain", toolchain])
            .unwrap_or_default();
        if components.lines().any(|l| l.starts_with("rust-src"))
            && targets.lines().any(|l| l.trim() == "wasm32-unknown-unknown")
        {
            return Ok(());
        }
    }
    eprintln!("xtask: installing {toolchain} for the threads web build (about 20 seconds, once)");
    run(Command::new("rustup").args([
        "toolchain",
        "install",
        toolchain,
        "--profile",
        "minimal",
        "--component",
        "rust-src",
        "--target",
        "wasm32-unknown-unknown",
    ]))
}

fn wasm_bindgen_cli() -> Result<(), String> {
    let locked = locked_wasm_bindgen_version()?;
    if installed_wasm_bindgen_version().as_deref() == Some(locked.as_str()) {
        return Ok(());
    }
    eprintln!("xtask: installing wasm-bindgen-cli {locked} to match Cargo.lock (about 3 minutes, once)");
    run(Command::new("cargo").args(["install", "--force", "wasm-bindgen-cli", "--version", &locked]))
}

fn apt_packages() -> Result<(), String> {
    let missing: Vec<&str> = APT_PACKAGES
        .into_iter()
        .filter(|p| {
            let status = output_of("dpkg-query", &["-W", "-f=${Status}", p]).unwrap_or_default();
            !status.contains("install ok installed")
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    run(Command::new("apt-get").arg("update").arg("-q"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// `npm ci` unless every package in `package-lock.json` is already in `node_modules` at
/// the locked version.
fn npm_packages() -> Result<(), String> {
    let root = workspace_root();
    let lock_path = root.join("package-lock.json");
    let lock = std::fs::read_to_string(&lock_path)
        .map_err(|e| format!("cannot read {}: {e}", lock_path.display()))?;
    let lock: serde_json::Value =
        serde_json::from_str(&lock).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let packages = lock["packages"].as_object().cloned().unwrap_or_default();
    let up_to_date = packages.iter().filter(|(path, _)| !path.is_empty()).all(|(path, entry)| {
        let manifest = root.join(path).join("package.json");
        let installed = std::fs::read_to_string(manifest)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|m| m["version"].as_str().map(str::to_string));
        installed.is_some() && installed.as_deref() == entry["version"].as_str()
    });
    if up_to_date {
        return Ok(());
    }
    run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&root))
}

/// The Python packages the safetensors interoperability test reads our export with.
const PYTHON_PACKAGES: [&str; 2] = ["safetensors", "numpy"];

fn python_packages() -> Result<(), String> {
    let probe = "import safetensors.numpy, numpy";
    if output_of("python3", &["-c", probe]).is_some() {
        return Ok(());
    }
    run(Command::new("python3")
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(PYTHON_PACKAGES))
}
