//! Where a new store may go on disk, checked before any work is done.
//!
//! A run's folder holds its generations, its pointers and `adapters/<name>/` (each an
//! adapter store of its own, see [`crate::ADAPTERS_GROUP`]); nothing else. So a store is
//! never created inside another store's root or inside a generation, except an adapter at
//! `<run>/adapters/<name>`; and an adapter is never written over a run (the base it adapts
//! or another). Foreign content *inside* the chosen folder is the store's own check
//! ([`crate::Generations::check_writable`]); this module looks at the folders around it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::adapter::ADAPTER_CONFIG;
use crate::error::{CkptError, Result};
use crate::generations::{is_generation_name, ADAPTERS_GROUP, BEST_POINTER, POINTER};
use crate::layout::TRAINER_STATE;

/// What is about to be stored in a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreRole {
    /// A run's checkpoints (`train --out`, `import --out`, `lora merge --out`).
    Run,
    /// A LoRA adapter's generations (`lora train --out`, `lora import --out`).
    Adapter,
}

/// What an existing folder is, judged by what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Run,
    Adapter,
    /// One generation of the store in its parent folder.
    Generation,
}

/// Refuses `path` as the root of a new or continued `role` store when it lies inside
/// another store's root or generation (other than `<run>/adapters/<name>` for an
/// adapter), or when an adapter would be written over a run. Nothing is created.
pub fn check_placement(path: &Path, role: StoreRole) -> Result<()> {
    let path = absolute(path);
    let refuse = |reason: String| Err(CkptError::Placement { path: path.display().to_string(), reason });
    match (classify(&path), role) {
        (Some(Found::Generation), _) => {
            let run = path.parent().map_or(PathBuf::new(), Path::to_path_buf);
            return refuse(format!(
                "this is a generation of the run in {}; a generation holds only its own files: choose a folder outside the run",
                run.display()
            ));
        }
        (Some(Found::Run), StoreRole::Adapter) => {
            return refuse(format!(
                "this folder holds a run's checkpoints; an adapter is never written over a run (its base or another): use {}",
                path.join(ADAPTERS_GROUP).join("<name>").display()
            ));
        }
        _ => {}
    }
    for ancestor in path.ancestors().skip(1) {
        let Some(found) = classify(ancestor) else { continue };
        let in_adapters_of_run = found == Found::Run
            && role == StoreRole::Adapter
            && path.parent().is_some_and(|p| p == ancestor.join(ADAPTERS_GROUP));
        if in_adapters_of_run {
            return Ok(());
        }
        let reason = match (found, role) {
            (Found::Generation, _) => format!(
                "it lies inside {}, a generation of a run; a generation holds only its own files: choose a folder outside the run",
                ancestor.display()
            ),
            (Found::Run, StoreRole::Adapter) => format!(
                "it lies inside the run folder {}; an adapter of that run goes in {}",
                ancestor.display(),
                ancestor.join(ADAPTERS_GROUP).join("<name>").display()
            ),
            (Found::Run, StoreRole::Run) => format!(
                "it lies inside the run folder {}; a run needs a folder of its own, outside any other run",
                ancestor.display()
            ),
            (Found::Adapter, _) => format!(
                "it lies inside the adapter folder {}, which holds only its own generations: choose a folder outside it",
                ancestor.display()
            ),
        };
        return refuse(reason);
    }
    Ok(())
}

/// `path` made absolute with symbolic links resolved as far as it exists.
fn absolute(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.into_iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing =
                    if parent.as_os_str().is_empty() { PathBuf::from(".") } else { parent.to_path_buf() };
            }
            _ => return std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        }
    }
}

/// Whether `dir` is a store root (run or adapter) or a generation, by its entries.
fn classify(dir: &Path) -> Option<Found> {
    let names = entries(dir)?;
    let has = |name: &str| names.iter().any(|n| n == name);
    let named_generation = dir.file_name().and_then(|n| n.to_str()).is_some_and(is_generation_name);
    let parent_is_root = dir.parent().and_then(entries).is_some_and(|p| p.iter().any(|n| n == POINTER));
    if named_generation && (has(TRAINER_STATE) || parent_is_root) {
        return Some(Found::Generation);
    }
    let generations: Vec<&String> = names.iter().filter(|n| is_generation_name(n)).collect();
    if !(has(POINTER) || has(BEST_POINTER) || has(TRAINER_STATE) || !generations.is_empty()) {
        return None;
    }
    let adapter = has(ADAPTER_CONFIG)
        || generations.iter().any(|g| dir.join(g).join(ADAPTER_CONFIG).exists())
        || (generations.is_empty()
            && !has(TRAINER_STATE)
            && dir.parent().is_some_and(|p| p.ends_with(ADAPTERS_GROUP)));
    Some(if adapter { Found::Adapter } else { Found::Run })
}

/// The names in `dir`, or `None` when it is not a readable folder.
fn entries(dir: &Path) -> Option<Vec<String>> {
    let read = fs::read_dir(dir).ok()?;
    Some(read.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"{}").unwrap();
    }

    #[test]
    fn adapters_go_under_a_run_or_outside_it_and_nowhere_else() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        touch(&run.join(POINTER));
        touch(&run.join("gen-000003").join(TRAINER_STATE));
        let adapter = run.join(ADAPTERS_GROUP).join("code");
        check_placement(&adapter, StoreRole::Adapter).unwrap();
        check_placement(&tmp.path().join("elsewhere"), StoreRole::Adapter).unwrap();
        for (bad, role, says) in [
            (run.clone(), StoreRole::Adapter, "never written over a run"),
            (run.join("gen-000003"), StoreRole::Adapter, "generation"),
            (run.join("gen-000003").join("x"), StoreRole::Adapter, "generation"),
            (run.join("sub"), StoreRole::Adapter, "adapters"),
            (run.join("sub"), StoreRole::Run, "folder of its own"),
            (adapter.join("x"), StoreRole::Adapter, "run folder"),
        ] {
            let err = check_placement(&bad, role).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?} as {role:?}: {err}");
        }
        // Once the adapter exists, nothing goes inside it.
        touch(&adapter.join(POINTER));
        touch(&adapter.join("gen-000001").join(ADAPTER_CONFIG));
        let err = check_placement(&adapter.join(ADAPTERS_GROUP).join("x"), StoreRole::Adapter).unwrap_err();
        assert!(err.to_string().contains("adapter folder"), "{err}");
        // A plain checkpoint folder (files at the top) is a run too.
        let plain = tmp.path().join("plain");
        touch(&plain.join(TRAINER_STATE));
        assert!(check_placement(&plain, StoreRole::Adapter).is_err());
        assert!(check_placement(&plain.join("x"), StoreRole::Run).is_err());
    }
}
