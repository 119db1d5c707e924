//! Wrapper backends (a backend that runs every op on another one and adds something around
//! it: checking, giving up a unit of work) must implement every method of [`Backend`]
//! themselves. A method left to its default runs the default's composition of other ops
//! (e.g. `matmul_sum_rows` as `matmul` then `sum_rows`) instead of the wrapped backend's own
//! fast path: the results stay right and only the speed is lost, so no op test notices.
//! This check reads the trait's source, as the worker's protocol test reads `protocol.d.ts`.
//!
//! A wrapper that only forwards (with a hook, e.g. counting calls) should not be written by
//! hand: [`crate::forward_backend!`] generates every method from one list, which the test
//! here compares with the trait. The text check on an impl is for wrappers that do more
//! than forward (checking operands, skipping ops).
//!
//! [`Backend`]: crate::Backend

/// The source of the trait, read at compile time.
const BACKEND_SOURCE: &str = include_str!("../backend.rs");

/// Every method name of [`crate::Backend`], in declaration order.
pub fn backend_methods() -> Vec<&'static str> {
    let start = BACKEND_SOURCE.find("pub trait Backend").expect("backend.rs declares the trait");
    let body = &BACKEND_SOURCE[start..];
    let end = body.find("\n}").expect("the trait's closing brace");
    method_names(&body[..end])
}

/// The methods of [`crate::Backend`] that `impl_source` (the text of a wrapper's
/// `impl Backend for …`, e.g. `include_str!("backend.rs")`) does not implement.
pub fn methods_left_to_defaults(impl_source: &str) -> Vec<&'static str> {
    let implemented = method_names(impl_source);
    backend_methods().into_iter().filter(|m| !implemented.contains(m)).collect()
}

/// Names of the functions declared one indent deep (a trait's or an impl's methods) in `source`.
fn method_names(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|line| line.strip_prefix("    fn "))
        .map(|rest| rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""))
        .filter(|name| !name.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trait_is_read_whole() {
        let methods = backend_methods();
        for m in ["name", "zeros", "copy_many", "matmul", "matmul_sum_rows", "adamw"] {
            assert!(methods.contains(&m), "{m} missing from {methods:?}");
        }
        assert!(methods.len() >= 30, "{methods:?}");
    }

    /// `forward_backend!`'s list against the trait: a defaulted method added to the trait
    /// but not to the list would otherwise run its default in every generated wrapper.
    #[test]
    fn the_forwarding_macro_implements_every_method() {
        let mut forwarded = crate::FORWARDED_BACKEND_METHODS.to_vec();
        let mut declared = backend_methods();
        forwarded.sort_unstable();
        declared.sort_unstable();
        assert_eq!(forwarded, declared, "tensor/src/forward.rs's list against the Backend trait");
    }

    #[test]
    fn a_method_left_out_is_named() {
        let partial = "impl Backend for W {\n    fn name(&self) -> String {\n        todo!()\n    }\n}";
        let left = methods_left_to_defaults(partial);
        assert!(!left.contains(&"name") && left.contains(&"matmul_sum_rows"), "{left:?}");
    }
}
