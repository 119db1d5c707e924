//! Issue 33, item 6: a `.safetensors` file is refused for its header before its tensors are
//! read, and a header of a million names is refused without building a structure for each.
//!
//! The proofs are counts, not timings: a reader that counts the bytes taken from it, and a
//! global allocator that records the peak bytes held.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

mod common;

use common::checkpoint;
use tinygpt_ckpt::{
    export_adapter_safetensors, export_nanogpt, export_safetensors, import_adapter_safetensors,
    import_nanogpt, import_safetensors, read_safetensors, AdapterCheckpoint, BaseRef, CkptError,
    ImportDefaults, LoadOptions, MAX_HEADER_BYTES,
};
use tinygpt_run::{LoraConfig, TrainingConfig};

/// The system allocator, keeping the bytes held now and the most held since the last reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Tests that measure run one at a time (the counters are the process's).
static MEASURING: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout);
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak bytes allocated while `f` ran, beyond what was held when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = HELD.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(start))
}

/// A reader that counts the bytes it hands out.
struct Counted<R> {
    inner: R,
    taken: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.taken += n as u64;
        Ok(n)
    }
}

/// `header` as a file's first bytes (its length, then the JSON), followed by endless zeros:
/// `/dev/zero`, or a 1.5 GB file of which only the start is meaningful.
fn endless(header: &str) -> Counted<impl Read> {
    let start = [(header.len() as u64).to_le_bytes().to_vec(), header.as_bytes().to_vec()].concat();
    Counted { inner: std::io::Cursor::new(start).chain(std::io::repeat(0)), taken: 0 }
}

const BIG: u64 = 1_500_000_000;
const LIMIT: u64 = 4 << 30;

#[test]
fn a_bad_header_length_is_refused_after_reading_eight_bytes() {
    let mut reader = Counted { inner: std::io::repeat(0xff), taken: 0 };
    let err = read_safetensors(&mut reader, "x.safetensors", BIG, LIMIT).unwrap_err();
    assert!(err.to_string().contains("x.safetensors") && err.to_string().contains("header"), "{err}");
    assert_eq!(reader.taken, 8);
}

#[test]
fn a_header_that_is_not_json_is_refused_after_reading_only_the_header() {
    let header = "this is not JSON at all!";
    let mut reader = endless(header);
    let err = read_safetensors(&mut reader, "x.safetensors", BIG, LIMIT).unwrap_err();
    assert!(err.to_string().contains("header"), "{err}");
    assert_eq!(reader.taken, 8 + header.len() as u64);
}

#[test]
fn a_header_whose_tensors_do_not_cover_the_file_is_refused_before_the_tensors_are_read() {
    let header = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let mut reader = endless(header);
    let err = read_safetensors(&mut reader, "x.safetensors", BIG, LIMIT).unwrap_err();
    assert!(err.to_string().contains("8 bytes"), "{err}");
    assert_eq!(reader.taken, 8 + header.len() as u64);
}

#[test]
fn a_file_over_the_limit_is_refused_unread_naming_it_and_the_limit() {
    let mut reader = endless("{}");
    let err = read_safetensors(&mut reader, "big.safetensors", BIG, 1 << 30).unwrap_err();
    assert!(matches!(err, CkptError::TooLarge { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("big.safetensors") && text.contains(&(1u64 << 30).to_string()), "{text}");
    assert_eq!(reader.taken, 0);
}

#[test]
fn a_header_longer_than_the_limit_is_refused() {
    let mut file = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
    file.resize(64, b' ');
    let err = read_safetensors(&mut file.as_slice(), "x", BIG, LIMIT).unwrap_err();
    assert!(err.to_string().contains(&MAX_HEADER_BYTES.to_string()), "{err}");
}

#[test]
fn a_file_shorter_than_it_said_is_refused() {
    let good = export_safetensors(&checkpoint(3, 1), false).unwrap();
    let err = read_safetensors(&mut &good[..good.len() - 1], "x", good.len() as u64, LIMIT).unwrap_err();
    assert!(err.to_string().contains("x"), "{err}");
}

#[test]
fn a_good_file_reads_back_whole() {
    let good = export_safetensors(&checkpoint(3, 1), true).unwrap();
    let mut reader = Counted { inner: good.as_slice(), taken: 0 };
    let back = read_safetensors(&mut reader, "x", good.len() as u64, LIMIT).unwrap();
    assert_eq!(back, good);
    assert_eq!(reader.taken, good.len() as u64);
}

/// `file` with `count` extra empty tensors `junk.{i}` added to its header (which then
/// runs to many megabytes); the data is unchanged.
fn with_empty_tensors(file: &[u8], count: usize) -> Vec<u8> {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&file[8..8 + n]).unwrap().trim_end();
    let mut junk = String::with_capacity(count * 64);
    for i in 0..count {
        junk.push_str(&format!(r#","junk.{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#));
    }
    let header = format!("{}{junk}}}", &header[..header.len() - 1]);
    [(header.len() as u64).to_le_bytes().to_vec(), header.into_bytes(), file[8 + n..].to_vec()].concat()
}

/// The issue's file: ~70 MB of header, a million empty tensors. Refusing it may not cost more
/// than the file itself (it cost 18 times the file).
#[test]
fn a_million_unknown_tensors_are_refused_without_building_them() {
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let ckpt = checkpoint(3, 1);
    let ours = export_safetensors(&ckpt, false).unwrap();
    let nano = export_nanogpt(&ckpt).unwrap();
    let lora = LoraConfig::preset("qv-r4").unwrap();
    let adapter = AdapterCheckpoint {
        base: BaseRef { name: "base".into(), weights_sha256: "0".repeat(64) },
        model_config: ckpt.model_config.clone(),
        weights: vec![0.5; lora.param_count(&ckpt.model_config)],
        lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: ckpt.dataset.clone(),
        progress: ckpt.progress.clone(),
        loss_history: Vec::new(),
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    };
    let peft = export_adapter_safetensors(&adapter).unwrap();
    let defaults = ImportDefaults { training: TrainingConfig::default(), dataset: ckpt.dataset.clone() };
    let model = ckpt.model_config.clone();
    type Import<'a> = Box<dyn Fn(&[u8]) -> Result<(), CkptError> + 'a>;
    let imports: [(&str, &[u8], Import); 3] = [
        ("ours", &ours, Box::new(|b| import_safetensors(b, &LoadOptions::default()).map(drop))),
        ("nanogpt", &nano, Box::new(|b| import_nanogpt(b, defaults.clone()).map(drop))),
        ("adapter", &peft, Box::new(|b| import_adapter_safetensors(b, &model).map(drop))),
    ];
    for (what, file, import) in imports {
        let hostile = with_empty_tensors(file, 1_000_000);
        assert!(hostile.len() > 60_000_000, "{}", hostile.len());
        let (result, peak) = peak_during(|| import(&hostile));
        let err = result.unwrap_err().to_string();
        assert!(err.contains("junk.0"), "{what}: {err}");
        assert!(
            peak < hostile.len() / 4,
            "{what}: refusing {} bytes held {peak} bytes at the peak",
            hostile.len()
        );
    }
}
