//! The byte-level BPE against Hugging Face `tokenizers`: `fixtures/bpe` holds a tokenizer
//! trained on TinyShakespeare (vocab 1,000) and the ids and decodings `tokenizers` gives
//! for texts in and out of that corpus, and for id sequences cut inside characters
//! (`fixtures/bpe/make_fixture.py` made them, outside CI).

use serde_json::Value;
use tinygpt_model::tokenizer::{Tokenizer, TokenizerError};

const VOCAB: &[u8] = include_bytes!("fixtures/bpe/vocab.json");
const MERGES: &[u8] = include_bytes!("fixtures/bpe/merges.txt");
const CASES: &str = include_str!("fixtures/bpe/cases.json");

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn encode_and_decode_equal_hugging_face_tokenizers() {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let cases: Value = serde_json::from_str(CASES).unwrap();
    assert_eq!(tok.vocab_size() as u64, cases["vocab_size"].as_u64().unwrap());
    let list = cases["cases"].as_array().unwrap();
    assert!(list.len() >= 20);
    for case in list {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        assert_eq!(tok.encode(text.as_bytes()), want, "encode {text:?}");
        let back = tok.decode(&want);
        assert_eq!(back, text.as_bytes(), "decode {text:?}");
        assert_eq!(String::from_utf8_lossy(&back), case["decoded"].as_str().unwrap());
    }
}

#[test]
fn ids_cut_inside_a_character_decode_to_bytes_shown_as_tokenizers_shows_them() {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let cases: Value = serde_json::from_str(CASES).unwrap();
    let cuts = cases["cuts"].as_array().unwrap();
    assert!(cuts.iter().any(|c| c["decoded"].as_str().unwrap().contains('\u{FFFD}')));
    for cut in cuts {
        let bytes = tok.decode(&ids(&cut["ids"]));
        assert_eq!(String::from_utf8_lossy(&bytes), cut["decoded"].as_str().unwrap(), "{cut}");
    }
}

#[test]
fn the_name_hashes_content_not_formatting() {
    let a = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let pretty = serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(VOCAB).unwrap()).unwrap();
    let no_header: Vec<u8> = MERGES.splitn(2, |&b| b == b'\n').nth(1).unwrap().to_vec();
    let b = Tokenizer::bpe(&pretty, &no_header).unwrap();
    assert!(a.name().starts_with("bpe-") && a.name().len() == 20, "{}", a.name());
    assert_eq!(a.name(), b.name());
    let last_line = MERGES[..MERGES.len() - 1].iter().rposition(|&b| b == b'\n').unwrap();
    let fewer = &MERGES[..last_line + 1];
    assert_ne!(Tokenizer::bpe(VOCAB, fewer).unwrap().name(), a.name());
}

#[test]
fn invalid_utf8_input_becomes_byte_tokens_and_round_trips() {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let text = b"the king\xff\xfe said \xe2\x82 hello";
    assert_eq!(tok.decode(&tok.encode(text)), text);
    // Valid text encodes as its string would.
    assert_eq!(tok.encode("the king".as_bytes()), tok.encode(b"the king"));
}

#[test]
fn broken_files_are_refused_naming_the_file() {
    let refuse = |v: &[u8], m: &[u8]| match Tokenizer::bpe(v, m).unwrap_err() {
        TokenizerError::Invalid { file, reason } => format!("{file}: {reason}"),
    };
    let err = refuse(br#"{"a": 0}"#, b"");
    assert!(err.starts_with("vocab.json") && err.contains("byte"), "{err}");
    let err = refuse(br#"{"a": 0, "b": 0}"#, b"");
    assert!(err.contains("id 0"), "{err}");
    let err = refuse(br#"{"a": 5}"#, b"");
    assert!(err.contains("ids must run"), "{err}");
    let err = refuse(VOCAB, b"#version: 0.2\nzzqq xxyy\n");
    assert!(err.starts_with("merges.txt: line 2") && err.contains("not in vocab.json"), "{err}");
    let err = refuse(VOCAB, b"onetoken\n");
    assert!(err.contains("two tokens"), "{err}");
}

#[test]
fn the_byte_tokenizer_is_unchanged() {
    let tok = Tokenizer::Byte;
    assert_eq!(tok.name(), "byte-v1");
    assert_eq!(tok.vocab_size(), 256);
    let text = b"h\xc3\xa9llo\xff";
    assert_eq!(tok.encode(text), text.iter().map(|&b| b as u32).collect::<Vec<_>>());
    assert_eq!(tok.decode(&tok.encode(text)), text);
}

#[test]
fn a_random_corpus_of_every_character_class_and_whitespace_encodes_as_tokenizers_does() {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let cases: Value = serde_json::from_str(CASES).unwrap();
    let text = cases["random_corpus"]["text"].as_str().unwrap();
    let want = ids(&cases["random_corpus"]["ids"]);
    let got = tok.encode(text.as_bytes());
    if got != want {
        let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        let from = at.saturating_sub(3);
        panic!(
            "first difference at id {at}: ours {:?} ({:?}), tokenizers {:?} ({:?})",
            &got[from..(at + 3).min(got.len())],
            String::from_utf8_lossy(&tok.decode(&got[from..(at + 3).min(got.len())])),
            &want[from..(at + 3).min(want.len())],
            String::from_utf8_lossy(&tok.decode(&want[from..(at + 3).min(want.len())])),
        );
    }
    assert_eq!(tok.decode(&got), text.as_bytes());
}

#[test]
fn all_of_tinyshakespeare_encodes_as_tokenizers_does() {
    use sha2::{Digest, Sha256};
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let cases: Value = serde_json::from_str(CASES).unwrap();
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let got = tok.encode(text);
    let digest: String = Sha256::digest(got.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let want = &cases["tinyshakespeare"];
    assert_eq!(got.len() as u64, want["tokens"].as_u64().unwrap());
    assert_eq!(digest, want["sha256_u32le"].as_str().unwrap());
    assert_eq!(tok.decode(&got), text);
}
