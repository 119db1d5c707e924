//! A Hugging Face GPT-2 folder as the LoRA base, through the router as the page drives it:
//! by URL (from a fake server that counts requests) with progress, kept in the bases store
//! so a second tab (a reloaded page) reads it there without downloading; an adapter trained
//! on it in its BPE tokens, saved, reloaded and sampled; and the refusals, each naming the
//! problem (404, a folder that is not GPT-2, a download cut short, a full storage), after
//! which the worker still loads a good base.

mod fake_browser;

use serde_json::{json, Value};
use tinygpt_ckpt::BlobStore;
use tinygpt_tensor::block_on;

use fake_browser::{error_of, of_type, rust_text, Server, Stores, Tab, FILES, FIXTURE, URL};

#[test]
fn url_base_downloads_with_progress_then_comes_from_the_cache() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let out = tab.load_url(URL);
    let progress = of_type(&out, "baseDownload");
    for file in FILES {
        let mine: Vec<_> = progress.iter().filter(|m| m["file"] == file).collect();
        let size = std::fs::metadata(format!("{FIXTURE}{file}")).unwrap().len();
        assert_eq!(mine.first().unwrap()["bytesDone"], 0, "{file} starts at 0");
        assert_eq!(mine.last().unwrap()["bytesDone"], size, "{file} ends complete");
        assert!(mine.iter().all(|m| m["bytesTotal"] == size && m["cached"] == false), "{mine:?}");
    }
    let model = progress.iter().filter(|m| m["file"] == "model.safetensors").count();
    assert!(model >= 3, "the weights report progress on the way ({model} messages)");
    let loaded = of_type(&out, "baseLoaded");
    let base = &loaded[0]["base"];
    assert_eq!(base["source"], "url");
    assert_eq!(base["name"], format!("{URL}/"));
    assert!(base["modelConfig"]["tokenizer"].as_str().unwrap().starts_with("bpe-"), "{base}");
    assert_eq!(base["modelConfig"]["vocab_size"], 1000);
    assert_eq!(of_type(&out, "adapters").len(), 1, "then the adapter list");
    assert_eq!(server.requests.borrow().len(), 4);

    // A reload: the same URL (with its slash, as the page may give it) is read from storage.
    let tab = Tab::open(&stores, &server);
    let again = tab.load_url(&format!("{URL}/"));
    let cached = of_type(&again, "baseDownload");
    assert_eq!(cached.len(), 4, "one message per file: {cached:?}");
    assert!(cached.iter().all(|m| m["cached"] == true && m["bytesDone"] == m["bytesTotal"]), "{cached:?}");
    assert_eq!(server.requests.borrow().len(), 4, "nothing downloaded again");
    assert_eq!(of_type(&again, "baseLoaded")[0]["base"]["weightsSha256"], base["weightsSha256"]);
}

#[test]
fn a_damaged_cached_copy_is_downloaded_again_not_imported() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let first = Tab::open(&stores, &server).load_url(URL);
    let weights = of_type(&first, "baseLoaded")[0]["base"]["weightsSha256"].clone();
    // Flip one byte of the kept weights (the size stays the same).
    for store in stores.opened.borrow().values() {
        for (key, mut bytes) in store.snapshot() {
            if key.ends_with("model.safetensors") {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x40;
                block_on(store.put(&key, &bytes)).unwrap();
            }
        }
    }
    let again = Tab::open(&stores, &server).load_url(URL);
    let weights_progress =
        of_type(&again, "baseDownload").into_iter().filter(|m| m["file"] == "model.safetensors");
    assert!(weights_progress.into_iter().all(|m| m["cached"] == false), "{again:?}");
    assert_eq!(server.requests_for("model.safetensors"), 2, "the weights came from the server again");
    assert_eq!(of_type(&again, "baseLoaded")[0]["base"]["weightsSha256"], weights, "the same base");
}

#[test]
fn an_adapter_on_a_gpt2_base_trains_in_its_tokens_reloads_and_samples() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    tab.load_url(URL);
    let training = json!({"max_steps": 3, "batch_size": 2, "learning_rate": 5e-2, "eval_interval": 3,
                          "eval_batches": 1, "checkpoint_interval": 3});
    let started = tab.send(json!({"type": "trainAdapter", "name": "code", "preset": "qv-r4",
                                  "trainingConfig": training, "dataset": rust_text()}));
    let run = &of_type(&started, "runStarted")[0]["run"];
    let tokens = run["dataset"]["token_count"].as_u64().unwrap();
    assert!(run["dataset"]["tokenizer"].as_str().unwrap().starts_with("bpe-"), "{run}");
    assert!(tokens < 15_140, "the text is read in the base's BPE tokens, not bytes ({tokens})");
    let trained = tab.run();
    assert_eq!(of_type(&trained, "adapterSaved").last().unwrap()["step"], 3, "{trained:?}");

    // A reload: the base from the cache, the adapter from the store, a sample in BPE tokens.
    let tab = Tab::open(&stores, &server);
    let out = tab.load_url(URL);
    let listed = &of_type(&out, "adapters")[0]["items"];
    assert_eq!(listed[0]["name"], "code");
    assert_eq!(listed[0]["fitsBase"], true, "{listed}");
    let loaded = tab.send(json!({"type": "loadAdapter", "name": "code"}));
    assert_eq!(of_type(&loaded, "adapterLoaded").len(), 1, "{loaded:?}");
    let sample = |adapter: bool| {
        tab.send(json!({"type": "sample", "prompt": "fn main", "maxTokens": 12, "temperature": 0.0,
                        "topK": 0, "seed": 1, "adapter": adapter}));
        let out = tab.run();
        let done = of_type(&out, "sampleDone");
        done[0]["text"].as_str().unwrap().to_string()
    };
    let (base, adapted) = (sample(false), sample(true));
    // The random base writes 12 two-byte BPE tokens; three steps on Rust source change that.
    assert!(base.len() > 12, "BPE tokens decoded to their bytes: {base:?}");
    assert_ne!(adapted, base, "the adapter changes what the model writes");
    assert!(!adapted.is_empty());
    assert_eq!(server.requests.borrow().len(), 4, "the reload downloaded nothing");
}

#[test]
fn a_missing_folder_is_named_and_the_worker_stays_usable() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let (code, message) = error_of(&tab.load_url("http://test/nothing-here"));
    assert_eq!(code, "downloadFailed");
    assert!(message.contains("config.json") && message.contains("HTTP 404"), "{message}");
    assert!(message.contains("http://test/nothing-here/config.json"), "{message}");
    assert_eq!(server.requests.borrow().len(), 1, "nothing after the first refusal");
    assert_eq!(of_type(&tab.load_url(URL), "baseLoaded").len(), 1);
}

#[test]
fn a_folder_that_is_not_gpt2_is_refused_before_its_weights_download() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    server.put_folder("http://test/llama", |files| {
        let mut config: Value = serde_json::from_slice(&files["config.json"]).unwrap();
        config["model_type"] = json!("llama");
        files.insert("config.json", serde_json::to_vec(&config).unwrap());
    });
    let tab = Tab::open(&stores, &server);
    let (code, message) = error_of(&tab.load_url("http://test/llama"));
    assert_eq!(code, "badCheckpoint");
    assert!(message.contains("model_type") && message.contains("llama"), "{message}");
    assert_eq!(server.requests_for("model.safetensors"), 0, "the weights were not fetched");
    assert_eq!(of_type(&tab.load_url(URL), "baseLoaded").len(), 1);
}

#[test]
fn a_download_cut_short_is_named_and_not_kept() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    *server.cut_short.borrow_mut() = Some("model.safetensors".into());
    let tab = Tab::open(&stores, &server);
    let (code, message) = error_of(&tab.load_url(URL));
    assert_eq!(code, "downloadFailed");
    assert!(message.contains("model.safetensors") && message.contains("cut short"), "{message}");
    *server.cut_short.borrow_mut() = None;
    let out = tab.load_url(URL);
    assert!(of_type(&out, "baseDownload").iter().all(|m| m["cached"] == false), "nothing was kept");
    assert_eq!(of_type(&out, "baseLoaded").len(), 1);
}

#[test]
fn a_full_storage_is_named() {
    let stores = Stores { quota: Some(100_000), ..Stores::default() };
    let server = Server::with_fixture();
    let tab = Tab::open(&stores, &server);
    let (code, message) = error_of(&tab.load_url(URL));
    assert_eq!(code, "quotaExceeded");
    assert!(
        message.contains("does not fit in this browser's storage") && message.contains("four files"),
        "{message}"
    );
}

#[test]
fn picked_files_make_the_same_base() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let from_url = of_type(&tab.load_url(URL), "baseLoaded")[0]["base"].clone();
    let read = |f: &str| std::fs::read(format!("{FIXTURE}{f}")).unwrap();
    let files = json!({"configJson": read("config.json"), "modelSafetensors": read("model.safetensors"),
                       "vocabJson": read("vocab.json"), "mergesTxt": read("merges.txt")});
    let out = tab.send(json!({"type": "loadBase", "source": "files", "files": files, "name": "tiny"}));
    let picked = &of_type(&out, "baseLoaded")[0]["base"];
    assert_eq!((picked["source"].as_str(), picked["name"].as_str()), (Some("files"), Some("tiny")));
    assert_eq!(picked["weightsSha256"], from_url["weightsSha256"], "adapters fit either");
    let started = tab.send(json!({"type": "trainAdapter", "name": "a", "trainingConfig": {"max_steps": 1},
                                  "dataset": rust_text()}));
    let run = &of_type(&started, "runStarted")[0]["run"];
    assert_eq!(run["trainingConfig"]["batch_size"], 4, "a GPT-2 base's adapters take 4 rows by default");
    tab.run();
    let (code, message) = error_of(&tab.send(json!({"type": "loadBase", "source": "files"})));
    assert_eq!(code, "badMessage");
    assert!(message.contains("config.json"), "{message}");
}

/// The worker trains whole models on bytes only: a model config naming a BPE tokenizer (as
/// a GPT-2 base's does) is refused by `train`, not trained on the wrong tokens.
#[test]
fn train_refuses_a_bpe_model_config() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    let tab = Tab::open(&stores, &server);
    let base = of_type(&tab.load_url(URL), "baseLoaded")[0]["base"].clone();
    let out = tab.send(json!({"type": "train", "modelConfig": base["modelConfig"], "dataset": rust_text()}));
    let (code, message) = error_of(&out);
    assert_eq!(code, "invalidConfig");
    assert!(message.contains("byte-level models only") && message.contains("bpe-"), "{message}");
}

/// A weights file larger than any GPT-2 of its config's shape can be is refused from its
/// announced length, before it is read.
#[test]
fn a_weights_file_too_large_for_its_config_is_refused_unread() {
    let (stores, server) = (Stores::default(), Server::with_fixture());
    *server.announce.borrow_mut() = Some(("model.safetensors".into(), 8 << 30));
    let tab = Tab::open(&stores, &server);
    let (code, message) = error_of(&tab.load_url(URL));
    assert_eq!(code, "downloadFailed");
    assert!(message.contains("model.safetensors") && message.contains("8589934592 bytes"), "{message}");
}
