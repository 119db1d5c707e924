//! Reading a page message, and saying in the protocol's terms what is wrong with one the
//! worker cannot read (`badMessage`): which message, which field, what to send instead —
//! never serde's own wording ("internally tagged enum InMessage").
//!
//! The browser decodes with serde-wasm-bindgen and native tests with serde_json; both
//! report through [`unreadable`], so the words are tested natively.

use serde_json::Value;

use crate::error::WorkerError;
use crate::protocol::{ErrorCode, InMessage};

/// The message types the worker understands, in PROTOCOL.md's order.
pub const MESSAGE_TYPES: [&str; 18] = [
    "init",
    "train",
    "pause",
    "resume",
    "stop",
    "sample",
    "save",
    "listCheckpoints",
    "load",
    "delete",
    "export",
    "import",
    "loadBase",
    "trainAdapter",
    "listAdapters",
    "loadAdapter",
    "listBases",
    "deleteBase",
];

/// What arrived, as far as it matters for the words of the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received<'a> {
    /// Not an object: `null`, `undefined`, `a number`, `a string`, `an array`, ….
    NotAnObject(&'a str),
    /// An object whose `type` is missing or not a string.
    NoType,
    /// An object with this `type`.
    Type(&'a str),
}

/// Reads a message given as JSON (natively; the browser passes JS objects).
pub fn read_json(value: Value) -> Result<InMessage, WorkerError> {
    let what = match &value {
        Value::Object(map) => match map.get("type") {
            Some(Value::String(t)) => t.clone(),
            _ => return Err(unreadable(Received::NoType, "")),
        },
        Value::Null => return Err(unreadable(Received::NotAnObject("null"), "")),
        Value::Bool(_) => return Err(unreadable(Received::NotAnObject("a boolean"), "")),
        Value::Number(_) => return Err(unreadable(Received::NotAnObject("a number"), "")),
        Value::String(_) => return Err(unreadable(Received::NotAnObject("a string"), "")),
        Value::Array(_) => return Err(unreadable(Received::NotAnObject("an array"), "")),
    };
    serde_json::from_value(value).map_err(|e| unreadable(Received::Type(&what), &e.to_string()))
}

/// `badMessage` for a message that could not be decoded; `error` is the decoder's text.
pub fn unreadable(received: Received, error: &str) -> WorkerError {
    let types = MESSAGE_TYPES.join(", ");
    let message = match received {
        Received::NotAnObject(what) => format!(
            "The worker was sent {what} instead of a message. Send an object with a \"type\", such as \
             {{type: \"pause\"}}; the types are {types} (see worker/PROTOCOL.md)."
        ),
        Received::NoType => format!(
            "The worker was sent a message without a \"type\" (a string). Give it one of: {types} \
             (see worker/PROTOCOL.md)."
        ),
        Received::Type(t) if !MESSAGE_TYPES.contains(&t) => format!(
            "The worker does not know messages of type \"{t}\". Send one of the types it knows: {types} \
             (see worker/PROTOCOL.md)."
        ),
        Received::Type(t) => {
            let problem = describe(error);
            format!(
                "The \"{t}\" message cannot be read: {problem}. Send the fields the \"{t}\" row of \
                 worker/PROTOCOL.md lists."
            )
        }
    };
    WorkerError::new(ErrorCode::BadMessage, message)
}

/// A decoder's error in the protocol's words (the shapes serde's derives produce).
fn describe(error: &str) -> String {
    let error = error.trim();
    if let Some(field) = backticked(error.strip_prefix("missing field ")) {
        return format!("its \"{field}\" field is missing");
    }
    if let Some(field) = backticked(error.strip_prefix("unknown field ")) {
        return format!("it has a field \"{field}\" that this message does not take");
    }
    if let Some(rest) = error.strip_prefix("unknown variant ") {
        let value = backticked(Some(rest)).unwrap_or(rest);
        return format!("\"{value}\" is not one of the values a field of it allows");
    }
    if let Some(rest) = error.strip_prefix("invalid type: ").or_else(|| error.strip_prefix("invalid value: "))
    {
        if let Some((got, expected)) = rest.split_once(", expected ") {
            return format!("a field holds {} where {} is expected", plain(got), plain(expected));
        }
    }
    format!("{error} (a field is missing or has the wrong type)")
}

/// The text between the first pair of backticks of `s`.
fn backticked(s: Option<&str>) -> Option<&str> {
    let s = s?.strip_prefix('`')?;
    s.split_once('`').map(|(inside, _)| inside)
}

/// serde's names of Rust types, as JavaScript values.
fn plain(s: &str) -> String {
    let s = s.trim();
    let known = [
        ("usize", "a whole number of 0 or more"),
        ("u64", "a whole number of 0 or more"),
        ("u32", "a whole number of 0 or more"),
        ("f32", "a number"),
        ("f64", "a number"),
        ("a string", "a string"),
        ("a borrowed byte array", "a Uint8Array"),
        ("byte array", "a Uint8Array"),
        ("a byte array", "a Uint8Array"),
        ("unit", "null"),
    ];
    for (rust, js) in known {
        if s == rust {
            return js.to_string();
        }
    }
    if let Some(v) = s.strip_prefix("floating point ") {
        return format!("the number {}", v.trim_matches('`'));
    }
    if let Some(v) = s.strip_prefix("integer ") {
        return format!("the number {}", v.trim_matches('`'));
    }
    if let Some(v) = s.strip_prefix("string ") {
        return format!("the string {v}");
    }
    if s.starts_with("struct ") || s.starts_with("internally tagged enum") || s.starts_with("enum ") {
        return "an object".to_string();
    }
    s.replace('`', "\"")
}

/// Whether `message` reads as sentences for a person: a capital first letter, a full stop
/// (or `?`/`!`) at the end, and a verb that says what to do.
pub fn is_a_sentence_for_people(message: &str) -> bool {
    let says_what_to_do = ["Send", "Give", "Use", "Choose", "Pick", "Load", "Try", "Change", "Ask", "Name"]
        .iter()
        .any(|verb| message.contains(verb));
    message.chars().next().is_some_and(char::is_uppercase)
        && message.trim_end().ends_with(['.', '?', '!'])
        && says_what_to_do
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal `read_json` gives, for messages malformed in every way the decoder
    /// reports, is sentences for people that say what to send.
    #[test]
    fn every_refusal_is_a_sentence_that_says_what_to_do() {
        use serde_json::json;
        let mut bad = vec![
            json!(null),
            json!(true),
            json!(3),
            json!("pause"),
            json!([1, 2]),
            json!({}),
            json!({"type": 7}),
            json!({"type": "dance"}),
            json!({"type": "sample", "prompt": 1}),
            json!({"type": "sample", "prompt": "a", "maxTokens": -1, "temperature": 1, "topK": 0, "seed": 1}),
            json!({"type": "sample", "prompt": "a", "maxTokens": 1.5, "temperature": 1, "topK": 0, "seed": 1}),
            json!({"type": "sample", "prompt": "a", "maxTokens": 1, "temperature": "hot", "topK": 0, "seed": 1}),
            json!({"type": "train", "dataset": 5}),
            json!({"type": "train", "dataset": {"kind": "nowhere"}}),
            json!({"type": "init", "backend": "tpu"}),
            json!({"type": "init", "checked": "yes"}),
            json!({"type": "loadBase", "source": 3}),
            json!({"type": "loadBase", "source": "moon"}),
            json!({"type": "trainAdapter", "rank": "four"}),
            json!({"type": "import", "bytes": "not bytes"}),
        ];
        for t in MESSAGE_TYPES {
            bad.push(json!({"type": t, "x": [], "unknownField": {"deep": [1, 2, 3]}}));
            bad.push(json!({"type": t, "name": 5, "id": [], "bytes": {}, "prompt": null}));
        }
        let mut refused = 0;
        for message in bad {
            if let Err(e) = read_json(message.clone()) {
                refused += 1;
                assert!(is_a_sentence_for_people(&e.message), "{message}: {:?}", e.message);
                assert!(
                    !e.message.contains('`') && !e.message.contains("usize"),
                    "{message}: {:?}",
                    e.message
                );
            }
        }
        assert!(refused >= 30, "only {refused} refusals were checked");
    }

    #[test]
    fn every_message_type_is_listed() {
        for t in MESSAGE_TYPES {
            let err = read_json(serde_json::json!({"type": t, "x": []})).err();
            // Messages without required fields decode; the others complain about a field, not the type.
            if let Some(e) = err {
                assert!(!e.message.contains("does not know"), "{t}: {}", e.message);
            }
        }
    }
}
