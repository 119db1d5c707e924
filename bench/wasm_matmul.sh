#!/bin/sh
# The simd128-relaxed matmul at a GPT-2-124M LoRA step's shapes (batch 4 x context 256 = 1,024
# rows, d 768, d_mlp 3,072, vocabulary 50,257) under Node's V8, one thread: kernels-cpu's
# matmul_bench built for wasm32-wasip1 and run by kernels-cpu/tests/wasi/run.mjs, the route the
# simd128 conformance kit takes (docs/testing.md), with `--no-liftoff` so every call runs
# TurboFan's code, as a tab does once V8 has tiered the kernels up. One JSON line per shape,
# each after an fma_peak line (the multiply-add peak of one thread, the fastest of short bursts):
# `gflops` from the mean call, `gflops_fastest` from the fastest, `of_peak` the fastest's
# share of the peak. On a shared machine the mean tracks how much of a core the run got.
#
#   bench/wasm_matmul.sh                  # all eight shapes
#   bench/wasm_matmul.sh 1024x768x768:nt  # or the ones named
#
# `nt` is a linear's forward (x · Wᵀ: q, k, v, o; fc_in; fc_out; the tied head), `nn` its
# input gradient (dY · W). Frozen weights take no weight gradient, so no `tn` shape is here.
# WASM_MATMUL_KERNELS picks the variants (simd128-relaxed; `simd128,simd128-relaxed` for both).
set -eu
cd "$(dirname "$0")/.."
RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo build --quiet --release \
  -p tinygpt-kernels-cpu --example matmul_bench --target wasm32-wasip1 \
  --target-dir target/wasi-relaxed-simd
if [ $# -eq 0 ]; then
  set -- 1024x768x768:nt 1024x3072x768:nt 1024x768x3072:nt 1024x50257x768:nt \
    1024x768x768:nn 1024x768x3072:nn 1024x3072x768:nn 1024x768x50257:nn
fi
# One process per shape: the 50,257-wide products after the others in one process died
# (wasm32 has 4 GiB, and the backend keeps its buffers for reuse).
for shape in "$@"; do
  node --no-liftoff kernels-cpu/tests/wasi/run.mjs \
    target/wasi-relaxed-simd/wasm32-wasip1/release/examples/matmul_bench.wasm \
    --kernels "${WASM_MATMUL_KERNELS:-simd128-relaxed}" "$shape" 2>/tmp/wasm_matmul.$$.err ||
    echo "{\"shape\":\"$shape\",\"error\":\"$(tail -1 /tmp/wasm_matmul.$$.err)\"}"
done
rm -f /tmp/wasm_matmul.$$.err
