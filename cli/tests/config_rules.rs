//! How `tinygpt train` builds a run's configs from `--config` and flags: the rules of
//! `tinygpt_optim::Recipe`, the same the web worker uses (issue 7, items 17 and 18).

use std::path::Path;

mod common;

use common::{scratch, tinygpt};

/// Trains one step with `config` and `flags`; the run's training_config.json.
fn trained_config(name: &str, config: &str, flags: &[&str]) -> serde_json::Value {
    let dir = scratch(name);
    let path = dir.join("config.json");
    std::fs::write(&path, config).unwrap();
    let out = dir.join("run");
    let mut args =
        vec!["train", "--config", path.to_str().unwrap(), "--steps", "1", "--out", out.to_str().unwrap()];
    args.extend_from_slice(flags);
    let run = tinygpt(&args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let config = read_training_config(&out);
    let _ = std::fs::remove_dir_all(&dir);
    config
}

fn read_training_config(out: &Path) -> serde_json::Value {
    let pointer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("latest.json")).unwrap()).unwrap();
    let generation = pointer["latest"].as_str().unwrap();
    serde_json::from_slice(&std::fs::read(out.join(generation).join("training_config.json")).unwrap())
        .unwrap()
}

#[test]
fn lr_keeps_a_min_lr_the_config_names_and_derives_it_only_otherwise() {
    let named =
        trained_config("named", r#"{"preset": "tiny", "training": {"min_lr": 5e-5}}"#, &["--lr", "1e-3"]);
    assert_eq!(named["learning_rate"].as_f64().unwrap() as f32, 1e-3);
    assert_eq!(named["min_lr"].as_f64().unwrap() as f32, 5e-5, "the config's min_lr is kept");
    let unnamed = trained_config("unnamed", r#"{"preset": "tiny", "training": {}}"#, &["--lr", "1e-3"]);
    assert_eq!(unnamed["min_lr"].as_f64().unwrap() as f32, 1e-4, "lr/10 when the config names none");
    let help = String::from_utf8(tinygpt(&["train", "--help"]).stdout).unwrap();
    assert!(help.contains("lr/10") && help.contains("names its own min_lr"), "{help}");
}

#[test]
fn a_config_file_takes_the_preset_batch_size_unless_it_names_one_as_the_worker_does() {
    // large's batch is 12; the default training config's is 16.
    let config = trained_config("batch", r#"{"preset": "large", "training": {"eval_batches": 1}}"#, &[]);
    assert_eq!(config["batch_size"], 12);
    assert_eq!(config["eval_batches"], 1);
}
