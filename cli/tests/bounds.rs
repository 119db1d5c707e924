//! Issue 33 through the real binary: inputs that would be read without end, counts that
//! would wrap, floats that are not numbers, and flags that would be silently ignored are
//! each refused with one line naming the flag (or file) and what is allowed.

use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{assert_clean_error, s, scratch, stderr, tinygpt};

/// The run of `args`, and its peak resident memory in KiB where GNU time can tell it.
fn tinygpt_measured(args: &[&str]) -> (Output, Option<u64>) {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return (tinygpt(args), None);
    }
    let out = Command::new(time)
        .arg("-v")
        .arg(env!("CARGO_BIN_EXE_tinygpt"))
        .args(args)
        .output()
        .expect("the binary runs under time");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let rss = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok());
    // What the binary itself wrote: the first line (time's report follows it).
    let first = err.lines().next().unwrap_or_default().to_string();
    (Output { stderr: format!("{first}\n").into_bytes(), ..out }, rss)
}

/// A sparse file of `len` bytes (no disk used) that starts with `start`.
fn sparse(path: &Path, start: &[u8], len: u64) {
    std::fs::write(path, start).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// 1.5 GB whose header is not JSON: refused from the header, in far less memory than the
/// file (the lora import read all of it first).
#[test]
fn a_large_file_with_a_bad_header_is_refused_from_its_header() {
    let dir = scratch("bad-header");
    let file = dir.join("big.safetensors");
    let header = b"not a JSON header, not at all";
    sparse(&file, &[&(header.len() as u64).to_le_bytes()[..], header].concat(), 1_500_000_000);
    let (imp, ad) = (dir.join("imp"), dir.join("ad"));
    let runs: [Vec<&str>; 2] = [
        vec!["import", "--in", s(&file), "--out", s(&imp)],
        vec!["lora", "import", "--base", "builtin", "--in", s(&file), "--out", s(&ad)],
    ];
    for args in runs {
        let (out, rss) = tinygpt_measured(&args);
        assert_clean_error(&out, &["big.safetensors", "header"]);
        if let Some(kib) = rss {
            assert!(kib < 300_000, "{args:?}: {kib} KiB resident for a refused 1.5 GB file");
        }
    }
    assert!(!dir.join("imp").exists() && !dir.join("ad").exists());
}

#[test]
fn files_that_are_not_regular_or_too_large_are_refused_naming_the_limit() {
    let out = tinygpt(&["lora", "import", "--base", "builtin", "--in", "/dev/zero", "--out", "/tmp/never"]);
    assert_clean_error(&out, &["/dev/zero", "not a regular file"]);
    let out = tinygpt(&["import", "--in", "/dev/zero", "--out", "/tmp/never"]);
    assert_clean_error(&out, &["/dev/zero", "not a regular file"]);

    let dir = scratch("too-large");
    let file = dir.join("huge.safetensors");
    sparse(&file, &[&2u64.to_le_bytes()[..], b"{}"].concat(), 5 << 30);
    let out = tinygpt(&["lora", "import", "--base", "builtin", "--in", s(&file), "--out", s(&dir.join("a"))]);
    assert_clean_error(&out, &["huge.safetensors", "bytes is more than the", "this reader accepts"]);
    let out = tinygpt(&["import", "--in", s(&file), "--out", s(&dir.join("b"))]);
    assert_clean_error(&out, &["huge.safetensors", "bytes is more than the", "this reader accepts"]);
}

/// `tinygpt lora train --base builtin` on a small text written into `dir`, with the extra
/// flags it is called with, into `dir/never`: for refusals, which must leave that unmade.
fn lora_into_never(dir: &Path) -> impl Fn(&[&str]) -> Output {
    let data = dir.join("data.txt");
    std::fs::write(&data, "To be or not to be, that is the question.\n".repeat(50)).unwrap();
    let never = dir.join("never");
    move |extra| {
        let mut args = vec!["lora", "train", "--base", "builtin", "--data", s(&data)];
        args.extend(["--out", s(&never), "--threads", "1"]);
        args.extend(extra);
        tinygpt(&args)
    }
}

#[test]
fn counts_out_of_range_are_refused_naming_the_flag_and_its_range() {
    let dir = scratch("counts");
    let lora = lora_into_never(&dir);
    let cases: Vec<(Output, &str)> = vec![
        (tinygpt(&["sample", "--model", "builtin", "--tokens", "18446744073709551613"]), "--tokens"),
        (tinygpt(&["sample", "--model", "builtin", "--tokens", "0"]), "--tokens"),
        (tinygpt(&["sample", "--model", "builtin", "--top-k", "257"]), "--top-k"),
        (tinygpt(&["bench-generate", "--windows", "576460752303423489"]), "--windows"),
        (tinygpt(&["bench-generate", "--windows", "0"]), "--windows"),
        (tinygpt(&["train", "--steps", "18446744073709551615"]), "--steps"),
        (tinygpt(&["bench", "--steps", "9223372036854775808"]), "--steps"),
        (tinygpt(&["debug-state", "--model", "x", "--out", "y", "--batch", "-1"]), "--batch"),
        (lora(&["--eval-interval", "0"]), "--eval-interval"),
        (lora(&["--rank", "5000"]), "--rank"),
        (lora(&["--batch", "0"]), "--batch"),
        (lora(&["--steps", "18446744073709551615"]), "--steps"),
    ];
    for (out, flag) in cases {
        assert_clean_error(&out, &[&format!("{flag} must be"), " to ", "got "]);
    }
    assert!(!dir.join("never").exists());
}

#[test]
fn floats_that_are_not_finite_are_refused_naming_the_flag_and_its_range() {
    let dir = scratch("floats");
    let lora = lora_into_never(&dir);
    let cases: Vec<(Output, &str, &str)> = vec![
        (lora(&["--lr", "NaN"]), "--lr", "positive"),
        (lora(&["--lr", "inf"]), "--lr", "positive"),
        (lora(&["--lr", "1e300"]), "--lr", "positive"),
        (lora(&["--weight-decay", "NaN"]), "--weight-decay", "0 or more"),
        (lora(&["--weight-decay", "-1"]), "--weight-decay", "0 or more"),
        (lora(&["--alpha", "NaN"]), "--alpha", "positive"),
        (tinygpt(&["train", "--lr", "NaN"]), "--lr", "positive"),
        (tinygpt(&["train", "--lr=-inf"]), "--lr", "positive"),
        (tinygpt(&["sample", "--model", "builtin", "--temperature", "inf"]), "--temperature", "0 or more"),
        (tinygpt(&["sample", "--model", "builtin", "--top-p", "NaN"]), "--top-p", "above 0 and at most 1"),
    ];
    for (out, flag, range) in cases {
        assert_clean_error(&out, &[&format!("{flag} must be"), range]);
        assert!(!stderr(&out).contains("invalid type"), "{}", stderr(&out));
    }
    assert!(!dir.join("never").exists());
}

#[test]
fn flags_that_would_be_ignored_or_changed_are_refused() {
    let out = tinygpt(&["sample", "--model", "builtin", "--generation", "999", "--tokens", "1"]);
    assert_clean_error(&out, &["--generation", "builtin"]);

    let dir = scratch("ignored");
    let out = lora_into_never(&dir)(&["--targets", "q_proj,v_proj,q_proj"]);
    assert_clean_error(&out, &["q_proj", "twice"]);
    assert!(!dir.join("never").exists());
}
