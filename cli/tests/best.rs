//! The best generation from the terminal: early stopping ends `train` saying why, the
//! `checkpoints` listing marks the best, and `--generation best` loads it in every command
//! that loads a generation (sample, eval, export, train --resume).

use std::process::{Command, Output};

mod common;

use common::{ok, s, scratch, tinygpt};

/// A learning rate far too small to move the weights: the validation loss stalls at once,
/// so a patience of 1 stops the run within a few evaluations (deterministically).
const STALLING_RUN: &str = r#"{"preset": "tiny", "training": {"learning_rate": 1e-12, "min_lr": 1e-12,
    "schedule": "constant", "weight_decay": 0.0, "max_steps": 30, "eval_interval": 1,
    "eval_batches": 2, "checkpoint_interval": 1, "early_stop_patience": 1}}"#;

#[test]
fn early_stop_keeps_the_best_generation_which_every_loading_command_takes() {
    let dir = scratch("early");
    let config = dir.join("config.json");
    std::fs::write(&config, STALLING_RUN).unwrap();
    let run = dir.join("run");
    let out = ok(&["train", "--config", s(&config), "--threads", "1", "--out", s(&run)]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stop_line = stderr.lines().find(|l| l.starts_with("stopped early at step ")).expect(&stderr);
    assert!(
        stop_line.contains("has not improved") && stop_line.contains("early_stop_patience 1"),
        "{stop_line}"
    );
    let stopped: usize =
        stop_line["stopped early at step ".len()..].split(':').next().unwrap().parse().unwrap();
    assert!(stopped < 30, "{stop_line}");

    // stdout: one JSON line with the best val, its step and the training time to reach it.
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let best_step = summary["best_step"].as_u64().unwrap() as usize;
    assert!(best_step < stopped, "{summary}");
    assert_eq!(summary["step"].as_u64().unwrap() as usize, stopped, "{summary}");
    assert!(summary["best_val_loss"].is_number() && summary["train_seconds_to_best"].is_number());
    assert!(stderr.contains(&format!("at step {best_step} after")), "{stderr}");

    // The listing marks the best (at its step) and the latest (at the stop).
    let listing = String::from_utf8(ok(&["checkpoints", s(&run)]).stdout).unwrap();
    let marked = |mark: &str| {
        let line = listing.lines().find(|l| l.contains(mark)).unwrap_or_else(|| panic!("{mark}: {listing}"));
        let step: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        (line.split_whitespace().next().unwrap().to_string(), step)
    };
    let (best_id, step) = marked("(best)");
    assert_eq!(step, best_step, "{listing}");
    assert_eq!(marked("(latest)").1, stopped, "{listing}");

    // --generation best in eval, sample, export and train --resume: they load that one.
    let said_best = |out: &Output| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("best generation: {best_id} (step {best_step}")), "{stderr}");
    };
    let eval_best = ok(&["eval", "--model", s(&run), "--generation", "best", "--threads", "1"]);
    said_best(&eval_best);
    let eval_numbered = ok(&["eval", "--model", s(&run), "--generation", &best_id, "--threads", "1"]);
    assert_eq!(eval_best.stdout, eval_numbered.stdout);
    let sample = |generation: &str| {
        ok(&["sample", "--model", s(&run), "--generation", generation, "--tokens", "8", "--seed", "3"])
    };
    said_best(&sample("best"));
    assert_eq!(sample("best").stdout, sample(&best_id).stdout);
    let export = dir.join("best.safetensors");
    said_best(&ok(&["export", "--model", s(&run), "--generation", "best", "--out", s(&export)]));
    assert!(export.is_file());
    let branch = dir.join("branch");
    let resumed = ok(&[
        "train",
        "--resume",
        s(&run),
        "--generation",
        "best",
        "--steps",
        "1",
        "--threads",
        "1",
        "--out",
        s(&branch),
    ]);
    said_best(&resumed);
    let branch_listing = String::from_utf8(ok(&["checkpoints", s(&branch)]).stdout).unwrap();
    assert!(branch_listing
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(&(best_step + 1).to_string())));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn generation_best_without_a_validated_generation_is_one_clear_line() {
    let dir = scratch("none");
    let run = dir.join("run");
    // Two steps, evaluated only at the last (eval_interval 100): generation 1 has no
    // validation loss at its own step. Left alone, it is no best.
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"preset": "tiny", "training": {"max_steps": 2, "eval_interval": 100, "checkpoint_interval": 1}}"#,
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tinygpt"))
        .args(["train", "--config", s(&config), "--threads", "1", "--out", s(&run)])
        .output()
        .unwrap();
    assert!(child.status.success());
    // Keep only generation 1 (step 1, not evaluated).
    for entry in std::fs::read_dir(&run).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "gen-000002" || name == "best.json" {
            std::fs::remove_dir_all(run.join(&name))
                .or_else(|_| std::fs::remove_file(run.join(&name)))
                .unwrap();
        }
    }
    std::fs::write(
        run.join("latest.json"),
        r#"{"format_version": 1, "latest": "gen-000001", "previous": []}"#,
    )
    .unwrap();
    let out = tinygpt(&["eval", "--model", s(&run), "--generation", "best"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no best generation"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
