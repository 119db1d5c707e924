//! The memory budget training is checked against before anything is allocated: physical
//! memory, or a smaller cgroup limit (a container's), whichever is less.

use tinygpt_model::{check_training_memory, ModelConfig};

use crate::error::CliError;

/// Refuses a model and batch whose training would not fit this machine's memory.
pub fn check_fits(model: &ModelConfig, batch: usize) -> Result<(), CliError> {
    if let Some((available, what)) = available() {
        check_training_memory(model, batch, available, what)?;
    }
    Ok(())
}

/// Bytes training may use and what they are, when the platform tells.
fn available() -> Option<(u64, &'static str)> {
    let physical = physical_memory();
    let cgroup = cgroup_limit();
    match (physical, cgroup) {
        (Some(p), Some(c)) if c < p => Some((c, "this container's memory limit")),
        (Some(p), _) => Some((p, "the physical memory")),
        (None, Some(c)) => Some((c, "this container's memory limit")),
        (None, None) => None,
    }
}

#[cfg(unix)]
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf reads system constants; no pointers.
    let (pages, page_size) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages > 0 && page_size > 0).then(|| pages as u64 * page_size as u64)
}

#[cfg(not(unix))]
fn physical_memory() -> Option<u64> {
    None
}

/// cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes` ("max" or a huge number: none).
fn cgroup_limit() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| t.trim().parse::<u64>().ok())
        .find(|&limit| limit < 1 << 60)
}
