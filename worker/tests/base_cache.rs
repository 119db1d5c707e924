//! The GPT-2 folders kept in the `tinygpt-bases` store, as the page manages them:
//! `listBases` names each by URL with its size, when it was fetched and whether it is
//! complete, and `deleteBase` drops one (its pointer first, then its files) without touching
//! another copy, the adapters or the checkpoints; the next `loadBase` of that URL downloads
//! it again. The loaded base may be deleted: it stays loaded, in memory. A download whose
//! write was cut short (the tab closed) is listed incomplete and deleted the same way; a
//! write refused by a full storage leaves nothing; a group an older version left without
//! its URL is removed when listed. Bad requests are refused by name.

mod fake_browser;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tinygpt_ckpt::{BlobStore, MemoryStore};
use tinygpt_tensor::block_on;

use fake_browser::{error_of, of_type, rust_text, Server, Stores, Tab, FILES, FIXTURE, URL};

const OTHER: &str = "http://test/other_gpt2";

fn bases(out: &[Value]) -> Vec<Value> {
    let listed = of_type(out, "bases");
    assert_eq!(listed.len(), 1, "one bases message: {out:?}");
    listed[0]["items"].as_array().unwrap().clone()
}

fn snapshot(stores: &Stores, name: &str) -> BTreeMap<String, Vec<u8>> {
    stores.opened.borrow().get(name).map(MemoryStore::snapshot).unwrap_or_default()
}

fn file_bytes(files: &[&str]) -> u64 {
    files.iter().map(|f| std::fs::metadata(format!("{FIXTURE}{f}")).unwrap().len()).sum()
}

/// A tab that downloads `url` and closes while the weights are being written.
fn close_while_writing_weights(stores: &Stores, server: &Server, url: &str) {
    let stalled = Stores { stall: Some("model.safetensors".into()), ..stores.clone() };
    Tab::open(&stalled, server).close_during(json!({"type": "loadBase", "source": "url", "url": url}));
}

/// Another kept copy, an adapter and the checkpoints, to see that they stay as they were.
struct Others {
    bases: BTreeMap<String, Vec<u8>>,
    adapters: BTreeMap<String, Vec<u8>>,
    checkpoints: BTreeMap<String, Vec<u8>>,
}

impl Others {
    /// Keeps [`OTHER`] and trains an adapter on it.
    fn make(stores: &Stores, server: &Server) -> Self {
        server.put_folder(OTHER, |_| {});
        let tab = Tab::open(stores, server);
        tab.load_url(OTHER);
        tab.send(json!({"type": "trainAdapter", "name": "code", "dataset": rust_text(),
                        "trainingConfig": {"max_steps": 1, "batch_size": 2}}));
        tab.run();
        let others = Others::now(stores);
        assert!(!others.adapters.is_empty(), "an adapter was saved");
        others
    }

    fn now(stores: &Stores) -> Self {
        Others {
            bases: snapshot(stores, "tinygpt-bases"),
            adapters: snapshot(stores, "tinygpt-adapters"),
            checkpoints: snapshot(stores, "tinygpt-checkpoints"),
        }
    }

    fn assert_untouched(&self, stores: &Stores) {
        let now = Others::now(stores);
        assert_eq!(now.bases, self.bases, "the other copy is as it was; nothing else is left");
        assert_eq!(now.adapters, self.adapters, "adapters untouched");
        assert_eq!(now.checkpoints, self.checkpoints, "checkpoints untouched");
    }
}

#[test]
fn kept_bases_are_listed_with_their_size_and_time() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    assert!(bases(&tab.send(json!({"type": "listBases"}))).is_empty(), "none kept yet");
    tab.load_url(URL);
    let items = bases(&tab.send(json!({"type": "listBases"})));
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["url"], format!("{URL}/"), "the folder's address as loadBase resolved it");
    let files = file_bytes(&FILES);
    let bytes = items[0]["bytes"].as_u64().unwrap();
    assert!((files..files + 4096).contains(&bytes), "its files and pointer: {bytes} bytes, files {files}");
    assert!(items[0]["fetchedMs"].as_f64().is_some(), "when it was fetched: {items:?}");
    assert_eq!(items[0]["complete"], true);
    let listed = tab.send(json!({"type": "listBases"}));
    assert_eq!(of_type(&listed, "bases")[0]["storage"], "opfs");
}

#[test]
fn a_deleted_base_downloads_again_and_nothing_else_is_touched() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let others = Others::make(&stores, &server);
    let tab = Tab::open(&stores, &server);
    tab.load_url(URL);
    assert_eq!(bases(&tab.send(json!({"type": "listBases"}))).len(), 2);

    // The base loaded now is deleted: allowed, since it is in memory.
    let out = tab.send(json!({"type": "deleteBase", "url": format!("{URL}/")}));
    assert_eq!(of_type(&out, "baseDeleted")[0]["url"], format!("{URL}/"), "{out:?}");
    let left = bases(&out);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["url"], format!("{OTHER}/"));
    others.assert_untouched(&stores);
    // The loaded base still samples.
    tab.send(
        json!({"type": "sample", "prompt": "fn", "maxTokens": 4, "temperature": 0.0, "topK": 0, "seed": 1,
                    "adapter": false}),
    );
    assert_eq!(of_type(&tab.run(), "sampleDone").len(), 1);

    // A reload: the deleted one downloads again, the other comes from storage.
    let requests = server.requests_for("model.safetensors");
    let tab = Tab::open(&stores, &server);
    let again = tab.load_url(URL);
    assert!(of_type(&again, "baseDownload").iter().all(|m| m["cached"] == false), "{again:?}");
    assert_eq!(server.requests_for("model.safetensors"), requests + 1, "downloaded again");
    let other = tab.load_url(OTHER);
    assert!(of_type(&other, "baseDownload").iter().all(|m| m["cached"] == true), "{other:?}");
    assert_eq!(server.requests_for("model.safetensors"), requests + 1, "the other was not");
    assert_eq!(bases(&tab.send(json!({"type": "listBases"}))).len(), 2, "kept again");
}

#[test]
fn deleting_a_base_not_kept_is_refused_by_name() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let (code, message) =
        error_of(&tab.send(json!({"type": "deleteBase", "url": "http://test/never-loaded/"})));
    assert_eq!(code, "baseNotFound");
    assert!(message.contains("http://test/never-loaded/"), "{message}");
    let (code, message) = error_of(&tab.send(json!({"type": "deleteBase", "url": " "})));
    assert_eq!(code, "badMessage");
    assert!(message.contains("\"url\""), "{message}");
    // Deleted twice: the second finds nothing.
    tab.load_url(URL);
    assert_eq!(of_type(&tab.send(json!({"type": "deleteBase", "url": URL})), "baseDeleted").len(), 1);
    let (code, _) = error_of(&tab.send(json!({"type": "deleteBase", "url": URL})));
    assert_eq!(code, "baseNotFound");
}

#[test]
fn a_download_cut_short_while_written_is_listed_incomplete_and_deleted() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let others = Others::make(&stores, &server);
    close_while_writing_weights(&stores, &server, URL);

    let tab = Tab::open(&stores, &server);
    let items = bases(&tab.send(json!({"type": "listBases"})));
    assert_eq!(items.len(), 2, "{items:?}");
    let cut = items.iter().find(|i| i["url"] == format!("{URL}/")).expect("listed by its URL");
    assert_eq!(cut["complete"], false, "{cut:?}");
    let small = file_bytes(&FILES[..3]);
    let bytes = cut["bytes"].as_u64().unwrap();
    assert!(
        (small..small + 1024).contains(&bytes),
        "its small files and marker: {bytes} bytes, files {small}"
    );
    assert!(cut["fetchedMs"].as_f64().is_some(), "when its write began: {cut:?}");
    let other = items.iter().find(|i| i["url"] == format!("{OTHER}/")).unwrap();
    assert_eq!(other["complete"], true, "{other:?}");

    let out = tab.send(json!({"type": "deleteBase", "url": format!("{URL}/")}));
    assert_eq!(of_type(&out, "baseDeleted")[0]["url"], format!("{URL}/"), "{out:?}");
    let left = bases(&out);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["url"], format!("{OTHER}/"));
    others.assert_untouched(&stores);
}

#[test]
fn a_download_cut_short_is_never_read_and_the_next_download_replaces_it() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    close_while_writing_weights(&stores, &server, URL);
    let tab = Tab::open(&stores, &server);
    let out = tab.load_url(URL);
    assert!(of_type(&out, "baseDownload").iter().all(|m| m["cached"] == false), "downloaded: {out:?}");
    assert_eq!(of_type(&out, "baseLoaded").len(), 1, "{out:?}");
    let items = bases(&tab.send(json!({"type": "listBases"})));
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["complete"], true);
}

#[test]
fn a_write_refused_by_a_full_storage_leaves_nothing() {
    let stores = Stores { quota: Some(file_bytes(&FILES[..3]) + 4096), ..Stores::default() };
    let server = Server::with_fixture();
    let tab = Tab::open(&stores, &server);
    let (code, _) = error_of(&tab.load_url(URL));
    assert_eq!(code, "quotaExceeded");
    assert!(snapshot(&stores, "tinygpt-bases").is_empty(), "the small files it wrote are taken back");
    assert!(bases(&tab.send(json!({"type": "listBases"}))).is_empty());
}

#[test]
fn a_group_an_older_version_left_without_its_url_is_removed_when_listed() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let others = Others::make(&stores, &server);
    let store = stores.opened.borrow()["tinygpt-bases"].clone();
    let orphan = format!("url-{}/", "0".repeat(32));
    for file in &FILES[..3] {
        block_on(store.put(&format!("{orphan}{file}"), &std::fs::read(format!("{FIXTURE}{file}")).unwrap()))
            .unwrap();
    }
    let tab = Tab::open(&stores, &server);
    let items = bases(&tab.send(json!({"type": "listBases"})));
    assert_eq!(items.len(), 1, "only the copy with a URL: {items:?}");
    assert_eq!(items[0]["url"], format!("{OTHER}/"));
    others.assert_untouched(&stores);
}
