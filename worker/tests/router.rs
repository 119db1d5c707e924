//! The worker's message router natively (the code the browser runs, minus the JS shim):
//! messages in as the page sends them (JSON), answers out as the page reads them, over
//! in-memory stores that stand for OPFS, IndexedDB and memory, and a lock manager shared
//! by several "tabs".

mod fake_browser;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::{json, Value};
use tinygpt_ckpt::{CkptError, MemoryStore};
use tinygpt_tensor::block_on;
use tinygpt_worker::fetch::NoFetch;
use tinygpt_worker::locks::LockManager;
use tinygpt_worker::protocol::{ErrorCode, InMessage, StoreKind};
use tinygpt_worker::router::{Router, Storage};
use tinygpt_worker::WorkerError;

/// Stores by kind and name, created on first open; the kinds in `unavailable` refuse to open.
#[derive(Clone, Default)]
struct Stores {
    opened: Rc<RefCell<BTreeMap<(String, String), MemoryStore>>>,
    unavailable: Rc<RefCell<BTreeSet<String>>>,
}

fn kind_name(kind: StoreKind) -> String {
    serde_json::to_value(kind).unwrap().as_str().unwrap().to_string()
}

impl Stores {
    fn without(kinds: &[StoreKind]) -> Self {
        let stores = Stores::default();
        stores.unavailable.borrow_mut().extend(kinds.iter().map(|k| kind_name(*k)));
        stores
    }

    /// The keys stored in store `name` of `kind` (`None`: never opened).
    fn keys(&self, kind: StoreKind, name: &str) -> Option<Vec<String>> {
        let opened = self.opened.borrow();
        let store = opened.get(&(kind_name(kind), name.to_string()))?;
        Some(store.snapshot().into_keys().collect())
    }
}

impl Storage for Stores {
    type Store = MemoryStore;

    async fn open(&self, kind: StoreKind, name: &str) -> Result<MemoryStore, CkptError> {
        let kind = kind_name(kind);
        if self.unavailable.borrow().contains(&kind) {
            return Err(CkptError::Unavailable { what: kind, reason: "SecurityError: denied".into() });
        }
        let mut opened = self.opened.borrow_mut();
        let store = opened
            .entry((kind.clone(), name.to_string()))
            .or_insert_with(|| MemoryStore::with_label(&format!("{kind}:{name}/")));
        Ok(store.clone())
    }

    async fn estimate(&self) -> Option<(f64, f64)> {
        Some((10e9, 0.0))
    }
}

/// The browser's Web Locks as several tabs share them: a lock is held by one tab at a time.
#[derive(Clone, Default)]
struct Browser {
    held: Rc<RefCell<BTreeSet<String>>>,
}

struct TabLock {
    name: String,
    held: Rc<RefCell<BTreeSet<String>>>,
}

impl Drop for TabLock {
    fn drop(&mut self) {
        self.held.borrow_mut().remove(&self.name);
    }
}

impl LockManager for Browser {
    type Lock = TabLock;

    async fn request(&self, name: &str, wait: bool) -> Option<TabLock> {
        if !self.held.borrow_mut().insert(name.to_string()) {
            assert!(!wait, "{name} is held by another tab: this test would wait forever");
            return None;
        }
        Some(TabLock { name: name.to_string(), held: Rc::clone(&self.held) })
    }
}

/// One tab's worker and what it posted.
struct Tab {
    router: Router<Stores, Browser>,
    posted: Rc<RefCell<Vec<Value>>>,
}

impl Tab {
    fn new(stores: &Stores, browser: &Browser) -> Self {
        let (router, posted) = fake_browser::worker(stores.clone(), browser.clone(), Box::new(NoFetch));
        Tab { router, posted }
    }

    /// A tab on its own storage and locks, after `init` with `storage`.
    fn ready(storage: &str) -> (Self, Stores) {
        let stores = Stores::default();
        let tab = Tab::new(&stores, &Browser::default());
        tab.send(json!({"type": "init", "backend": "wasm", "storage": storage}));
        (tab, stores)
    }

    /// Handles `message` (as the page sends it) and returns what it posted.
    fn send(&self, message: Value) -> Vec<Value> {
        let message: InMessage = serde_json::from_value(message).unwrap();
        block_on(self.router.handle(message));
        self.take()
    }

    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.posted.borrow_mut())
    }

    /// Ticks (training) until a message of `kind` goes out; returns it.
    fn tick_until(&self, kind: &str) -> Value {
        for _ in 0..1_000 {
            assert!(block_on(self.router.tick(20.0)), "the worker went idle before a {kind}");
            if let Some(m) = self.take().into_iter().find(|m| m["type"] == kind) {
                return m;
            }
        }
        panic!("no {kind}");
    }

    /// Ticks until the worker is idle; returns what it posted.
    fn run_until_idle(&self) -> Vec<Value> {
        let mut posted = Vec::new();
        for _ in 0..10_000 {
            let busy = block_on(self.router.tick(50.0));
            posted.extend(self.take());
            if !busy {
                return posted;
            }
        }
        panic!("the worker did not become idle");
    }
}

fn types(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(|m| m["type"].as_str().unwrap()).collect()
}

fn find<'a>(messages: &'a [Value], kind: &str) -> &'a Value {
    messages
        .iter()
        .find(|m| m["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", types(messages)))
}

fn all<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["type"] == kind).collect()
}

fn error_code(messages: &[Value]) -> &str {
    find(messages, "error")["code"].as_str().unwrap()
}

fn shakespeare() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    let bytes = std::fs::read(path).unwrap();
    json!({"name": "tinyshakespeare.txt", "bytes": bytes[..20_000].to_vec()})
}

/// A tiny run of `max_steps`, checkpointing every `interval` steps.
fn train(max_steps: usize, interval: usize) -> Value {
    json!({
        "type": "train",
        "preset": "tiny",
        "trainingConfig": {"max_steps": max_steps, "eval_interval": 4, "eval_batches": 1, "checkpoint_interval": interval},
        "dataset": shakespeare(),
    })
}

#[test]
fn init_chooses_the_engine_and_the_storage_and_answers_ready() {
    let (tab, stores) = Tab::ready("auto");
    // `ready` went out during `Tab::ready`; a second init keeps the engine and answers again.
    let ready = tab.send(json!({"type": "init", "backend": "webgpu", "storage": "auto"}));
    assert_eq!(types(&ready), ["ready"]);
    let capabilities = &ready[0]["capabilities"];
    assert_eq!(capabilities["backend"], "wasm", "the first init chose the engine");
    assert_eq!(capabilities["backendNote"], "chosen in the Backend setting.");
    assert_eq!(capabilities["storage"], "opfs");
    assert_eq!(capabilities["storageNote"], Value::Null);
    assert_eq!(capabilities["quotaBytes"], 10e9);
    assert!(!ready[0]["presets"].as_array().unwrap().is_empty());
    assert!(stores.keys(StoreKind::Opfs, "tinygpt-checkpoints").is_some());
    assert!(stores.keys(StoreKind::Opfs, "tinygpt-adapters").is_some(), "adapters beside checkpoints");

    // Without a GPU, `auto` trains on the CPU and says why in one line.
    let tab = Tab::new(&Stores::default(), &Browser::default());
    let ready = tab.send(json!({"type": "init", "storage": "memory"}));
    assert_eq!(ready[0]["capabilities"]["backendNote"], "No WebGPU adapter.");
    assert_eq!(ready[0]["capabilities"]["storage"], "memory");
    let ready = Tab::new(&Stores::default(), &Browser::default())
        .send(json!({"type": "init", "backend": "wasm", "checked": true}));
    assert_eq!(ready[0]["capabilities"]["checked"], true);
}

#[test]
fn auto_storage_falls_back_to_indexeddb_for_checkpoints_and_adapters_and_says_why() {
    let stores = Stores::without(&[StoreKind::Opfs]);
    let tab = Tab::new(&stores, &Browser::default());
    let ready = tab.send(json!({"type": "init", "backend": "wasm", "storage": "auto"}));
    let capabilities = &ready[0]["capabilities"];
    assert_eq!(capabilities["storage"], "indexeddb");
    assert!(capabilities["storageNote"].as_str().unwrap().contains("SecurityError"), "{capabilities}");
    let adapters = tab.send(json!({"type": "listAdapters"}));
    assert_eq!(adapters, [json!({"type": "adapters", "items": [], "storage": "indexeddb"})]);
    assert!(stores.keys(StoreKind::Indexeddb, "tinygpt-adapters").is_some());
}

#[test]
fn without_storage_saves_are_refused_with_storage_unavailable_and_training_still_works() {
    let stores = Stores::without(&[StoreKind::Opfs, StoreKind::Indexeddb]);
    let tab = Tab::new(&stores, &Browser::default());
    let ready = tab.send(json!({"type": "init", "backend": "wasm"}));
    let note = ready[0]["capabilities"]["storageNote"].as_str().unwrap();
    assert_eq!(ready[0]["capabilities"]["storage"], "none");
    assert!(note.contains("OPFS: ") && note.contains("IndexedDB: "), "{note}");

    let listed = tab.send(json!({"type": "listCheckpoints"}));
    assert_eq!(listed, [json!({"type": "checkpoints", "items": [], "storage": "none"})]);
    let load = tab.send(json!({"type": "load", "id": "gen-000001", "dataset": shakespeare()}));
    assert_eq!(error_code(&load), "storageUnavailable");
    assert!(find(&load, "error")["message"].as_str().unwrap().contains("private windows"));

    // A run checkpointing every 2 steps says so once, not at every interval.
    tab.send(train(6, 2));
    let trained = tab.run_until_idle();
    assert_eq!(find(&trained, "done")["step"], 6, "training works without storage");
    let errors = all(&trained, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["code"], "storageUnavailable");
    // An explicit save says so every time.
    assert_eq!(error_code(&tab.send(json!({"type": "save"}))), "storageUnavailable");
    assert_eq!(error_code(&tab.send(json!({"type": "save"}))), "storageUnavailable");
}

#[test]
fn train_pause_resume_and_stop_are_routed_to_the_run_and_stop_saves() {
    let (tab, _) = Tab::ready("memory");
    let started = tab.send(train(40, 1000));
    assert_eq!(types(&started)[0], "runStarted");
    let progress = tab.tick_until("progress");
    assert!(progress["step"].as_u64() > Some(0), "{progress}");

    let paused = tab.send(json!({"type": "pause"}));
    assert_eq!(find(&paused, "status")["state"], "paused");
    assert!(!block_on(tab.router.tick(50.0)), "paused: no more ticks");
    let resumed = tab.send(json!({"type": "resume"}));
    assert_eq!(find(&resumed, "status")["state"], "training");
    tab.tick_until("progress");

    // Stop: `done`, then (the weights changed since the last save) an automatic save.
    let stopped = tab.send(json!({"type": "stop"}));
    let order = types(&stopped);
    assert_eq!(order[..2], ["status", "done"], "{order:?}");
    let saved = find(&stopped, "checkpointSaved");
    let listed = find(&stopped, "checkpoints");
    assert_eq!(listed["items"][0]["id"], saved["id"]);
    assert_eq!(listed["storage"], "memory");
    assert!(
        order.iter().position(|t| *t == "checkpointSaved") < order.iter().position(|t| *t == "checkpoints")
    );
    assert!(!block_on(tab.router.tick(50.0)));

    // A sample of the stopped run streams.
    tab.send(
        json!({"type": "sample", "prompt": "RO", "maxTokens": 5, "temperature": 0.0, "topK": 0, "seed": 1}),
    );
    let sampled = tab.run_until_idle();
    assert!(all(&sampled, "sampleDone").len() == 1, "{:?}", types(&sampled));
}

#[test]
fn saves_explicit_and_automatic_go_to_the_chosen_store() {
    let (tab, stores) = Tab::ready("idb");
    assert_eq!(error_code(&tab.send(json!({"type": "save"}))), "noRun", "an explicit save without a run");
    tab.send(train(6, 2));
    let trained = tab.run_until_idle();
    let saved: Vec<_> =
        all(&trained, "checkpointSaved").iter().map(|m| m["step"].as_u64().unwrap()).collect();
    assert_eq!(saved, [2, 4, 6], "every checkpoint interval and the end");
    assert!(all(&trained, "error").is_empty(), "{trained:?}");
    let explicit = tab.send(json!({"type": "save"}));
    assert_eq!(find(&explicit, "checkpointSaved")["step"], 6);
    let listed = find(&explicit, "checkpoints");
    assert_eq!(listed["storage"], "indexeddb");
    assert_eq!(listed["items"].as_array().unwrap().len(), 4);

    let keys = stores.keys(StoreKind::Indexeddb, "tinygpt-checkpoints").unwrap();
    assert!(keys.iter().any(|k| k.ends_with("weights.f32")), "{keys:?}");
    assert_eq!(stores.keys(StoreKind::Opfs, "tinygpt-checkpoints"), None, "OPFS never opened");
    let adapters = stores.keys(StoreKind::Indexeddb, "tinygpt-adapters").unwrap();
    assert!(adapters.is_empty(), "a full run saves no adapter: {adapters:?}");
    assert!(tab.router.held_locks().is_empty(), "the finished run's lock is let go");
}

#[test]
fn list_load_and_delete_checkpoints() {
    let (tab, _) = Tab::ready("memory");
    tab.send(train(4, 2));
    tab.run_until_idle();
    let listed = tab.send(json!({"type": "listCheckpoints"}));
    let items = listed[0]["items"].as_array().unwrap().clone();
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(items.iter().map(|i| i["step"].as_u64().unwrap()).collect::<Vec<_>>(), [4, 2], "newest first");

    let loaded = tab.send(json!({"type": "load", "id": ids[1], "dataset": shakespeare()}));
    let run = &find(&loaded, "runStarted")["run"];
    assert_eq!((run["step"].as_u64(), run["checkpointId"].as_str()), (Some(2), Some(ids[1])));
    let wrong_text =
        json!({"name": "other.txt", "bytes": b"another text altogether, long enough ".repeat(400)});
    assert_eq!(
        error_code(&tab.send(json!({"type": "load", "id": ids[1], "dataset": wrong_text}))),
        "datasetMismatch"
    );

    let deleted = tab.send(json!({"type": "delete", "id": ids[1]}));
    assert_eq!(types(&deleted), ["deleted", "checkpoints"]);
    assert_eq!(deleted[1]["items"].as_array().unwrap().len(), 1);
    assert_eq!(error_code(&tab.send(json!({"type": "delete", "id": ids[0]}))), "deleteRefused", "the newest");
    let missing = tab.send(json!({"type": "load", "id": ids[1], "dataset": shakespeare()}));
    assert_eq!(error_code(&missing), "checkpointNotFound");

    let exported = tab.send(json!({"type": "export"}));
    assert!(find(&exported, "exported")["fileName"].as_str().unwrap().ends_with("-step4.safetensors"));
}

#[test]
fn a_run_another_tab_trains_is_refused_until_that_tab_pauses() {
    let (stores, browser) = (Stores::default(), Browser::default());
    let (first, second) = (Tab::new(&stores, &browser), Tab::new(&stores, &browser));
    for tab in [&first, &second] {
        tab.send(json!({"type": "init", "backend": "wasm", "storage": "opfs"}));
    }
    first.send(train(40, 1000));
    let lock = first.router.held_locks();
    assert!(lock.len() == 1 && lock[0].starts_with("tinygpt-run/tinygpt-tiny/"), "{lock:?}");

    let refused = second.send(train(40, 1000));
    assert_eq!(types(&refused), ["error"]);
    assert_eq!(refused[0]["code"], "runLocked");
    assert!(refused[0]["message"].as_str().unwrap().contains("tinygpt-tiny on \"tinyshakespeare.txt\""));
    assert!(second.router.held_locks().is_empty());
    // Another run (another seed) is not locked.
    let mut other = train(40, 1000);
    other["trainingConfig"]["seed"] = json!(7);
    assert_eq!(types(&second.send(other))[0], "runStarted");
    second.send(json!({"type": "stop"}));
    assert!(second.router.held_locks().is_empty(), "a stopped run lets its lock go");

    // Paused, the run is free: the second tab trains it now, and the first may not resume.
    assert!(block_on(first.router.tick(0.0)));
    first.send(json!({"type": "pause"}));
    assert!(first.router.held_locks().is_empty());
    assert_eq!(types(&second.send(train(40, 1000)))[0], "runStarted");
    assert_eq!(error_code(&first.send(json!({"type": "resume"}))), "runLocked");
    assert_eq!(
        types(&first.send(json!({"type": "save"}))),
        ["checkpointSaved", "checkpoints"],
        "saving is not locked"
    );
}

#[test]
fn adapters_are_trained_saved_to_the_adapter_store_listed_and_loaded() {
    let (tab, stores) = Tab::ready("opfs");
    assert_eq!(
        tab.send(json!({"type": "listAdapters"})),
        [json!({"type": "adapters", "items": [], "storage": "opfs"})]
    );
    let no_base = tab.send(json!({"type": "loadAdapter", "name": "a"}));
    assert_eq!(error_code(&no_base), "noBase");
    let no_id = tab.send(json!({"type": "loadBase", "source": "checkpoint"}));
    assert_eq!(error_code(&no_id), "badMessage");

    // A saved tiny run is the base.
    tab.send(train(2, 1000));
    let id = find(&tab.run_until_idle(), "checkpointSaved")["id"].clone();
    let based = tab.send(json!({"type": "loadBase", "source": "checkpoint", "id": id}));
    assert_eq!(types(&based), ["baseLoaded", "adapters"]);

    tab.send(json!({
        "type": "trainAdapter",
        "name": "shout",
        "preset": "qv-r4",
        "trainingConfig": {"max_steps": 4, "eval_interval": 2, "eval_batches": 1, "checkpoint_interval": 2},
        "dataset": {"name": "shout.txt", "bytes": b"TO BE OR NOT TO BE, THAT IS THE QUESTION. ".repeat(100)},
    }));
    assert_eq!(tab.router.held_locks(), ["tinygpt-adapter/shout"]);
    let trained = tab.run_until_idle();
    assert!(all(&trained, "checkpointSaved").is_empty(), "an adapter run saves to the adapter store");
    let saved: Vec<_> = all(&trained, "adapterSaved").iter().map(|m| m["step"].as_u64().unwrap()).collect();
    assert_eq!(saved, [2, 4]);
    let listed = all(&trained, "adapters");
    let item = &listed.last().unwrap()["items"][0];
    assert_eq!((item["name"].as_str(), item["fitsBase"].as_bool()), (Some("shout"), Some(true)));
    let keys = stores.keys(StoreKind::Opfs, "tinygpt-adapters").unwrap();
    assert!(keys.iter().any(|k| k.starts_with("shout.gen-")), "{keys:?}");

    let explicit = tab.send(json!({"type": "save"}));
    assert_eq!(find(&explicit, "adapterSaved")["name"], "shout");
    let loaded = tab.send(json!({"type": "loadAdapter", "name": "shout"}));
    assert_eq!(types(&loaded)[0], "adapterLoaded");
    assert_eq!(error_code(&tab.send(json!({"type": "loadAdapter", "name": "nope"}))), "adapterNotFound");
}

#[test]
fn a_message_that_cannot_be_read_is_answered_with_its_error() {
    let (tab, _) = Tab::ready("memory");
    let error = WorkerError::new(ErrorCode::BadMessage, "not a message");
    tab.router.refuse(&error);
    assert_eq!(tab.take(), [json!({"type": "error", "code": "badMessage", "message": "not a message"})]);
}
