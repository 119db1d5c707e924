#!/bin/sh
# Issue 37's baseline table: what a LoRA adapter on the bundled base adds on text of another
# style, read against what any model learns from byte counts (unigram, bigram) and against
# fine-tuning every parameter with the same steps, batches and schedule (`--compare-full`).
# Two texts, both rebuilt from this repository's history so the figures can be reproduced:
# its Rust sources at 77f2eec (tests and xtask left out) and its Markdown at b280508.
#
#   bench/lora_baselines.sh [TINYGPT]      (default target/release/tinygpt; 2 threads)
#
# Prints one JSON line per text (`tinygpt lora train`'s report plus "text"), then a Markdown
# table. The adapter: rank 4 on q, k, v and o (16,384 parameters, 1.95% of the base's
# 838,400), peak lr 1e-2 (the best of 3e-3 and 1e-2 on the Markdown text); full fine-tuning
# at 1e-3. 1,000 steps each, evaluated every 250; the losses are the last evaluation's.
set -eu
cd "$(dirname "$0")/.."
tinygpt=${1:-target/release/tinygpt}
dir=${LORA_BASELINES_DIR:-target/lora-baselines}
mkdir -p "$dir"
git ls-tree -r --name-only 77f2eec | grep '\.rs$' | grep -v '^xtask\|tests/' |
    while read -r f; do git show "77f2eec:$f"; done >"$dir/rust-code.txt"
git ls-tree -r --name-only b280508 | grep '\.md$' |
    while read -r f; do git show "b280508:$f"; done >"$dir/docs-md.txt"
for text in rust-code docs-md; do
    rm -rf "$dir/$text-adapter"
    "$tinygpt" lora train --base builtin --data "$dir/$text.txt" \
        --targets q_proj,k_proj,v_proj,o_proj --rank 4 --lr 1e-2 \
        --steps 1000 --eval-interval 250 --compare-full --full-lr 1e-3 --threads 2 \
        --out "$dir/$text-adapter" 2>"$dir/$text.log" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); r["text"]=sys.argv[1]; print(json.dumps(r))' "$text" |
        tee "$dir/$text.json"
done
python3 - "$dir/rust-code.json" "$dir/docs-md.json" <<'PY'
import json, sys
rows = [json.load(open(p)) for p in sys.argv[1:]]
print("| text | base | unigram | bigram | adapter | full fine-tuning | adapter / full | adapter params / base |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['text']} | {r['base_val_loss']:.4f} | {r['unigram_val_loss']:.4f} | {r['bigram_val_loss']:.4f} "
          f"| **{r['adapter_val_loss']:.4f}** | {r['full_val_loss']:.4f} | {r['adapter_val_loss'] / r['full_val_loss']:.3f} "
          f"| {r['adapter_over_base']:.2%} |")
PY
