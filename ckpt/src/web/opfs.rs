//! The Origin Private File System as [`BlobStore`]: the store is a directory of OPFS, a
//! group is a subdirectory.
//!
//! In a dedicated worker, blobs are written through sync access handles (the fast path, no
//! copy through a stream); elsewhere through `createWritable()`. [`BlobStore::put_atomic`]
//! always uses `createWritable()`, whose data goes to a swap file that replaces the target
//! only on `close()`: all or nothing. Blobs are always read through `getFile()`, which takes
//! no lock: a sync access handle is exclusive, so reading through one failed with
//! `NoModificationAllowedError` whenever another tab read the same generation at that moment
//! (two tabs of one run listing or loading its checkpoints).

use js_sys::{AsyncIterator, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{
    File, FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions,
    FileSystemGetFileOptions, FileSystemHandle, FileSystemHandleKind, FileSystemReadWriteOptions,
    FileSystemRemoveOptions, FileSystemSyncAccessHandle, FileSystemWritableFileStream,
};

use super::js::{
    await_promise, describe, error_name, storage_error, storage_manager, sync_access_handles_available,
    unavailable,
};
use crate::error::{CkptError, Result};
use crate::store::{check_key, BlobInfo, BlobStore};

/// An OPFS directory as a [`BlobStore`].
#[derive(Debug)]
pub struct OpfsStore {
    root: FileSystemDirectoryHandle,
    name: String,
    sync_access: bool,
}

fn is_not_found(e: &JsValue) -> bool {
    error_name(e).as_deref() == Some("NotFoundError")
}

/// Chromium's swap files of unfinished `createWritable()` streams, and our own hidden
/// names, are not blobs.
fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.ends_with(".crswap")
}

impl OpfsStore {
    /// Opens (creating it) the OPFS directory `name`, e.g. `"tinygpt-checkpoints"`.
    pub async fn open(name: &str) -> Result<Self> {
        check_key("opfs:", name, false)?;
        let manager = storage_manager()?;
        let top =
            await_promise(manager.get_directory()).await.map_err(|e| unavailable("OPFS", &describe(&e)))?;
        let top: FileSystemDirectoryHandle =
            top.dyn_into().map_err(|e| unavailable("OPFS", &describe(&e)))?;
        let options = FileSystemGetDirectoryOptions::new();
        options.set_create(true);
        let root = await_promise(top.get_directory_handle_with_options(name, &options))
            .await
            .map_err(|e| storage_error(format!("opfs:{name}"), &e, 0))?;
        Ok(OpfsStore {
            root: root.unchecked_into(),
            name: name.to_string(),
            sync_access: sync_access_handles_available(),
        })
    }

    /// Whether blobs go through sync access handles (in a dedicated worker).
    pub fn uses_sync_access_handles(&self) -> bool {
        self.sync_access
    }

    fn error(&self, key: &str, bytes: u64) -> impl Fn(JsValue) -> CkptError + '_ {
        let file = self.location(key);
        move |e| storage_error(file.clone(), &e, bytes)
    }

    /// The directory of `key`'s group (the root for an ungrouped key); `None` if it does
    /// not exist and `create` is false.
    async fn dir_of(&self, key: &str, create: bool) -> Result<Option<FileSystemDirectoryHandle>> {
        let Some((group, _)) = key.split_once('/') else { return Ok(Some(self.root.clone())) };
        let options = FileSystemGetDirectoryOptions::new();
        options.set_create(create);
        match await_promise(self.root.get_directory_handle_with_options(group, &options)).await {
            Ok(dir) => Ok(Some(dir.unchecked_into())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.error(key, 0)(e)),
        }
    }

    async fn file(&self, key: &str, create: bool) -> Result<Option<FileSystemFileHandle>> {
        let Some(dir) = self.dir_of(key, create).await? else { return Ok(None) };
        let name = key.rsplit('/').next().expect("split yields one part");
        let options = FileSystemGetFileOptions::new();
        options.set_create(create);
        match await_promise(dir.get_file_handle_with_options(name, &options)).await {
            Ok(file) => Ok(Some(file.unchecked_into())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.error(key, 0)(e)),
        }
    }

    async fn write_sync(&self, key: &str, file: &FileSystemFileHandle, bytes: &[u8]) -> Result<()> {
        let err = self.error(key, bytes.len() as u64);
        let handle: FileSystemSyncAccessHandle =
            await_promise(file.create_sync_access_handle()).await.map_err(&err)?.unchecked_into();
        let write = || -> std::result::Result<(), JsValue> {
            handle.truncate_with_u32(0)?;
            let at = FileSystemReadWriteOptions::new();
            at.set_at(0.0);
            let written = handle.write_with_u8_array_and_options(bytes, &at)?;
            if written as usize != bytes.len() {
                return Err(JsValue::from_str(&format!("wrote {written} of {} bytes", bytes.len())));
            }
            handle.flush()
        };
        let result = write();
        handle.close();
        result.map_err(err)
    }

    async fn write_stream(&self, key: &str, file: &FileSystemFileHandle, bytes: &[u8]) -> Result<()> {
        let err = self.error(key, bytes.len() as u64);
        let stream: FileSystemWritableFileStream =
            await_promise(file.create_writable()).await.map_err(&err)?.unchecked_into();
        // A copy in JS memory: the stream may read it after wasm memory has moved.
        let data = Uint8Array::from(bytes);
        let written = match stream.write_with_js_u8_array(&data) {
            Ok(promise) => await_promise(promise).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let _ = await_promise(stream.abort()).await;
            return Err(err(e));
        }
        await_promise(stream.close()).await.map(drop).map_err(err)
    }

    /// Reads a snapshot of `file`; see the module doc for why never through a sync access handle.
    async fn read(&self, key: &str, file: &FileSystemFileHandle) -> Result<Vec<u8>> {
        let err = self.error(key, 0);
        let blob: File = await_promise(file.get_file()).await.map_err(&err)?.unchecked_into();
        let buffer = await_promise(blob.array_buffer()).await.map_err(&err)?;
        Ok(Uint8Array::new(&buffer).to_vec())
    }

    /// `(name, handle)` of every entry of `dir`.
    async fn entries(
        &self,
        dir: &FileSystemDirectoryHandle,
        key: &str,
    ) -> Result<Vec<(String, FileSystemHandle)>> {
        let err = self.error(key, 0);
        let iter: AsyncIterator = dir.entries();
        let mut out = Vec::new();
        loop {
            let step = await_promise(iter.next().map_err(&err)?).await.map_err(&err)?;
            if Reflect::get(&step, &"done".into()).map_err(&err)?.is_truthy() {
                return Ok(out);
            }
            let pair = Reflect::get(&step, &"value".into()).map_err(&err)?;
            let name = Reflect::get_u32(&pair, 0).map_err(&err)?.as_string().unwrap_or_default();
            let handle: FileSystemHandle = Reflect::get_u32(&pair, 1).map_err(&err)?.unchecked_into();
            out.push((name, handle));
        }
    }

    async fn size(&self, key: &str, handle: FileSystemHandle) -> Result<u64> {
        let file: File = await_promise(handle.unchecked_into::<FileSystemFileHandle>().get_file())
            .await
            .map_err(self.error(key, 0))?
            .unchecked_into();
        Ok(file.size() as u64)
    }

    /// Lists `dir` as `prefix + name`; subdirectories are descended into once when
    /// `descend` is set (an empty one is listed as `name/`), else listed as `name/`.
    async fn list_dir(
        &self,
        dir: &FileSystemDirectoryHandle,
        prefix: &str,
        descend: bool,
        out: &mut Vec<BlobInfo>,
    ) -> Result<()> {
        for (name, handle) in self.entries(dir, prefix).await? {
            if is_hidden(&name) {
                continue;
            }
            let key = format!("{prefix}{name}");
            match handle.kind() {
                FileSystemHandleKind::Directory if descend => {
                    let before = out.len();
                    let sub: FileSystemDirectoryHandle = handle.unchecked_into();
                    Box::pin(self.list_dir(&sub, &format!("{key}/"), false, out)).await?;
                    if out.len() == before {
                        out.push(BlobInfo { key: format!("{key}/"), bytes: 0 });
                    }
                }
                FileSystemHandleKind::Directory => out.push(BlobInfo { key: format!("{key}/"), bytes: 0 }),
                _ => {
                    let bytes = self.size(&key, handle).await?;
                    out.push(BlobInfo { key, bytes });
                }
            }
        }
        Ok(())
    }
}

impl BlobStore for OpfsStore {
    fn location(&self, key: &str) -> String {
        format!("opfs:{}/{key}", self.name)
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(&self.location(""), key, false)?;
        let file = self.file(key, true).await?.expect("created");
        if self.sync_access {
            self.write_sync(key, &file, bytes).await
        } else {
            self.write_stream(key, &file, bytes).await
        }
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(&self.location(""), key, false)?;
        let file = self.file(key, true).await?.expect("created");
        self.write_stream(key, &file, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_key(&self.location(""), key, false)?;
        match self.file(key, false).await? {
            Some(file) => Ok(Some(self.read(key, &file).await?)),
            None => Ok(None),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let mut out = Vec::new();
        match prefix.split_once('/') {
            Some((group, _)) => {
                if let Some(dir) = self.dir_of(&format!("{group}/x"), false).await? {
                    self.list_dir(&dir, &format!("{group}/"), false, &mut out).await?;
                }
            }
            None => self.list_dir(&self.root, "", true, &mut out).await?,
        }
        out.retain(|b| b.key.starts_with(prefix));
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        check_key(&self.location(""), key, true)?;
        let (dir, name) = match key.strip_suffix('/') {
            Some(group) => (Some(self.root.clone()), group),
            None => (self.dir_of(key, false).await?, key.rsplit('/').next().expect("one part")),
        };
        let Some(dir) = dir else { return Ok(()) };
        let options = FileSystemRemoveOptions::new();
        options.set_recursive(true);
        match await_promise(dir.remove_entry_with_options(name, &options)).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.error(key, 0)(e)),
        }
    }
}
