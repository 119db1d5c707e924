//! Buffer sharding (issue 34): with the storage-binding limit forced low (a test-only
//! override, [`WgpuBackend::with_max_binding_for_tests`]), the optimizer's flat per-group
//! buffers split into shards no longer than one binding, and training matches the unsplit
//! run; a single tensor larger than one binding is refused, naming it and the limit.
//!
//! Tolerance: the only difference between the two runs is where the squared global
//! gradient norm is rounded (one `sum_squares` per shard, added, instead of one per group),
//! so the clip factor differs in the last bits of f32; AdamW itself is elementwise and runs
//! the same per element. Losses agree within 1e-6 relative and every parameter and moment
//! within 1e-6 absolute plus 1e-5 relative.

use tinygpt_kernels_wgsl::testing::{own_backend, shared_backend};
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{AdamW, GroupOptions, ParamGroup, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend, Tensor};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// 64 KiB bindings (16,384 values): every `tiny` tensor fits (the largest, the token
/// embedding, is 256 × 48 = 12,288), its decay group (~69K values) does not, and at one row
/// of 32 tokens a batch neither does any activation (logits 32 × 256 = 8,192).
const FORCED_BINDING: u64 = 64 * 1024;

fn trainer(backend: &WgpuBackend, steps: usize) -> Trainer<WgpuBackend> {
    let preset = Preset::by_name("tiny").unwrap();
    let config = TrainingConfig {
        batch_size: 1,
        max_steps: steps,
        warmup_steps: 2,
        eval_interval: 1000,
        eval_batches: 1,
        ..Default::default()
    };
    let dataset =
        Dataset::new("shakespeare", &TEXT[..100_000], preset.model.context_length, config.seed).unwrap();
    Trainer::new(TrainedSet::whole_model(backend, preset.model), config, dataset, None).unwrap()
}

/// Asserts the tolerance; returns the largest absolute difference.
fn close(what: &str, a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-6 + 1e-5 * y.abs(), "{what}[{i}]: sharded {x}, unsplit {y}");
    }
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

#[test]
fn a_model_whose_groups_exceed_one_binding_trains_like_the_unsplit_run() {
    let Some(gpu) = shared_backend() else { return };
    let forced = gpu.with_max_binding_for_tests(FORCED_BINDING);
    assert_eq!(forced.max_tensor_len(), (FORCED_BINDING / 4) as usize);
    assert!(gpu.max_tensor_len() > forced.max_tensor_len());

    let steps = 5;
    let mut unsplit = trainer(&gpu, steps);
    let mut sharded = trainer(&forced, steps);
    assert!(unsplit.optimizer().shards().iter().all(|&n| n == 1), "{:?}", unsplit.optimizer().shards());
    let shards = sharded.optimizer().shards();
    eprintln!("shards per group: {shards:?}");
    assert!(shards[0] >= 3, "the decay group should need 3 or more shards: {shards:?}");
    assert!(unsplit.optimizer().groups().eq(sharded.optimizer().groups()), "the same groups either way");
    assert_eq!(unsplit.optimizer().slots(0).len(), sharded.optimizer().slots(0).len());

    for step in 1..=steps {
        let a = sharded.step().unwrap().train_loss;
        let b = unsplit.step().unwrap().train_loss;
        eprintln!("step {step}: loss sharded {a}, unsplit {b}");
        assert!(((a - b) / b).abs() <= 1e-6, "step {step}: loss sharded {a}, unsplit {b}");
    }
    let params =
        |t: &Trainer<WgpuBackend>| block_on(t.optimizer().weights(t.model().params().tensors())).unwrap();
    let worst = close("weights", &params(&sharded), &params(&unsplit));
    let (sm, sv) = block_on(sharded.optimizer().to_flat()).unwrap();
    let (um, uv) = block_on(unsplit.optimizer().to_flat()).unwrap();
    let worst_m = close("adam_m", &sm, &um);
    let worst_v = close("adam_v", &sv, &uv);
    eprintln!("largest differences after {steps} steps: weights {worst:e}, m {worst_m:e}, v {worst_v:e}");
    // The model's own tensors got the sharded updates back.
    let tensors = sharded.model().params().tensors();
    for (s, u) in tensors.iter().zip(unsplit.model().params().tensors()) {
        close("model tensor", &block_on(s.read()).unwrap(), &block_on(u.read()).unwrap());
    }
    // Regrouping a sharded optimizer keeps every moment (copied shard to shard).
    let mut regrouped = sharded.optimizer().clone();
    regrouped.regroup(tensors, sharded.optimizer().groups().cloned().collect());
    assert_eq!(regrouped.shards(), shards);
    let (rm, rv) = block_on(regrouped.to_flat()).unwrap();
    assert_eq!((rm, rv), (sm, sv), "moments after regroup");
    block_on(forced.flush()).expect("no tensor above the forced binding");
}

#[test]
fn a_tensor_larger_than_one_binding_is_refused_naming_it_and_the_limit() {
    // Its own device: allocating the tensor records a sticky out-of-memory error.
    let Some(gpu) = own_backend() else { return };
    let forced = gpu.with_max_binding_for_tests(16 * 1024);
    let params = vec![Tensor::zeros(&forced, [100]), Tensor::zeros(&forced, [8192])];
    let group = ParamGroup {
        name: "decay".into(),
        members: vec![0, 1],
        options: GroupOptions { weight_decay: 0.1, lr_scale: 1.0 },
    };
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| AdamW::new(&params, vec![group])))
        .unwrap_err();
    let message = refused.downcast_ref::<String>().expect("a formatted message");
    for part in ["parameter 1", "8192 values", "4096 values", "not supported"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}
