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
    let header_len = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if let Some(header) = header_len.and_then(|n| bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?))
    {
        check_unique_names(header)?;
    }
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(st_error)?;
    let tensors = SafeTensors::deserialize(bytes).map_err(st_error)?;
    let metadata = header.metadata().as_ref().ok_or_else(|| st_error("the header has no __metadata__"))?;

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

/// The format forbids two tensors of one name; a JSON parser into a map would silently
/// keep the last, so the header's keys are checked first.
pub(crate) fn check_unique_names(header: &[u8]) -> Result<()> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
            let mut seen = std::collections::BTreeSet::new();
            let mut duplicate = None;
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if !seen.insert(key.clone()) && duplicate.is_none() {
                    duplicate = Some(key);
                }
            }
            Ok(duplicate)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(header);
    match de.deserialize_map(Keys).map_err(st_error)? {
        Some(name) => Err(st_error(format!(
            "the header names {name:?} twice; a safetensors file names each tensor once"
        ))),
        None => Ok(()),
    }
}

fn put(files: &MemoryStore, name: &str, bytes: &[u8]) -> Result<()> {
    block_on(files.put(name, bytes))
        .map_err(|_| st_error(format!("__metadata__ key {name:?} is not a file name")))
}
