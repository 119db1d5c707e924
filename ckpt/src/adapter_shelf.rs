//! Several adapters in one [`BlobStore`] (the browser keeps all of them in one OPFS folder or
//! IndexedDB database): each named adapter is an [`AdapterStore`] whose keys carry the
//! name as a prefix (`<name>.latest.json`, `<name>.gen-000002/adapter.f32`), so the
//! store's one level of grouping still holds, and listing the adapters is listing the
//! `*.latest.json` keys. The bases they belong to are in their own adapter_config.json;
//! a shelf may hold adapters of several bases.

use crate::adapter::{AdapterConfigFile, AdapterStore};
use crate::error::{CkptError, Result};
use crate::store::{BlobInfo, BlobStore};

const POINTER_SUFFIX: &str = ".latest.json";

/// The longest adapter name (keys are at most 128 characters a part).
pub const MAX_ADAPTER_NAME: usize = 64;

/// Named adapters in one storage.
pub struct AdapterShelf<S> {
    storage: S,
}

/// One adapter of a shelf: the shelf's storage seen with the adapter's name as key prefix.
pub struct Shelved<'a, S> {
    storage: &'a S,
    prefix: String,
}

impl<S: BlobStore> AdapterShelf<S> {
    /// A shelf over `storage` (an empty one, or one holding adapters already).
    pub fn new(storage: S) -> Self {
        AdapterShelf { storage }
    }

    /// The storage the shelf keeps its adapters in.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The adapter called `name` (1 to 64 of `[A-Za-z0-9_-]`; refused otherwise).
    pub fn adapter(&self, name: &str) -> Result<AdapterStore<Shelved<'_, S>>> {
        check_name(name)?;
        Ok(AdapterStore::new(Shelved { storage: &self.storage, prefix: format!("{name}.") }))
    }

    /// The names of the adapters saved here, sorted.
    pub async fn names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .storage
            .list("")
            .await?
            .into_iter()
            .filter_map(|b| b.key.strip_suffix(POINTER_SUFFIX).map(str::to_string))
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Every adapter with its config (or why it cannot be read), sorted by name.
    pub async fn list(&self) -> Result<Vec<(String, Result<AdapterConfigFile>)>> {
        let mut out = Vec::new();
        for name in self.names().await? {
            let config = self.adapter(&name)?.config().await;
            out.push((name, config));
        }
        Ok(out)
    }

    /// Removes every generation of adapter `name`.
    pub async fn delete(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let prefix = format!("{name}.");
        for blob in self.storage.list(&prefix).await? {
            let group = blob.key.split_once('/').map(|(g, _)| format!("{g}/"));
            self.storage.delete(group.as_deref().unwrap_or(&blob.key)).await?;
        }
        Ok(())
    }
}

/// Refuses a name that cannot be a key prefix.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_ADAPTER_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(CkptError::InvalidCheckpoint {
            reason: format!(
                "{name:?} cannot name an adapter: use 1 to {MAX_ADAPTER_NAME} letters, digits, '-' or '_'"
            ),
        })
    }
}

impl<S: BlobStore> BlobStore for Shelved<'_, S> {
    fn location(&self, key: &str) -> String {
        self.storage.location(&self.inner(key))
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.storage.put(&self.inner(key), bytes).await
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.storage.put_atomic(&self.inner(key), bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.storage.get(&self.inner(key)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let found = self.storage.list(&self.inner(prefix)).await?;
        Ok(found
            .into_iter()
            .filter_map(|b| {
                let key = b.key.strip_prefix(&self.prefix)?.to_string();
                Some(BlobInfo { key, bytes: b.bytes })
            })
            .collect())
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.storage.delete(&self.inner(key)).await
    }
}

impl<S> Shelved<'_, S> {
    /// The shelf's key for the adapter's `key` (the name goes before the group, or before
    /// the name of an ungrouped key).
    fn inner(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    #[test]
    fn names_are_checked() {
        for good in ["code", "my-adapter_2", &"a".repeat(64)] {
            check_name(good).unwrap();
        }
        for bad in ["", "a.b", "a/b", "é", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let shelf = AdapterShelf::new(MemoryStore::default());
        assert!(shelf.adapter("no.dots").is_err());
        assert!(tinygpt_tensor::block_on(shelf.names()).unwrap().is_empty());
    }
}
