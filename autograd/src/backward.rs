//! Every op's derivative, one `match` arm each. Shapes in comments use the forward names.

use std::collections::HashMap;

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
        assert!(self.is_recording(), "backward on a no_grad tape");
        assert_eq!(seed.shape(), output.value.shape(), "backward seed shape");
        let nodes = self.nodes.borrow();
        let mut grads = Gradients { grads: HashMap::new() };
        if !output.requires_grad {
            return grads;
        }
        grads.grads.insert(output.id, seed);
        // Per `LinearMany` node: its outputs' gradients, gathered from its `Part`s (which
        // come after it on the tape, so all have arrived when the walk reaches it).
        let mut parts: HashMap<usize, Vec<Option<Tensor<B>>>> = HashMap::new();
        for id in (0..=output.id).rev() {
            let node = &nodes[id];
            if !node.requires_grad {
                continue;
            }
            if let Op::LinearMany { .. } = &node.op {
                if let Some(douts) = parts.remove(&id) {
                    for (input, grad) in linear_many_grads(&nodes, node, &douts) {
                        grads.accumulate(input, grad);
                    }
                }
                continue;
            }
            let Some(dout) = grads.grads.get(&id).cloned() else { continue };
            if let Op::Part { group, index } = node.op {
                let count = douts_len(&nodes, group);
                parts.entry(group).or_insert_with(|| vec![None; count])[index] = Some(dout);
                grads.grads.remove(&id);
                continue;
            }
            for (input, grad) in input_grads(&nodes, node, &dout) {
                grads.accumulate(input, grad);
            }
            if !matches!(node.op, Op::Leaf) {
                grads.grads.remove(&id);
            }
        }
        grads
    }
}

/// How many outputs the `LinearMany` node `group` has.
fn douts_len<B: Backend>(nodes: &[Node<B>], group: usize) -> usize {
    match &nodes[group].op {
        Op::LinearMany { weights, .. } => weights.len(),
        _ => unreachable!("a Part's group is a LinearMany node"),
    }
}

/// The gradients a `LinearMany` node sends to its input, weights and biases, given its
/// outputs' gradients `douts` (`None` where the loss does not depend on that output).
/// `y_i = x · W_iᵀ + b_i`: `dx = Σ_i dy_i · W_i`, summed from the last output to the first
/// (the order in which separate linears' gradients accumulated, so a backend whose
/// `matmul_sum` is the trait's default gives the same bits); `dW_i = dy_iᵀ · x` as one
/// group; `db_i` the column sums of `dy_i`.
fn linear_many_grads<B: Backend>(
    nodes: &[Node<B>],
    node: &Node<B>,
    douts: &[Option<Tensor<B>>],
) -> Vec<(usize, Tensor<B>)> {
    let Op::LinearMany { x, weights, biases } = &node.op else { unreachable!("a LinearMany node") };
    let wants = |id: usize| nodes[id].requires_grad;
    let x_val = &nodes[*x].value;
    let x2 = x_val.reshape([x_val.shape().rows(), x_val.shape().last()]);
    // (output index, its gradient as [rows, out]) for the outputs that have one.
    let dcs: Vec<(usize, Tensor<B>)> = douts
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.as_ref().map(|d| (i, d.reshape([d.shape().rows(), d.shape().last()]))))
        .collect();
    let mut out = Vec::new();
    if wants(*x) && !dcs.is_empty() {
        let terms: Vec<_> = dcs.iter().rev().map(|(i, dc)| (dc, &nodes[weights[*i]].value, None)).collect();
        out.push((*x, Tensor::matmul_sum(&terms, false, false).reshape(x_val.shape().clone())));
    }
    let trained: Vec<&(usize, Tensor<B>)> = dcs.iter().filter(|(i, _)| wants(weights[*i])).collect();
    if !trained.is_empty() {
        let products: Vec<_> = trained.iter().map(|(_, dc)| (dc, &x2, None)).collect();
        let dws = Tensor::matmul_many(&products, true, false);
        out.extend(trained.iter().map(|(i, _)| weights[*i]).zip(dws));
    }
    for (i, dc) in &dcs {
        if let Some(bias) = biases[*i].filter(|&b| wants(b)) {
            out.push((bias, dc.sum_rows()));
        }
    }
    out
}

/// The gradients `node` sends to those of its inputs that require one.
fn input_grads<B: Backend>(nodes: &[Node<B>], node: &Node<B>, dout: &Tensor<B>) -> Vec<(usize, Tensor<B>)> {
    let wants = |id: usize| nodes[id].requires_grad;
    let value = |id: usize| &nodes[id].value;
    let mut out = Vec::new();
    match &node.op {
        Op::Leaf => {}
        Op::LinearMany { .. } | Op::Part { .. } => unreachable!("linear groups are handled in backward_from"),
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
        Op::Matmul { a, b, bias, trans_a, trans_b } => {
            // C[m,n] = op(A)[m,k] · op(B)[k,n] + bias; A may carry leading dims (folded into m).
            let (ta, tb) = (*trans_a, *trans_b);
            let a_val = value(*a);
            let a2 =
                if ta { a_val.clone() } else { a_val.reshape([a_val.shape().rows(), a_val.shape().last()]) };
            let dc = dout.reshape([dout.shape().rows(), dout.shape().last()]);
            let b_val = value(*b);
            if wants(*a) {
                // dA = dC · op(B)ᵀ, or its transpose when A is stored transposed.
                let da =
                    if ta { b_val.matmul(&dc, None, tb, true) } else { dc.matmul(b_val, None, false, !tb) };
                out.push((*a, da.reshape(a_val.shape().clone())));
            }
            if wants(*b) {
                // dB = op(A)ᵀ · dC, or its transpose when B is stored transposed.
                let db = if tb { dc.matmul(&a2, None, true, ta) } else { a2.matmul(&dc, None, !ta, false) };
                out.push((*b, db));
            }
            if let Some(bias) = bias {
                if wants(*bias) {
                    out.push((*bias, dc.sum_rows()));
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
            let (dx, dgamma, dbeta) = dout.layer_norm_backward(value(*x), value(*gamma), saved);
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
