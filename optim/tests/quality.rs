//! Quality on real text (ignored by default; minutes of CPU): nanoGPT's CPU recipe
//! (`configs/nanogpt-cpu.json`: 4 layers, 4 heads, d 128, ctx 64, batch 12, 2000 steps,
//! lr 1e-3 cosine to 1e-4 after 100 warm-up steps) on TinyShakespeare must reach a
//! validation loss of at most 1.95 (nanoGPT reports about 1.88 on this data and budget).
//!
//! Run: `cargo test --release -p tinygpt-optim --test quality -- --ignored --nocapture`

use std::time::Instant;

use serde::Deserialize;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, ModelConfig, Split};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};

#[derive(Deserialize)]
struct Recipe {
    model: ModelConfig,
    training: TrainingConfig,
}

#[test]
#[ignore = "trains for minutes; run explicitly (see the module docs)"]
fn nanogpt_cpu_recipe_reaches_val_loss_1_95() {
    let recipe: Recipe = serde_json::from_str(include_str!("../../configs/nanogpt-cpu.json")).unwrap();
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let backend = CpuBackend::new(threads);
    let seed = recipe.training.seed;
    let dataset = Dataset::new("tinyshakespeare", text, recipe.model.context_length, seed).unwrap();
    let mut trainer =
        Trainer::new(TrainedSet::whole_model(&backend, recipe.model), recipe.training, dataset, None)
            .unwrap();
    let started = Instant::now();
    let mut val = f32::NAN;
    while !trainer.is_finished() {
        let r = trainer.step().unwrap();
        if r.eval_due {
            val = trainer.evaluate(Split::Val).unwrap();
            trainer.record_eval(r.train_loss, val);
            println!(
                "step {:>5} train {:.4} val {val:.4} ({:.0} s)",
                r.step,
                r.train_loss,
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{}",
        serde_json::json!({"recipe": "nanogpt-cpu", "steps": trainer.progress().step, "val_loss": val,
            "threads": threads, "seconds": started.elapsed().as_secs_f64().round()})
    );
    assert!(val <= 1.95, "validation loss {val} is above 1.95");
}
