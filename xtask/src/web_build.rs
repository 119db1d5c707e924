//! `cargo xtask build-web`: the page and the five wasm builds of the worker, in `dist/`.
//!
//! Layout of `dist/` (everything the page needs; it requests nothing from another origin):
//! ```text
//! index.html, *.js, style.css, ...   copied from www/
//! tinygpt-web/index.js, worker-client.js   the npm package's client (npm/), which app.js imports
//! pkg/scalar/tinygpt_worker{.js,_bg.wasm}   wasm-bindgen --target web, no SIMD
//! pkg/simd/tinygpt_worker{.js,_bg.wasm}     the same with -C target-feature=+simd128
//! pkg/relaxed-simd/...                      the same with +simd128,+relaxed-simd (relaxed_madd)
//! pkg/simd-threads/...                      SIMD + threads (wasm-bindgen-rayon, shared memory)
//! pkg/relaxed-simd-threads/...              the same with +relaxed-simd (relaxed_madd)
//! vendor/uplot/uPlot.esm.js, uPlot.min.css  from node_modules (npm ci)
//! data/tinyshakespeare.txt                  the default dataset
//! assets/base-medium-shakespeare.safetensors  the bundled LoRA base (from cli/assets)
//! build-info.json                           variants and the wasm-bindgen version
//! ```
//! Each variant builds into its own target dir (`target/wasm-<variant>`), because they
//! differ in RUSTFLAGS and would otherwise rebuild each other from scratch every time.
//! The threads builds need the pinned nightly [`THREADS_TOOLCHAIN`] (std rebuilt with
//! atomics: `-Z build-std`), installed by `setup::web_build_tools`; the page loads one only
//! when the page is cross-origin isolated (TOOLCHAIN.md, "WASM threads"); the relaxed
//! builds only when the browser validates relaxed SIMD (www/simd.js).
//! No wasm-opt: Debian's (binaryen 108) breaks wasm-bindgen 0.2.130 output (TOOLCHAIN.md).
//! Missing build tools (wasm target, wasm-bindgen-cli at Cargo.lock's version, npm
//! packages) are installed first, see `setup::web_build_tools`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{
    copy_file, copy_tree, installed_wasm_bindgen_version, locked_wasm_bindgen_version, parse_options, run,
    workspace_root,
};
use crate::{npm_pack, setup};

/// A wasm build of the worker: its folder under `dist/pkg/`, the extra rustc flags, and for
/// the threads build the toolchain, crate features and cargo flags it needs.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    pub name: &'static str,
    pub rustflags: &'static str,
    /// A rustup toolchain other than the default.
    pub toolchain: Option<&'static str>,
    pub features: &'static str,
    pub cargo_args: &'static [&'static str],
}

/// The nightly the threads build is pinned to (the one wasm-bindgen-rayon documents).
pub const THREADS_TOOLCHAIN: &str = "nightly-2025-11-15";

/// Shared memory (at most 4 GiB, the wasm32 address space), imported so the worker threads
/// share it, and the thread-local-storage exports wasm-bindgen's thread start-up calls.
macro_rules! threads_rustflags {
    ($features:literal) => {
        concat!(
            "-C target-feature=+simd128,",
            $features,
            "+atomics,+bulk-memory,+mutable-globals \
    -C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=--import-memory \
    -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
    -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"
        )
    };
}

const PLAIN: Variant = Variant { name: "", rustflags: "", toolchain: None, features: "", cargo_args: &[] };

const THREADS: Variant = Variant {
    name: "simd-threads",
    rustflags: threads_rustflags!(""),
    toolchain: Some(THREADS_TOOLCHAIN),
    features: "threads",
    cargo_args: &["-Z", "build-std=panic_abort,std"],
};

// The relaxed builds: relaxed SIMD's `f32x4.relaxed_madd` in the kernels (kernels-cpu's
// `simd128-relaxed` variant).
pub const VARIANTS: [Variant; 5] = [
    Variant { name: "scalar", ..PLAIN },
    Variant { name: "simd", rustflags: "-C target-feature=+simd128", ..PLAIN },
    Variant { name: "relaxed-simd", rustflags: "-C target-feature=+simd128,+relaxed-simd", ..PLAIN },
    THREADS,
    Variant { name: "relaxed-simd-threads", rustflags: threads_rustflags!("+relaxed-simd,"), ..THREADS },
];

/// web-sys hides its WebGPU and some storage bindings behind this cfg; RUSTFLAGS replaces
/// the config file's flags, so it is repeated here.
const BASE_RUSTFLAGS: &str = "--cfg=web_sys_unstable_apis";

pub fn dist_dir() -> PathBuf {
    workspace_root().join("dist")
}

pub fn run_task(args: &[String]) -> Result<(), String> {
    parse_options(args, &[])?;
    build()
}

/// Builds everything into `dist/`.
pub fn build() -> Result<(), String> {
    let root = workspace_root();
    setup::web_build_tools()?;
    check_wasm_bindgen()?;
    let uplot = root.join("node_modules/uplot/dist");
    if !uplot.join("uPlot.esm.js").is_file() {
        return Err(format!(
            "{} is missing: run `npm ci` in {} (or `cargo xtask setup`)",
            uplot.join("uPlot.esm.js").display(),
            root.display()
        ));
    }
    let dist = dist_dir();
    if dist.exists() {
        std::fs::remove_dir_all(&dist).map_err(|e| format!("cannot clear {}: {e}", dist.display()))?;
    }
    for variant in VARIANTS {
        let wasm = cargo_build(&root, variant)?;
        run(Command::new("wasm-bindgen")
            .args(["--target", "web", "--no-typescript", "--out-dir"])
            .arg(dist.join("pkg").join(variant.name))
            .arg(&wasm))?;
    }
    copy_tree(&root.join("www"), &dist, &["tests", "node_modules"])?;
    for file in npm_pack::CLIENT_FILES {
        copy_file(&root.join("npm").join(file), &dist.join("tinygpt-web").join(file))?;
    }
    copy_file(&uplot.join("uPlot.esm.js"), &dist.join("vendor/uplot/uPlot.esm.js"))?;
    copy_file(&uplot.join("uPlot.min.css"), &dist.join("vendor/uplot/uPlot.min.css"))?;
    copy_file(&root.join("data/tinyshakespeare.txt"), &dist.join("data/tinyshakespeare.txt"))?;
    // The bundled LoRA base (the CLI's `--base builtin`), fetched by worker.js for `loadBase`.
    copy_file(
        &root.join("cli/assets/base-medium-shakespeare.safetensors"),
        &dist.join("assets/base-medium-shakespeare.safetensors"),
    )?;
    let info = serde_json::json!({
        "variants": VARIANTS.iter().map(|v| v.name).collect::<Vec<_>>(),
        "wasmBindgen": locked_wasm_bindgen_version()?,
    });
    std::fs::write(dist.join("build-info.json"), info.to_string()).map_err(|e| e.to_string())?;
    eprintln!("xtask: web build ready in {}", dist.display());
    Ok(())
}

/// Release build of the worker cdylib for one variant; returns the `.wasm` path.
fn cargo_build(root: &Path, variant: Variant) -> Result<PathBuf, String> {
    let target_dir = root.join("target").join(format!("wasm-{}", variant.name));
    let rustflags =
        format!("{BASE_RUSTFLAGS} {}", variant.rustflags).split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cargo = match variant.toolchain {
        // `rustup run` rather than `cargo +toolchain`: CARGO may name a cargo binary, not
        // rustup's proxy.
        Some(toolchain) => {
            let mut c = Command::new("rustup");
            c.args(["run", toolchain, "cargo"]);
            c.env_remove("RUSTUP_TOOLCHAIN").env_remove("RUSTC").env_remove("RUSTDOC");
            c
        }
        None => Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())),
    };
    cargo
        .current_dir(root)
        .args(["build", "--release", "--target", "wasm32-unknown-unknown", "-p", "tinygpt-worker", "--lib"])
        .args(variant.cargo_args);
    if !variant.features.is_empty() {
        cargo.args(["--features", variant.features]);
    }
    run(cargo
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTFLAGS", rustflags)
        // Line tables (the workspace's release setting) only bloat the download.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env_remove("CARGO_ENCODED_RUSTFLAGS"))?;
    Ok(target_dir.join("wasm32-unknown-unknown/release/tinygpt_worker.wasm"))
}

/// The CLI's schema must match the `wasm-bindgen` crate exactly, or the bindings it writes
/// do not fit the module.
pub fn check_wasm_bindgen() -> Result<(), String> {
    let locked = locked_wasm_bindgen_version()?;
    let install = format!(
        "install it with `cargo install wasm-bindgen-cli --version {locked}` (without --locked) \
         or run `cargo xtask setup`"
    );
    match installed_wasm_bindgen_version() {
        Some(v) if v == locked => Ok(()),
        Some(v) => {
            Err(format!("wasm-bindgen CLI is {v}, but Cargo.lock pins wasm-bindgen {locked}: {install}"))
        }
        None => Err(format!("wasm-bindgen CLI not found on PATH: {install}")),
    }
}
