//! `tinygpt lora …` and `--adapter` end to end on a tiny base: train, resume, list,
//! sample, eval, merge, export/import, and one clear line for a wrong base.

use std::path::Path;

use tinygpt_tensor::block_on;

mod common;

use common::{assert_ok, lora_train, ok, s, scratch, tiny_base_and_code, tinygpt};

#[test]
fn adapter_train_resume_list_sample_eval_merge_and_transfer() {
    let dir = scratch("flow");
    let base = dir.join("base");
    ok(&["train", "--preset", "tiny", "--steps", "3", "--threads", "1", "--out", s(&base)]);
    let data = dir.join("code.txt");
    std::fs::write(&data, "fn main() { println!(\"hello\"); }\n".repeat(200)).unwrap();
    let adapter = base.join("adapters").join("code");
    let train = |steps: &str, extra: &[&str]| {
        let args = [&["--steps", steps, "--eval-interval", "2", "--lr", "0.03"][..], extra].concat();
        lora_train(&base, &data, &adapter, &args)
    };
    let out = train("10", &["--preset", "qvo-r8"]);
    assert_ok(&out);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["steps"], 10);
    assert!(line["adapter_val_loss"].as_f64().unwrap() < line["base_val_loss"].as_f64().unwrap(), "{line}");
    assert!(line["adapter_over_base"].as_f64().unwrap() > 0.0);
    // The count-model baselines: one line repeated, so the bigram all but knows the text.
    let (unigram, bigram) =
        (line["unigram_val_loss"].as_f64().unwrap(), line["bigram_val_loss"].as_f64().unwrap());
    assert!(bigram < unigram && bigram < 1.0 && unigram < 5.55, "{line}");
    // Beside the base, never a copy of it.
    let files: Vec<String> = walk(&adapter);
    assert!(
        files.iter().any(|f| f.ends_with("adapter.f32")) && !files.iter().any(|f| f.ends_with("weights.f32"))
    );
    // A second train into the same folder is refused; --resume continues it.
    let again = train("10", &[]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    let resumed = train("12", &["--resume"]);
    assert_ok(&resumed);
    let line: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(line["steps"], 12);

    let listed = String::from_utf8(ok(&["lora", "list", "--base", s(&base)]).stdout).unwrap();
    assert!(
        listed.contains("code") && listed.contains("rank 8") && listed.contains("fits this base"),
        "{listed}"
    );

    // Sample with and without the adapter (by name), and from the merged model.
    let sample = |model: &Path, adapter: Option<&str>| {
        let mut args = vec![
            "sample",
            "--model",
            s(model),
            "--prompt",
            "fn",
            "--tokens",
            "60",
            "--temperature",
            "1",
            "--top-k",
            "0",
        ];
        args.extend(adapter.map(|a| ["--adapter", a]).into_iter().flatten());
        String::from_utf8(ok(&args).stdout).unwrap()
    };
    let (plain, adapted) = (sample(&base, None), sample(&base, Some("code")));
    assert_ne!(plain, adapted, "the adapter changes what is sampled");
    let merged = dir.join("merged");
    ok(&["lora", "merge", "--base", s(&base), "--adapter", "code", "--out", s(&merged)]);
    assert_eq!(sample(&merged, None), adapted, "the merged model samples like base + adapter");

    let eval = |adapter: Option<&str>| {
        let mut args = vec!["eval", "--model", s(&base), "--data", s(&data)];
        args.extend(adapter.map(|a| ["--adapter", a]).into_iter().flatten());
        let v: serde_json::Value = serde_json::from_slice(&ok(&args).stdout).unwrap();
        v["val_loss"].as_f64().unwrap()
    };
    assert!(eval(Some("code")) < eval(None), "the adapter lowers the loss on its own data");

    // PEFT .safetensors out and back in: the same samples.
    let file = dir.join("code.safetensors");
    ok(&["lora", "export", "--base", s(&base), "--adapter", "code", "--out", s(&file)]);
    let imported = base.join("adapters").join("imported");
    ok(&["lora", "import", "--base", s(&base), "--in", s(&file), "--out", s(&imported)]);
    assert_eq!(sample(&base, Some("imported")), adapted);

    // Another base (other weights, same shape) refuses the adapter in one line naming both.
    let other = dir.join("other");
    ok(&["train", "--preset", "tiny", "--steps", "3", "--seed", "9", "--threads", "1", "--out", s(&other)]);
    let out = tinygpt(&["sample", "--model", s(&other), "--adapter", s(&adapter), "--tokens", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(s(&base)) && stderr.contains(s(&other)) && stderr.contains("sha256"), "{stderr}");

    // The window it trained on is recorded (by default the base's context); an adapter
    // recorded with a shorter one (as the page trains) continues on that window, and no other.
    let tiny = tinygpt_model::Preset::by_name("tiny").unwrap().model;
    let store = tinygpt_ckpt::AdapterStore::new(tinygpt_ckpt::DirStore::open(&adapter).unwrap());
    let recorded = || block_on(store.config()).unwrap().context_length;
    assert_eq!(recorded(), Some(tiny.context_length));
    let half = tiny.context_length / 2;
    let mut shorter = block_on(store.load_latest(&tiny)).unwrap();
    shorter.context_length = Some(half);
    block_on(store.save(&shorter)).unwrap();
    let refused = train("14", &["--resume", "--context", &tiny.context_length.to_string()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    let names_both = stderr.contains(&format!("windows of {half} tokens"))
        && stderr.contains(&format!("the {} asked for", tiny.context_length));
    assert!(names_both, "{stderr}");
    let resumed = train("14", &["--resume"]);
    assert_ok(&resumed);
    assert_eq!(recorded(), Some(half), "continued on its own window");
}

/// `--context` trains on shorter windows of the base (what a GPT-2 base needs for memory):
/// the adapter records its window, still names the full base, and samples on it; a window
/// longer than the base's context is one clear line.
#[test]
fn lora_train_context_trains_on_windows_of_the_base() {
    let (base, data) = tiny_base_and_code(&scratch("window"));
    let context = tinygpt_model::Preset::by_name("tiny").unwrap().model.context_length;
    let adapter = base.join("adapters").join("short");
    let train = |window: usize| {
        let window = window.to_string();
        lora_train(&base, &data, &adapter, &["--steps", "4", "--eval-interval", "2", "--context", &window])
    };
    let long = train(context + 1);
    let stderr = String::from_utf8_lossy(&long.stderr);
    assert!(!long.status.success() && stderr.contains(&format!("at most {context}")), "{stderr}");
    let out = train(context / 4);
    assert_ok(&out);
    let store = tinygpt_ckpt::AdapterStore::new(tinygpt_ckpt::DirStore::open(&adapter).unwrap());
    assert_eq!(block_on(store.config()).unwrap().context_length, Some(context / 4));
    // It loads on the full base (the hash it names is the full base's) and samples there.
    ok(&["sample", "--model", s(&base), "--adapter", "short", "--prompt", "fn", "--tokens", "20"]);
}

#[test]
fn bad_adapter_options_are_one_line_errors() {
    let dir = scratch("bad");
    let data = dir.join("d.txt");
    std::fs::write(&data, "x".repeat(5000)).unwrap();
    let out_dir = dir.join("a");
    for (extra, needle) in [
        (vec!["--preset", "qv-r99"], "qv-r4"),
        (vec!["--targets", "q_proj,zz"], "zz"),
        (vec!["--preset", "qv-r4", "--rank", "2"], "not both"),
        (vec!["--rank", "0"], "rank"),
    ] {
        let out = lora_train(Path::new("builtin"), &data, &out_dir, &extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle) && !stderr.contains("panicked"), "{needle}: {stderr}");
    }
    let out = tinygpt(&["sample", "--model", "builtin", "--adapter", s(&dir.join("none")), "--tokens", "3"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}
