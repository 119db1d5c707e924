//! A model past one buffer of the device (issue 34): on WebGPU the worker refuses, before
//! allocating, a model one of whose tensors exceeds the adapter's largest storage binding,
//! naming the tensor, the limit and by how much; a model whose only large buffers are the
//! optimizer's flat groups trains (they shard). Natively on lavapipe, with the binding limit
//! forced low by the test-only override.

use serde_json::json;
use tinygpt_kernels_wgsl::testing::own_backend;
use tinygpt_tensor::{block_on, Backend};
use tinygpt_worker::protocol::{DatasetInput, EngineKind, ErrorCode};
use tinygpt_worker::session::TrainRequest;
use tinygpt_worker::Session;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

fn tiny(training: serde_json::Value) -> TrainRequest {
    TrainRequest { preset: Some("tiny".into()), training_config: Some(training), ..Default::default() }
}

#[test]
fn a_tensor_past_one_binding_is_refused_and_a_flat_group_past_it_is_not() {
    let Some(gpu) = own_backend() else { return };
    // 64 KiB bindings: tiny's logits at its batch of 16 (16·32·256 values, 512 KiB) do not
    // fit; at a batch of 1 every tensor fits but the decay group (~69K values) does not.
    let mut s = Session::new(gpu.with_max_binding_for_tests(64 * 1024), EngineKind::Webgpu);
    let err = s.start(tiny(json!({})), shakespeare(), 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::DeviceLost);
    for part in [
        "largest tensor (logits)",
        "0.5 MiB",
        "0.4 MiB more",
        "largest storage binding (65536 bytes",
        "maxStorageBufferBindingSize",
    ] {
        assert!(err.message.contains(part), "{part:?} missing from: {}", err.message);
    }
    s.start(tiny(json!({"batch_size": 1, "max_steps": 2})), shakespeare(), 0.0)
        .expect("flat groups above one binding shard instead of refusing the model");
    assert!(s.run().unwrap().trainer().optimizer().shards()[0] >= 3);
    block_on(s.backend().flush()).expect("no buffer above the forced binding");
}
