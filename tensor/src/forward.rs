//! [`forward_backend!`]: a wrapper backend that runs every op on an inner backend, calling a
//! hook first (counting calls, logging), generated from one list of the [`Backend`]'s
//! methods, so that a wrapper cannot leave a method to its default by omission. A method
//! left to its default runs the default's composition of other ops (`copy_many` as one
//! `copy` per range, `matmul_sum_rows` as `matmul` then `sum_rows`) instead of the inner
//! backend's own: results stay right, and only a count or a speed says otherwise.
//!
//! The list is checked against the trait: a signature that differs, or a required method
//! missing from it, fails to compile; a defaulted method missing from it fails the
//! conformance kit's `forwarding` test, which compares [`FORWARDED_BACKEND_METHODS`] with
//! the trait's source. Wrappers that do more than forward (checking operands, skipping
//! ops) write their impls by hand and use that module's text check.
//!
//! [`Backend`]: crate::Backend

/// Implements [`Backend`](crate::Backend) for a wrapper whose `Storage` and `Indices` are
/// those of an inner backend: `name` is given, and every other method evaluates `route`
/// (with `this` bound to `&self` and `op` to the method's name, a `&'static str`) to get a
/// `&Inner`, then calls the same method on it with the same arguments.
///
/// ```ignore
/// tinygpt_tensor::forward_backend! {
///     impl Backend for Counting {
///         inner: CpuBackend,
///         name: |this| "counting cpu".into(),
///         route: |this, op| this.count(op),
///     }
/// }
/// // A generic wrapper: impl[B: Backend] Backend for Logged<B> { inner: B, ... }
/// ```
#[macro_export]
macro_rules! forward_backend {
    (
        impl $([$($generics:tt)*])? Backend for $wrapper:ty {
            inner: $inner:ty,
            name: |$name_this:ident| $name:expr,
            route: |$this:ident, $op:ident| $route:expr $(,)?
        }
    ) => {
        $crate::__backend_methods!(
            @forward [$($($generics)*)?] [$wrapper] [$inner] [$name_this $name] [$this $op $route]
        );
    };
}

/// Implementation detail of [`forward_backend!`] and [`FORWARDED_BACKEND_METHODS`]: the one
/// list of [`Backend`](crate::Backend)'s methods (all but `name`), with their signatures,
/// handed to [`__backend_methods_expand!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __backend_methods {
    ($($prefix:tt)*) => {
        $crate::__backend_methods_expand! { $($prefix)* ;
            fn max_tensor_len() -> usize;
            fn zeros(len: usize) -> Self::Storage;
            fn upload(data: &[f32]) -> Self::Storage;
            fn upload_indices(data: &[u32]) -> Self::Indices;
            fn read(src: &Self::Storage)
                -> impl ::core::future::Future<
                    Output = ::core::result::Result<::std::vec::Vec<f32>, $crate::TensorError>,
                >;
            fn read_into(src: &Self::Storage, dst: &mut [f32])
                -> impl ::core::future::Future<Output = ::core::result::Result<(), $crate::TensorError>>;
            fn copy(
                src: &Self::Storage,
                src_offset: usize,
                dst: &Self::Storage,
                dst_offset: usize,
                len: usize
            );
            fn copy_many(copies: &[$crate::CopyRange<'_, Self::Storage>]);
            fn flush()
                -> impl ::core::future::Future<Output = ::core::result::Result<(), $crate::TensorError>>;
            fn add(a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage;
            fn scale(a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage;
            fn sum_rows(x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage;
            fn sum_squares(x: &Self::Storage, len: usize) -> Self::Storage;
            fn dropout(x: &Self::Storage, mask: &$crate::DropoutMask, len: usize) -> Self::Storage;
            fn dropout_add(
                residual: &Self::Storage,
                x: &Self::Storage,
                mask: &$crate::DropoutMask,
                len: usize
            ) -> Self::Storage;
            fn matmul(
                a: &Self::Storage,
                b: &Self::Storage,
                bias: Option<&Self::Storage>,
                dims: $crate::MatmulDims
            ) -> Self::Storage;
            fn matmul_sum_rows(a: &Self::Storage, b: &Self::Storage, dims: $crate::MatmulDims)
                -> (Self::Storage, Self::Storage);
            fn matmul_onto(
                onto: &Self::Storage,
                a: &Self::Storage,
                b: &Self::Storage,
                bias: Option<&Self::Storage>,
                dims: $crate::MatmulDims
            ) -> Self::Storage;
            fn embedding(table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage;
            fn embedding_backward(
                dout: &Self::Storage,
                ids: &Self::Indices,
                n: usize,
                table_rows: usize,
                dim: usize
            ) -> Self::Storage;
            fn layer_norm(
                x: &Self::Storage,
                gamma: &Self::Storage,
                beta: &Self::Storage,
                rows: usize,
                dim: usize,
                eps: f32
            ) -> $crate::LayerNormOut<Self::Storage>;
            fn layer_norm_backward(
                dout: &Self::Storage,
                x: &Self::Storage,
                gamma: &Self::Storage,
                saved: &$crate::LayerNormOut<Self::Storage>,
                rows: usize,
                dim: usize
            ) -> $crate::LayerNormGrads<Self::Storage>;
            fn layer_norm_backward_onto(
                onto: &Self::Storage,
                dout: &Self::Storage,
                x: &Self::Storage,
                gamma: &Self::Storage,
                saved: &$crate::LayerNormOut<Self::Storage>,
                rows: usize,
                dim: usize
            ) -> $crate::LayerNormGrads<Self::Storage>;
            fn gelu(x: &Self::Storage, len: usize) -> Self::Storage;
            fn gelu_backward(x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage;
            fn attention(q: &Self::Storage, k: &Self::Storage, v: &Self::Storage, dims: $crate::AttentionDims)
                -> $crate::AttentionOut<Self::Storage>;
            fn cached_attention(
                q: &Self::Storage,
                k_cache: &Self::Storage,
                v_cache: &Self::Storage,
                dims: $crate::CachedAttentionDims
            ) -> Self::Storage;
            fn attention_backward(
                dout: &Self::Storage,
                q: &Self::Storage,
                k: &Self::Storage,
                v: &Self::Storage,
                probs: &Self::Storage,
                dims: $crate::AttentionDims
            ) -> $crate::AttentionGrads<Self::Storage>;
            fn attention_for_training(
                q: &Self::Storage,
                k: &Self::Storage,
                v: &Self::Storage,
                dims: $crate::AttentionDims
            ) -> $crate::AttentionSaved<Self::Storage>;
            fn attention_backward_saved(
                dout: &Self::Storage,
                q: &Self::Storage,
                k: &Self::Storage,
                v: &Self::Storage,
                saved: &Self::Storage,
                dims: $crate::AttentionDims
            ) -> $crate::AttentionGrads<Self::Storage>;
            fn cross_entropy(logits: &Self::Storage, targets: &Self::Indices, rows: usize, vocab: usize)
                -> Self::Storage;
            fn cross_entropy_backward(
                logits: &Self::Storage,
                targets: &Self::Indices,
                dloss: &Self::Storage,
                rows: usize,
                vocab: usize
            ) -> Self::Storage;
            fn cross_entropy_for_training(
                logits: &Self::Storage,
                targets: &Self::Indices,
                rows: usize,
                vocab: usize
            ) -> $crate::CrossEntropySaved<Self::Storage>;
            fn cross_entropy_backward_saved(
                logits: &Self::Storage,
                targets: &Self::Indices,
                saved: Option<&Self::Storage>,
                dloss: &Self::Storage,
                rows: usize,
                vocab: usize
            ) -> Self::Storage;
            fn adamw(
                param: &Self::Storage,
                grad: &Self::Storage,
                m: &Self::Storage,
                v: &Self::Storage,
                grad_sumsq: &Self::Storage,
                hp: &$crate::AdamWStep,
                len: usize
            );
        }
    };
}

/// Implementation detail of [`forward_backend!`]: what [`__backend_methods!`]'s list
/// expands to, the forwarding impl (`@forward`) or the method names (`@names`).
#[doc(hidden)]
#[macro_export]
macro_rules! __backend_methods_expand {
    (
        @forward [$($generics:tt)*] [$wrapper:ty] [$inner:ty] [$name_this:ident $name:expr]
        [$this:ident $op:ident $route:expr] ;
        $(fn $method:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*
    ) => {
        impl<$($generics)*> $crate::Backend for $wrapper {
            type Storage = <$inner as $crate::Backend>::Storage;
            type Indices = <$inner as $crate::Backend>::Indices;

            #[allow(unused_variables)]
            fn name(&self) -> ::std::string::String {
                let $name_this = self;
                $name
            }
            $(
                #[allow(clippy::too_many_arguments, unused_variables)]
                fn $method(&self, $($arg: $ty),*) $(-> $ret)? {
                    let $this = self;
                    let $op: &'static str = stringify!($method);
                    let inner: &$inner = $route;
                    <$inner as $crate::Backend>::$method(inner, $($arg),*)
                }
            )*
        }
    };
    (@names ; $(fn $method:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        &["name", $(stringify!($method)),*]
    };
}

/// Every method of [`Backend`](crate::Backend) that [`forward_backend!`] implements, `name`
/// first: compared with the trait by the conformance kit's `forwarding` test.
pub const FORWARDED_BACKEND_METHODS: &[&str] = crate::__backend_methods!(@names);
