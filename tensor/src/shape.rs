use std::fmt;
use std::hash::{Hash, Hasher};

/// A row-major shape. The last dimension is contiguous.
///
/// Held inline, not on the heap: every op makes a shape for its output, and a steady-state
/// training step allocates nothing (`optim/tests/allocations.rs`).
#[derive(Clone)]
pub struct Shape {
    dims: [usize; Shape::MAX_RANK],
    rank: u8,
}

impl Shape {
    /// The most dimensions a shape holds. The model's tensors have at most three
    /// (`[batch, time, channels]`); the rest is headroom.
    pub const MAX_RANK: usize = 6;

    /// A shape with these dimensions, outermost first.
    ///
    /// # Panics
    /// With more than [`Shape::MAX_RANK`] dimensions.
    pub fn new(dims: &[usize]) -> Self {
        assert!(
            dims.len() <= Self::MAX_RANK,
            "shape {dims:?}: rank {} exceeds the maximum of {}",
            dims.len(),
            Self::MAX_RANK
        );
        let mut inline = [0; Self::MAX_RANK];
        inline[..dims.len()].copy_from_slice(dims);
        Shape { dims: inline, rank: dims.len() as u8 }
    }

    /// The dimensions, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The number of elements (the product of the dimensions).
    pub fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// The size of the last dimension (1 for a scalar).
    pub fn last(&self) -> usize {
        self.dims().last().copied().unwrap_or(1)
    }

    /// Everything but the last dimension, flattened: the number of rows a row-wise op sees.
    pub fn rows(&self) -> usize {
        self.numel() / self.last().max(1)
    }

    /// This shape with its last dimension replaced by `last`.
    pub(crate) fn with_last(&self, last: usize) -> Self {
        let mut shape = self.clone();
        match shape.rank() {
            0 => shape = Shape::new(&[last]),
            rank => shape.dims[rank - 1] = last,
        }
        shape
    }
}

impl PartialEq for Shape {
    fn eq(&self, other: &Self) -> bool {
        self.dims() == other.dims()
    }
}

impl Eq for Shape {}

impl Hash for Shape {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dims().hash(state)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Self {
        Shape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Self {
        Shape::new(&d)
    }
}

impl From<&Vec<usize>> for Shape {
    fn from(d: &Vec<usize>) -> Self {
        Shape::new(d)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Self {
        Shape::new(&d)
    }
}

impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}
