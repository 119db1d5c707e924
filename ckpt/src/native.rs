//! A directory on the local file system as [`BlobStore`]: a group is a subdirectory.
//!
//! Every `put` writes `.<name>.tmp`, fsyncs it, renames it over `<name>` and fsyncs the
//! directory, so each blob is replaced atomically and is on disk when `put` returns; new
//! folders (the root too) are fsynced into their parents.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{CkptError, Result};
use crate::store::{check_key, BlobInfo, BlobStore};

/// A directory as a [`BlobStore`](crate::BlobStore).
#[derive(Clone, Debug)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store rooted at `root`, which is created on the first write. Fails if `root`
    /// exists and is not a directory.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if root.exists() && !root.is_dir() {
            return Err(CkptError::NotADirectory { path: root.display().to_string() });
        }
        Ok(DirStore { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key.trim_end_matches('/'))
    }

    fn io_error(&self, key: &str) -> impl FnOnce(io::Error) -> CkptError {
        let file = self.location(key);
        move |source| CkptError::Io { file, source }
    }

    /// Lists one directory level: files as `prefix + name`, subdirectories as
    /// `prefix + name + "/"` (with 0 bytes) unless `descend` lists their files instead
    /// (an empty subdirectory is then still listed as `name/`).
    /// Lists `dir` into `out`; `false` when `dir` is gone. An entry removed while it is
    /// listed (a writer pruning an old generation) is left out, not an error: readers run
    /// during saves.
    fn list_dir(&self, dir: &Path, prefix: &str, descend: bool, out: &mut Vec<BlobInfo>) -> Result<bool> {
        if dir.is_file() {
            return Err(CkptError::NotADirectory { path: dir.display().to_string() });
        }
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.io_error(prefix)(e)),
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(self.io_error(prefix)(e)),
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(self.io_error(&format!("{prefix}{name}"))(e)),
            };
            if meta.is_dir() && descend {
                let before = out.len();
                let exists = self.list_dir(&entry.path(), &format!("{prefix}{name}/"), false, out)?;
                if exists && out.len() == before {
                    // An empty group (or one holding only temp files) is still listed,
                    // so that it is noticed and cleaned up.
                    out.push(BlobInfo { key: format!("{prefix}{name}/"), bytes: 0 });
                }
            } else if meta.is_dir() {
                out.push(BlobInfo { key: format!("{prefix}{name}/"), bytes: 0 });
            } else {
                out.push(BlobInfo { key: format!("{prefix}{name}"), bytes: meta.len() });
            }
        }
        Ok(true)
    }
}

/// Makes a directory's entries (a rename, a new file) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    if cfg!(unix) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The directory holding `path`'s entry: `.` for a relative path with one component.
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates `dir` and any missing ancestors, fsyncing each new entry in its parent, so
/// that a folder made just before a crash is still there after it.
pub fn create_dir_durably(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durably(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    sync_dir(parent_of(dir))
}

/// Replaces `path` with `bytes` all or nothing: writes `.<name>.tmp` next to it, fsyncs
/// it, renames it over `path` and fsyncs the folder. A failure (a full disk, say) leaves
/// the old `path` as it was and removes the temp file.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_of(path);
    let name = path.file_name().ok_or_else(|| io::Error::other("not a file name"))?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp"));
    let write = || -> io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    };
    write().inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

impl BlobStore for DirStore {
    fn location(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(&self.location(""), key, false)?;
        let path = self.path(key);
        let dir = path.parent().expect("a key has a parent directory");
        create_dir_durably(dir).map_err(self.io_error(key))?;
        write_file_atomically(&path, bytes).map_err(self.io_error(key))
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.put(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_key(&self.location(""), key, false)?;
        match fs::read(self.path(key)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(key)(e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let mut out = Vec::new();
        match prefix.split_once('/') {
            Some((group, _)) => {
                self.list_dir(&self.root.join(group), &format!("{group}/"), false, &mut out)?;
            }
            None => {
                self.list_dir(&self.root, "", true, &mut out)?;
            }
        }
        out.retain(|b| b.key.starts_with(prefix));
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        check_key(&self.location(""), key, true)?;
        let path = self.path(key);
        let result = if key.ends_with('/') { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        match result {
            Ok(()) => sync_dir(path.parent().unwrap_or(&self.root)).map_err(self.io_error(key)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_error(key)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_folders_entry_is_synced_in_its_parent_also_for_a_relative_path() {
        // `Path::new("out").parent()` is "", which the first save used to skip: the folder's
        // own entry (in the working directory) was never fsynced.
        assert_eq!(parent_of(Path::new("out")), Path::new("."));
        assert_eq!(parent_of(Path::new("runs/out")), Path::new("runs"));
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_durably(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_durably(&deep).unwrap();
    }

    #[test]
    fn a_failed_atomic_write_leaves_the_old_file_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f.bin");
        write_file_atomically(&file, b"old").unwrap();
        // A directory where the temp file should go makes the write fail part-way.
        std::fs::create_dir(tmp.path().join(".f.bin.tmp")).unwrap();
        assert!(write_file_atomically(&file, b"new").is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"old");
    }
}
