//! A fake browser for the router tests that drive the worker as a page does: a server that
//! counts requests ([`Server`], serving ckpt's GPT-2 fixture), named stores kept across tabs
//! with an optional quota ([`Stores`]), [`Tab`], a page load with its worker, and
//! [`worker`], the worker a tab builds, for tests with storage or locks of their own. Each
//! test file uses part of it.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Waker};

use serde_json::{json, Value};
use tinygpt_ckpt::{BlobInfo, BlobStore, CkptError, MemoryStore};
use tinygpt_tensor::block_on;
use tinygpt_worker::abandon::Abandon;
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::fetch::{Body, Fetch, LocalFuture};
use tinygpt_worker::locks::LockManager;
use tinygpt_worker::protocol::{EngineKind, InMessage, OutMessage, StoreKind};
use tinygpt_worker::router::{BrowserFacts, Environment, Platform, Router, Storage};

pub const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ckpt/tests/fixtures/hf_gpt2/");
pub const URL: &str = "http://test/hf_gpt2";
pub const FILES: [&str; 4] = ["config.json", "vocab.json", "merges.txt", "model.safetensors"];

/// A server: files by URL, each request counted; `announce_more` makes it announce more
/// bytes than it sends for URLs ending so (a connection cut short).
#[derive(Clone, Default)]
pub struct Server {
    pub files: Rc<RefCell<BTreeMap<String, Vec<u8>>>>,
    pub requests: Rc<RefCell<Vec<String>>>,
    pub cut_short: Rc<RefCell<Option<String>>>,
    /// A length announced for URLs ending so, instead of the file's.
    pub announce: Rc<RefCell<Option<(String, u64)>>>,
}

impl Server {
    pub fn with_fixture() -> Self {
        let server = Server::default();
        server.put_folder(URL, |_| {});
        server
    }

    /// The fixture at `folder`, after `edit` changed its files.
    pub fn put_folder(&self, folder: &str, edit: impl FnOnce(&mut BTreeMap<&str, Vec<u8>>)) {
        let mut files: BTreeMap<&str, Vec<u8>> =
            FILES.iter().map(|f| (*f, std::fs::read(format!("{FIXTURE}{f}")).unwrap())).collect();
        edit(&mut files);
        for (name, bytes) in files {
            self.files.borrow_mut().insert(format!("{folder}/{name}"), bytes);
        }
    }

    pub fn requests_for(&self, file: &str) -> usize {
        self.requests.borrow().iter().filter(|u| u.ends_with(file)).count()
    }
}

pub struct Response {
    status: u16,
    length: Option<u64>,
    chunks: Vec<Vec<u8>>,
}

impl Body for Response {
    fn status(&self) -> u16 {
        self.status
    }
    fn length(&self) -> Option<u64> {
        self.length
    }
    fn chunk(&mut self) -> LocalFuture<'_, Result<Option<Vec<u8>>, String>> {
        let next = if self.chunks.is_empty() { None } else { Some(self.chunks.remove(0)) };
        Box::pin(async move { Ok(next) })
    }
}

impl Fetch for Server {
    fn get<'a>(&'a self, url: &'a str) -> LocalFuture<'a, Result<Box<dyn Body>, String>> {
        self.requests.borrow_mut().push(url.to_string());
        let response = match self.files.borrow().get(url) {
            None => Response { status: 404, length: Some(10), chunks: vec![b"not found\n".to_vec()] },
            Some(bytes) => {
                let cut = self.cut_short.borrow().as_ref().is_some_and(|c| url.ends_with(c.as_str()));
                let sent = if cut { &bytes[..bytes.len() / 2] } else { &bytes[..] };
                let chunks = sent.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
                let announced = self.announce.borrow().clone().filter(|(end, _)| url.ends_with(end.as_str()));
                Response {
                    status: 200,
                    length: Some(announced.map_or(bytes.len() as u64, |(_, n)| n)),
                    chunks,
                }
            }
        };
        Box::pin(async move { Ok(Box::new(response) as Box<dyn Body>) })
    }
}

/// A memory store that refuses to hold more than `quota` bytes in all, and whose `put` of a
/// key ending in `stall` never finishes (a write the tab closed during).
#[derive(Clone)]
pub struct Limited {
    inner: MemoryStore,
    pub quota: Option<u64>,
    pub stall: Option<String>,
}

impl BlobStore for Limited {
    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), CkptError> {
        let used: u64 = self.inner.snapshot().values().map(|b| b.len() as u64).sum();
        if self.quota.is_some_and(|q| used + bytes.len() as u64 > q) {
            return Err(CkptError::QuotaExceeded { needed_bytes: bytes.len() as u64 });
        }
        if self.stall.as_ref().is_some_and(|s| key.ends_with(s.as_str())) {
            std::future::pending::<()>().await;
        }
        self.inner.put(key, bytes).await
    }
    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<(), CkptError> {
        self.inner.put_atomic(key, bytes).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CkptError> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>, CkptError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), CkptError> {
        self.inner.delete(key).await
    }
}

/// The browser's storage: stores by name, kept across tabs; `quota` limits each, `stall`
/// stalls their writes of keys ending so ([`Limited`]).
#[derive(Clone, Default)]
pub struct Stores {
    pub opened: Rc<RefCell<BTreeMap<String, MemoryStore>>>,
    pub quota: Option<u64>,
    pub stall: Option<String>,
}

impl Storage for Stores {
    type Store = Limited;

    async fn open(&self, _kind: StoreKind, name: &str) -> Result<Limited, CkptError> {
        let inner = self.opened.borrow_mut().entry(name.to_string()).or_default().clone();
        Ok(Limited { inner, quota: self.quota, stall: self.stall.clone() })
    }

    async fn estimate(&self) -> Option<(f64, f64)> {
        None
    }
}

/// Every lock granted at once (one tab at a time here).
pub struct NoContention;

impl LockManager for NoContention {
    type Lock = ();
    async fn request(&self, _name: &str, _wait: bool) -> Option<()> {
        Some(())
    }
}

pub struct Tab {
    pub router: Router<Stores, NoContention>,
    pub posted: Rc<RefCell<Vec<Value>>>,
}

/// A worker as a page starts it (wasm CPU, the system clock, never abandoning a step) on
/// `storage`, `locks` and `fetch`, and the messages it posts, as the page reads them (JSON).
pub fn worker<S: Storage, L: LockManager>(
    storage: S,
    locks: L,
    fetch: Box<dyn Fetch>,
) -> (Router<S, L>, Rc<RefCell<Vec<Value>>>) {
    let posted = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&posted);
    let platform = Platform {
        outbox: Box::new(move |m: &OutMessage| sink.borrow_mut().push(serde_json::to_value(m).unwrap())),
        clock: Box::new(SystemClock::default()),
        storage,
        locks,
        abandon: Rc::new(Abandon::never()),
        fetch,
    };
    let env = Environment { cpu: EngineKind::Wasm, threads: None, browser: BrowserFacts::default() };
    (Router::new(platform, env), posted)
}

impl Tab {
    /// A tab (a page load) on `stores` and `server`, after `init`.
    pub fn open(stores: &Stores, server: &Server) -> Self {
        let (router, posted) = worker(stores.clone(), NoContention, Box::new(server.clone()));
        let tab = Tab { router, posted };
        tab.send(json!({"type": "init", "backend": "wasm", "storage": "opfs"}));
        tab
    }

    /// Sends `message` and closes the tab while the worker still handles it (waiting on a
    /// [`Stores::stall`]ed write, say): the worker stops where it waits, as when the page
    /// goes away, and nothing after that point runs.
    pub fn close_during(self, message: Value) {
        let message: InMessage = serde_json::from_value(message).unwrap();
        let mut handled = pin!(self.router.handle(message));
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..100 {
            assert!(handled.as_mut().poll(&mut cx).is_pending(), "handled whole before the tab closed");
        }
    }

    pub fn send(&self, message: Value) -> Vec<Value> {
        let message: InMessage = serde_json::from_value(message).unwrap();
        block_on(self.router.handle(message));
        std::mem::take(&mut *self.posted.borrow_mut())
    }

    /// Ticks until the worker is idle; everything it posted.
    pub fn run(&self) -> Vec<Value> {
        for _ in 0..100_000 {
            if !block_on(self.router.tick(50.0)) {
                return std::mem::take(&mut *self.posted.borrow_mut());
            }
        }
        panic!("the worker did not become idle");
    }

    pub fn load_url(&self, url: &str) -> Vec<Value> {
        self.send(json!({"type": "loadBase", "source": "url", "url": url}))
    }
}

pub fn of_type<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["type"] == kind).collect()
}

pub fn error_of(messages: &[Value]) -> (String, String) {
    let e = of_type(messages, "error");
    assert_eq!(e.len(), 1, "one error: {messages:?}");
    (e[0]["code"].as_str().unwrap().into(), e[0]["message"].as_str().unwrap().into())
}

/// Text that is not TinyShakespeare: the LoRA fixture's Rust source.
pub fn rust_text() -> Value {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests-web/fixtures/lora-text.rs.txt"))
        .unwrap();
    json!({"name": "lora-text.rs.txt", "bytes": bytes})
}
