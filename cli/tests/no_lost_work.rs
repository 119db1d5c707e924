//! Issue 33's data-loss findings, end to end: an adapter never deletes or shadows a run's
//! checkpoints, a run and its adapters live in one folder without breaking each other, a
//! corrupt pointer leaves a way back that the commands show and take, and the shape of a
//! wrong base is named.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::{ok, s, scratch, tinygpt};

fn refused(args: &[&str]) -> String {
    let out = tinygpt(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} must be refused; stderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A tiny run of `steps` steps, evaluated and saved every step (the last two generations
/// and the best are kept).
fn base_run(dir: &Path, steps: &str) -> PathBuf {
    let base = dir.join("base");
    let config = dir.join("every-step.json");
    let json = format!(
        r#"{{"preset": "tiny", "training": {{"max_steps": {steps}, "eval_interval": 1, "eval_batches": 2, "checkpoint_interval": 1}}}}"#
    );
    std::fs::write(&config, json).unwrap();
    ok(&["train", "--config", s(&config), "--threads", "1", "--out", s(&base)]);
    base
}

fn data(dir: &Path) -> PathBuf {
    let data = dir.join("code.txt");
    std::fs::write(&data, "fn main() { println!(\"hello\"); }\n".repeat(200)).unwrap();
    data
}

fn lora_train(base: &Path, data: &Path, out: &Path) -> Output {
    tinygpt(&[
        "lora",
        "train",
        "--base",
        s(base),
        "--data",
        s(data),
        "--steps",
        "2",
        "--eval-interval",
        "1",
        "--threads",
        "1",
        "--out",
        s(out),
    ])
}

fn generations(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("gen-"))
        .collect();
    names.sort();
    names
}

#[test]
fn an_adapter_never_deletes_or_overwrites_a_run() {
    let dir = scratch("adapter-over-run");
    let base = base_run(&dir, "3");
    let data = data(&dir);
    // A copy of the run that lost its latest.json: an adapter saved there used to delete
    // every generation its own pointer did not name.
    let orphan = dir.join("orphan");
    std::fs::create_dir_all(&orphan).unwrap();
    for gen in generations(&base) {
        let (from, to) = (base.join(&gen), orphan.join(&gen));
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&from).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
    let before = generations(&orphan);
    let out = lora_train(&base, &data, &orphan);
    assert!(!out.status.success(), "an adapter into a run's folder must be refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds a run's checkpoints"), "{err}");
    assert!(!err.contains("step "), "refused before training: {err}");
    assert_eq!(generations(&orphan), before, "nothing was deleted");

    // Inside one of the base's generations, and over the base itself.
    let inside = base.join(generations(&base).last().unwrap());
    let err = String::from_utf8_lossy(&lora_train(&base, &data, &inside).stderr).into_owned();
    assert!(err.contains("generation"), "{err}");
    let err = String::from_utf8_lossy(&lora_train(&base, &data, &base).stderr).into_owned();
    assert!(err.contains("never written over a run"), "{err}");
    let err = String::from_utf8_lossy(&lora_train(&base, &data, &base.join("mine")).stderr).into_owned();
    assert!(err.contains("adapters"), "{err}");
    // A plain checkpoint folder (files at the top level) used as --base and --out.
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    for f in std::fs::read_dir(&inside).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), plain.join(f.file_name())).unwrap();
    }
    let out = lora_train(&plain, &data, &plain);
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ok(&["eval", "--model", s(&plain), "--threads", "1"]);
    ok(&["eval", "--model", s(&base), "--threads", "1"]);
    for gen in generations(&base) {
        ok(&["eval", "--model", s(&base), "--generation", &gen, "--threads", "1"]);
    }
}

#[test]
fn a_run_and_its_adapters_live_in_one_folder() {
    let dir = scratch("together");
    let base = base_run(&dir, "2");
    let data = data(&dir);
    let adapter = base.join("adapters").join("code");
    let out = lora_train(&base, &data, &adapter);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The base run continues and saves with its adapters beside it.
    ok(&["train", "--resume", s(&base), "--steps", "2", "--threads", "1"]);
    ok(&["checkpoints", s(&base)]);
    // An import into the run's folder saves a new generation beside the adapters.
    let file = dir.join("base.safetensors");
    ok(&["export", "--format", "nanogpt", "--model", s(&base), "--out", s(&file)]);
    ok(&["import", "--format", "nanogpt", "--in", s(&file), "--out", s(&base)]);
    // The adapter still loads (it was trained on the first weights; the import is a copy of
    // the latest, so sampling with it names the base it fits).
    assert!(adapter.join("latest.json").is_file());
    let listed = String::from_utf8(ok(&["lora", "list", "--base", s(&base)]).stdout).unwrap();
    assert!(listed.contains("code"), "{listed}");
    // --overwrite never deletes a run's adapters.
    let err = refused(&["train", "--preset", "tiny", "--steps", "1", "--out", s(&base), "--overwrite"]);
    assert!(err.contains("adapters"), "{err}");
    assert!(adapter.join("latest.json").is_file());
}

#[test]
fn a_corrupt_pointer_leaves_a_way_back_that_every_command_shows() {
    let dir = scratch("corrupt-pointer");
    let base = base_run(&dir, "4");
    let gens = generations(&base);
    assert!(gens.len() >= 2, "{gens:?}");
    let newest = gens.last().unwrap();
    // latest.json cut short, as a crash of another tool might leave it.
    let pointer = base.join("latest.json");
    let text = std::fs::read(&pointer).unwrap();
    std::fs::write(&pointer, &text[..text.len() / 2]).unwrap();

    let listed = ok(&["checkpoints", s(&base)]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    for gen in &gens {
        assert!(stdout.contains(&format!("{gen} ")) && stdout.contains("verified"), "{stdout}");
    }
    assert!(stdout.contains("latest.json") && stdout.contains(&format!("--generation {newest}")), "{stdout}");

    let err = refused(&["eval", "--model", s(&base), "--threads", "1"]);
    assert!(err.contains(newest.as_str()), "the intact generation is named: {err}");

    // The recovery route: resume from an intact generation, which saves and rewrites the
    // pointer atomically, pruning nothing that was intact.
    ok(&["train", "--resume", s(&base), "--generation", newest, "--steps", "1", "--threads", "1"]);
    let after = generations(&base);
    assert!(gens.iter().all(|g| after.contains(g)), "nothing intact was pruned: {after:?}");
    ok(&["eval", "--model", s(&base), "--threads", "1"]);
    let listed = String::from_utf8(ok(&["checkpoints", s(&base)]).stdout).unwrap();
    assert!(listed.contains("(latest)") && !listed.contains("note:"), "{listed}");
}

#[test]
fn a_corrupt_best_pointer_is_reported_the_same_way_by_checkpoints_and_sample() {
    let dir = scratch("corrupt-best");
    let base = base_run(&dir, "4");
    let best = base.join("best.json");
    assert!(best.is_file());
    std::fs::write(&best, b"{\"format_version\": 1, \"best\"").unwrap();
    let listed = String::from_utf8(ok(&["checkpoints", s(&base)]).stdout).unwrap();
    assert!(listed.contains("best.json") && listed.contains("recomputed"), "{listed}");
    let sample =
        ok(&["sample", "--model", s(&base), "--generation", "best", "--tokens", "5", "--threads", "1"]);
    let said = String::from_utf8_lossy(&sample.stderr);
    let note = listed.lines().find(|l| l.starts_with("note:") && l.contains("best.json")).unwrap();
    let reason = note.trim_start_matches("note: ");
    assert!(said.contains(reason), "the same words: {said:?} vs {reason:?}");
}

#[test]
fn an_adapter_file_and_a_stray_file_get_a_clear_line() {
    let dir = scratch("adapter-file");
    let base = base_run(&dir, "2");
    let data = data(&dir);
    let adapter = base.join("adapters").join("code");
    assert!(lora_train(&base, &data, &adapter).status.success());
    let file = dir.join("code.safetensors");
    ok(&["lora", "export", "--base", s(&base), "--adapter", s(&adapter), "--out", s(&file)]);
    let err = refused(&["sample", "--model", s(&base), "--adapter", s(&file), "--tokens", "3"]);
    assert!(err.contains("is a file") && err.contains("lora import"), "{err}");
    std::fs::write(base.join("adapters").join("notes.txt"), "mine").unwrap();
    let out = ok(&["lora", "list", "--base", s(&base)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("code"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("notes.txt"));
}

#[test]
fn an_adapter_on_a_base_of_another_shape_names_both_shapes() {
    let dir = scratch("shapes");
    let base = base_run(&dir, "2");
    let data = data(&dir);
    let adapter = dir.join("adapter");
    assert!(lora_train(&base, &data, &adapter).status.success());
    let other = dir.join("small");
    ok(&["train", "--preset", "small", "--steps", "1", "--threads", "1", "--out", s(&other)]);
    for command in [&["lora", "merge", "--out"][..], &["lora", "export", "--out"][..]] {
        let out = dir.join("merged");
        let mut args = command.to_vec();
        args.extend([s(&out), "--base", s(&other), "--adapter", s(&adapter)]);
        let err = refused(&args);
        assert!(err.contains("layers of width 48") && err.contains("layers of width"), "{err}");
        assert!(!err.contains("to save is inconsistent") && !err.contains("tensor table"), "{err}");
    }
    let err = refused(&["eval", "--model", s(&other), "--adapter", s(&adapter), "--threads", "1"]);
    assert!(!err.contains("to save is inconsistent"), "{err}");
}
