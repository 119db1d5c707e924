//! The GPT-2 folders kept in the `tinygpt-bases` store, as the page manages them:
//! `listBases` names each by URL with its size and when it was fetched, and `deleteBase`
//! drops one (its pointer first, then its files) without touching another copy, the
//! adapters or the checkpoints; the next `loadBase` of that URL downloads it again. The
//! loaded base may be deleted: it stays loaded, in memory. Bad requests are refused by name.

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

#[test]
fn kept_bases_are_listed_with_their_size_and_time() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    assert!(bases(&tab.send(json!({"type": "listBases"}))).is_empty(), "none kept yet");
    tab.load_url(URL);
    let items = bases(&tab.send(json!({"type": "listBases"})));
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["url"], format!("{URL}/"), "the folder's address as loadBase resolved it");
    let files: u64 = FILES.iter().map(|f| std::fs::metadata(format!("{FIXTURE}{f}")).unwrap().len()).sum();
    let bytes = items[0]["bytes"].as_u64().unwrap();
    assert!((files..files + 4096).contains(&bytes), "its files and pointer: {bytes} bytes, files {files}");
    assert!(items[0]["fetchedMs"].as_f64().is_some(), "when it was fetched: {items:?}");
    let listed = tab.send(json!({"type": "listBases"}));
    assert_eq!(of_type(&listed, "bases")[0]["storage"], "opfs");
}

#[test]
fn a_deleted_base_downloads_again_and_nothing_else_is_touched() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    server.put_folder(OTHER, |_| {});
    let tab = Tab::open(&stores, &server);
    tab.load_url(OTHER);
    tab.load_url(URL);
    tab.send(json!({"type": "trainAdapter", "name": "code", "dataset": rust_text(),
                    "trainingConfig": {"max_steps": 1, "batch_size": 2}}));
    tab.run();
    assert_eq!(bases(&tab.send(json!({"type": "listBases"}))).len(), 2);
    let (adapters, checkpoints) =
        (snapshot(&stores, "tinygpt-adapters"), snapshot(&stores, "tinygpt-checkpoints"));
    assert!(!adapters.is_empty(), "an adapter was saved");
    let group = group_of(&stores, URL).expect("the copy is kept");
    let others: BTreeMap<String, Vec<u8>> =
        snapshot(&stores, "tinygpt-bases").into_iter().filter(|(k, _)| !k.starts_with(&group)).collect();

    // The base loaded now is deleted: allowed, since it is in memory.
    let out = tab.send(json!({"type": "deleteBase", "url": format!("{URL}/")}));
    assert_eq!(of_type(&out, "baseDeleted")[0]["url"], format!("{URL}/"), "{out:?}");
    let left = bases(&out);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["url"], format!("{OTHER}/"));
    assert_eq!(
        snapshot(&stores, "tinygpt-bases"),
        others,
        "the other copy is as it was; nothing of this one is left"
    );
    assert_eq!(snapshot(&stores, "tinygpt-adapters"), adapters, "adapters untouched");
    assert_eq!(snapshot(&stores, "tinygpt-checkpoints"), checkpoints, "checkpoints untouched");
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

/// The bases store's group holding the copy of `url`, found from its pointer.
fn group_of(stores: &Stores, url: &str) -> Option<String> {
    let store = stores.opened.borrow()["tinygpt-bases"].clone();
    let pointers = block_on(store.list("")).unwrap().into_iter().filter(|b| b.key.ends_with("/source.json"));
    for pointer in pointers {
        let text = String::from_utf8(block_on(store.get(&pointer.key)).unwrap().unwrap()).unwrap();
        if text.contains(&format!("\"{url}/\"")) {
            return Some(pointer.key.trim_end_matches("source.json").to_string());
        }
    }
    None
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
