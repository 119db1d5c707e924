//! Every op's derivative, one `match` arm each. Shapes in comments use the forward names.

use tinygpt_tensor::{Backend, Tensor};

use crate::gradients::Gradients;
use crate::tape::{Node, Op, Tape, Var};

impl<B: Backend> Tape<B> {
    /// Gradients of `loss` (any shape; seeded with ones) with respect to every recorded var
    /// that requires one. The tape can be dropped afterwards to free the activations.
    pub fn backward(&self, loss: &Var<B>) -> Gradients<B> {
        let ones = vec![1.0; loss.value.numel()];
        let seed = Tensor::from_slice(loss.value.backend(), &ones, loss.value.shape().clone());
        self.backward_from(loss, seed)
    }

    /// Backward with an explicit output gradient `seed` (same shape as `output`).
    pub fn backward_from(&self, output: &Var<B>, seed: Tensor<B>) -> Gradients<B> {
        let mut grads = Gradients::new();
        self.backward_into(output, seed, &mut grads);
        grads
    }

    /// [`Tape::backward_from`] into `grads`, whose earlier contents it replaces: a training
    /// loop that keeps one `Gradients` (and one tape, [`Tape::reset`]) allocates nothing here.
    pub fn backward_into(&self, output: &Var<B>, seed: Tensor<B>, grads: &mut Gradients<B>) {
        assert!(self.is_recording(), "backward on a no_grad tape");
        assert_eq!(seed.shape(), output.value.shape(), "backward seed shape");
        let nodes = self.nodes.borrow();
        grads.reset(nodes.len());
        if !output.requires_grad {
            return;
        }
        grads.set(output.id, seed);
        for id in (0..=output.id).rev() {
            let node = &nodes[id];
            if !node.requires_grad {
                continue;
            }
            let Some(dout) = grads.peek(id).cloned() else { continue };
            for (input, grad) in input_grads(&nodes, node, &dout, grads).into_iter().flatten() {
                grads.accumulate(input, grad);
            }
            if !matches!(node.op, Op::Leaf) {
                grads.take_prior(id);
            }
        }
    }
}

/// The most inputs an op sends gradients to (a linear's input, weight, bias and the stream
/// it was added onto; attention's q, k and v; a LayerNorm's x, gamma and beta).
const MAX_INPUTS: usize = 4;

/// What one op sends back: up to [`MAX_INPUTS`] (input, gradient) pairs, held inline.
struct Sends<B: Backend>([Option<(usize, Tensor<B>)>; MAX_INPUTS]);

impl<B: Backend> Sends<B> {
    fn push(&mut self, pair: (usize, Tensor<B>)) {
        let slot = self.0.iter_mut().find(|slot| slot.is_none()).expect("an op has at most four inputs");
        *slot = Some(pair);
    }
}

impl<B: Backend> IntoIterator for Sends<B> {
    type Item = Option<(usize, Tensor<B>)>;
    type IntoIter = std::array::IntoIter<Self::Item, MAX_INPUTS>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// The gradients `node` sends to those of its inputs that require one. Where an op can add
/// its part onto the gradient an input has already gathered (a linear's input gradient, a
/// LayerNorm's `dx`), it takes that from `grads` and returns the sum, which
/// [`Gradients::accumulate`] then finds nothing to add to: the same sum, one pass fewer.
fn input_grads<B: Backend>(
    nodes: &[Node<B>],
    node: &Node<B>,
    dout: &Tensor<B>,
    grads: &mut Gradients<B>,
) -> Sends<B> {
    let wants = |id: usize| nodes[id].requires_grad;
    let value = |id: usize| &nodes[id].value;
    let mut out = Sends(std::array::from_fn(|_| None));
    match &node.op {
        Op::Leaf => {}
        Op::Add { a, b } => {
            for id in [*a, *b] {
                if wants(id) {
                    out.push((id, dout.clone()));
                }
            }
        }
        Op::Scale { x, alpha } => {
            if wants(*x) {
                out.push((*x, dout.scale(*alpha)));
            }
        }
        Op::Reshape { x } => {
            if wants(*x) {
                out.push((*x, dout.reshape(value(*x).shape().clone())));
            }
        }
        Op::Rows { x, start } => {
            if wants(*x) {
                let x_val = value(*x);
                let dx = Tensor::zeros(x_val.backend(), x_val.shape().clone());
                dout.copy_into(0, &dx, start * x_val.shape().last(), dout.numel());
                out.push((*x, dx));
            }
        }
        Op::Matmul { a, b, bias, onto, trans_a, trans_b } => {
            // C[m,n] = [onto +] op(A)[m,k] · op(B)[k,n] + bias; A may carry leading dims (folded
            // into m). `onto` gets C's gradient as it is, as an `add`'s input would.
            if let Some(onto) = onto.filter(|&onto| wants(onto)) {
                out.push((onto, dout.clone()));
            }
            let (ta, tb) = (*trans_a, *trans_b);
            let a_val = value(*a);
            let a2 =
                if ta { a_val.clone() } else { a_val.reshape([a_val.shape().rows(), a_val.shape().last()]) };
            let dc = dout.reshape([dout.shape().rows(), dout.shape().last()]);
            let b_val = value(*b);
            if wants(*a) {
                // dA = dC · op(B)ᵀ, or its transpose when A is stored transposed (onto what
                // A's gradient holds already, if anything).
                let (lhs, rhs, t1, t2) = if ta { (b_val, &dc, tb, true) } else { (&dc, b_val, false, !tb) };
                let da = match grads.take_prior(*a) {
                    Some(prior) => lhs.matmul_onto(rhs, None, t1, t2, &prior),
                    None => lhs.matmul(rhs, None, t1, t2),
                };
                out.push((*a, da.reshape(a_val.shape().clone())));
            }
            let bias = bias.filter(|&bias| wants(bias));
            match (wants(*b), bias) {
                // A linear's weight (B stored transposed): dB = dCᵀ · op(A), and the bias
                // gradient (dC's column sums) from the same call.
                (true, Some(bias)) if tb => {
                    let (db, dbias) = dc.matmul_sum_rows(&a2, ta);
                    out.push((*b, db));
                    out.push((bias, dbias));
                }
                (wants_b, bias) => {
                    if wants_b {
                        // dB = op(A)ᵀ · dC, or its transpose when B is stored transposed (onto
                        // what B's gradient holds already: the tied head's earlier row chunks).
                        let (lhs, rhs, t1, t2) =
                            if tb { (&dc, &a2, true, ta) } else { (&a2, &dc, !ta, false) };
                        let db = match grads.take_prior(*b) {
                            Some(prior) => lhs.matmul_onto(rhs, None, t1, t2, &prior),
                            None => lhs.matmul(rhs, None, t1, t2),
                        };
                        out.push((*b, db));
                    }
                    if let Some(bias) = bias {
                        out.push((bias, dc.sum_rows()));
                    }
                }
            }
        }
        Op::Embedding { table, ids } => {
            if wants(*table) {
                let rows = value(*table).dims()[0];
                out.push((*table, dout.embedding_backward(ids, rows)));
            }
        }
        Op::LayerNorm { x, gamma, beta, saved } => {
            let (x_val, gamma_val) = (value(*x), value(*gamma));
            let prior = if wants(*x) { grads.take_prior(*x) } else { None };
            let (dx, dgamma, dbeta) = match prior {
                Some(prior) => dout.layer_norm_backward_onto(x_val, gamma_val, saved, &prior),
                None => dout.layer_norm_backward(x_val, gamma_val, saved),
            };
            for (id, g) in [(*x, dx), (*gamma, dgamma), (*beta, dbeta)] {
                if wants(id) {
                    out.push((id, g));
                }
            }
        }
        Op::Gelu { x } => {
            if wants(*x) {
                out.push((*x, dout.gelu_backward(value(*x))));
            }
        }
        Op::Attention { q, k, v, saved, heads, dropout } => {
            let (dq, dk, dv) =
                dout.attention_backward_saved(value(*q), value(*k), value(*v), saved, *heads, *dropout);
            for (id, g) in [(*q, dq), (*k, dk), (*v, dv)] {
                if wants(id) {
                    out.push((id, g));
                }
            }
        }
        Op::Dropout { x, mask } => {
            // y = x · factor: the same mask, redrawn, scales the gradient.
            if wants(*x) {
                out.push((*x, dout.dropout(mask)));
            }
        }
        Op::DropoutAdd { residual, x, mask } => {
            if wants(*residual) {
                out.push((*residual, dout.clone()));
            }
            if wants(*x) {
                out.push((*x, dout.dropout(mask)));
            }
        }
        Op::CrossEntropy { logits, targets, saved } => {
            if wants(*logits) {
                let dlogits = value(*logits).cross_entropy_backward_saved(targets, saved.as_ref(), dout);
                out.push((*logits, dlogits));
            }
        }
    }
    out
}
