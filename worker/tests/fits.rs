//! The tab's memory check for a GPT-2-124M-shaped base: an adapter at batch 4 × 256 tokens
//! fits wasm32's 4 GiB (the frozen weights without gradients or moments, the loaded base's
//! own copy, the adapter and activations at the window), full training does not even at
//! batch 1, and a window the base has no positions for is refused with what to give.

use tinygpt_model::{LoraConfig, ModelConfig};
use tinygpt_worker::fits::{
    adapter_window, check_adapter_fits_wasm32, check_base_fits_wasm32, check_fits_wasm32,
    DEFAULT_ADAPTER_WINDOW,
};
use tinygpt_worker::incoming::is_a_sentence_for_people;

/// GPT-2-124M's shape: what `loadBase` makes of `GPT2LMHeadModel(GPT2Config())`.
fn gpt2_124m() -> ModelConfig {
    ModelConfig { tokenizer: "bpe-0000000000000000".into(), ..ModelConfig::gpt2_124m_shape() }
}

#[test]
fn a_124m_base_fits_for_an_adapter_at_4_by_256_and_is_refused_for_full_training() {
    let model = gpt2_124m();
    model.validate().unwrap();
    let window = adapter_window(&model, None).unwrap();
    assert_eq!(window, DEFAULT_ADAPTER_WINDOW);
    assert_eq!(window, 256);
    check_base_fits_wasm32(&model, 4).unwrap();
    for preset in ["qv-r4", "qvo-r8"] {
        let lora = LoraConfig::preset(preset).unwrap();
        check_adapter_fits_wasm32(&model, &lora, 4, window).unwrap();
        // The base's whole context quadruples the activations: past 4 GiB.
        let refused = check_adapter_fits_wasm32(&model, &lora, 4, 1024).unwrap_err();
        assert!(refused.message.contains("WebAssembly"), "{}", refused.message);
    }
    for batch in [1, 4] {
        let refused = check_fits_wasm32(&model, batch).unwrap_err();
        assert!(refused.message.contains("GiB"), "{}", refused.message);
    }
}

#[test]
fn the_window_is_the_bases_context_when_shorter_and_a_bad_one_says_what_to_give() {
    let short = ModelConfig { context_length: 96, ..ModelConfig::reference() };
    assert_eq!(adapter_window(&short, None).unwrap(), 96);
    assert_eq!(adapter_window(&gpt2_124m(), Some(512)).unwrap(), 512);
    for bad in [0, 97] {
        let e = adapter_window(&short, Some(bad)).unwrap_err();
        assert!(is_a_sentence_for_people(&e.message), "{}", e.message);
        assert!(e.message.contains("1 to 96"), "{}", e.message);
    }
}
