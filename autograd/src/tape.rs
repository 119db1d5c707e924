use std::cell::RefCell;

use tinygpt_tensor::{Backend, DropoutMask, Indices, LayerNormOut, Tensor};

/// A value produced on a [`Tape`]: its tensor and its position in the record.
#[derive(Clone, Debug)]
pub struct Var<B: Backend> {
    pub(crate) id: usize,
    pub(crate) value: Tensor<B>,
    pub(crate) requires_grad: bool,
}

impl<B: Backend> Var<B> {
    /// The forward value.
    pub fn value(&self) -> &Tensor<B> {
        &self.value
    }

    /// Whether a gradient is computed for this variable.
    pub fn requires_grad(&self) -> bool {
        self.requires_grad
    }

    /// Its position on the tape.
    pub fn id(&self) -> usize {
        self.id
    }
}

/// What an op saw in the forward pass, enough to compute its derivative.
#[derive(Debug)]
pub(crate) enum Op<B: Backend> {
    Leaf,
    Add {
        a: usize,
        b: usize,
    },
    Scale {
        x: usize,
        alpha: f32,
    },
    Reshape {
        x: usize,
    },
    /// Rows `start ..` of `x` (as many as the value has).
    Rows {
        x: usize,
        start: usize,
    },
    Matmul {
        a: usize,
        b: usize,
        bias: Option<usize>,
        /// What the product was added to (a residual stream), which gets the output's gradient.
        onto: Option<usize>,
        trans_a: bool,
        trans_b: bool,
    },
    Embedding {
        table: usize,
        ids: Indices<B>,
    },
    LayerNorm {
        x: usize,
        gamma: usize,
        beta: usize,
        saved: LayerNormOut<B::Storage>,
    },
    Gelu {
        x: usize,
    },
    /// `saved`: what the backend keeps for the backward pass (see `AttentionKeep::Backward`).
    Attention {
        q: usize,
        k: usize,
        v: usize,
        saved: B::Storage,
        heads: usize,
        dropout: Option<DropoutMask>,
    },
    Dropout {
        x: usize,
        mask: DropoutMask,
    },
    DropoutAdd {
        residual: usize,
        x: usize,
        mask: DropoutMask,
    },
    /// `saved`: what the backend keeps for the backward pass (see `CrossEntropyOut`).
    CrossEntropy {
        logits: usize,
        targets: Indices<B>,
        saved: Option<B::Storage>,
    },
}

#[derive(Debug)]
pub(crate) struct Node<B: Backend> {
    pub(crate) op: Op<B>,
    pub(crate) value: Tensor<B>,
    pub(crate) requires_grad: bool,
}

/// The record of a forward pass. One tape serves one forward and one backward.
#[derive(Debug)]
pub struct Tape<B: Backend> {
    pub(crate) nodes: RefCell<Vec<Node<B>>>,
    recording: bool,
}

impl<B: Backend> Default for Tape<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: Backend> Tape<B> {
    /// A tape that records, for training.
    pub fn new() -> Self {
        Tape { nodes: RefCell::new(Vec::new()), recording: true }
    }

    /// A tape that records nothing: ops only compute values (inference, evaluation).
    pub fn no_grad() -> Self {
        Tape { nodes: RefCell::new(Vec::new()), recording: false }
    }

    /// Forgets every record (and the activations they hold) but keeps the list's
    /// allocation, so a training loop can record each step on one tape. Vars recorded before
    /// belong to the old records: using one after a reset is a bug.
    pub fn reset(&self) {
        self.nodes.borrow_mut().clear();
    }

    /// Whether ops are recorded for a backward pass (false in no-grad mode).
    pub fn is_recording(&self) -> bool {
        self.recording
    }

    /// Puts a tensor on the tape. `requires_grad = false` freezes it.
    pub fn leaf(&self, value: &Tensor<B>, requires_grad: bool) -> Var<B> {
        self.push(Op::Leaf, value.clone(), requires_grad)
    }

    /// Records an op whose output requires a gradient when any input does.
    pub(crate) fn record(&self, op: Op<B>, value: Tensor<B>, inputs: &[&Var<B>]) -> Var<B> {
        let requires_grad = inputs.iter().any(|v| v.requires_grad);
        self.push(op, value, requires_grad)
    }

    fn push(&self, op: Op<B>, value: Tensor<B>, requires_grad: bool) -> Var<B> {
        let requires_grad = requires_grad && self.recording;
        if !self.recording {
            return Var { id: usize::MAX, value, requires_grad };
        }
        let mut nodes = self.nodes.borrow_mut();
        let id = nodes.len();
        nodes.push(Node { op, value: value.clone(), requires_grad });
        Var { id, value, requires_grad }
    }
}
