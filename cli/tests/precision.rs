//! `--precision f32|mixed` (issue 34) through the real binary: refused on the CPU backends in
//! one line; on wgpu a mixed run says what its matmul runs and why, writes its precision and
//! loss scale into the checkpoint, and keeps them on resume unless told otherwise; an f32
//! run's files have neither field. The wgpu parts pass quietly where no adapter opens.

mod common;

use common::{assert_ok, latest_file, s, scratch, stderr, tinygpt};

/// Whether a wgpu adapter opens here (a bench step of `tiny`).
fn wgpu_opens() -> bool {
    let out = tinygpt(&["bench", "--backend", "wgpu", "--preset", "tiny", "--steps", "1"]);
    if !out.status.success() {
        eprintln!("no wgpu adapter, skipped: {}", stderr(&out));
    }
    out.status.success()
}

#[test]
fn mixed_on_a_cpu_backend_is_refused_in_one_line() {
    for command in
        [&["train", "--preset", "tiny", "--steps", "1"][..], &["bench", "--preset", "tiny", "--steps", "1"]]
    {
        for backend in ["cpu", "checked"] {
            let out = scratch("refused");
            let mut args = command.to_vec();
            args.extend(["--backend", backend, "--precision", "mixed"]);
            if command[0] == "train" {
                args.extend(["--out", s(&out)]);
            }
            let result = tinygpt(&args);
            let err = stderr(&result);
            assert_eq!(result.status.code(), Some(1), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains("--precision mixed runs on --backend wgpu"), "{err}");
            assert!(!out.join("latest.json").exists(), "nothing trained");
        }
    }
    let bad = tinygpt(&["bench", "--precision", "bf16"]);
    assert!(stderr(&bad).contains("use f32 or mixed"), "{}", stderr(&bad));
}

#[test]
fn an_f32_run_writes_no_precision_and_no_loss_scale() {
    let out = scratch("f32");
    let run = tinygpt(&["train", "--preset", "tiny", "--steps", "2", "--threads", "1", "--out", s(&out)]);
    assert_ok(&run);
    assert!(
        stderr(&run).contains("precision f32: matmul f32: the CPU backends compute in f32"),
        "{}",
        stderr(&run)
    );
    assert!(!latest_file(&out, "training_config.json").contains("precision"));
    assert!(!latest_file(&out, "trainer_state.json").contains("loss_scale"));
}

#[test]
fn a_mixed_run_reports_its_matmul_saves_its_loss_scale_and_resumes_mixed() {
    if !wgpu_opens() {
        return;
    }
    let out = scratch("mixed");
    let wgpu = ["--backend", "wgpu", "--out", s(&out)];
    let run = tinygpt(
        &[&["train", "--preset", "tiny", "--steps", "3", "--precision", "mixed"][..], &wgpu].concat(),
    );
    assert_ok(&run);
    let err = stderr(&run);
    // shader-f16 where the adapter has it and the self-test passed; f32 with the reason otherwise.
    assert!(err.contains("precision mixed: matmul "), "{err}");
    assert!(latest_file(&out, "training_config.json").contains(r#""precision": "mixed""#));
    let state: serde_json::Value = serde_json::from_str(&latest_file(&out, "trainer_state.json")).unwrap();
    assert_eq!(state["loss_scale"]["scale"], 65536.0, "{state}");
    assert_eq!(state["loss_scale"]["growth_tracker"], 3, "{state}");

    // Resume keeps mixed; --precision f32 changes it from there on.
    let resumed = tinygpt(&[&["train", "--resume", s(&out), "--steps", "1"][..], &wgpu].concat());
    assert_ok(&resumed);
    assert!(stderr(&resumed).contains("precision mixed: matmul "), "{}", stderr(&resumed));
    let state: serde_json::Value = serde_json::from_str(&latest_file(&out, "trainer_state.json")).unwrap();
    assert_eq!((state["step"].as_u64(), state["loss_scale"]["growth_tracker"].as_u64()), (Some(4), Some(4)));
    let f32 =
        tinygpt(&[&["train", "--resume", s(&out), "--steps", "1", "--precision", "f32"][..], &wgpu].concat());
    assert_ok(&f32);
    assert!(stderr(&f32).contains("precision f32: matmul f32"), "{}", stderr(&f32));
    assert!(!latest_file(&out, "training_config.json").contains("precision"));

    let bench =
        tinygpt(&["bench", "--backend", "wgpu", "--precision", "mixed", "--preset", "tiny", "--steps", "1"]);
    assert_ok(&bench);
    let line: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(line["precision"], "mixed", "{line}");
    assert!(line["matmul_path"].is_string() && line["matmul_reason"].is_string(), "{line}");
}

#[test]
fn lora_train_takes_precision_like_train() {
    let dir = scratch("lora");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("text.txt");
    std::fs::write(&data, "To be, or not to be, that is the question. ".repeat(200)).unwrap();
    let lora = |out: &str, extra: &[&str]| {
        let out = dir.join(out);
        let args = ["lora", "train", "--base", "builtin", "--data", s(&data), "--steps", "2", "--batch", "2"];
        let result = tinygpt(&[&args[..], &["--out", s(&out)], extra].concat());
        (out, result)
    };
    let (out, refused) = lora("cpu", &["--backend", "cpu", "--precision", "mixed"]);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--precision mixed runs on --backend wgpu"), "{err}");
    assert!(!out.join("latest.json").exists(), "nothing trained");

    if !wgpu_opens() {
        return;
    }
    let (out, run) = lora("wgpu", &["--backend", "wgpu", "--precision", "mixed"]);
    assert_ok(&run);
    assert!(stderr(&run).contains("precision mixed: matmul "), "{}", stderr(&run));
    assert!(latest_file(&out, "training_config.json").contains(r#""precision": "mixed""#));
    let state: serde_json::Value = serde_json::from_str(&latest_file(&out, "trainer_state.json")).unwrap();
    assert_eq!(state["loss_scale"]["scale"], 65536.0, "{state}");
}
