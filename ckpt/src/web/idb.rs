//! IndexedDB as [`BlobStore`]: one database with two object stores keyed by blob key,
//! `blobs` (the bytes, as `Uint8Array`) and `sizes` (`[key, bytes]`, so `list` reads no
//! data). Every write is one `readwrite` transaction over both, with `strict` durability:
//! atomic, and on disk when it completes.

use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{IdbDatabase, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbRequest, IdbTransaction};

use super::js::{await_event, describe, indexed_db, storage_error, unavailable};
use crate::error::Result;
use crate::store::{check_key, BlobInfo, BlobStore};

const BLOBS: &str = "blobs";
const SIZES: &str = "sizes";

/// An IndexedDB database as a [`BlobStore`].
#[derive(Debug)]
pub struct IdbStore {
    db: IdbDatabase,
    name: String,
}

/// Waits for `request` to succeed, giving its result.
async fn request(request: &IdbRequest) -> std::result::Result<JsValue, JsValue> {
    let (ok, err) = (request.clone(), request.clone());
    await_event(
        request,
        "onsuccess",
        &["onerror"],
        move || ok.result().unwrap_or(JsValue::UNDEFINED),
        move || err.error().ok().flatten().map_or(JsValue::NULL, JsValue::from),
    )
    .await
}

/// Waits for `tx` to commit.
async fn complete(tx: &IdbTransaction) -> std::result::Result<(), JsValue> {
    let err = tx.clone();
    await_event(
        tx,
        "oncomplete",
        &["onerror", "onabort"],
        || JsValue::UNDEFINED,
        move || err.error().map_or(JsValue::NULL, JsValue::from),
    )
    .await
    .map(drop)
}

/// Every key starting with `prefix`.
fn prefix_range(prefix: &str) -> std::result::Result<JsValue, JsValue> {
    Ok(IdbKeyRange::bound(&prefix.into(), &format!("{prefix}\u{ffff}").into())?.into())
}

impl IdbStore {
    /// Opens (creating it) the database `name`, e.g. `"tinygpt-checkpoints"`.
    pub async fn open(name: &str) -> Result<Self> {
        let factory = indexed_db()?;
        let open: IdbOpenDbRequest =
            factory.open_with_u32(name, 1).map_err(|e| unavailable("IndexedDB", &describe(&e)))?;
        let req = open.clone();
        let upgrade = Closure::<dyn FnMut()>::new(move || {
            let Ok(db) = req.result().and_then(|db| db.dyn_into::<IdbDatabase>()) else { return };
            for store in [BLOBS, SIZES] {
                if !db.object_store_names().contains(store) {
                    let _ = db.create_object_store(store);
                }
            }
        });
        open.set_onupgradeneeded(Some(upgrade.as_ref().unchecked_ref()));
        let db = request(&open).await;
        open.set_onupgradeneeded(None);
        drop(upgrade);
        let db: IdbDatabase = db.map_err(|e| unavailable("IndexedDB", &describe(&e)))?.unchecked_into();
        Ok(IdbStore { db, name: name.to_string() })
    }

    /// A transaction over `stores`; `readwrite` ones ask for strict durability.
    fn transaction(&self, stores: &[&str], write: bool) -> std::result::Result<IdbTransaction, JsValue> {
        let names: Array = stores.iter().map(|s| JsValue::from_str(s)).collect();
        if !write {
            return self.db.transaction_with_str_sequence(&names);
        }
        // `{durability: "strict"}` through Reflect: web-sys only binds the options
        // argument behind an unstable cfg.
        let options = js_sys::Object::new();
        Reflect::set(&options, &"durability".into(), &"strict".into())?;
        let transaction: js_sys::Function = Reflect::get(&self.db, &"transaction".into())?.unchecked_into();
        let args = Array::of3(&names, &"readwrite".into(), &options);
        Ok(Reflect::apply(&transaction, &self.db, &args)?.unchecked_into())
    }

    fn store(tx: &IdbTransaction, name: &str) -> std::result::Result<IdbObjectStore, JsValue> {
        tx.object_store(name)
    }
}

impl BlobStore for IdbStore {
    fn location(&self, key: &str) -> String {
        format!("indexeddb:{}/{key}", self.name)
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(&self.location(""), key, false)?;
        let err = |e: JsValue| storage_error(self.location(key), &e, bytes.len() as u64);
        let tx = self.transaction(&[BLOBS, SIZES], true).map_err(err)?;
        let issue = || -> std::result::Result<(), JsValue> {
            Self::store(&tx, BLOBS)?.put_with_key(&Uint8Array::from(bytes), &key.into())?;
            let entry = Array::of2(&key.into(), &JsValue::from_f64(bytes.len() as f64));
            Self::store(&tx, SIZES)?.put_with_key(&entry, &key.into())?;
            Ok(())
        };
        issue().map_err(err)?;
        complete(&tx).await.map_err(err)
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.put(key, bytes).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_key(&self.location(""), key, false)?;
        let err = |e: JsValue| storage_error(self.location(key), &e, 0);
        let tx = self.transaction(&[BLOBS], false).map_err(err)?;
        let req = Self::store(&tx, BLOBS).and_then(|s| s.get(&key.into())).map_err(err)?;
        let value = request(&req).await.map_err(err)?;
        if value.is_undefined() {
            return Ok(None);
        }
        Ok(Some(Uint8Array::new(&value).to_vec()))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let err = |e: JsValue| storage_error(self.location(prefix), &e, 0);
        let tx = self.transaction(&[SIZES], false).map_err(err)?;
        let store = Self::store(&tx, SIZES).map_err(err)?;
        let req = if prefix.is_empty() {
            store.get_all()
        } else {
            prefix_range(prefix).and_then(|range| store.get_all_with_key(&range))
        }
        .map_err(err)?;
        let entries: Array = request(&req).await.map_err(err)?.unchecked_into();
        let mut out: Vec<BlobInfo> = entries
            .iter()
            .filter_map(|entry| {
                let key = Reflect::get_u32(&entry, 0).ok()?.as_string()?;
                let bytes = Reflect::get_u32(&entry, 1).ok()?.as_f64()? as u64;
                Some(BlobInfo { key, bytes })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        check_key(&self.location(""), key, true)?;
        let err = |e: JsValue| storage_error(self.location(key), &e, 0);
        let tx = self.transaction(&[BLOBS, SIZES], true).map_err(err)?;
        let issue = || -> std::result::Result<(), JsValue> {
            let query = if key.ends_with('/') { prefix_range(key)? } else { key.into() };
            Self::store(&tx, BLOBS)?.delete(&query)?;
            Self::store(&tx, SIZES)?.delete(&query)?;
            Ok(())
        };
        issue().map_err(err)?;
        complete(&tx).await.map_err(err)
    }
}
