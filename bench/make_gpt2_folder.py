"""Writes a GPT-2-124M Hugging Face folder with random weights, for the tab's LoRA speed
benchmark (issue 37: real GPT-2 weights cannot be downloaded here; the shapes and the
arithmetic are the same with random ones). Run outside CI, with a Python that has torch,
transformers and tokenizers:

    /work/venv-tok/bin/python bench/make_gpt2_folder.py [--out target/bench/gpt2-124m]

`config.json` + `model.safetensors`: `GPT2LMHeadModel(GPT2Config())` (12 layers, d_model
768, 12 heads, context 1,024, vocabulary 50,257), saved with `save_pretrained` (about
500 MB: it lives under target/, never committed). `vocab.json` + `merges.txt`: GPT-2's own
tokenizer files are not downloadable here either, so a byte-level BPE of GPT-2's kind
(every byte in the alphabet, `<|endoftext|>` its one special token, no prefix space) is
trained with `tokenizers` to exactly 50,257 entries on TinyShakespeare, this repository's
tracked text and about 20 MB of the installed `transformers` package's Python sources
(TinyShakespeare and this repository give only about 38,000 before running out of pairs),
so the embedding, the head and the cross-entropy have GPT-2's width. Prints one JSON line
(the folder, its files' sizes, the vocabulary's size).
"""

import argparse
import json
import os
import subprocess

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = 50257


def corpus_files():
    """TinyShakespeare, the repository's tracked text, then `transformers`' sources."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.rs", "*.md", "*.mjs", "*.js", "*.py", "*.toml"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    files = [os.path.join(ROOT, "data", "tinyshakespeare.txt")] + [os.path.join(ROOT, p) for p in tracked]
    import transformers

    budget = 20 << 20
    for folder, _, names in sorted(os.walk(os.path.dirname(transformers.__file__))):
        for name in sorted(names):
            if name.endswith(".py") and budget > 0:
                files.append(os.path.join(folder, name))
                budget -= os.path.getsize(files[-1])
    return files


def train_tokenizer(out):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.train(corpus_files(), trainer)
    tok.model.save(out)
    with open(os.path.join(out, "vocab.json")) as f:
        size = len(json.load(f))
    if size != VOCAB:
        raise SystemExit(f"the trained vocabulary has {size} entries, not {VOCAB}: give the trainer more text")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench", "gpt2-124m"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    size = train_tokenizer(args.out)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())
    assert model.config.vocab_size == VOCAB
    model.save_pretrained(args.out, safe_serialization=True)
    gen = os.path.join(args.out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    files = {n: os.path.getsize(os.path.join(args.out, n)) for n in sorted(os.listdir(args.out))}
    print(json.dumps({"folder": args.out, "files": files, "vocab": size, "params": model.num_parameters()}))


if __name__ == "__main__":
    main()
