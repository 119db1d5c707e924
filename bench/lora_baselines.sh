#!/bin/sh
# Issue 37's baseline table: what a LoRA adapter on the bundled base adds on text of another
# style, read against what any model learns from byte counts (unigram, bigram) and against
# fine-tuning every parameter with the same steps, batches and schedule (`--compare-full`).
# Three texts: this repository's Rust sources at 77f2eec (tests and xtask left out) and its
# Markdown at b280508, both rebuilt from its history, and English legal prose: the licence
# texts Debian ships in /usr/share/common-licenses (thirteen files, 216,888 bytes; the one
# text here whose bytes the Shakespeare base has nearly all seen: 4% of its val bytes are
# new to it, against 9-10% of the code's and the Markdown's).
#
#   bench/lora_baselines.sh [TINYGPT]      (default target/release/tinygpt; 2 threads)
#   LORA_BASELINES_TEXTS="licenses" bench/lora_baselines.sh     (some of the texts)
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
licenses="Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0"
(cd /usr/share/common-licenses && cat $licenses) >"$dir/licenses.txt"
texts=${LORA_BASELINES_TEXTS:-rust-code docs-md licenses}
for text in $texts; do
    rm -rf "$dir/$text-adapter"
    "$tinygpt" lora train --base builtin --data "$dir/$text.txt" \
        --targets q_proj,k_proj,v_proj,o_proj --rank 4 --lr 1e-2 \
        --steps 1000 --eval-interval 250 --compare-full --full-lr 1e-3 --threads 2 \
        --out "$dir/$text-adapter" 2>"$dir/$text.log" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); r["text"]=sys.argv[1]; print(json.dumps(r))' "$text" |
        tee "$dir/$text.json"
done
python3 - $(for text in $texts; do echo "$dir/$text.json"; done) <<'PY'
import json, sys
rows = [json.load(open(p)) for p in sys.argv[1:]]
print("| text | base | unigram | bigram | adapter | full fine-tuning | adapter / full | adapter params / base |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['text']} | {r['base_val_loss']:.4f} | {r['unigram_val_loss']:.4f} | {r['bigram_val_loss']:.4f} "
          f"| **{r['adapter_val_loss']:.4f}** | {r['full_val_loss']:.4f} | {r['adapter_val_loss'] / r['full_val_loss']:.3f} "
          f"| {r['adapter_over_base']:.2%} |")
PY
