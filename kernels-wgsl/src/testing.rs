//! For test binaries (here and in other crates' tests): one shared backend on whatever
//! adapter the machine has, with Mesa's lavapipe chosen when nothing else is configured.
//!
//! CI installs lavapipe (`mesa-vulkan-drivers`), so a missing adapter is a failure there,
//! not a skip: [`shared_backend`] panics with what to install, unless
//! `TINYGPT_ALLOW_NO_GPU=1` is set, in which case it returns `None` and the caller skips.

use std::sync::OnceLock;

use tinygpt_tensor::Precision;

use crate::WgpuBackend;

/// Mesa's software Vulkan driver, where Debian's `mesa-vulkan-drivers` puts it.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// Points the Vulkan loader at lavapipe when neither `VK_ICD_FILENAMES` nor
/// `VK_DRIVER_FILES` is set and lavapipe is installed (and gives the loader an
/// `XDG_RUNTIME_DIR`). Call before the first backend is created.
pub fn prefer_lavapipe() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let chosen =
            std::env::var_os("VK_ICD_FILENAMES").is_some() || std::env::var_os("VK_DRIVER_FILES").is_some();
        if !chosen && std::path::Path::new(LAVAPIPE_ICD).exists() {
            std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
        }
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
    });
}

/// Whether `TINYGPT_ALLOW_NO_GPU=1` lets tests pass without an adapter.
pub fn no_gpu_allowed() -> bool {
    std::env::var("TINYGPT_ALLOW_NO_GPU").is_ok_and(|v| v == "1")
}

/// A backend of its own (for tests that count what the device creates), or `None` as
/// for [`shared_backend`].
pub fn own_backend() -> Option<WgpuBackend> {
    prefer_lavapipe();
    match WgpuBackend::new() {
        Ok(backend) => Some(backend),
        Err(e) => no_adapter(&e.to_string()),
    }
}

fn no_adapter(e: &str) -> Option<WgpuBackend> {
    if no_gpu_allowed() {
        eprintln!("skipped: {e} (TINYGPT_ALLOW_NO_GPU=1)");
        return None;
    }
    panic!(
        "{e}\nThe wgpu tests need a Vulkan adapter: `apt-get install mesa-vulkan-drivers` gives the \
         software one (lavapipe), which these tests pick by themselves. Set TINYGPT_ALLOW_NO_GPU=1 \
         to skip them on a machine without one."
    )
}

/// One backend per test process (pipelines compile once), or `None` when there is no
/// adapter and `TINYGPT_ALLOW_NO_GPU=1`; panics when there is none otherwise.
pub fn shared_backend() -> Option<WgpuBackend> {
    shared_backend_with(Precision::F32)
}

/// [`shared_backend`] for each precision: one device per precision and test process,
/// opened with [`WgpuBackend::new_with_precision`] (so `Mixed` may have fallen back to f32:
/// see [`WgpuBackend::matmul_precision`]).
pub fn shared_backend_with(precision: Precision) -> Option<WgpuBackend> {
    static SHARED: [OnceLock<Result<WgpuBackend, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = Precision::ALL.iter().position(|&p| p == precision).expect("every precision has a slot");
    let made = SHARED[slot].get_or_init(|| {
        prefer_lavapipe();
        WgpuBackend::new_with_precision(precision).map_err(|e| e.to_string())
    });
    match made {
        Ok(backend) => Some(backend.clone()),
        Err(e) => no_adapter(e),
    }
}
