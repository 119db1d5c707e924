//! Dropout, with the counter-based mask of `tinygpt_tensor::dropout` (no stored mask).
//!
//! dropout:     x [len], mask -> out [len]                 out[i] = x[i] · mask.factor(i)
//! dropout_add: residual, x [len], mask -> out [len]       out[i] = residual[i] + x[i] · mask.factor(i)
//!
//! `mask.factor(i)` is `mask.scale()` for a kept element and 0 for a dropped one; one f32
//! multiply (and add) per element, so every backend gets the same bits.

use tinygpt_tensor::DropoutMask;

use crate::kernels::elementwise::ELEMENTWISE_CHUNK;
use crate::parallel::Parallel;

/// `mask.factor(i)` with the scale computed once per call.
fn factor(mask: &DropoutMask, scale: f32, i: usize) -> f32 {
    if mask.keeps(i) {
        scale
    } else {
        0.0
    }
}

pub(crate) fn dropout(par: &Parallel, out: &mut [f32], x: &[f32], mask: &DropoutMask) {
    let scale = mask.scale();
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |c, out| {
        let start = c * ELEMENTWISE_CHUNK;
        for (i, (o, &v)) in out.iter_mut().zip(&x[start..]).enumerate() {
            *o = v * factor(mask, scale, start + i);
        }
    });
}

pub(crate) fn dropout_add(par: &Parallel, out: &mut [f32], residual: &[f32], x: &[f32], mask: &DropoutMask) {
    let scale = mask.scale();
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |c, out| {
        let start = c * ELEMENTWISE_CHUNK;
        let (residual, x) = (&residual[start..], &x[start..]);
        for (i, (o, (&r, &v))) in out.iter_mut().zip(residual.iter().zip(x)).enumerate() {
            *o = r + v * factor(mask, scale, start + i);
        }
    });
}
