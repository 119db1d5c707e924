//! What every CLI test does: run the real `tinygpt` binary, give each test a scratch
//! folder of its own, and read what the binary said. Each test file uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the binary Cargo built for these tests.
pub fn tinygpt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tinygpt")).args(args).output().expect("the binary runs")
}

/// Runs the binary and asserts it succeeded, naming the arguments and its stderr when not.
pub fn ok(args: &[&str]) -> Output {
    let out = tinygpt(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out
}

/// An empty folder for the test `name` of this test file (the file's name and the process
/// id keep concurrent test binaries and earlier runs apart).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tinygpt-{}-{}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path as the `&str` an argument list takes.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{}", stderr(out));
}

/// A refusal as users should see it: exit code 1, no panic, one line naming each of `needles`.
pub fn assert_clean_error(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
}

/// The newest generation's `name` file in the store `run`, as text.
pub fn latest_file(run: &Path, name: &str) -> String {
    let mut gens: Vec<_> = std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gen-"))
        .collect();
    gens.sort();
    std::fs::read_to_string(run.join(gens.last().expect("a generation")).join(name)).unwrap()
}

/// The numbers that stand between `before` and `after` on the lines of `text` that hold
/// both (e.g. the steps of `step N  train …` log lines), in order.
pub fn steps_of(text: &str, before: &str, after: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| {
            let rest = &l[l.find(before)? + before.len()..];
            rest[..rest.find(after)?].trim().parse().ok()
        })
        .collect()
}

/// `tinygpt lora train` of `base` (a run folder, or `builtin`) on `data` into `out`, on one
/// thread, with `extra` after: each test passes only what it is about (steps, rates,
/// presets, resume) and asserts on the output itself, since some expect a refusal.
pub fn lora_train(base: &Path, data: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args =
        vec!["lora", "train", "--base", s(base), "--data", s(data), "--threads", "1", "--out", s(out)];
    args.extend(extra);
    tinygpt(&args)
}

/// A `tiny` base trained 2 steps in `dir`, and a Rust-like text to adapt it to.
pub fn tiny_base_and_code(dir: &Path) -> (PathBuf, PathBuf) {
    let base = dir.join("base");
    ok(&["train", "--preset", "tiny", "--steps", "2", "--threads", "1", "--out", s(&base)]);
    let data = dir.join("code.txt");
    std::fs::write(&data, "fn main() { println!(\"hello\"); }\n".repeat(200)).unwrap();
    (base, data)
}
