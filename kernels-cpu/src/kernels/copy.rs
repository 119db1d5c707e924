//! Plain copies between buffers.
//!
//! copy:      src [len] -> dst [len]   (bit for bit; the caller slices both at their offsets)
//! copy_many: for each copy c, src_c [len_c] -> dst_c [len_c], all the optimizer's gradients
//!            into its flat buffer (one dst) or its flat parameters back out (one src)
//!
//! A single copy runs on one thread: it does no arithmetic to spread. The optimizer's
//! `copy_many`s move every parameter twice a step, a few MB at `medium`, and on one thread
//! they were serial time in which the other threads waited (about 1% of the calling
//! thread's samples in a two-thread `medium` step, `perf`). So `copy_many` cuts the copies'
//! concatenation into [`PIECE`]-value pieces, chosen by size alone, that the threads share;
//! a copy has no order of operations, so any split gives the same bits.

use crate::parallel::Parallel;

/// Values per parallel piece of a [`copy_many`] (128 KiB: enough to dwarf handing it out).
pub(crate) const PIECE: usize = 32 * 1024;

pub(crate) fn copy(dst: &mut [f32], src: &[f32]) {
    dst.copy_from_slice(src);
}

/// Calls `part(i, at, len)` for each run of values of piece `piece` that lies in copy `i`
/// (`lens[i]` values long), `at` values into it, in copy order.
fn piece_parts(lens: &[usize], piece: usize, mut part: impl FnMut(usize, usize, usize)) {
    let (start, end) = (piece * PIECE, (piece + 1) * PIECE);
    let mut copy_start = 0;
    for (i, &len) in lens.iter().enumerate() {
        let copy_end = copy_start + len;
        let (from, to) = (start.max(copy_start), end.min(copy_end));
        if from < to {
            part(i, from - copy_start, to - from);
        }
        if copy_end >= end {
            break;
        }
        copy_start = copy_end;
    }
}

/// Copies of `lens[i]` values each, the pieces shared by `par`'s threads. `copy_part(i, at,
/// len)` copies values `at..at + len` of copy `i`; the caller makes it safe to call for
/// disjoint runs at once (each copy's destination range is written by no other copy).
pub(crate) fn copy_many(
    par: &Parallel,
    lens: &[usize],
    copy_part: impl Fn(usize, usize, usize) + Sync + Send,
) {
    let total: usize = lens.iter().sum();
    par.map(total.div_ceil(PIECE), |piece| piece_parts(lens, piece, &copy_part));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_every_value_once_in_order() {
        let lens = [5, PIECE, 3 * PIECE / 2, 0, 7, PIECE - 12];
        let total: usize = lens.iter().sum();
        let mut seen = Vec::new();
        for piece in 0..total.div_ceil(PIECE) {
            piece_parts(&lens, piece, |i, at, len| seen.push((i, at, len)));
        }
        let mut next = vec![0; lens.len()];
        for &(i, at, len) in &seen {
            assert_eq!(at, next[i], "copy {i} continues where it stopped");
            assert!(len > 0);
            next[i] += len;
        }
        assert_eq!(next, lens);
    }
}
