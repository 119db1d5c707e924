//! One-file export/import: a `.safetensors` file for downloads and uploads.
//!
//! Tensors: every parameter under its canonical name and shape (`token_embedding`
//! `[256, d]`, `blocks.0.attn.q_proj.weight` `[d, d]`, …), F32; with moments, also
//! `adam_m.<name>` and `adam_v.<name>`. `__metadata__` holds each JSON file of the layout
//! as a string under its file name (`model_config.json`, `trainer_state.json`, …), so
//! an import rebuilds the directory layout and loads it with the same checks, checksums
//! included. `safetensors.numpy.load_file` reads the file as it is.
//!
//! The header's keys are written in sorted order, so the same checkpoint always exports
//! to the same bytes.

use std::collections::BTreeMap;

use ::safetensors::tensor::TensorView;
use ::safetensors::{Dtype, SafeTensors};
use tinygpt_tensor::block_on;

use crate::checkpoint::Checkpoint;
use crate::decode::{parse_model_config, read_checkpoint, LoadOptions};
use crate::encode::encode;
use crate::error::{CkptError, Result};
use crate::layout::{ADAM_M, ADAM_V, MODEL_CONFIG, WEIGHTS};
use crate::memory::MemoryStore;
use crate::store::BlobStore;

/// How import errors name the file.
const FILE: &str = "safetensors";
/// The moment tensors' name prefixes and their layout files.
const MOMENTS: [(&str, &str); 2] = [("adam_m.", ADAM_M), ("adam_v.", ADAM_V)];

fn st_error(reason: impl ToString) -> CkptError {
    CkptError::Safetensors { file: FILE.to_string(), reason: reason.to_string() }
}

/// `ckpt` as one `.safetensors` file; the AdamW moments go in only if `include_moments`
/// is set (and the checkpoint has them).
pub fn export_safetensors(ckpt: &Checkpoint, include_moments: bool) -> Result<Vec<u8>> {
    let files = encode(ckpt, include_moments)?;
    let specs = ckpt.model_config.tensor_specs();
    let mut tensors: Vec<(String, TensorView<'_>)> = Vec::new();
    for file in files.iter().filter(|f| f.name.ends_with(".f32")) {
        let prefix = MOMENTS.iter().find(|m| m.1 == file.name).map_or("", |m| m.0);
        for spec in &specs {
            let data = &file.bytes[spec.offset * 4..(spec.offset + spec.numel()) * 4];
            let view = TensorView::new(Dtype::F32, spec.shape.clone(), data).map_err(st_error)?;
            tensors.push((format!("{prefix}{}", spec.name), view));
        }
    }
    let metadata = files.iter().filter(|f| f.name.ends_with(".json")).map(|f| {
        let text = String::from_utf8(f.bytes.clone()).expect("serde_json writes UTF-8");
        (f.name.to_string(), text)
    });
    let bytes = ::safetensors::serialize(tensors, Some(metadata.collect())).map_err(st_error)?;
    canonical_header(bytes)
}

/// Rewrites the header with its keys (and the metadata's) in sorted order: the crate
/// writes `__metadata__` from a hash map, whose order changes from run to run.
pub(crate) fn canonical_header(bytes: Vec<u8>) -> Result<Vec<u8>> {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).map_err(st_error)?;
    let mut header_bytes = serde_json::to_vec(&header).map_err(st_error)?;
    header_bytes.resize(header_bytes.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + header_bytes.len() + bytes.len() - 8 - n);
    out.extend_from_slice(&(header_bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&header_bytes);
    out.extend_from_slice(&bytes[8 + n..]);
    Ok(out)
}

/// Reads a file written by [`export_safetensors`] (or by another tool following its
/// contract), with every check a directory load makes.
pub fn import_safetensors(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
    // The header is walked (bounded: one name at a time) for the config, and its names are
    // checked against the config's, before the safetensors crate builds its structure.
    let header = header(bytes).map_err(st_error)?;
    let metadata = scan_header(header, |_, _| Ok(())).map_err(st_error)?;
    if metadata.is_empty() {
        return Err(st_error("the header has no __metadata__"));
    }

    let files = MemoryStore::with_label("safetensors:");
    for (name, text) in metadata.iter() {
        if name.ends_with(".json") {
            put(&files, name, text.as_bytes())?;
        }
    }
    let config_text = metadata
        .get(MODEL_CONFIG)
        .ok_or_else(|| CkptError::MissingFile { file: files.location(MODEL_CONFIG) })?;
    let (config, specs) = parse_model_config(&files.location(MODEL_CONFIG), config_text.as_bytes())?;

    let names: std::collections::HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let known = |n: &str| {
        let bare = MOMENTS.iter().find_map(|(prefix, _)| n.strip_prefix(prefix)).unwrap_or(n);
        names.contains(bare)
    };
    check_names(header, known, |n| format!("tensor {n:?} is not a parameter of this model"))
        .map_err(st_error)?;
    let tensors = SafeTensors::deserialize(bytes).map_err(st_error)?;

    // Every expected tensor is checked (F32, canonical shape, hence a slice of `bytes`)
    // before the buffers sized by the config are allocated.
    let with_moments = tensors.names().iter().any(|n| n.starts_with(MOMENTS[0].0));
    let groups: &[(&str, &str)] =
        if with_moments { &[("", WEIGHTS), MOMENTS[0], MOMENTS[1]] } else { &[("", WEIGHTS)] };
    if tensors.len() != specs.len() * groups.len() {
        let expected =
            |n: &str| groups.iter().any(|(p, _)| specs.iter().any(|s| n == format!("{p}{}", s.name)));
        let extra = tensors.names().into_iter().find(|n| !expected(n));
        return Err(st_error(match extra {
            Some(name) => format!("tensor {name:?} is not a parameter of this model"),
            None => format!("{} tensors, expected {}", tensors.len(), specs.len() * groups.len()),
        }));
    }
    let mut views = Vec::with_capacity(tensors.len());
    for (prefix, _) in groups {
        for spec in &specs {
            let name = format!("{prefix}{}", spec.name);
            let view = tensors.tensor(&name).map_err(|_| st_error(format!("tensor {name:?} is missing")))?;
            if view.dtype() != Dtype::F32 || view.shape() != spec.shape.as_slice() {
                return Err(st_error(format!(
                    "tensor {name:?} is {:?} {:?}, expected F32 {:?}",
                    view.dtype(),
                    view.shape(),
                    spec.shape
                )));
            }
            views.push(view);
        }
    }
    let bytes_per_file = config.param_count() * 4;
    for (group, chunk) in groups.iter().zip(views.chunks(specs.len())) {
        let mut flat = Vec::with_capacity(bytes_per_file);
        for view in chunk {
            flat.extend_from_slice(view.data());
        }
        put(&files, group.1, &flat)?;
    }
    block_on(read_checkpoint(&files, "", options))
}

/// The longest header a file may have (the safetensors crate's own limit): reads and imports
/// refuse a longer one before reading it.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// A `.safetensors` file of `len` bytes (as its metadata says) from `reader`, checked as it
/// is read so that a bad file costs no more than its header: `len` against `limit`, then the
/// 8-byte header length against [`MAX_HEADER_BYTES`] and `len`, then the JSON header (every
/// tensor's data within the file, the last ending where the file does), and only then the
/// tensors, at most `len` bytes in all (an endless reader, like `/dev/zero`, stops there).
/// `file` names the file in errors.
pub fn read_safetensors(
    reader: &mut impl std::io::Read,
    file: &str,
    len: u64,
    limit: u64,
) -> Result<Vec<u8>> {
    use std::io::Read;

    let invalid = |reason: String| CkptError::Safetensors { file: file.to_string(), reason };
    let io = |source| CkptError::Io { file: file.to_string(), source };
    if len > limit {
        return Err(CkptError::TooLarge { file: file.to_string(), bytes: len, limit });
    }
    if len < 8 {
        return Err(invalid(format!("{len} bytes, shorter than the 8-byte header length")));
    }
    let mut prefix = [0u8; 8];
    reader.read_exact(&mut prefix).map_err(io)?;
    let n = u64::from_le_bytes(prefix);
    if n > MAX_HEADER_BYTES || n > len - 8 {
        return Err(invalid(format!(
            "the header length is {n} bytes, but the file has {} after it (and headers are at most {MAX_HEADER_BYTES})",
            len - 8
        )));
    }
    let mut bytes =
        Vec::with_capacity(usize::try_from(len).map_err(|_| invalid("too large to hold".into()))?);
    bytes.extend_from_slice(&prefix);
    reader.take(n).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 != 8 + n {
        return Err(invalid(format!("the file ends inside its {n}-byte header")));
    }
    let data = len - 8 - n;
    let mut end = 0;
    scan_header(&bytes[8..], |name, [from, to]| {
        if from > to || to > data {
            return Err(format!(
                "tensor {name:?} lies at bytes {from}..{to}, but the file has {data} bytes of data"
            ));
        }
        end = end.max(to);
        Ok(())
    })
    .map_err(invalid)?;
    if end != data {
        return Err(invalid(format!(
            "the tensors end at byte {end} of the data, but the file has {data} bytes of data"
        )));
    }
    reader.take(data).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 != len {
        return Err(invalid(format!(
            "{} bytes, though the file was {len} bytes long when opened",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The JSON header of a safetensors file in `bytes`, its length checked against the bytes
/// and [`MAX_HEADER_BYTES`].
pub(crate) fn header(bytes: &[u8]) -> std::result::Result<&[u8], String> {
    let n = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let n = n.ok_or_else(|| format!("{} bytes, shorter than the 8-byte header length", bytes.len()))?;
    if n > MAX_HEADER_BYTES || n > bytes.len() as u64 - 8 {
        return Err(format!(
            "the header length is {n} bytes, but the file has {} after it (and headers are at most {MAX_HEADER_BYTES})",
            bytes.len() - 8
        ));
    }
    Ok(&bytes[8..8 + n as usize])
}

/// One tensor's entry of a header, as far as a scan needs it (dtype and shape are skipped).
#[derive(serde::Deserialize)]
struct Entry {
    data_offsets: [u64; 2],
}

/// Walks the header's entries in order, handing each tensor's name and data offsets to
/// `each` (whose error ends the walk), without building anything per tensor: a header of
/// a million names costs one name at a time. Returns `__metadata__` (empty if absent).
pub(crate) fn scan_header(
    header: &[u8],
    each: impl FnMut(&str, [u64; 2]) -> std::result::Result<(), String>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    use serde::de::{Deserializer, Error, MapAccess, Visitor};

    /// `each`, and the refusal that stopped the walk (reported as it is, not as serde's
    /// error with a line and column).
    struct Walk<'a, F>(F, &'a mut Option<String>);
    impl<'de, F: FnMut(&str, [u64; 2]) -> std::result::Result<(), String>> Visitor<'de> for Walk<'_, F> {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object of tensors")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
            let Walk(mut each, refusal) = self;
            let mut metadata = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if key == "__metadata__" {
                    metadata = map.next_value::<Option<BTreeMap<String, String>>>()?.unwrap_or_default();
                } else {
                    let entry: Entry =
                        map.next_value().map_err(|e| A::Error::custom(format!("tensor {key:?}: {e}")))?;
                    if let Err(reason) = each(&key, entry.data_offsets) {
                        *refusal = Some(reason);
                        return Err(A::Error::custom("refused"));
                    }
                }
            }
            Ok(metadata)
        }
    }
    let mut refusal = None;
    let mut de = serde_json::Deserializer::from_slice(header);
    let walked = de.deserialize_map(Walk(each, &mut refusal)).and_then(|m| de.end().map(|()| m));
    match (walked, refusal) {
        (_, Some(reason)) => Err(reason),
        (Ok(metadata), None) => Ok(metadata),
        (Err(e), None) => Err(format!("the header is not a safetensors header: {e}")),
    }
}

/// Refuses, on the first one, a tensor name that `known` does not accept or that the
/// header gives twice (a JSON parser into a map would silently keep the last): run before
/// the safetensors crate builds its structure, so what that allocates is bounded by the
/// names the model has, not by what the header lists. `unknown` words the refusal.
pub(crate) fn check_names(
    header: &[u8],
    known: impl Fn(&str) -> bool,
    unknown: impl Fn(&str) -> String,
) -> std::result::Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    scan_header(header, |name, _| {
        if !known(name) {
            return Err(unknown(name));
        }
        if !seen.insert(name.to_string()) {
            return Err(format!(
                "the header names {name:?} twice; a safetensors file names each tensor once"
            ));
        }
        Ok(())
    })
    .map(drop)
}

fn put(files: &MemoryStore, name: &str, bytes: &[u8]) -> Result<()> {
    block_on(files.put(name, bytes))
        .map_err(|_| st_error(format!("__metadata__ key {name:?} is not a file name")))
}
