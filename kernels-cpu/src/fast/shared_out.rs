//! A raw output pointer that parallel pieces share, each writing its own disjoint part
//! (rows, or one head's columns), where safe slices cannot express the split.

/// An output buffer shared by the pieces, each writing a disjoint part of it.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub *mut f32);
// SAFETY: pieces write disjoint elements (their own head's columns), and the buffer
// outlives the parallel call that uses it.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The same buffer from element `offset` on.
    ///
    /// # Safety
    /// `offset` lies inside the buffer.
    #[inline(always)]
    pub(crate) unsafe fn offset(self, offset: usize) -> SharedOut {
        SharedOut(self.0.add(offset))
    }

    /// # Safety
    /// `start + len` lies inside the buffer and no other piece touches that range meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn slice<'a>(self, start: usize, len: usize) -> &'a mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(start), len)
    }
}
