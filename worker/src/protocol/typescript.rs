//! `www/protocol.d.ts`, generated from the protocol types (ts-rs reads their serde
//! attributes, so wire names come from one place), and the test that keeps the checked-in
//! file equal to a fresh generation. `cargo xtask gen-types` rewrites it.
//!
//! Test builds only: the derives are `cfg_attr(test, …)`, so the wasm module carries none
//! of this.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::path::PathBuf;

use tinygpt_model::{DatasetManifest, ModelConfig};
use tinygpt_optim::{ScheduleKind, TrainingConfig};
use tinygpt_tensor::Precision;
use ts_rs::{Config, TypeVisitor, TS};

use super::*;

/// Set by `cargo xtask gen-types`: the test writes the file instead of comparing.
const WRITE_VAR: &str = "TINYGPT_WRITE_PROTOCOL_TYPES";

const HEADER: &str = "\
// The worker protocol's types, generated from worker/src/protocol.rs (and the config files'
// types in run/) by `cargo xtask gen-types`: do not edit. `cargo test -p tinygpt-worker`
// fails when this file differs from a fresh generation. What the messages mean and when
// they come: worker/PROTOCOL.md.
//
// `init` may also carry `pendingMessages`, which worker.js takes before the message reaches
// the Rust side (so it has no field here): the page's pending-message counter, an
// Int32Array over a SharedArrayBuffer (so only on a cross-origin isolated page). The page
// adds 1 to element 0 before posting every message (`init` included) and the worker
// subtracts 1 as it begins handling each; an optional element 1 counts the waiting `pause`
// and `stop` messages the same way (worker/PROTOCOL.md, \"Timing\"; npm/worker-client.js).
";

/// One declaration: its TypeScript name and text (doc comment included).
type Decl = (String, String);

fn decl<T: TS + ?Sized>(cfg: &Config) -> Decl {
    let docs = T::docs().unwrap_or_default();
    (T::ident(cfg), format!("{docs}export {}", layout(&T::decl(cfg))))
}

/// Lays out ts-rs's one-line declaration for reading: one field per line, each under its
/// doc comment, and a long union one member per line. Only whitespace changes.
fn layout(decl: &str) -> String {
    let (head, body) = decl.split_once(" = ").expect("type X = …");
    let break_union = !body.starts_with('{') && body.contains(" | ") && head.len() + body.len() > 96;
    let base = usize::from(break_union);
    let mut out = format!("{head} =");
    if !break_union {
        out.push(' ');
    }
    let mut depth = 0;
    let mut rest = body;
    let newline = |out: &mut String, depth: usize| {
        let kept = out.trim_end().len();
        out.truncate(kept);
        out.push('\n');
        out.push_str(&"  ".repeat(base + depth));
    };
    if break_union {
        newline(&mut out, 0);
        out.push_str("| ");
    }
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("/**") {
            let end = rest.find("*/").expect("closed doc comment") + 2;
            for (i, line) in rest[..end].lines().enumerate() {
                if i > 0 {
                    newline(&mut out, depth);
                    out.push(' ');
                }
                out.push_str(line.trim());
            }
            newline(&mut out, depth);
            rest = rest[end..].trim_start();
            continue;
        }
        match c {
            '{' if rest[1..].trim_start().starts_with('}') => {
                out.push_str("{}");
                rest = rest[1..].trim_start()[1..].trim_start_matches(' ');
                continue;
            }
            '{' => {
                out.push('{');
                depth += 1;
                newline(&mut out, depth);
            }
            '}' => {
                depth -= 1;
                newline(&mut out, depth);
                out.push('}');
            }
            ',' if depth > 0 => {
                out.push(',');
                if rest[1..].trim_start().starts_with('}') {
                    // ts-rs's trailing comma: the `}` arm breaks the line.
                } else {
                    newline(&mut out, depth);
                }
            }
            '|' if depth == 0 && break_union => {
                newline(&mut out, 0);
                out.push('|');
            }
            // Runs of spaces and ts-rs's line breaks become one space.
            c if c.is_whitespace() => {
                if !out.ends_with([' ', '\n']) {
                    out.push(' ');
                }
            }
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
        if out.trim_end_matches(' ').ends_with('\n') {
            // A fresh line: its indent is ours, not the input's.
            rest = rest.trim_start();
        }
    }
    out
}

/// One name per message for the page's code: `SampleMessage` is `InMessage`'s member whose
/// `type` is `"sample"`, and so on for every tag in `union`'s declaration.
fn messages(union: &Decl) -> Decl {
    let (union_name, text) = union;
    let tags = text.split("\"type\": \"").skip(1).map(|rest| &rest[..rest.find('"').expect("a closed tag")]);
    let aliases = tags.map(|tag| {
        let name = format!("{}{}Message", tag[..1].to_uppercase(), &tag[1..]);
        format!("export type {name} = Extract<{union_name}, {{ \"type\": \"{tag}\" }}>;")
    });
    let doc = format!("/**\n * Each {union_name} by name.\n */");
    (String::new(), [doc].into_iter().chain(aliases).collect::<Vec<_>>().join("\n"))
}

/// `Precision` is tinygpt-tensor's, which has neither serde nor ts-rs: its names come from
/// `Precision::ALL`, as `TrainingConfig` serializes them.
fn precision() -> Decl {
    let names: Vec<String> = Precision::ALL.iter().map(|p| format!("\"{}\"", p.as_str())).collect();
    let doc = "/**\n * How matrix products round their inputs (`training_config.json`'s `precision`).\n */\n";
    ("Precision".into(), format!("{doc}export type Precision = {};", names.join(" | ")))
}

/// Every declaration, by section, in reading order.
fn sections(cfg: &Config) -> Vec<(&'static str, Vec<Decl>)> {
    let in_messages = decl::<InMessage>(cfg);
    let out_messages = decl::<OutMessage>(cfg);
    vec![
        ("page → worker", vec![messages(&in_messages), in_messages]),
        (
            "what page messages carry",
            vec![
                decl::<DatasetInput>(cfg),
                decl::<BaseSource>(cfg),
                decl::<HfFiles>(cfg),
                decl::<BackendChoice>(cfg),
                decl::<StoreChoice>(cfg),
            ],
        ),
        ("worker → page", vec![messages(&out_messages), out_messages]),
        (
            "what worker messages carry",
            vec![
                decl::<Capabilities>(cfg),
                decl::<EngineKind>(cfg),
                decl::<StoreKind>(cfg),
                decl::<WebgpuInfo>(cfg),
                decl::<WebgpuLimits>(cfg),
                decl::<MatmulInfo>(cfg),
                decl::<PresetInfo>(cfg),
                decl::<RunInfo>(cfg),
                decl::<RunAdapter>(cfg),
                decl::<TrainingProgress>(cfg),
                decl::<LossPoint>(cfg),
                decl::<RunState>(cfg),
                decl::<DoneReason>(cfg),
                decl::<CheckpointInfo>(cfg),
                decl::<BaseInfo>(cfg),
                decl::<AdapterInfo>(cfg),
                decl::<CachedBase>(cfg),
                decl::<ErrorCode>(cfg),
            ],
        ),
        (
            "the checkpoint files (snake_case, as in the files)",
            vec![
                decl::<ModelConfig>(cfg),
                decl::<TrainingConfig>(cfg),
                decl::<ScheduleKind>(cfg),
                precision(),
                decl::<DatasetManifest>(cfg),
            ],
        ),
    ]
}

/// Collects the TypeScript names of every type the messages reach.
struct Reached<'a> {
    cfg: &'a Config,
    seen: BTreeSet<TypeId>,
    names: BTreeSet<String>,
}

impl TypeVisitor for Reached<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if self.seen.insert(TypeId::of::<T>()) {
            // Built-ins (`Array`, …) have no file of their own; derived types do.
            if T::output_path().is_some() {
                self.names.insert(T::ident(self.cfg));
            }
            T::visit_dependencies(self);
        }
    }
}

/// The text of `www/protocol.d.ts`.
pub fn declarations() -> String {
    // u64 fields (seeds, byte counts) are JSON numbers, as serde_json and serde-wasm-bindgen
    // write them.
    let cfg = Config::new().with_large_int("number");
    let sections = sections(&cfg);
    let declared: BTreeSet<&str> =
        sections.iter().flat_map(|(_, d)| d.iter().map(|(n, _)| n.as_str())).collect();
    let mut reached = Reached { cfg: &cfg, seen: BTreeSet::new(), names: BTreeSet::new() };
    reached.visit::<InMessage>();
    reached.visit::<OutMessage>();
    for name in &reached.names {
        assert!(
            declared.contains(name.as_str()),
            "{name} is used by a message but not declared in sections()"
        );
    }
    let mut out = String::from(HEADER);
    for (title, decls) in sections {
        out.push_str(&format!(
            "\n// ---- {title} {}\n",
            "-".repeat(80usize.saturating_sub(title.chars().count() + 9))
        ));
        for (_, text) in decls {
            out.push('\n');
            out.push_str(&text);
            out.push('\n');
        }
    }
    out
}

fn checked_in_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../www/protocol.d.ts")
}

#[test]
fn www_protocol_d_ts_is_generated_from_these_types() {
    let fresh = declarations();
    let path = checked_in_path();
    if std::env::var_os(WRITE_VAR).is_some() {
        std::fs::write(&path, &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != fresh {
        let line = checked_in.lines().zip(fresh.lines()).position(|(a, b)| a != b);
        let line = line.unwrap_or(checked_in.lines().count().min(fresh.lines().count()));
        panic!(
            "www/protocol.d.ts is not what worker/src/protocol.rs generates (first difference at \
             line {}: {:?} should be {:?}); run `cargo xtask gen-types` and commit the file",
            line + 1,
            checked_in.lines().nth(line).unwrap_or(""),
            fresh.lines().nth(line).unwrap_or(""),
        );
    }
}
