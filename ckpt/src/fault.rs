//! Fault injection around any [`BlobStore`], to prove that an interrupted save leaves the
//! previous checkpoint loadable.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::{CkptError, Result};
use crate::store::{BlobInfo, BlobStore};

/// What happens at the failing write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A crash: a failing `put` first leaves half of its bytes behind (a torn write; an
    /// atomic `put_atomic` leaves nothing), and every later write or delete fails too.
    Crash,
    /// The storage is full: the write fails with [`CkptError::QuotaExceeded`] and leaves
    /// nothing; later operations work (so a save can clean up after itself). Deletes
    /// never fail and are not counted: freeing space does not hit a quota.
    QuotaExceeded,
}

/// Passes reads through and lets the first `writes_allowed` writes (`put`, `put_atomic`
/// and `delete` each count one) succeed, then injects `fault`.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    fault: Fault,
    writes_allowed: usize,
    writes: AtomicUsize,
    crashed: AtomicBool,
}

impl<S: BlobStore> FaultyStore<S> {
    /// Wraps `inner`; the write after `writes_allowed` fails with `fault`.
    pub fn new(inner: S, fault: Fault, writes_allowed: usize) -> Self {
        FaultyStore {
            inner,
            fault,
            writes_allowed,
            writes: AtomicUsize::new(0),
            crashed: AtomicBool::new(false),
        }
    }

    /// A store that never fails, to count the writes an operation makes.
    pub fn counting(inner: S) -> Self {
        Self::new(inner, Fault::Crash, usize::MAX)
    }

    /// Writes that succeeded.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst).min(self.writes_allowed)
    }

    /// Whether the fault has fired.
    pub fn fired(&self) -> bool {
        self.crashed.load(Ordering::SeqCst) || self.writes.load(Ordering::SeqCst) > self.writes_allowed
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Counts a write; `Err` if this one must fail.
    fn admit(&self, key: &str, bytes: u64) -> Result<()> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(self.crash_error(key));
        }
        if self.writes.fetch_add(1, Ordering::SeqCst) < self.writes_allowed {
            return Ok(());
        }
        match self.fault {
            Fault::Crash => {
                self.crashed.store(true, Ordering::SeqCst);
                Err(self.crash_error(key))
            }
            Fault::QuotaExceeded => Err(CkptError::QuotaExceeded { needed_bytes: bytes }),
        }
    }

    fn crash_error(&self, key: &str) -> CkptError {
        CkptError::Store { file: self.inner.location(key), reason: "injected crash".into() }
    }
}

impl<S: BlobStore> BlobStore for FaultyStore<S> {
    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let already_crashed = self.crashed.load(Ordering::SeqCst);
        match self.admit(key, bytes.len() as u64) {
            Ok(()) => self.inner.put(key, bytes).await,
            Err(e) => {
                if self.fault == Fault::Crash && !already_crashed {
                    self.inner.put(key, &bytes[..bytes.len() / 2]).await?;
                }
                Err(e)
            }
        }
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.admit(key, bytes.len() as u64)?;
        self.inner.put_atomic(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        self.inner.list(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        if self.fault == Fault::Crash {
            self.admit(key, 0)?;
        }
        self.inner.delete(key).await
    }
}
