//! Helpers shared by the web tasks: where things are, running commands, reading versions.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the folder holding `Cargo.lock`), found from this crate's manifest dir
/// so tasks work from any current directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the root").into()
}

/// Runs `cmd`, streaming its output, and turns a non-zero exit into an error naming it.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask: running {shown}");
    let status = cmd.status().map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

/// Stdout of `program args` when it runs and exits 0; `None` when it is missing or fails.
pub fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The version of package `name` pinned in `Cargo.lock` (the first entry if several).
pub fn lockfile_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let version = lines.next()?.trim();
            return version.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_string);
        }
    }
    None
}

/// The wasm-bindgen version `Cargo.lock` pins: the CLI must be exactly this one.
pub fn locked_wasm_bindgen_version() -> Result<String, String> {
    let path = workspace_root().join("Cargo.lock");
    let lock = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    lockfile_version(&lock, "wasm-bindgen")
        .ok_or_else(|| format!("{} pins no wasm-bindgen; run `cargo generate-lockfile`", path.display()))
}

/// The installed `wasm-bindgen` CLI's version (`wasm-bindgen 0.2.130` → `0.2.130`).
pub fn installed_wasm_bindgen_version() -> Option<String> {
    output_of("wasm-bindgen", &["--version"])?.split_whitespace().nth(1).map(str::to_string)
}

/// Copies a folder tree, creating folders as needed; skips names in `skip`.
pub fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if src.is_dir() {
            copy_tree(&src, &dst, skip)?;
        } else {
            copy_file(&src, &dst)?;
        }
    }
    Ok(())
}

pub fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// Splits `--name value` options out of `args`; unknown options are an error naming them.
pub fn parse_options<'a>(args: &'a [String], known: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let name = arg.as_str();
        if !known.contains(&name) {
            return Err(if known.is_empty() {
                format!("unknown option {name:?}; this task takes no options")
            } else {
                format!("unknown option {name:?}; known: {}", known.join(", "))
            });
        }
        if name.starts_with("--no-") || name == "--release" {
            out.push((name, ""));
        } else {
            let value = it.next().ok_or_else(|| format!("{name} needs a value"))?;
            out.push((name, value.as_str()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockfile_version_reads_the_entry_for_the_exact_name() {
        let lock = "[[package]]\nname = \"wasm-bindgen-macro\"\nversion = \"9.9.9\"\n\n\
                    [[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.130\"\n";
        assert_eq!(lockfile_version(lock, "wasm-bindgen").as_deref(), Some("0.2.130"));
        assert_eq!(lockfile_version(lock, "js-sys"), None);
    }

    #[test]
    fn options_need_values_and_known_names() {
        let args: Vec<String> = ["--port", "9000", "--no-build"].iter().map(|s| s.to_string()).collect();
        let opts = parse_options(&args, &["--port", "--host", "--no-build"]).unwrap();
        assert_eq!(opts, vec![("--port", "9000"), ("--no-build", "")]);
        assert!(parse_options(&args[..1], &["--port"]).is_err());
        assert!(parse_options(&args, &["--host"]).is_err());
    }
}
