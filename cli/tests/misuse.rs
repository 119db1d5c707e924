//! Issue 7 through the real binary: what a careless or hostile user does, and what they see.
//! Each test is named after the behaviour it holds the CLI to.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{assert_clean_error, assert_ok, s, scratch, stderr, tinygpt};

/// A tiny run of `steps` steps into `out`.
fn train_tiny(out: &Path, steps: &str) {
    assert_ok(&tinygpt(&["train", "--preset", "tiny", "--steps", steps, "--threads", "1", "--out", s(out)]));
}

fn pointer(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("latest.json")).unwrap()).unwrap()
}

/// A long training run whose first stderr line ("training …") has been read.
fn spawn_long_run(out: &Path, config: Option<&Path>) -> (Child, BufReader<std::process::ChildStderr>) {
    let mut args = vec!["train", "--steps", "100000", "--threads", "1", "--out", s(out)];
    match config {
        Some(c) => args.extend(["--config", s(c)]),
        None => args.extend(["--preset", "tiny"]),
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_tinygpt"))
        .args(&args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.starts_with("training "), "{first}");
    (child, stderr)
}

// 1
#[test]
fn train_refuses_an_out_folder_holding_a_run_unless_resumed_or_overwritten() {
    let dir = scratch("occupied");
    let run = dir.join("run");
    train_tiny(&run, "2");
    let before = std::fs::read(run.join("gen-000001/weights.f32")).unwrap();
    let out = tinygpt(&["train", "--preset", "tiny", "--steps", "2", "--threads", "1", "--out", s(&run)]);
    assert_clean_error(&out, &["already holds a run", "--resume", "--overwrite"]);
    assert_eq!(
        std::fs::read(run.join("gen-000001/weights.f32")).unwrap(),
        before,
        "the old run is untouched"
    );

    let out = tinygpt(&[
        "train",
        "--preset",
        "tiny",
        "--steps",
        "1",
        "--threads",
        "1",
        "--out",
        s(&run),
        "--overwrite",
    ]);
    assert_ok(&out);
    assert_eq!(pointer(&run)["previous"], serde_json::json!([]), "the old run is gone, not kept as previous");
    // Resuming into the run's own folder needs neither.
    assert_ok(&tinygpt(&["train", "--resume", s(&run), "--steps", "1", "--threads", "1"]));
}

// 3, and the concurrency test the issue asks for.
#[test]
fn a_second_writer_is_refused_at_once_naming_the_pid_and_readers_keep_working_during_saves() {
    let dir = scratch("two-writers");
    let run = dir.join("run");
    let config = dir.join("often.json");
    // A checkpoint every 5 steps keeps saves going while the others run.
    std::fs::write(&config, r#"{"preset": "tiny", "training": {"checkpoint_interval": 5, "eval_interval": 1000, "batch_size": 4}}"#)
        .unwrap();
    let (mut first, mut first_err) = spawn_long_run(&run, Some(&config));
    let pid = first.id().to_string();
    // Wait for a checkpoint so that there is something to resume and to read.
    let mut line = String::new();
    while !line.starts_with("checkpoint ") {
        line.clear();
        first_err.read_line(&mut line).unwrap();
    }

    for second in [
        vec!["train", "--resume", s(&run), "--steps", "5", "--threads", "1"],
        vec!["train", "--preset", "tiny", "--out", s(&run), "--overwrite", "--threads", "1"],
    ] {
        let started = Instant::now();
        let out = tinygpt(&second);
        assert_clean_error(&out, &["in use by another training process", &format!("pid {pid}")]);
        assert!(started.elapsed() < Duration::from_secs(10), "refused at once");
    }
    // Readers take no lock and succeed while the writer keeps saving.
    for _ in 0..5 {
        let out = tinygpt(&["sample", "--model", s(&run), "--tokens", "5", "--threads", "1"]);
        assert_ok(&out);
        let out = tinygpt(&["export", "--model", s(&run), "--out", s(&dir.join("x.safetensors"))]);
        assert_ok(&out);
    }
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let mut rest = String::new();
    first_err.read_to_string(&mut rest).unwrap();
    first.wait().unwrap();
    // Every checkpoint the first writer kept loads.
    let listing = tinygpt(&["checkpoints", s(&run)]);
    assert_ok(&listing);
    let text = String::from_utf8_lossy(&listing.stdout);
    let generations: Vec<&str> = text.lines().skip(1).collect();
    assert!(!generations.is_empty(), "{text}");
    for g in generations {
        assert!(g.contains("verified"), "{text}");
        let id = g.split_whitespace().next().unwrap();
        assert_ok(&tinygpt(&["eval", "--model", s(&run), "--generation", id, "--threads", "1"]));
    }
}

// 4
#[test]
fn export_on_a_full_disk_leaves_an_existing_file_intact() {
    let dir = scratch("full-disk");
    let run = dir.join("run");
    train_tiny(&run, "1");
    let file = dir.join("model.safetensors");
    assert_ok(&tinygpt(&["export", "--model", s(&run), "--out", s(&file)]));
    let before = std::fs::read(&file).unwrap();
    // A 1-block file size limit makes every larger write fail (EFBIG) as a full disk would.
    let script = format!(
        "trap '' XFSZ; ulimit -f 1; exec {} export --model {} --out {}",
        env!("CARGO_BIN_EXE_tinygpt"),
        s(&run),
        s(&file)
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_clean_error(&out, &["model.safetensors"]);
    assert_eq!(std::fs::read(&file).unwrap(), before, "the old export still imports");
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "no temp file left behind: {leftovers:?}");
}

// 6
#[test]
fn thread_counts_out_of_range_are_refused_saying_what_is_allowed() {
    for bad in ["100000", "0", "-2"] {
        let out = tinygpt(&["bench", "--preset", "tiny", "--steps", "1", "--threads", bad]);
        assert_clean_error(&out, &["--threads must be between 1 and"]);
    }
}

// 7
#[test]
fn training_that_cannot_fit_in_memory_is_refused_with_the_estimate_before_allocating() {
    let dir = scratch("oom");
    let started = Instant::now();
    let out = tinygpt(&["train", "--preset", "tiny", "--batch", "1000000000", "--out", s(&dir.join("a"))]);
    assert_clean_error(&out, &["training needs about", "memory"]);
    let config = dir.join("long-context.json");
    std::fs::write(
        &config,
        r#"{"model": {"model_name": "x", "vocab_size": 256, "context_length": 65536, "n_layers": 2,
            "n_heads": 2, "d_model": 64, "d_mlp": 256, "dropout": 0.0, "tie_embeddings": true,
            "dtype": "float32"}}"#,
    )
    .unwrap();
    let out = tinygpt(&["train", "--config", s(&config), "--out", s(&dir.join("b"))]);
    assert_clean_error(&out, &["training needs about", "memory"]);
    assert!(started.elapsed() < Duration::from_secs(20), "refused before allocating");
    assert!(!dir.join("a").exists() && !dir.join("b").exists(), "nothing was created");
}

// 10
#[test]
fn oversized_inputs_are_refused_before_they_are_read() {
    let dir = scratch("unbounded");
    let out = tinygpt(&["train", "--data", "/dev/zero", "--out", s(&dir.join("run"))]);
    assert_clean_error(&out, &["/dev/zero", "512 MiB"]);
    // A header length far beyond the file: refused from the first 8 bytes.
    let file = dir.join("bad.safetensors");
    let mut bytes = (3u64 << 30).to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}      ");
    std::fs::write(&file, &bytes).unwrap();
    let out = tinygpt(&["import", "--in", s(&file), "--out", s(&dir.join("imp"))]);
    assert_clean_error(&out, &["bad.safetensors", "header length"]);
}

// 12
#[test]
fn an_out_folder_that_cannot_be_written_fails_before_training() {
    let dir = scratch("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    for out_dir in [s(&file), "/proc/tinygpt-cannot-exist"] {
        let out =
            tinygpt(&["train", "--preset", "tiny", "--steps", "50", "--threads", "1", "--out", out_dir]);
        assert_clean_error(&out, &[out_dir]);
        assert!(!stderr(&out).contains("training "), "failed before training: {}", stderr(&out));
    }
}

// 13
#[test]
fn sigterm_saves_a_checkpoint_before_exiting() {
    let run = scratch("sigterm").join("run");
    let (mut child, mut err) = spawn_long_run(&run, None);
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    child.wait().unwrap();
    assert!(rest.contains("interrupted at step"), "{rest}");
    assert!(run.join("latest.json").exists(), "{rest}");
}

// 14
#[test]
fn a_corrupt_latest_names_the_intact_generation_which_generation_then_loads() {
    let dir = scratch("corrupt-latest");
    let run = dir.join("run");
    train_tiny(&run, "1");
    assert_ok(&tinygpt(&["train", "--resume", s(&run), "--steps", "1", "--threads", "1"]));
    let latest = pointer(&run)["latest"].as_str().unwrap().to_string();
    let weights = run.join(&latest).join("weights.f32");
    let mut w = std::fs::read(&weights).unwrap();
    w[100] ^= 4;
    std::fs::write(&weights, w).unwrap();
    for cmd in [&["eval", "--model"][..], &["sample", "--model"], &["train", "--resume"]] {
        let out = tinygpt(&[cmd, &[s(&run), "--threads", "1"]].concat());
        assert_clean_error(
            &out,
            &["weights.f32", "gen-000001 (step 1) is intact", "--generation gen-000001"],
        );
    }
    let export = dir.join("older.safetensors");
    let out = tinygpt(&["export", "--model", s(&run), "--generation", "1", "--out", s(&export)]);
    assert_ok(&out);
    assert!(stderr(&out).contains("step 1"), "{}", stderr(&out));
    let listing = tinygpt(&["checkpoints", s(&run)]);
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(text.contains("gen-000001") && text.contains("verified"), "{text}");
    assert!(text.contains(&latest) && text.contains("CORRUPT"), "{text}");
    let out = tinygpt(&["eval", "--model", s(&run), "--generation", "7"]);
    assert_clean_error(&out, &["gen-000007", "the saved ones are gen-000001, gen-000002"]);
}

// 15
#[test]
fn loss_history_records_every_steps_train_loss() {
    let run = scratch("history").join("run");
    train_tiny(&run, "4");
    let latest = pointer(&run)["latest"].as_str().unwrap().to_string();
    let history: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(run.join(latest).join("loss_history.json")).unwrap()).unwrap();
    let steps: Vec<u64> = history.iter().map(|p| p["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [1, 2, 3, 4]);
    assert!(history[3]["val_loss"].is_number(), "the last step was evaluated: {history:?}");
}

// 16
#[test]
fn resume_with_steps_keeps_the_original_learning_rate_schedule() {
    let dir = scratch("schedule");
    let config = dir.join("cosine.json");
    // No warm-up: the cosine decays from the first step, so a stretched schedule shows.
    std::fs::write(
        &config,
        r#"{"preset": "tiny", "training": {"max_steps": 6, "warmup_steps": 0, "checkpoint_interval": 1, "batch_size": 4}}"#,
    )
    .unwrap();
    let straight = dir.join("straight");
    assert_ok(&tinygpt(&["train", "--config", s(&config), "--threads", "1", "--out", s(&straight)]));
    // The straight run keeps its last two generations: steps 5 and 6. Resume from 5 for
    // 2 more steps: step 6 must be the straight run's step 6.
    let resumed = dir.join("resumed");
    let out = tinygpt(&[
        "train",
        "--resume",
        s(&straight),
        "--generation",
        "gen-000005",
        "--steps",
        "2",
        "--threads",
        "1",
        "--out",
        s(&resumed),
    ]);
    assert_ok(&out);
    let at_step_6 = |root: &Path| {
        let text = String::from_utf8(tinygpt(&["checkpoints", s(root)]).stdout).unwrap();
        let line =
            text.lines().find(|l| l.split_whitespace().nth(1) == Some("6")).expect("a step-6 generation");
        let id = line.split_whitespace().next().unwrap().to_string();
        std::fs::read(root.join(id).join("weights.f32")).unwrap()
    };
    assert!(at_step_6(&straight) == at_step_6(&resumed), "the resumed step 6 used another learning rate");
}

// 20
#[test]
fn messages_say_what_is_wrong_in_the_users_terms() {
    let out = tinygpt(&["sample"]);
    assert_clean_error(&out, &["--model"]);
    let out = tinygpt(&[]);
    let err = stderr(&out);
    assert!(err.contains("Usage: tinygpt") && err.contains("train"), "{err}");
    assert!(!err.contains("error: Train"), "{err}");
    let out = tinygpt(&["sample", "--model", "nowhere", "--temperature", "-1"]);
    assert_clean_error(&out, &["--temperature must be 0 or more, got -1"]);

    let run = scratch("messages").join("run");
    train_tiny(&run, "1");
    std::fs::remove_file(run.join("latest.json")).unwrap();
    let out = tinygpt(&["eval", "--model", s(&run)]);
    assert_clean_error(&out, &["latest.json", "is missing", "--generation gen-000001"]);
    assert!(!stderr(&out).contains("interrupted"), "{}", stderr(&out));
    for internal in ["LoadOptions", "memory::", "`list`"] {
        assert!(!stderr(&out).contains(internal), "{}", stderr(&out));
    }
}

// 21
#[test]
fn config_and_flag_mistakes_are_refused_not_ignored() {
    let dir = scratch("strict");
    let config = dir.join("typo.json");
    std::fs::write(
        &config,
        r#"{"model": {"model_name": "x", "vocab_size": 256, "context_length": 32, "n_layers": 2,
            "n_layer": 8, "n_heads": 3, "d_model": 48, "d_mlp": 192, "dropout": 0.0,
            "tie_embeddings": true, "dtype": "float32"}}"#,
    )
    .unwrap();
    let out = tinygpt(&["train", "--config", s(&config), "--out", s(&dir.join("run"))]);
    assert_clean_error(&out, &["unknown field `n_layer`"]);
    let out = tinygpt(&["train", "--preset", "tiny", "--force", "--out", s(&dir.join("run"))]);
    assert_clean_error(&out, &["--force"]);
    assert!(!dir.join("run").exists());
}

// Full disk during training: the save fails in words, the previous checkpoint still loads.
#[test]
fn a_save_on_a_full_disk_fails_saying_the_previous_checkpoint_is_intact() {
    let dir = scratch("full-disk-train");
    let run = dir.join("run");
    train_tiny(&run, "2");
    let script = format!(
        "trap '' XFSZ; ulimit -f 1; exec {} train --resume {} --steps 1 --threads 1",
        env!("CARGO_BIN_EXE_tinygpt"),
        s(&run)
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim().lines().last().unwrap();
    assert!(last.contains("saving the checkpoint at step 3 failed"), "{err}");
    assert!(last.contains(&format!("--resume {}", s(&run))), "{err}");
    let eval = tinygpt(&["eval", "--model", s(&run), "--threads", "1"]);
    assert_ok(&eval);
    assert_eq!(pointer(&run)["latest"], "gen-000001");
}
