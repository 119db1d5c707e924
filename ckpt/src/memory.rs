//! An in-memory [`BlobStore`], for tests and for building files before a download.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Result;
use crate::store::{check_key, BlobInfo, BlobStore};

/// Blobs in a shared map: clones see the same contents, so a test can hold one handle
/// while a `FaultyStore` (feature `test-util`) wraps another.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    blobs: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    label: String,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_label("memory:")
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose messages name keys as `label + key`.
    pub fn with_label(label: &str) -> Self {
        MemoryStore { blobs: Arc::default(), label: label.to_string() }
    }

    /// A copy of every blob, for comparing states in tests.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.map().clone()
    }

    /// Replaces or removes (`None`) a blob directly, bypassing key checks: tests use it to
    /// corrupt a checkpoint or plant foreign files.
    pub fn set_raw(&self, key: &str, bytes: Option<Vec<u8>>) {
        match bytes {
            Some(b) => self.map().insert(key.to_string(), b),
            None => self.map().remove(key),
        };
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // A panic while holding the lock cannot leave the map half-updated (every
        // operation is a single insert/remove), so a poisoned lock is still usable.
        self.blobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl BlobStore for MemoryStore {
    /// `label + key`; the root alone is the label without its trailing `:`, so that
    /// messages read "memory: no checkpoint found", not "memory:: …".
    fn location(&self, key: &str) -> String {
        match key {
            "" => self.label.trim_end_matches(':').to_string(),
            _ => format!("{}{key}", self.label),
        }
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(&self.label, key, false)?;
        self.map().insert(key.to_string(), bytes.to_vec());
        Ok(())
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.put(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.map().get(key).cloned())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let map = self.map();
        let found = map.range(prefix.to_string()..).take_while(|(k, _)| k.starts_with(prefix));
        Ok(found.map(|(k, v)| BlobInfo { key: k.clone(), bytes: v.len() as u64 }).collect())
    }

    async fn delete(&self, key: &str) -> Result<()> {
        check_key(&self.label, key, true)?;
        let mut map = self.map();
        if key.ends_with('/') {
            map.retain(|k, _| !k.starts_with(key));
        } else {
            map.remove(key);
        }
        Ok(())
    }
}
