#!/bin/bash
# Trains a few short runs with each of two `tinygpt` binaries (e.g. main's and a branch's)
# and compares what they save bit for bit: weights, both AdamW moments and the loss history
# (sha256), on every backend and variant this machine has (CPU fast and reference kernels,
# checked, with and without dropout; wgpu f32 and mixed when a Vulkan device is found,
# e.g. lavapipe: VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json). For
# changes that must not move a single bit ("no change in behaviour").
#
#   bench/same_bits.sh BEFORE_BIN AFTER_BIN [WORKDIR]
#
# Prints one line per run and exits 1 if any differ.
set -u
before=$1; after=$2; work=${3:-$(mktemp -d)}
mkdir -p "$work"
drop=$work/dropout.json
cat > "$drop" <<'JSON'
{"model":{"model_name":"drop-test","vocab_size":256,"context_length":64,"n_layers":2,"n_heads":4,"d_model":64,"d_mlp":256,"dropout":0.1,"tie_embeddings":true,"dtype":"float32"},
 "training":{"eval_interval":5,"eval_batches":2,"batch_size":4,"warmup_steps":2,"learning_rate":0.001,"min_lr":0.0001,"beta1":0.9,"beta2":0.99,"weight_decay":0.1,"grad_clip":1.0,"schedule":"cosine","max_steps":100,"checkpoint_interval":100,"seed":7}}
JSON
runs=(
  "cpu_fast|--preset tiny --steps 20 --threads 2"
  "cpu_reference|--preset tiny --steps 20 --threads 2 --kernels reference"
  "checked|--preset tiny --steps 10 --threads 2 --backend checked"
  "cpu_dropout|--config $drop --steps 10 --threads 2"
  "cpu_dropout_reference|--config $drop --steps 10 --threads 2 --kernels reference"
  "wgpu|--preset tiny --steps 10 --backend wgpu"
  "wgpu_dropout|--config $drop --steps 10 --backend wgpu"
  "wgpu_mixed|--config $drop --steps 10 --backend wgpu --precision mixed"
  "checked_wgpu|--preset tiny --steps 5 --backend checked:wgpu"
)
status=0
for run in "${runs[@]}"; do
  name=${run%%|*}; args=${run#*|}
  sums=()
  for which in before after; do
    bin=before; [ $which = after ] && bin=after
    out=$work/$which/$name; rm -rf "$out"; mkdir -p "$work/$which"
    # shellcheck disable=SC2086
    if ! "${!bin}" train $args --out "$out" > "$out.log" 2>&1; then sums+=("failed"); continue; fi
    sums+=("$(cd "$out"/gen-000001 && cat weights.f32 adam_m.f32 adam_v.f32 loss_history.json | sha256sum | cut -c1-16)")
  done
  if [ "${sums[0]}" = failed ] && [ "${sums[1]}" = failed ]; then
    echo "$name: skipped (no such backend here: see $work/before/$name.log)"
  elif [ "${sums[0]}" = "${sums[1]}" ]; then
    echo "$name: same bits (${sums[0]})"
  else
    echo "$name: DIFFERENT (before ${sums[0]}, after ${sums[1]})"; status=1
  fi
done
exit $status
