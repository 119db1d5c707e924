#!/bin/sh
# Ours and the PyTorch twin back to back on one GPU machine, preset by preset (each pair
# twice, alternating), then the ratios (best run of each side) and the matmul lines:
# every line JSON. For a machine without cargo (the lent H200): BIN holds release builds
# of `tinygpt` and kernels-wgsl's `gpu_matmul_bench` example made elsewhere; python3 there has
# torch.
#
#   bench/gpu_vs_pytorch.sh BIN [presets] [steps]     e.g. bench/gpu_vs_pytorch.sh target/release
#
# (`cargo xtask bench-gpu` runs ours and the matmul lines on a machine with cargo.)
set -eu
bin=$1
presets=${2:-small,medium,large,xl,huge}
steps=${3:-30}
here=$(dirname "$0")
log=$(mktemp)
for p in $(echo "$presets" | tr , ' '); do
    for round in 1 2; do
        "$bin/tinygpt" bench --backend wgpu --preset "$p" --steps "$steps" | tee -a "$log"
        python3 "$here/pytorch_twin.py" --presets "$p" --steps "$steps" --attention both | tee -a "$log"
    done
done
python3 "$here/ratios.py" < "$log"
"$bin/gpu_matmul_bench" 4096x4096x4096 2048x256x256:nt 2048x1024x256:nt 2048x256x1024:nt \
    2048x256x1024:nn 256x256x2048:tn 256x1024x2048:tn 1024x256x2048:tn
rm -f "$log"
