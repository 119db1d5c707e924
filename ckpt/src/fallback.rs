//! OPFS, else IndexedDB: the one fallback between browser stores, for [`crate::web::WebStore`]
//! and for the worker, which opens stores through its own platform trait so that its tests
//! run natively.

use std::future::Future;

use crate::error::{CkptError, Result};

/// `opfs` if it opened; else what `indexed_db` opens, with the OPFS error that passed OPFS
/// over (a page says why its files are not where it expects them); if neither opens, one
/// error naming both reasons. `indexed_db` is only called when OPFS failed.
pub async fn opfs_else_indexed_db<S, F>(
    opfs: impl Future<Output = Result<S>>,
    indexed_db: impl FnOnce() -> F,
) -> Result<(S, Option<CkptError>)>
where
    F: Future<Output = Result<S>>,
{
    let opfs_error = match opfs.await {
        Ok(store) => return Ok((store, None)),
        Err(e) => e,
    };
    match indexed_db().await {
        Ok(store) => Ok((store, Some(opfs_error))),
        Err(idb_error) => Err(CkptError::Unavailable {
            what: "browser storage".into(),
            reason: format!("OPFS: {opfs_error}; IndexedDB: {idb_error}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use tinygpt_tensor::block_on;

    fn unavailable(what: &str) -> CkptError {
        CkptError::Unavailable { what: what.into(), reason: "denied".into() }
    }

    #[test]
    fn opfs_first_indexed_db_only_when_it_fails_and_both_reasons_when_neither_opens() {
        let asked = Cell::new(false);
        let idb = || {
            asked.set(true);
            async { Ok("idb") }
        };
        let (store, why) = block_on(opfs_else_indexed_db(async { Ok("opfs") }, idb)).unwrap();
        assert_eq!((store, why.is_none()), ("opfs", true));
        assert!(!asked.get(), "IndexedDB is not opened where OPFS opens");

        let (store, why) =
            block_on(opfs_else_indexed_db(async { Err(unavailable("OPFS")) }, || async { Ok("idb") }))
                .unwrap();
        assert_eq!(store, "idb");
        assert!(why.is_some_and(|e| e.to_string().contains("OPFS")), "the OPFS error is kept");

        let neither =
            block_on(opfs_else_indexed_db::<&str, _>(async { Err(unavailable("OPFS")) }, || async {
                Err(unavailable("IndexedDB"))
            }))
            .unwrap_err()
            .to_string();
        assert!(neither.contains("OPFS: ") && neither.contains("; IndexedDB: "), "{neither}");
    }
}
