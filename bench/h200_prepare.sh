#!/bin/sh
# What bench/h200.py needs on the lent H200, made on a machine with cargo (the GPU machine
# has none and reaches no registry): release builds of `tinygpt` and kernels-wgsl's
# `gpu_matmul_bench`, `attention_time`, `step_profile`, and the `conformance` and
# `coop_matmul` tests, stripped into target/h200/ (a device call carries 64 MiB at most;
# the unstripped tinygpt alone is ~70 MB), and the Vulkan loader's .debs in .gl/ (TOOLCHAIN.md,
# last section). Then carry `target/h200` and `.gl` (both git-ignored) into the call.
#
#   bench/h200_prepare.sh          (builds in $CARGO_TARGET_DIR where set, else target/)
set -eu
cd "$(dirname "$0")/.."
release=${CARGO_TARGET_DIR:-target}/release
cargo build --release -p tinygpt-cli
cargo build --release -p tinygpt-kernels-wgsl --example gpu_matmul_bench --example attention_time --example step_profile
mkdir -p target/h200
cp "$release/tinygpt" "$release/examples/gpu_matmul_bench" "$release/examples/attention_time" \
    "$release/examples/step_profile" target/h200/
# The cooperative-matrix self-test and the conformance kit, to run on the card (`conformance
# mixed`): test binaries, whose file names carry a hash, found from cargo's JSON.
cargo test --release -p tinygpt-kernels-wgsl --no-run --test conformance --test coop_matmul \
    --message-format=json | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], "target/h200/" + m["target"]["name"])'
strip target/h200/*
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
    mkdir -p .gl
    (cd .gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
for sub in bench train; do
    if ! target/h200/tinygpt "$sub" --help | grep -q -- --precision; then
        echo "note: this tinygpt $sub has no --precision yet; h200.py refuses it unless given --precisions default" >&2
    fi
done
du -sh target/h200 .gl
