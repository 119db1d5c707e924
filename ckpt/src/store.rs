//! The storage a [`crate::CheckpointStore`] writes through: named byte blobs with a
//! one-level grouping, so one generation of files is one group.
//!
//! Keys are `name` or `group/name`; each part is 1–128 characters of `[A-Za-z0-9._-]`
//! and does not start with `.` (names starting with `.` are the stores' temporary files,
//! which `list` never shows). The methods are `async` because browser storage is; native
//! and in-memory stores complete at once, so `tinygpt_tensor::block_on` drives them.

use crate::error::{CkptError, Result};

/// One stored blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobInfo {
    /// The blob's key.
    pub key: String,
    /// Its size.
    pub bytes: u64,
}

/// A place checkpoints live: a directory, OPFS, IndexedDB, memory.
///
/// Futures are not required to be `Send`: browser handles are bound to their thread.
#[allow(async_fn_in_trait)]
pub trait BlobStore {
    /// Where `key` lives, for messages: a path, `opfs:…`, `indexeddb:…` or `memory:…`.
    fn location(&self, key: &str) -> String;

    /// Stores `bytes` under `key`, creating its group; durable once it returns `Ok`.
    /// An interrupted `put` may leave `key` missing or holding part of `bytes`.
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;

    /// Like [`BlobStore::put`], but all or nothing: a reader, also after a crash, finds the
    /// old blob or the new one, never a mix. Used to flip the pointer to a new generation.
    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()>;

    /// The blob under `key`, or `None` if there is none.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Every blob whose key starts with `prefix`, sorted by key. A store also lists
    /// entries it did not write (a nested directory shows as `group/name/` with 0 bytes)
    /// and empty groups (as `group/`), so that foreign content and leftovers are noticed.
    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>>;

    /// Removes `key`, or every blob of the group when `key` is `group/`. Removing what
    /// does not exist is not an error.
    async fn delete(&self, key: &str) -> Result<()>;
}

/// A borrowed store is a store, so one storage can serve a `CheckpointStore` and a test.
impl<S: BlobStore> BlobStore for &S {
    fn location(&self, key: &str) -> String {
        (**self).location(key)
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        (**self).put(key, bytes).await
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        (**self).put_atomic(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        (**self).get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        (**self).list(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        (**self).delete(key).await
    }
}

/// Checks `key` against the grammar in the module docs; `group/` (for delete) is allowed
/// when `allow_group` is set.
pub(crate) fn check_key(storage_location: &str, key: &str, allow_group: bool) -> Result<()> {
    let valid_part = |p: &str| {
        !p.is_empty()
            && p.len() <= 128
            && !p.starts_with('.')
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let ok = match key.split_once('/') {
        None => valid_part(key),
        Some((group, "")) => allow_group && valid_part(group),
        Some((group, name)) => valid_part(group) && valid_part(name),
    };
    if ok {
        Ok(())
    } else {
        Err(CkptError::Store {
            file: format!("{storage_location}{key}"),
            reason: "invalid key: use `name` or `group/name` of [A-Za-z0-9._-], not starting with '.'".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_grammar() {
        for good in ["latest.json", "gen-000001/weights.f32", "a_b-c.d"] {
            check_key("", good, false).unwrap();
        }
        check_key("", "gen-000001/", true).unwrap();
        for bad in ["", "/x", "a/b/c", "../x", "a/..", ".tmp", "a/.x", "a b", "gen-1/", "a\\b", "é"] {
            assert!(check_key("", bad, false).is_err(), "{bad:?} accepted");
        }
    }
}
