//! Random and mutated bytes into every loader: a directory of generations (in memory and
//! on disk) and a safetensors import. Each input must give a typed error or a valid load,
//! never a panic, and no allocation may be sized by a number inside a file: a counting
//! allocator records the largest single request of this test binary.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::checkpoint;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tinygpt_ckpt::{
    export_safetensors, import_safetensors, Checkpoint, CheckpointDir, CheckpointStore, CkptError,
    LoadOptions, MemoryStore,
};
use tinygpt_model::ModelConfig;
use tinygpt_tensor::{block_on, Rng};

struct PeakAlloc;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// The checkpoints here are 15 KB per tensor file; nothing legitimate comes near this.
const ALLOCATION_BOUND: usize = 16 << 20;

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

fn random_bytes(rng: &mut Rng, max_len: u64) -> Vec<u8> {
    (0..rng.below(max_len + 1)).map(|_| rng.next_u64() as u8).collect()
}

/// A value that stresses a JSON reader: extremes, wrong types, huge sizes.
fn nasty_value(rng: &mut Rng) -> Value {
    pick(
        rng,
        &[
            json!(0),
            json!(-1),
            json!(1_000_000_000_000u64),
            json!(u64::MAX),
            json!(1 << 31),
            json!(65536),
            json!(1.5),
            json!(1e300),
            json!(-0.0),
            json!("gen-000001"),
            json!(""),
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!([1, 2, 3]),
            json!({"name": "token_embedding", "shape": [4294967296u64, 4294967296u64], "offset": 0}),
        ],
    )
    .clone()
}

/// Changes, removes or adds one node somewhere in `v`.
fn mutate_json(rng: &mut Rng, v: &mut Value) {
    let descend = rng.below(3) != 0;
    match v {
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = pick(rng, &keys).clone();
            match rng.below(6) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(format!("extra_{}", rng.below(9)), nasty_value(rng));
                }
                _ if descend => mutate_json(rng, map.get_mut(&key).unwrap()),
                _ => {
                    map.insert(key, nasty_value(rng));
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = rng.below(items.len() as u64) as usize;
            match rng.below(5) {
                0 => {
                    items.remove(i);
                }
                1 => items.push(nasty_value(rng)),
                _ if descend => mutate_json(rng, &mut items[i]),
                _ => items[i] = nasty_value(rng),
            }
        }
        _ => *v = nasty_value(rng),
    }
}

/// Records `bytes` for `name` in trainer_state.json (when both parse), so a mutation
/// reaches the parsers behind the checksum gate.
fn reseal(files: &mut BTreeMap<String, Vec<u8>>, gen: &str, name: &str) {
    let key = format!("{gen}trainer_state.json");
    let (Some(bytes), Some(state)) = (files.get(&format!("{gen}{name}")), files.get(&key)) else { return };
    let Ok(mut state) = serde_json::from_slice::<Value>(state) else { return };
    if let Some(files_table) = state.get_mut("files").and_then(Value::as_object_mut) {
        files_table.insert(name.to_string(), json!({"bytes": bytes.len(), "sha256": sha(bytes)}));
    }
    // Unsealed, like a checkpoint from before trainer_state.json had its own checksum.
    if let Some(state) = state.as_object_mut() {
        state.remove("state_sha256");
    }
    files.insert(key, serde_json::to_vec(&state).unwrap());
}

/// One random mutation of a saved store's blobs; returns a description for failures.
fn mutate_store(rng: &mut Rng, files: &mut BTreeMap<String, Vec<u8>>) -> String {
    let keys: Vec<String> = files.keys().cloned().collect();
    let key = pick(rng, &keys).clone();
    let (gen, name) = key.split_once('/').map_or(("", key.as_str()), |(g, n)| (g, n));
    let gen = if gen.is_empty() { String::new() } else { format!("{gen}/") };
    let name = name.to_string();
    let bytes = files.get_mut(&key).unwrap();
    let kind = rng.below(8);
    match kind {
        0 => bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize),
        1 => {
            for _ in 0..=rng.below(8) {
                if !bytes.is_empty() {
                    let i = rng.below(bytes.len() as u64) as usize;
                    bytes[i] ^= 1 << rng.below(8);
                }
            }
        }
        2 => bytes.extend(random_bytes(rng, 64)),
        3 => *bytes = random_bytes(rng, 200),
        4 => {
            files.remove(&key);
        }
        5 | 6 if name.ends_with(".json") => {
            if let Ok(mut v) = serde_json::from_slice::<Value>(bytes) {
                mutate_json(rng, &mut v);
                *bytes = serde_json::to_vec(&v).unwrap();
            }
        }
        _ if name.ends_with(".f32") => match rng.below(3) {
            0 if bytes.len() >= 4 => {
                let i = rng.below(bytes.len() as u64 / 4) as usize * 4;
                let v = *pick(rng, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e38]);
                bytes[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            1 => bytes.truncate(bytes.len().saturating_sub(4 * (1 + rng.below(100) as usize))),
            _ => bytes.extend(vec![0u8; 4 * (1 + rng.below(100) as usize)]),
        },
        _ => bytes.reverse(),
    }
    let sealed = kind >= 5 && rng.below(4) != 0 && name != "trainer_state.json";
    if sealed {
        reseal(files, &gen, &name);
    }
    format!("{key}: mutation {kind}{}", if sealed { " (resealed)" } else { "" })
}

/// Loads through `load`, turning a panic into a test failure that names the input.
fn must_not_panic(
    what: &str,
    load: impl FnOnce() -> Result<Checkpoint, CkptError>,
) -> Result<Checkpoint, CkptError> {
    match catch_unwind(AssertUnwindSafe(load)) {
        Ok(result) => result,
        Err(_) => panic!("the loader panicked on: {what}"),
    }
}

fn tally(counts: &mut BTreeMap<String, usize>, result: &Result<Checkpoint, CkptError>) {
    let kind = match result {
        Ok(_) => "loaded".to_string(),
        Err(e) => format!("{e:?}").split([' ', '{', '(']).next().unwrap().to_string(),
    };
    *counts.entry(kind).or_default() += 1;
}

fn saved_store() -> BTreeMap<String, Vec<u8>> {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone());
    block_on(store.save(&checkpoint(20, 1))).unwrap();
    block_on(store.save(&checkpoint(25, 2))).unwrap();
    mem.snapshot()
}

#[test]
fn mutated_directories_give_typed_errors_or_valid_loads() {
    let original = saved_store();
    let mut rng = Rng::new(0xF022);
    let mut counts = BTreeMap::new();
    for round in 0..4000 {
        let mut files = original.clone();
        let mut what = Vec::new();
        for _ in 0..=rng.below(3) / 2 {
            what.push(mutate_store(&mut rng, &mut files));
        }
        let mem = MemoryStore::new();
        for (k, v) in &files {
            mem.set_raw(k, Some(v.clone()));
        }
        let what = format!("round {round}: {}", what.join("; "));
        let result = must_not_panic(&what, || block_on(CheckpointStore::new(mem.clone()).load_latest()));
        if let Ok(ckpt) = &result {
            assert_eq!(ckpt.weights.len(), ckpt.model_config.param_count(), "{what}");
        }
        tally(&mut counts, &result);
        let older = must_not_panic(&what, || block_on(CheckpointStore::new(mem.clone()).load("gen-000001")));
        tally(&mut counts, &older);
        let _ = must_not_panic(&what, || {
            block_on(CheckpointStore::new(mem.clone()).list()).map(|_| checkpoint(0, 0))
        });
    }
    eprintln!(
        "directory loads: {counts:?}; largest allocation so far {} bytes",
        LARGEST.load(Ordering::Relaxed)
    );
    assert!(counts.len() >= 8, "the mutations reach many different checks: {counts:?}");
    assert!(
        LARGEST.load(Ordering::Relaxed) < ALLOCATION_BOUND,
        "largest allocation {}",
        LARGEST.load(Ordering::Relaxed)
    );
}

#[test]
fn mutated_native_directories_give_typed_errors_or_valid_loads() {
    let original = saved_store();
    let mut rng = Rng::new(0xD15C);
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..150 {
        let mut files = original.clone();
        let what = format!("round {round}: {}", mutate_store(&mut rng, &mut files));
        let root = tmp.path().join(format!("r{round}"));
        for (k, v) in &files {
            let path = root.join(k);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, v).unwrap();
        }
        let dir = CheckpointDir::open(&root).unwrap();
        let _ = must_not_panic(&what, || dir.load_latest());
    }
    assert!(LARGEST.load(Ordering::Relaxed) < ALLOCATION_BOUND);
}

/// A valid config for a 1.6-billion-parameter model, with a matching tensor table and
/// checksums, in front of 15 KB tensor files: refused by size before any allocation.
#[test]
fn a_huge_but_valid_config_is_refused_without_allocating_for_it() {
    let mut files = saved_store();
    let gen = "gen-000002/";
    let big = ModelConfig { d_model: 8192, d_mlp: 32768, n_heads: 8, ..common::small_config() };
    big.validate().unwrap();
    assert!(big.param_count() > 1_500_000_000);
    let mut config: Value = serde_json::from_slice(&files[&format!("{gen}model_config.json")]).unwrap();
    config["d_model"] = json!(big.d_model);
    config["d_mlp"] = json!(big.d_mlp);
    config["n_heads"] = json!(big.n_heads);
    config["tensors"] = serde_json::to_value(big.tensor_specs()).unwrap();
    files.insert(format!("{gen}model_config.json"), serde_json::to_vec(&config).unwrap());
    reseal(&mut files, gen, "model_config.json");
    let mem = MemoryStore::new();
    for (k, v) in &files {
        mem.set_raw(k, Some(v.clone()));
    }
    let err = block_on(CheckpointStore::new(mem).load_latest()).unwrap_err();
    assert!(matches!(err, CkptError::SizeMismatch { .. }), "{err}");
    assert!(LARGEST.load(Ordering::Relaxed) < ALLOCATION_BOUND);
}

/// Rewrites the safetensors header with `edit` applied to its JSON.
fn with_header(file: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&file[8..8 + n]).unwrap();
    edit(&mut header);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend_from_slice(&file[8 + n..]);
    out
}

#[test]
fn mutated_safetensors_give_typed_errors_or_valid_loads() {
    let original = export_safetensors(&checkpoint(25, 1), true).unwrap();
    let light = export_safetensors(&checkpoint(25, 1), false).unwrap();
    let mut rng = Rng::new(0x5AFE);
    let mut counts = BTreeMap::new();
    let opts = LoadOptions::default();
    for round in 0..3000 {
        let base = if rng.below(2) == 0 { &original } else { &light };
        let kind = rng.below(6);
        let input = match kind {
            0 => random_bytes(&mut rng, 512),
            1 => base[..rng.below(base.len() as u64) as usize].to_vec(),
            2 => {
                let mut b = base.clone();
                for _ in 0..=rng.below(8) {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
                b
            }
            3 => {
                let mut b = base.clone();
                let any = rng.next_u64();
                let n = *pick(&mut rng, &[u64::MAX, 1 << 40, 100_000_001, 0, 7, any]);
                b[..8].copy_from_slice(&n.to_le_bytes());
                b
            }
            4 => with_header(base, |h| mutate_json(&mut rng, h)),
            _ => with_header(base, |h| {
                // Mutate one of the JSON documents inside __metadata__.
                let meta = h["__metadata__"].as_object_mut().unwrap();
                let keys: Vec<String> = meta.keys().cloned().collect();
                let key = pick(&mut rng, &keys).clone();
                let mut doc: Value = serde_json::from_str(meta[&key].as_str().unwrap()).unwrap();
                mutate_json(&mut rng, &mut doc);
                meta.insert(key, Value::String(doc.to_string()));
            }),
        };
        let what = format!("round {round}, mutation {kind}");
        let result = must_not_panic(&what, || import_safetensors(&input, &opts));
        tally(&mut counts, &result);
    }
    eprintln!("safetensors imports: {counts:?}");
    assert!(counts.len() >= 5, "{counts:?}");
    assert!(LARGEST.load(Ordering::Relaxed) < ALLOCATION_BOUND);
}
