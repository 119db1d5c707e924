//! The presets as the page shows them: size and an estimate of the memory training needs.

use tinygpt_model::{training_memory_bytes, Preset};

use crate::protocol::PresetInfo;

pub fn preset_infos() -> Vec<PresetInfo> {
    Preset::all()
        .into_iter()
        .map(|p| PresetInfo {
            name: p.name.to_string(),
            params: p.model.param_count(),
            memory_bytes: training_memory_bytes(&p.model, p.batch_size),
            batch_size: p.batch_size,
            model_config: p.model,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_listed_with_its_size_and_memory_grows_with_it() {
        let infos = preset_infos();
        let names: Vec<&str> = infos.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, Preset::names().collect::<Vec<_>>());
        for pair in infos.windows(2) {
            assert!(pair[1].params > pair[0].params, "{} vs {}", pair[0].name, pair[1].name);
        }
        let tiny = &infos[0];
        assert_eq!(tiny.params, tiny.model_config.param_count());
        // Weights, grads and moments alone are 16 bytes a parameter; activations add more.
        assert!(tiny.memory_bytes > 16 * tiny.params as u64);
        assert!(
            tiny.memory_bytes < 64 << 20,
            "tiny should train in well under 64 MiB: {}",
            tiny.memory_bytes
        );
    }
}
