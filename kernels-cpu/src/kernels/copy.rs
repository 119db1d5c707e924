//! A plain copy between two buffers.
//!
//! copy: src [len] -> dst [len]   (bit for bit; the caller slices both at their offsets)
//!
//! One thread: a copy moves memory, it does no arithmetic to spread, and at the sizes the
//! optimizer copies (a parameter group, a few million values) the memory bus is the limit.

pub(crate) fn copy(dst: &mut [f32], src: &[f32]) {
    dst.copy_from_slice(src);
}
