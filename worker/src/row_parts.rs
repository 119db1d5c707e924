//! How many batch rows one unit of training (or evaluation) work covers.
//!
//! Why: a wasm call cannot be interrupted, so the longest unit of work bounds how fast the
//! worker answers `pause` and `stop`. A whole step of `small` takes about 360 ms in SIMD
//! wasm (600 ms scalar) and of `medium` about 1 s (1.8 s), so the worker takes each step in
//! row parts (`Trainer::queue_part`, gradient accumulation over the one batch the step draws)
//! and scores each validation batch the same way (`Evaluation::next_part`).
//!
//! The rule depends only on the model config and the batch size, never on measured time:
//! parts change the float rounding of a step, so the scalar and SIMD builds, a run reloaded
//! from a checkpoint, and a faster or slower machine must all cut the same parts to take
//! identical steps.
//!
//! Rule: a part aims at [`PART_WORK`] parameter·tokens (`param_count × context_length` per
//! row), which is roughly 60 ms of a training part in scalar wasm and 35 ms with SIMD in
//! Chromium on a 2-core VM (forward and backward cost about 1.2 ns and 0.7 ns a
//! parameter·token there). So at most `max(1, PART_WORK / (param_count × context_length))` rows; the batch is
//! cut into `ceil(batch / that)` parts of `ceil(batch / parts)` rows (the last one may be
//! smaller), as even as the count allows. `tiny` stays one part (a plain step); `small`
//! takes 8 parts of 2 rows; `medium` and larger take one row a part, which for `large` and
//! up is still more than 200 ms: a part cannot be smaller than one row.
//!
//! Whole steps instead: when the page shares its pending-message counter (a
//! `SharedArrayBuffer`, so on a cross-origin isolated page, in every build) a unit can be
//! given up the moment a message waits and taken again later ([`crate::abandon`]), so the
//! CPU builds take whole steps and whole validation batches ([`unit_rows`]): bigger ops, and
//! on the threads build work big enough to be worth handing to other threads. Every build
//! then cuts the same way (the whole batch), so the SIMD and threads builds still give the
//! same losses bit for bit; a page without the counter falls back to the parts above.

use tinygpt_model::ModelConfig;

/// Batch rows per unit of training or validation work: the whole batch when units can be
/// given up (`abandonable`: the page shares its message counter), else [`rows_per_part`].
pub fn unit_rows(model: &ModelConfig, batch: usize, abandonable: bool) -> usize {
    if abandonable {
        batch.max(1)
    } else {
        rows_per_part(model, batch)
    }
}

/// Parameter·tokens a part aims at (see the module docs).
pub const PART_WORK: u64 = 50_000_000;

/// Batch rows per part of a training step or a validation batch, `1..=batch`.
pub fn rows_per_part(model: &ModelConfig, batch: usize) -> usize {
    let per_row = (model.param_count() as u64 * model.context_length as u64).max(1);
    let max_rows = (PART_WORK / per_row).clamp(1, batch.max(1) as u64) as usize;
    let parts = batch.div_ceil(max_rows);
    batch.div_ceil(parts.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use tinygpt_model::Preset;

    use super::*;

    fn preset_rows(name: &str) -> usize {
        let p = Preset::by_name(name).unwrap();
        rows_per_part(&p.model, p.batch_size)
    }

    #[test]
    fn units_are_whole_batches_when_they_can_be_given_up() {
        for p in Preset::all() {
            assert_eq!(unit_rows(&p.model, p.batch_size, true), p.batch_size, "{}", p.name);
            assert_eq!(unit_rows(&p.model, p.batch_size, false), rows_per_part(&p.model, p.batch_size));
        }
    }

    #[test]
    fn presets_are_cut_as_documented() {
        assert_eq!(preset_rows("tiny"), 16, "one part: the plain step");
        assert_eq!(preset_rows("small"), 2);
        for name in ["medium", "large", "xl", "huge"] {
            assert_eq!(preset_rows(name), 1, "{name}");
        }
    }

    #[test]
    fn parts_stay_within_the_budget_and_are_as_even_as_possible() {
        for p in Preset::all() {
            for batch in 1..=64 {
                let rows = rows_per_part(&p.model, batch);
                let per_row = p.model.param_count() as u64 * p.model.context_length as u64;
                assert!((1..=batch).contains(&rows));
                assert!(rows == 1 || rows as u64 * per_row <= PART_WORK, "{} batch {batch}: {rows}", p.name);
                // No more parts than the budget needs, and the last part is never more
                // than one part's worth of rows short.
                let parts = batch.div_ceil(rows);
                let max_rows = (PART_WORK / per_row).clamp(1, batch as u64) as usize;
                assert_eq!(parts, batch.div_ceil(max_rows), "{} batch {batch}", p.name);
                assert!(batch - (parts - 1) * rows >= 1);
            }
        }
        let tiny = Preset::by_name("tiny").unwrap().model;
        assert_eq!(rows_per_part(&tiny, 64), 22, "22 + 22 + 20 rows");
    }
}
