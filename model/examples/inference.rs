//! Inference à la carte: `tinygpt-model` and one kernel crate (`tinygpt-kernels-cpu`), no
//! optimizer and no checkpoint code. It reads a checkpoint generation's two files that
//! matter for sampling straight from disk (the format is plain: `model_config.json` and
//! `weights.f32`, little-endian f32 in canonical order, see ckpt/src/layout.rs):
//!
//! ```sh
//! cargo run --release -p tinygpt-model --example inference -- runs/small/gen-000200 "ROMEO:"
//! cargo run --release -p tinygpt-model --example inference     # random weights, to try it
//! ```

use std::path::Path;

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Generation, Gpt, ModelConfig, Params, Preset, SampleConfig};
use tinygpt_tensor::{block_on, Rng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let folder = args.next();
    let prompt = args.next().unwrap_or_else(|| "ROMEO:".into());
    let backend = CpuBackend::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let model = match folder {
        Some(dir) => load(&backend, Path::new(&dir))?,
        None => Gpt::init(&backend, Preset::by_name("tiny")?.model, &mut Rng::new(7))?,
    };
    let config = SampleConfig { max_tokens: 200, ..SampleConfig::default() };
    let mut generation = Generation::new(prompt.as_bytes(), config);
    while !generation.is_done() {
        block_on(generation.next_token(&model))?;
    }
    println!("{prompt}{}", String::from_utf8_lossy(generation.generated()));
    Ok(())
}

/// A model from a generation folder: its config (the file also lists the tensor table,
/// which `Params::from_flat` recomputes) and its flat weights.
fn load(backend: &CpuBackend, dir: &Path) -> Result<Gpt<CpuBackend>, Box<dyn std::error::Error>> {
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("model_config.json"))?)?;
    json.as_object_mut().ok_or("model_config.json is not an object")?.remove("tensors");
    let config: ModelConfig = serde_json::from_value(json)?;
    let bytes = std::fs::read(dir.join("weights.f32"))?;
    let flat: Vec<f32> =
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let params = Params::from_flat(backend, &config, &flat)?;
    Ok(Gpt::new(config, params)?)
}
