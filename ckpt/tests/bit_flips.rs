//! Fault injection: bit flips in every file of a generation are refused, naming the file,
//! or load exactly the saved state, never a changed one; and a corrupt generation never
//! pushes an intact one out of the store.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{assert_same, checkpoint};
use tinygpt_ckpt::{CheckpointStore, CkptError, MemoryStore, FILES};
use tinygpt_tensor::block_on;

const GEN: &str = "gen-000001/";

/// Positions to flip in a file of `len` bytes: the first bytes (headers, the opening of
/// JSON), a spread through the middle, and the last bytes.
fn positions(len: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (0..len.min(16)).collect();
    at.extend((1..32).map(|k| k * len / 32));
    at.extend(len.saturating_sub(16)..len);
    at.sort_unstable();
    at.dedup();
    at
}

#[test]
fn bit_flips_in_any_file_of_a_generation_are_refused_naming_the_file_or_change_nothing() {
    let mem = MemoryStore::new();
    let saved = checkpoint(25, 1);
    block_on(CheckpointStore::new(mem.clone()).save(&saved)).unwrap();
    let original = mem.snapshot();
    let (mut refused, mut unchanged) = (0, 0);
    for name in FILES {
        let key = format!("{GEN}{name}");
        let bytes = original.get(&key).unwrap_or_else(|| panic!("{key} was written"));
        for at in positions(bytes.len()) {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[at] ^= 1 << bit;
                mem.set_raw(&key, Some(flipped));
                match block_on(CheckpointStore::new(mem.clone()).load_latest()) {
                    Ok(back) => {
                        assert_same(&back, &saved);
                        unchanged += 1;
                    }
                    Err(e) => {
                        assert!(e.to_string().contains(name), "flip of bit {bit} at {at} in {name}: {e}");
                        refused += 1;
                    }
                }
            }
        }
        mem.set_raw(&key, Some(bytes.clone()));
    }
    eprintln!("bit flips: {refused} refused, {unchanged} loaded unchanged");
    assert!(refused > 1000, "{refused}");
}

#[test]
fn a_bit_flip_in_trainer_state_is_refused_not_loaded_as_another_step() {
    let mem = MemoryStore::new();
    block_on(CheckpointStore::new(mem.clone()).save(&checkpoint(25, 1))).unwrap();
    let key = format!("{GEN}trainer_state.json");
    let text = String::from_utf8(mem.snapshot()[&key].clone()).unwrap();
    // "step": 25 → 27, a change JSON still parses: only a checksum can catch it.
    let edited = text.replace("\"step\": 25", "\"step\": 27");
    assert_ne!(edited, text);
    mem.set_raw(&key, Some(edited.into_bytes()));
    let err = block_on(CheckpointStore::new(mem.clone()).load_latest()).unwrap_err();
    assert!(matches!(err, CkptError::ChecksumMismatch { .. }), "{err}");
    assert!(err.to_string().contains("trainer_state.json"), "{err}");
}

#[test]
fn pruning_never_keeps_a_corrupt_generation_in_place_of_an_intact_one() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone());
    block_on(store.save(&checkpoint(10, 1))).unwrap();
    block_on(store.save(&checkpoint(20, 1))).unwrap();
    // The newest generation rots on disk.
    let key = "gen-000002/weights.f32";
    let mut w = mem.snapshot()[key].clone();
    w[0] ^= 1;
    mem.set_raw(key, Some(w));
    let report = block_on(store.save(&checkpoint(30, 1))).unwrap();
    assert_eq!(report.pruned, ["gen-000002"], "the corrupt generation goes first");
    let kept: Vec<String> = block_on(store.list()).unwrap().into_iter().map(|g| g.id).collect();
    assert_eq!(kept, ["gen-000001", "gen-000003"]);
    assert_eq!(block_on(store.load("gen-000001")).unwrap().progress.step, 10);
    // The next save keeps the newest intact one behind it, as usual.
    let report = block_on(store.save(&checkpoint(40, 1))).unwrap();
    assert_eq!(report.pruned, ["gen-000001"]);
}

#[test]
fn a_corrupt_latest_names_the_newest_intact_generation() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone());
    block_on(store.save(&checkpoint(10, 1))).unwrap();
    block_on(store.save(&checkpoint(20, 1))).unwrap();
    mem.set_raw("gen-000002/adam_m.f32", Some(vec![0; 8]));
    assert!(block_on(store.load_latest()).is_err());
    let intact = block_on(store.newest_intact(Some("gen-000002"))).unwrap().unwrap();
    assert_eq!((intact.id.as_str(), intact.step), ("gen-000001", 10));
}
