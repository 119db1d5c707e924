//! How much memory training a model takes, estimated before anything is allocated, so that
//! a run that cannot fit is refused with a number instead of aborting the process (natively)
//! or killing the worker (in the browser). One function serves the CLI, the worker and the
//! page's preset picker.

use crate::error::ModelError;
use crate::{LoraConfig, ModelConfig};

/// A wasm32 module addresses at most 4 GiB, whatever the machine has.
pub const WASM32_ADDRESS_SPACE: u64 = 4 << 30;

/// Estimated bytes to train `model` at `batch` rows of `context_length` tokens: weights,
/// gradients and both AdamW moments (4 × params × 4 bytes = params × 16), plus the
/// activations a step keeps for backward, doubled for their gradients
/// (`activation_values`). An estimate, not a bound: allocator slack and temporaries come
/// on top.
///
/// Counted in saturating u64, so a hostile config (any sizes, any batch) gives a huge number
/// instead of overflowing, on wasm32 too.
pub fn training_memory_bytes(model: &ModelConfig, batch: usize) -> u64 {
    let activations = activation_values(model, batch, model.context_length);
    mul(&[16, param_count(model)]).saturating_add(mul(&[4, 2, activations]))
}

/// Estimated bytes to train `lora`'s adapter on `model`, frozen, at `batch` rows of `window`
/// tokens. Differs from [`training_memory_bytes`] in what makes a LoRA run of a large base
/// cheap: the base's weights are kept (4 bytes a parameter) but have no gradients and no
/// AdamW moments, which only the adapter's parameters have (16 bytes each); and the
/// activations are those of the run's window, which may be shorter than the base's context
/// (a GPT-2 base's 1,024 positions, adapted on windows of 256). The activations and their
/// gradients are a full run's at that window: backward still goes through every frozen
/// layer to reach the adapters in the layers below. An estimate, as the other.
pub fn adapter_training_memory_bytes(
    model: &ModelConfig,
    lora: &LoraConfig,
    batch: usize,
    window: usize,
) -> u64 {
    let adapter = lora.param_count(model) as u64;
    let activations = activation_values(model, batch, window);
    mul(&[4, param_count(model)]).saturating_add(mul(&[16, adapter])).saturating_add(mul(&[
        4,
        2,
        activations,
    ]))
}

/// f32 values a training step of `model` at `batch` rows of `seq` tokens keeps for
/// backward. Per layer (B, T, C, F, H = batch, seq, d_model, d_mlp, heads): about 10·BTC
/// (norms, q/k/v, attention output, projections, residuals) + 2·BTF (MLP) + BHT²
/// (attention probabilities); the head keeps logits and their softmax, 2·BTV; the final
/// norm 2·BTC.
fn activation_values(model: &ModelConfig, batch: usize, seq: usize) -> u64 {
    let [b, t, c, f, h, v, l] =
        [batch, seq, model.d_model, model.d_mlp, model.n_heads, model.vocab_size, model.n_layers]
            .map(|x| x as u64);
    let per_layer = mul(&[10, b, t, c]).saturating_add(mul(&[2, b, t, f])).saturating_add(mul(&[b, h, t, t]));
    mul(&[l, per_layer]).saturating_add(mul(&[2, b, t, v])).saturating_add(mul(&[2, b, t, c]))
}

/// `ModelConfig::param_count`, saturating (a hostile config must not overflow here).
fn param_count(model: &ModelConfig) -> u64 {
    let [t, c, f, v, l] =
        [model.context_length, model.d_model, model.d_mlp, model.vocab_size, model.n_layers]
            .map(|x| x as u64);
    let per_block =
        mul(&[4, c, c]).saturating_add(mul(&[2, c, f])).saturating_add(f).saturating_add(mul(&[9, c]));
    mul(&[v, c])
        .saturating_add(mul(&[t, c]))
        .saturating_add(mul(&[l, per_block]))
        .saturating_add(mul(&[2, c]))
}

/// The saturating product of `xs`.
fn mul(xs: &[u64]) -> u64 {
    xs.iter().fold(1u64, |acc, &x| acc.saturating_mul(x))
}

/// The largest single buffer training `model` at `batch` allocates, in f32 values, and what
/// it is: the token embedding (V·C), an MLP weight (C·F), the logits (B·T·V), the attention
/// probabilities (B·H·T²) or the MLP's hidden activations (B·T·F). A GPU binds every buffer
/// whole, so this must fit one storage binding. The optimizer's flat per-group buffers are
/// not counted: they split into shards of one binding each (`tinygpt_optim`'s buffer
/// sharding). Saturating, as [`training_memory_bytes`].
pub fn largest_tensor(model: &ModelConfig, batch: usize) -> (&'static str, u64) {
    let [b, t, c, f, h, v] =
        [batch, model.context_length, model.d_model, model.d_mlp, model.n_heads, model.vocab_size]
            .map(|x| x as u64);
    [
        ("token embedding", mul(&[v, c])),
        ("MLP weight", mul(&[c, f])),
        ("logits", mul(&[b, t, v])),
        ("attention probabilities", mul(&[b, h, t, t])),
        ("MLP activations", mul(&[b, t, f])),
    ]
    .into_iter()
    .fold(("token embedding", 0), |best, x| if x.1 > best.1 { x } else { best })
}

/// Refuses to train `model` at `batch` when [`training_memory_bytes`] exceeds `available`
/// bytes; `available_what` names that budget for the message ("physical memory", "the
/// 4 GiB wasm32 address space"). Returns the estimate otherwise.
pub fn check_training_memory(
    model: &ModelConfig,
    batch: usize,
    available: u64,
    available_what: &str,
) -> Result<u64, ModelError> {
    within(training_memory_bytes(model, batch), available, available_what)
}

/// Refuses to train `lora`'s adapter on `model` at `batch` × `window` when
/// [`adapter_training_memory_bytes`] plus `extra` bytes (what the caller holds besides the
/// run, such as a second copy of the base's weights) exceed `available`; the estimate
/// otherwise. The refusal is [`check_training_memory`]'s.
pub fn check_adapter_training_memory(
    model: &ModelConfig,
    lora: &LoraConfig,
    batch: usize,
    window: usize,
    extra: u64,
    available: u64,
    available_what: &str,
) -> Result<u64, ModelError> {
    let needed = adapter_training_memory_bytes(model, lora, batch, window).saturating_add(extra);
    within(needed, available, available_what)
}

/// `needed`, or the one refusal both checks make when it exceeds `available`.
fn within(needed: u64, available: u64, available_what: &str) -> Result<u64, ModelError> {
    if needed > available {
        return Err(ModelError::OutOfMemory {
            needed,
            available,
            available_what: available_what.to_string(),
        });
    }
    Ok(needed)
}

/// `bytes` for people: `512 MiB`, `31.7 GiB`, `1.2 EiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} bytes"),
        _ if value < 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.0} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Preset;

    #[test]
    fn the_estimate_counts_16_bytes_a_parameter_plus_activations() {
        let tiny = Preset::by_name("tiny").unwrap();
        let bytes = training_memory_bytes(&tiny.model, tiny.batch_size);
        assert!(bytes > 16 * tiny.model.param_count() as u64);
        assert!(bytes < 64 << 20, "tiny should train in well under 64 MiB: {bytes}");
        // Activations grow with the batch; parameters do not.
        assert!(training_memory_bytes(&tiny.model, 2 * tiny.batch_size) > bytes);
    }

    #[test]
    fn hostile_sizes_saturate_instead_of_overflowing() {
        let mut c = ModelConfig::reference();
        assert_eq!(training_memory_bytes(&c, usize::MAX), u64::MAX);
        for p in Preset::all() {
            let at_batch_0 = training_memory_bytes(&p.model, 0);
            assert_eq!(at_batch_0, 16 * p.model.param_count() as u64, "{}", p.name);
        }
        c.d_model = usize::MAX;
        assert_eq!(training_memory_bytes(&c, 1), u64::MAX);
        c = ModelConfig::reference();
        c.context_length = 1 << 16;
        c.n_heads = 1 << 16;
        assert!(training_memory_bytes(&c, 1 << 30) > WASM32_ADDRESS_SPACE);
    }

    #[test]
    fn a_model_that_cannot_fit_is_refused_with_the_estimate_and_the_budget() {
        // 1 layer, d_model 13312: under the 2^31-parameter limit, but ~34 GB to train.
        let c = ModelConfig {
            n_layers: 1,
            n_heads: 8,
            d_model: 13312,
            d_mlp: 4 * 13312,
            ..ModelConfig::reference()
        };
        c.validate().unwrap();
        let err = check_training_memory(&c, 1, WASM32_ADDRESS_SPACE, "the 4 GiB wasm32 address space")
            .unwrap_err()
            .to_string();
        assert!(err.contains("GiB") && err.contains("wasm32 address space"), "{err}");
        let small = Preset::by_name("small").unwrap();
        check_training_memory(&small.model, small.batch_size, WASM32_ADDRESS_SPACE, "wasm32").unwrap();
    }

    #[test]
    fn a_lora_run_counts_the_frozen_base_once_and_the_adapter_sixteen_times() {
        let model = ModelConfig::gpt2_124m_shape();
        let lora = LoraConfig::preset("qvo-r8").unwrap();
        assert_eq!(model.param_count(), 124_439_808);
        assert_eq!(lora.param_count(&model), 442_368); // 12 layers × 3 targets × 8 × (768 + 768)
                                                       // By hand at batch 4 × window 256: per layer 10·4·256·768 + 2·4·256·3072 + 4·12·256²
                                                       // = 17,301,504 values, × 12 layers, + logits and softmax 2·1024·50257 + final norm
                                                       // 2·1024·768 = 312,117,248 activation values, × 4 bytes × 2 (their gradients).
        let activations = 312_117_248u64 * 8;
        let expected = 4 * 124_439_808 + 16 * 442_368 + activations;
        assert_eq!(adapter_training_memory_bytes(&model, &lora, 4, 256), expected);
        assert_eq!(expected, 3_001_775_104);
        // `tinygpt bench --config configs/gpt2-124m-lora.json --lora qvo-r8 --threads 2`
        // (context 256, so the base is 590k parameters smaller) measured 2.03 GB peak resident
        // (docs/benchmarks-log.md, 2026-12-05): the estimate is above it, by under 1.5×.
        let measured_peak = 2_030_000_000u64;
        let native = ModelConfig { context_length: 256, ..model.clone() };
        let estimate = adapter_training_memory_bytes(&native, &lora, 4, 256);
        assert!(estimate > measured_peak && estimate < measured_peak * 3 / 2, "{estimate}");
        // So it fits wasm32's 4 GiB, where full training at the base's context does not even
        // at batch 1 (16 × 124M + activations at 1 × 1,024: 5.39 GB).
        assert!(expected < WASM32_ADDRESS_SPACE);
        assert_eq!(training_memory_bytes(&model, 1), 5_393_944_576);
        // A longer window costs activations, not weights.
        let window_1024 = adapter_training_memory_bytes(&model, &lora, 4, 1024);
        assert!(window_1024 > WASM32_ADDRESS_SPACE, "{window_1024}");
        assert_eq!(adapter_training_memory_bytes(&model, &lora, 0, 256), 4 * 124_439_808 + 16 * 442_368);
    }

    #[test]
    fn an_adapter_that_cannot_fit_is_refused_counting_what_the_caller_holds_besides() {
        let model = ModelConfig::gpt2_124m_shape();
        let lora = LoraConfig::preset("qvo-r8").unwrap();
        let budget = WASM32_ADDRESS_SPACE;
        let fits = check_adapter_training_memory(&model, &lora, 4, 256, 0, budget, "wasm32").unwrap();
        assert_eq!(fits, 3_001_775_104);
        let err = check_adapter_training_memory(&model, &lora, 4, 256, 2 << 30, budget, "wasm32")
            .unwrap_err()
            .to_string();
        assert!(err.contains("4.8 GiB") && err.contains("wasm32"), "{err}");
        assert_eq!(adapter_training_memory_bytes(&model, &lora, usize::MAX, 256), u64::MAX);
    }

    #[test]
    fn the_largest_tensor_is_named_with_its_size() {
        let tiny = Preset::by_name("tiny").unwrap();
        // V·C = 256·48 against B·T·V = 16·32·256 logits.
        assert_eq!(largest_tensor(&tiny.model, tiny.batch_size), ("logits", 16 * 32 * 256));
        assert_eq!(largest_tensor(&tiny.model, 1), ("token embedding", 256 * 48));
    }

    #[test]
    fn bytes_read_like_a_person_would_write_them() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(34_000_000_000), "32 GiB");
    }
}
