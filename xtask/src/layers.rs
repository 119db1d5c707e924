//! `cargo xtask check-layers`: the crate layering, read from `cargo metadata` and checked.
//!
//! Rules (DEVELOPERS' brief, issue 12): tensor ← autograd ← model ← optim, each layer
//! depending only on layers below it; `tinygpt-run` (a training run as plain data) sits just
//! above tensor, beside autograd (a recipe names tensor's `Precision`, the arithmetic the
//! composition root builds its backend with); kernel crates (`tinygpt-kernels-*`) depend on `tinygpt-tensor` alone;
//! `tinygpt-ckpt` (the checkpoint format) may use tensor and run (where the model's
//! architecture, the training config, the dataset manifest and the adapter config live as
//! plain data) but **no training crate** (autograd, model, optim) and no kernel crate; the
//! checkpoint crate is used only by the trainer (optim, whose `ckpt` feature maps a `Trainer`
//! to a `Checkpoint`) and by the composition roots (`cli`, `worker`, `xtask`), the only crates
//! that name a kernel crate in their normal dependencies; no library depends on a composition
//! root. Dev-dependencies are free: tests are composition roots.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// What a workspace crate is, for the rules above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A layer of the stack, with its height (tensor 0, run and autograd 1 … optim 3).
    Layer(u8),
    Kernel,
    Persistence,
    Root,
}

fn role(name: &str) -> Option<Role> {
    Some(match name {
        "tinygpt-tensor" => Role::Layer(0),
        "tinygpt-run" | "tinygpt-autograd" => Role::Layer(1),
        "tinygpt-model" => Role::Layer(2),
        "tinygpt-optim" => Role::Layer(3),
        "tinygpt-ckpt" => Role::Persistence,
        "tinygpt-cli" | "tinygpt-worker" | "tinygpt-xtask" => Role::Root,
        n if n.starts_with("tinygpt-kernels-") => Role::Kernel,
        _ => return None,
    })
}

/// The crates that train (the tape, the model's forward pass and the trainer): the checkpoint
/// format must not need them; what it stores is plain data in `tinygpt-run`.
const TRAINING_CRATES: [&str; 3] = ["tinygpt-autograd", "tinygpt-model", "tinygpt-optim"];

/// Why `from → to` (a normal dependency between workspace crates) breaks the layering.
fn violation(from: &str, to: &str) -> Option<String> {
    if from == "tinygpt-ckpt" && TRAINING_CRATES.contains(&to) {
        return Some(format!(
            "{from} → {to}: the checkpoint format depends on no training crate (the trainer maps itself to a checkpoint in optim's `ckpt` feature)"
        ));
    }
    let (Some(a), Some(b)) = (role(from), role(to)) else {
        return Some(format!(
            "{from} → {to}: unknown workspace crate; give it a role in xtask/src/layers.rs"
        ));
    };
    let why = match (a, b) {
        (Role::Layer(x), Role::Layer(y)) if y < x => return None,
        (Role::Layer(_), Role::Layer(_)) => "a layer may depend only on layers below it",
        (Role::Kernel, Role::Layer(0)) => return None,
        (Role::Kernel, _) => "a kernel crate depends on tinygpt-tensor alone",
        (Role::Persistence, Role::Layer(_)) => return None,
        (Role::Layer(3), Role::Persistence) => return None,
        (Role::Root, Role::Root) => "nothing depends on a composition root",
        (Role::Root, _) => return None,
        (_, Role::Kernel) => "only composition roots (cli, worker, xtask) name a kernel crate",
        (_, Role::Root) => "nothing depends on a composition root",
        (_, Role::Persistence) => "only the trainer (optim) and composition roots use the checkpoint crate",
    };
    Some(format!("{from} → {to}: {why}"))
}

/// Normal (non-dev) dependencies between workspace members, from `cargo metadata`.
fn workspace_edges(metadata: &Value) -> Result<Vec<(String, String)>, String> {
    let packages = metadata["packages"].as_array().ok_or("cargo metadata has no packages")?;
    let members: BTreeMap<&str, &Value> =
        packages.iter().filter_map(|p| Some((p["name"].as_str()?, p))).collect();
    let mut edges = Vec::new();
    for (name, package) in &members {
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let is_dev = dep["kind"].as_str() == Some("dev");
            if members.contains_key(dep_name) && !is_dev {
                edges.push((name.to_string(), dep_name.to_string()));
            }
        }
    }
    Ok(edges)
}

fn check(metadata: &Value) -> Result<usize, String> {
    let edges = workspace_edges(metadata)?;
    let problems: Vec<String> = edges.iter().filter_map(|(a, b)| violation(a, b)).collect();
    if problems.is_empty() {
        Ok(edges.len())
    } else {
        Err(format!("layering violated:\n  {}", problems.join("\n  ")))
    }
}

fn metadata() -> Result<Value, String> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))
}

pub fn run(_args: &[String]) -> Result<(), String> {
    let edges = check(&metadata()?)?;
    println!("layering ok: {edges} dependencies between workspace crates checked");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_respects_the_layering() {
        check(&metadata().unwrap()).unwrap();
    }

    #[test]
    fn upward_and_kernel_dependencies_are_caught() {
        assert!(violation("tinygpt-model", "tinygpt-autograd").is_none());
        assert!(violation("tinygpt-autograd", "tinygpt-model").is_some());
        assert!(violation("tinygpt-model", "tinygpt-kernels-cpu").is_some());
        assert!(violation("tinygpt-kernels-wgsl", "tinygpt-autograd").is_some());
        assert!(violation("tinygpt-kernels-cpu", "tinygpt-tensor").is_none());
        assert!(violation("tinygpt-cli", "tinygpt-kernels-cpu").is_none());
        assert!(violation("tinygpt-optim", "tinygpt-cli").is_some());
        assert!(violation("tinygpt-ckpt", "tinygpt-kernels-cpu").is_some());
        assert!(violation("tinygpt-model", "tinygpt-ckpt").is_some());
        assert!(violation("tinygpt-optim", "tinygpt-ckpt").is_none());
    }

    #[test]
    fn the_checkpoint_format_names_no_training_crate() {
        for training in TRAINING_CRATES {
            let why = violation("tinygpt-ckpt", training).expect(training);
            assert!(why.contains("no training crate"), "{why}");
        }
        for data in ["tinygpt-tensor", "tinygpt-run"] {
            assert!(violation("tinygpt-ckpt", data).is_none(), "{data}");
        }
    }

    #[test]
    fn dev_dependencies_are_allowed() {
        let meta = serde_json::json!({"packages": [
            {"name": "tinygpt-model", "dependencies": [{"name": "tinygpt-kernels-cpu", "kind": "dev"}]},
            {"name": "tinygpt-kernels-cpu", "dependencies": [{"name": "tinygpt-tensor", "kind": null}]},
            {"name": "tinygpt-tensor", "dependencies": []},
        ]});
        assert_eq!(check(&meta).unwrap(), 1);
        let bad = serde_json::json!({"packages": [
            {"name": "tinygpt-model", "dependencies": [{"name": "tinygpt-kernels-cpu", "kind": null}]},
            {"name": "tinygpt-kernels-cpu", "dependencies": []},
        ]});
        assert!(check(&bad).unwrap_err().contains("composition roots"));
    }
}
