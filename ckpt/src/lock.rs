//! One writer per checkpoint folder: an advisory lock on `<folder>/.lock`.
//!
//! The lock is `flock(LOCK_EX | LOCK_NB)` on a file that holds the writer's pid. The kernel
//! drops it when the process ends, however it ends (a SIGKILL too), so a lock file left
//! behind is never stale: the next writer simply takes it. Readers take no lock; a save
//! never changes a generation a reader could be reading (see `generations.rs`). The lock
//! file starts with `.`, which stores never list, so it is not "foreign" to a checkpoint.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::{CkptError, Result};
use crate::native::create_dir_durably;

/// The lock file's name inside the folder.
pub const LOCK_FILE: &str = ".lock";

/// An exclusive hold on a checkpoint folder, released on drop or process exit.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
    path: PathBuf,
}

impl WriterLock {
    /// Creates `dir` if needed (so an unwritable folder fails here, before any training)
    /// and locks it, or fails at once with [`CkptError::Locked`] naming the holder's pid.
    pub fn acquire(dir: &Path) -> Result<WriterLock> {
        if dir.exists() && !dir.is_dir() {
            return Err(CkptError::NotADirectory { path: dir.display().to_string() });
        }
        create_dir_durably(dir).map_err(|e| CkptError::Store {
            file: dir.display().to_string(),
            reason: format!("cannot create the checkpoint folder ({e}); choose a writable place"),
        })?;
        let path = dir.join(LOCK_FILE);
        let io = |source| CkptError::Io { file: path.display().to_string(), source };
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        if !try_lock(&file).map_err(io)? {
            return Err(CkptError::Locked {
                location: dir.display().to_string(),
                pid: holder_pid(&mut file),
            });
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(WriterLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The pid the holder wrote; it writes right after locking, so a moment's wait covers a
/// holder caught in between.
fn holder_pid(file: &mut File) -> Option<u32> {
    for _ in 0..20 {
        let mut text = String::new();
        if file.rewind().is_ok() && file.read_to_string(&mut text).is_ok() {
            if let Ok(pid) = text.trim().parse() {
                return Some(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor we own, no pointers involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// Without flock (not unix) every writer gets the lock: one writer per folder is then the
/// user's to keep.
#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_with_the_holders_pid_and_the_lock_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let first = WriterLock::acquire(&run).unwrap();
        assert!(run.is_dir());
        // flock locks belong to the open file description, so a second open in the same
        // process conflicts just as another process would.
        let err = WriterLock::acquire(&run).unwrap_err();
        assert!(matches!(err, CkptError::Locked { pid: Some(p), .. } if p == std::process::id()), "{err}");
        assert!(err.to_string().contains(&std::process::id().to_string()), "{err}");
        drop(first);
        WriterLock::acquire(&run).unwrap();
    }

    #[test]
    fn a_file_where_the_folder_should_be_is_refused_before_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(WriterLock::acquire(&file), Err(CkptError::NotADirectory { .. })));
    }
}
