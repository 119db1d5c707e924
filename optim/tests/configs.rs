//! The run configs shipped in `configs/` build into valid runs under the rules `tinygpt
//! train --config` uses (`Recipe`), and the nanoGPT shakespeare-char recipe holds the
//! settings it is named after.

use serde_json::Value;
use tinygpt_model::ModelConfig;
use tinygpt_optim::{Recipe, ScheduleKind, TrainingConfig};

fn build(path: &std::path::Path) -> (ModelConfig, TrainingConfig) {
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let recipe = Recipe {
        preset: file.get("preset").and_then(Value::as_str).map(String::from),
        model: file.get("model").map(|m| serde_json::from_value(m.clone()).unwrap()),
        training: file.get("training").and_then(Value::as_object).cloned().unwrap_or_default(),
        ..Default::default()
    };
    recipe.build().unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_shipped_config_builds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            build(&path);
            seen += 1;
        }
    }
    assert!(seen >= 2, "configs in {}", dir.display());
}

#[test]
fn the_shakespeare_char_recipe_is_nanogpts() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/nanogpt-shakespeare-char.json");
    let (m, t) = build(&path);
    assert_eq!((m.n_layers, m.n_heads, m.d_model, m.d_mlp, m.context_length), (6, 6, 384, 1536, 256));
    assert_eq!(m.dropout, 0.2);
    assert_eq!(
        (t.batch_size, t.learning_rate, t.min_lr, t.warmup_steps, t.max_steps),
        (64, 1e-3, 1e-4, 100, 5000)
    );
    assert_eq!((t.beta2, t.schedule), (0.99, ScheduleKind::Cosine));
    assert_eq!((t.eval_interval, t.eval_batches), (250, 200));
    // Every evaluated step is saved, so the best generation is one that was evaluated.
    assert_eq!(t.checkpoint_interval % t.eval_interval, 0);
}
