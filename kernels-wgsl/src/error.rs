use thiserror::Error;

/// Why a [`crate::WgpuBackend`] could not be created.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum WgpuBackendError {
    #[error(
        "no GPU adapter found (wgpu: {reason}); install a Vulkan driver (for a software one: \
         apt-get install mesa-vulkan-drivers) or use --backend cpu"
    )]
    NoAdapter { reason: String },
    #[error("the GPU adapter {adapter} refused to open a device: {reason}")]
    RequestDevice { adapter: String, reason: String },
}
