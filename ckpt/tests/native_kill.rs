//! A real crash: a child process saves in a loop and is killed (SIGKILL) at random
//! moments; every time, the directory still loads the last completed save.
#![cfg(unix)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_same, checkpoint_for, small_config};
use tinygpt_ckpt::{Checkpoint, CheckpointDir};
use tinygpt_model::ModelConfig;
use tinygpt_tensor::Rng;

const CHILD_ENV: &str = "TINYGPT_CKPT_KILL_CHILD_DIR";
const TEST_NAME: &str = "killed_saves_leave_the_last_completed_checkpoint";

/// ~120k parameters (1.4 MB per generation), so a kill often lands inside a save.
fn config() -> ModelConfig {
    ModelConfig { d_model: 64, n_heads: 4, d_mlp: 256, context_length: 32, ..small_config() }
}

/// The checkpoint saved at `step`: a pure function of the step, so the parent can check
/// what it loads.
fn expected(step: usize) -> Checkpoint {
    let mut ckpt = checkpoint_for(config(), step % 7, step as u64);
    ckpt.progress.step = step;
    ckpt
}

/// The step latest.json points at, tolerating a listing that races with the writer (a
/// generation listed but not yet pointed at is not a completed save).
fn newest_step(root: &std::path::Path) -> usize {
    let listed = CheckpointDir::open(root).and_then(|d| d.list());
    listed.ok().and_then(|l| l.iter().filter(|g| g.latest).map(|g| g.step).max()).unwrap_or(0)
}

#[test]
fn killed_saves_leave_the_last_completed_checkpoint() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        // Child: save forever, continuing after what is there.
        let dir = CheckpointDir::open(dir).unwrap();
        let mut step = dir.load_latest().map_or(0, |c| c.progress.step) + 1;
        loop {
            dir.save(&expected(step)).unwrap();
            step += 1;
        }
    }

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("run");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(11);
    let mut interrupted_saves = 0;
    for round in 0..8 {
        let mut child = Command::new(&exe)
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for a completed save of this round, then a random moment more.
        let (start, before) = (Instant::now(), newest_step(&root));
        while newest_step(&root) == before && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        child.kill().unwrap();
        child.wait().unwrap();

        let dir = CheckpointDir::open(&root).unwrap();
        let loaded = dir.load_latest().unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(loaded.progress.step > before, "round {round}: no save completed");
        assert_same(&loaded, &expected(loaded.progress.step));
        let generations =
            std::fs::read_dir(&root).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count();
        let kept = dir.list().unwrap().iter().filter(|g| !g.latest).count() + 1;
        if generations > kept {
            interrupted_saves += 1;
        }
    }
    eprintln!("{interrupted_saves} of 8 kills interrupted a save in progress");
    let dir = CheckpointDir::open(&root).unwrap();
    dir.save(&expected(1_000_000)).unwrap();
    let dirs = std::fs::read_dir(&root).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count();
    assert_eq!(dirs, 2, "the next save removed every abandoned generation");
}
