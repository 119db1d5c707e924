use thiserror::Error;

/// Why a [`crate::WgpuBackend`] could not be created.
#[derive(Debug, Error, Clone, PartialEq)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum WgpuBackendError {
    /// No adapter is available.
    #[error(
        "no GPU adapter found (wgpu: {reason}); install a Vulkan driver (for a software one: \
         apt-get install mesa-vulkan-drivers) or use --backend cpu"
    )]
    NoAdapter { reason: String },
    /// The adapter refused a device.
    #[error("the GPU adapter {adapter} refused to open a device: {reason}")]
    RequestDevice { adapter: String, reason: String },
}
