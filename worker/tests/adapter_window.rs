//! The window an adapter trains on (`trainAdapter`'s `context`) is saved with it: a run
//! trained on 64-token windows of the GPT-2 fixture (context 128) continues on 64-token
//! windows after a reload without being told, a `loadAdapter` asking for another window is
//! refused by name, and an adapter saved before windows were recorded (no `context_length`
//! in its adapter_config.json) still loads, at the default window or the one asked for.

mod fake_browser;

use serde_json::{json, Value};
use tinygpt_ckpt::{AdapterShelf, BlobStore, MemoryStore};
use tinygpt_model::ModelConfig;
use tinygpt_tensor::block_on;

use fake_browser::{error_of, of_type, rust_text, Server, Stores, Tab, URL};

/// Steps the runs here take in all.
const STEPS: usize = 6;

fn training() -> Value {
    json!({"max_steps": STEPS, "batch_size": 2, "learning_rate": 5e-2, "eval_interval": 3,
           "eval_batches": 1, "checkpoint_interval": 3})
}

/// The adapter store the tabs share.
fn adapter_store(stores: &Stores) -> MemoryStore {
    stores.opened.borrow()["tinygpt-adapters"].clone()
}

/// Ticks until the run has taken a step, then stops it (which saves it part-way).
fn train_a_little(tab: &Tab) -> Vec<Value> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        block_on(tab.router.tick(1.0));
        out.extend(std::mem::take(&mut *tab.posted.borrow_mut()));
        if of_type(&out, "progress").iter().any(|m| m["step"].as_u64() >= Some(1)) {
            break;
        }
    }
    out.extend(tab.send(json!({"type": "stop"})));
    out
}

/// The adapters list's entry for `name` after loading the base in `tab`.
fn listed(tab: &Tab, name: &str) -> Value {
    let out = tab.send(json!({"type": "listAdapters"}));
    let items = of_type(&out, "adapters")[0]["items"].as_array().unwrap().clone();
    items.into_iter().find(|a| a["name"] == name).unwrap_or_else(|| panic!("{name} listed: {out:?}"))
}

fn continue_run(tab: &Tab, name: &str, context: Option<usize>) -> Vec<Value> {
    let mut message = json!({"type": "loadAdapter", "name": name, "dataset": rust_text()});
    if let Some(c) = context {
        message["context"] = json!(c);
    }
    tab.send(message)
}

#[test]
fn an_adapter_continues_on_the_window_it_was_trained_on() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let base = of_type(&tab.load_url(URL), "baseLoaded")[0]["base"].clone();
    assert_eq!(
        base["modelConfig"]["context_length"], 128,
        "the fixture's context, which is the default window"
    );
    let started = tab.send(json!({"type": "trainAdapter", "name": "code", "context": 64,
                                  "trainingConfig": training(), "dataset": rust_text()}));
    assert_eq!(of_type(&started, "runStarted")[0]["run"]["modelConfig"]["context_length"], 64);
    let stopped = train_a_little(&tab);
    let saved = of_type(&stopped, "adapterSaved");
    let step = saved.last().unwrap_or_else(|| panic!("saved at stop: {stopped:?}"))["step"].as_u64().unwrap();
    assert!((1..STEPS as u64).contains(&step), "stopped part-way, at step {step}");

    // A reload: the window is in the saved files, and the list shows it.
    let tab = Tab::open(&stores, &server);
    tab.load_url(URL);
    assert_eq!(listed(&tab, "code")["context"], 64);
    let loaded = continue_run(&tab, "code", None);
    let run = &of_type(&loaded, "runStarted").first().unwrap_or_else(|| panic!("{loaded:?}"))["run"];
    assert_eq!(run["modelConfig"]["context_length"], 64, "it continues on its own window, not the default");
    assert_eq!(run["step"], step);
    tab.send(json!({"type": "resume"}));
    let finished = tab.run();
    assert_eq!(of_type(&finished, "adapterSaved").last().unwrap()["step"], STEPS, "{finished:?}");
    let config =
        block_on(AdapterShelf::new(adapter_store(&stores)).adapter("code").unwrap().config()).unwrap();
    assert_eq!(config.context_length, Some(64), "the continued run saved its window again");

    // Asking for the window it has is the same as not asking; another one is refused by name.
    let same = continue_run(&tab, "code", Some(64));
    assert_eq!(of_type(&same, "runStarted")[0]["run"]["modelConfig"]["context_length"], 64);
    let (code, message) = error_of(&continue_run(&tab, "code", Some(32)));
    assert_eq!(code, "contextMismatch");
    assert!(message.contains("windows of 64 tokens") && message.contains("not 32"), "{message}");
}

#[test]
fn an_adapter_saved_before_windows_were_recorded_loads_at_the_default_or_the_asked_window() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let base = of_type(&tab.load_url(URL), "baseLoaded")[0]["base"].clone();
    tab.send(json!({"type": "trainAdapter", "name": "code", "context": 64, "trainingConfig": training(),
                    "dataset": rust_text()}));
    train_a_little(&tab);

    // The same adapter as an older page saved it: adapter_config.json without context_length.
    let model: ModelConfig = serde_json::from_value(base["modelConfig"].clone()).unwrap();
    let shelf = AdapterShelf::new(adapter_store(&stores));
    let mut ckpt = block_on(shelf.adapter("code").unwrap().load_latest(&model)).unwrap();
    assert_eq!(ckpt.context_length, Some(64));
    ckpt.context_length = None;
    block_on(shelf.adapter("old").unwrap().save(&ckpt)).unwrap();
    let configs: Vec<String> =
        block_on(shelf.storage().list("old.")).unwrap().into_iter().map(|b| b.key).collect();
    let config_key = configs.iter().find(|k| k.ends_with("adapter_config.json")).expect("a config file");
    let text = String::from_utf8(block_on(shelf.storage().get(config_key)).unwrap().unwrap()).unwrap();
    assert!(
        !text.contains("context_length") && text.contains("target_modules"),
        "an old-format file: {text}"
    );

    let tab = Tab::open(&stores, &server);
    tab.load_url(URL);
    assert!(listed(&tab, "old").get("context").is_none(), "no window to show");
    let loaded = continue_run(&tab, "old", None);
    let run = &of_type(&loaded, "runStarted").first().unwrap_or_else(|| panic!("{loaded:?}"))["run"];
    assert_eq!(run["modelConfig"]["context_length"], 128, "the default window: min(256, the base's context)");
    let asked = continue_run(&tab, "old", Some(32));
    assert_eq!(of_type(&asked, "runStarted")[0]["run"]["modelConfig"]["context_length"], 32, "{asked:?}");
    let (code, message) = error_of(&continue_run(&tab, "old", Some(4096)));
    assert_eq!(code, "invalidConfig");
    assert!(message.contains("1 to 128"), "{message}");
    // Selected for sampling (no text), it samples on the whole base as before.
    let selected = tab.send(json!({"type": "loadAdapter", "name": "old"}));
    assert_eq!(of_type(&selected, "adapterLoaded")[0]["resumable"], false, "{selected:?}");
}
