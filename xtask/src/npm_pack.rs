//! `cargo xtask pack-npm [--no-build]`: the npm package `tinygpt-web` (npm/README.md),
//! assembled from `npm/` and `dist/` and packed by `npm pack` into
//! `target/npm/tinygpt-web-<version>.tgz`.
//!
//! Layout of the package (staged in `target/npm/package/`):
//! ```text
//! package.json, README.md                     npm/
//! index.js, index.d.ts, worker-client.js      npm/ (the client; build-web copies it to dist/tinygpt-web/ for the page)
//! protocol.d.ts                               www/protocol.d.ts, as it is when packing
//! worker.js, simd.js, lib/builds.js           dist/ (the worker script, from www/)
//! pkg/<build>/tinygpt_worker{.js,_bg.wasm}    dist/pkg/ (the five wasm builds; each carries WebGPU)
//! assets/base-medium-shakespeare.safetensors  dist/assets/ (LoRA's bundled base)
//! ```
//! The client finds the worker beside itself (`./worker.js`), and the worker its builds
//! and assets beside itself, as in `dist/`.
//!
//! The example page (`examples/web-page/`) is installed from the packed tarball, never from
//! the sources: [`install_example`] copies it to `target/npm/example/`, points its
//! dependency at the tarball and runs `npm install` there; `test-web` serves that folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::util::{copy_file, copy_tree, parse_options, run, workspace_root};
use crate::web_build;

/// The client's files in `npm/`, which the page in `www/` imports too.
pub const CLIENT_FILES: [&str; 3] = ["index.js", "index.d.ts", "worker-client.js"];

/// The worker script's files in `dist/` (worker.js and the modules it imports).
const WORKER_FILES: [&str; 3] = ["worker.js", "simd.js", "lib/builds.js"];

pub fn run_task(args: &[String]) -> Result<(), String> {
    let opts = parse_options(args, &["--no-build"])?;
    if !opts.iter().any(|(n, _)| *n == "--no-build") {
        web_build::build()?;
    }
    pack()?;
    Ok(())
}

/// Where the tarball and the example's install go.
pub fn out_dir() -> PathBuf {
    workspace_root().join("target/npm")
}

/// The tarball `npm pack` writes for npm/package.json's version.
pub fn tarball() -> Result<PathBuf, String> {
    let manifest = workspace_root().join("npm/package.json");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let (Some(name), Some(version)) = (json["name"].as_str(), json["version"].as_str()) else {
        return Err(format!("{} needs a name and a version", manifest.display()));
    };
    Ok(out_dir().join(format!("{name}-{version}.tgz")))
}

/// Stages the package from `npm/`, `www/protocol.d.ts` and `dist/` (built already) and
/// packs it; returns the tarball.
pub fn pack() -> Result<PathBuf, String> {
    let started = Instant::now();
    let (root, dist) = (workspace_root(), web_build::dist_dir());
    if !dist.join("build-info.json").is_file() {
        return Err(format!("{} holds no web build: run `cargo xtask build-web` first", dist.display()));
    }
    let stage = out_dir().join("package");
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| format!("cannot clear {}: {e}", stage.display()))?;
    }
    for file in ["package.json", "README.md"].iter().chain(&CLIENT_FILES) {
        copy_file(&root.join("npm").join(file), &stage.join(file))?;
    }
    copy_file(&root.join("www/protocol.d.ts"), &stage.join("protocol.d.ts"))?;
    for file in WORKER_FILES {
        copy_file(&dist.join(file), &stage.join(file))?;
    }
    copy_tree(&dist.join("pkg"), &stage.join("pkg"), &[])?;
    copy_tree(&dist.join("assets"), &stage.join("assets"), &[])?;
    let tarball = tarball()?;
    let _ = std::fs::remove_file(&tarball);
    run(Command::new("npm")
        .current_dir(&stage)
        .args(["pack", "--silent", "--pack-destination"])
        .arg(out_dir()))?;
    if !tarball.is_file() {
        return Err(format!("npm pack wrote no {}", tarball.display()));
    }
    let bytes = std::fs::metadata(&tarball).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "xtask: packed {} ({:.1} MB) in {:.1} s",
        tarball.display(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(tarball)
}

/// Packs unless a tarball newer than everything it is made of is there already.
pub fn pack_if_stale() -> Result<PathBuf, String> {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let (root, dist) = (workspace_root(), web_build::dist_dir());
    let mut inputs = vec![dist.join("build-info.json"), root.join("www/protocol.d.ts")];
    inputs.extend(WORKER_FILES.iter().map(|f| dist.join(f)));
    inputs
        .extend(["package.json", "README.md"].iter().chain(&CLIENT_FILES).map(|f| root.join("npm").join(f)));
    let tarball = tarball()?;
    match modified(&tarball) {
        Some(packed) if inputs.iter().all(|i| modified(i).is_some_and(|m| m <= packed)) => Ok(tarball),
        _ => pack(),
    }
}

/// Installs the example page (`examples/web-page/`) from `tarball` into
/// `target/npm/example/`, a folder outside the sources; returns it.
pub fn install_example(tarball: &Path) -> Result<PathBuf, String> {
    let site = out_dir().join("example");
    if site.exists() {
        std::fs::remove_dir_all(&site).map_err(|e| format!("cannot clear {}: {e}", site.display()))?;
    }
    copy_tree(&workspace_root().join("examples/web-page"), &site, &["node_modules", "package-lock.json"])?;
    // The checked-in dependency is a path relative to examples/web-page/; here it is this tarball.
    let manifest = site.join("package.json");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let mut json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    json["dependencies"]["tinygpt-web"] = format!("file:{}", tarball.display()).into();
    std::fs::write(&manifest, json.to_string())
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    // The package has no dependencies, so nothing comes from the registry.
    run(Command::new("npm").current_dir(&site).args([
        "install",
        "--offline",
        "--no-audit",
        "--no-fund",
        "--no-package-lock",
        "--silent",
    ]))?;
    Ok(site)
}
