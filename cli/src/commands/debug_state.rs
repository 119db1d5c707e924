//! `tinygpt debug-state`: one training step's reference state as a `.safetensors` file,
//! the oracle another backend or implementation diffs against (see
//! `tinygpt_optim::reference_state` for what is measured, and how).
//!
//! Tensors: `x`, `y` (I32 `[B, T]`: the batch, drawn from the train split with
//! `Rng::new(seed)` as the trainer draws batches), `logits` (F32 `[B, T, 256]`), `loss`
//! (F32 `[]`), `losses` (F32 `[10]`: after 1…10 AdamW updates on the same batch) and
//! `grads.<name>` for every parameter under its nanoGPT name and layout
//! (`grads.transformer.h.0.attn.c_attn.weight`, …; no `lm_head`: the tied `wte` gradient
//! holds both uses), so PyTorch diffs directly. `__metadata__` holds nanoGPT's config,
//! the batch, seed, learning rate and the backend that computed it.

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tinygpt_ckpt::{to_nanogpt_layout, write_file_atomically};
use tinygpt_model::{Dataset, Gpt, ModelConfig, Params, Split};
use tinygpt_optim::reference_state;
use tinygpt_tensor::{block_on, Backend, Rng};

use crate::args::DebugStateArgs;
use crate::checkpoint::load;
use crate::compute::{device_label, dispatch, WithBackend};
use crate::error::CliError;
use crate::text;

/// AdamW updates after the recorded step (llm.c's test checks ten).
pub const STEPS: usize = 10;

struct DebugState(DebugStateArgs);

pub fn run(args: DebugStateArgs) -> Result<(), CliError> {
    if args.batch <= 0 {
        return Err(CliError::Usage(format!("--batch must be positive, got {}", args.batch)));
    }
    let compute = args.compute.clone();
    dispatch(&compute, DebugState(args))
}

impl WithBackend for DebugState {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let args = self.0;
        let batch_size = args.batch as usize;
        let ckpt = load(&args.model, args.generation.as_deref())?;
        // Evaluation mode: the state is deterministic whatever the run's dropout.
        let config = ModelConfig { dropout: 0.0, ..ckpt.model_config.clone() };
        crate::memory::check_fits(&config, batch_size)?;
        let (name, bytes) = text::load(args.data.as_deref())?;
        let seq = config.context_length;
        let dataset = Dataset::new(&name, &bytes, seq, args.seed)?;
        let batch = dataset.batch(Split::Train, batch_size, seq, &mut Rng::new(args.seed));
        let model = Gpt::new(config.clone(), Params::from_flat(&backend, &config, &ckpt.weights)?)?;
        let training = &ckpt.training_config;
        let state = block_on(reference_state(&model, training, &batch, STEPS))?;

        let ids = |v: &[u32]| v.iter().flat_map(|&t| (t as i32).to_le_bytes()).collect::<Vec<u8>>();
        let floats = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        let mut data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = vec![
            ("x".into(), Dtype::I32, vec![batch_size, seq], ids(&batch.inputs)),
            ("y".into(), Dtype::I32, vec![batch_size, seq], ids(&batch.targets)),
            ("logits".into(), Dtype::F32, vec![batch_size, seq, config.vocab_size], floats(&state.logits)),
            ("loss".into(), Dtype::F32, vec![], floats(&[state.loss])),
            ("losses".into(), Dtype::F32, vec![state.losses.len()], floats(&state.losses)),
        ];
        for t in to_nanogpt_layout(&config, &state.grads, false) {
            data.push((format!("grads.{}", t.name), Dtype::F32, t.shape, floats(&t.values)));
        }
        let views = data
            .iter()
            .map(|(n, d, s, b)| Ok((n.clone(), TensorView::new(*d, s.clone(), b)?)))
            .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
            .map_err(|e| CliError::Usage(format!("cannot lay out the state: {e}")))?;
        let metadata = [
            ("n_layer", config.n_layers.to_string()),
            ("n_head", config.n_heads.to_string()),
            ("n_embd", config.d_model.to_string()),
            ("block_size", config.context_length.to_string()),
            ("vocab_size", config.vocab_size.to_string()),
            ("bias", "true".into()),
            ("batch", batch_size.to_string()),
            ("seed", args.seed.to_string()),
            ("data", name),
            ("learning_rate", training.learning_rate.to_string()),
            ("backend", device_label(&backend, threads)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v));
        let file = safetensors::serialize(views, Some(metadata.collect()))
            .map_err(|e| CliError::Usage(format!("cannot write the state: {e}")))?;
        write_file_atomically(&args.out, &file).map_err(|source| CliError::Io {
            what: "cannot write",
            path: args.out.clone(),
            source,
        })?;
        eprintln!("wrote {} ({} bytes)", args.out.display(), file.len());
        println!("{}", serde_json::json!({ "loss": state.loss, "losses": state.losses }));
        Ok(())
    }
}
