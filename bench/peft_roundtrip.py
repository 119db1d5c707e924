"""LoRA adapters between `tinygpt` and Python's `peft`, both ways, on the GPT-2 fixture
(ckpt/tests/fixtures/hf_gpt2: a random GPT2LMHeadModel, 2 layers, width 64, a 1,000-token
BPE). Outside CI; needs transformers, peft, torch, tokenizers and safetensors:

    /work/venv-tok/bin/python bench/peft_roundtrip.py --tinygpt target/release/tinygpt

1. ours -> peft: `tinygpt lora train` trains an adapter (qvo-r8: q, v and the attention
   output at rank 8) on the fixture base, `tinygpt lora export --format peft` writes it,
   `PeftModel.from_pretrained` loads it on the transformers model, and its logits on a
   text are compared with `tinygpt lora logits`' on the same text.
2. peft -> ours: `peft` trains an adapter (r 4, alpha 8 on c_attn, c_proj, c_fc) with
   AdamW on the same text, `save_pretrained` writes it, `tinygpt lora import --format peft`
   reads it, and `tinygpt lora logits` is compared with the peft model's logits.

Prints one line per direction and a JSON summary (largest |ours - peft| logit, and how far
the adapter moves the base's logits, so the agreement means something). docs/lora.md
("PEFT interop") records a run.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile

import peft
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2LMHeadModel

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BASE = os.path.join(ROOT, "ckpt", "tests", "fixtures", "hf_gpt2")
TEXT = (
    "Now is the winter of our discontent made glorious summer by this sun of York; "
    "and all the clouds that lour'd upon our house in the deep bosom of the ocean buried. "
) * 40
PROBE = "ROMEO:\nBut, soft! what light through yonder window breaks?"


WORK = None


def shown(arg):
    """`arg` as the log shows it: $WORK/… for the run folder, repository paths relative."""
    if WORK and arg.startswith(WORK):
        return "$WORK" + arg[len(WORK):]
    if os.path.isabs(arg) and arg.startswith(ROOT + os.sep):
        return os.path.relpath(arg, ROOT)
    return shlex.quote(arg)


def run(tinygpt, *args):
    cmd = [tinygpt, *args]
    print("$ tinygpt " + " ".join(shown(a) for a in args), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    if out.stderr.strip():
        print("  " + out.stderr.strip().replace("\n", "\n  "))
    return out.stdout


def tokenizer():
    tok = Tokenizer(models.BPE.from_file(os.path.join(BASE, "vocab.json"), os.path.join(BASE, "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def ours_logits(tinygpt, work, base, adapter):
    out = os.path.join(work, "logits.safetensors")
    run(tinygpt, "lora", "logits", "--base", base, "--adapter", adapter, "--text", PROBE, "--out", out)
    t = load_file(out)
    return t["ids"].tolist(), t["logits"]


def peft_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


def compare(name, ours, theirs, base):
    worst = float((ours - theirs).abs().max())
    moved = float((theirs - base).abs().max())
    print(f"{name}: largest |tinygpt - peft| logit {worst:.3e}; the adapter moves the base's logits by up to {moved:.4f}")
    return {"max_abs_logit_diff": worst, "adapter_moves_logits_by": moved}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tinygpt", default=os.path.join(ROOT, "target", "release", "tinygpt"))
    parser.add_argument("--work", default=None, help="folder for the runs (default: a temporary one)")
    args = parser.parse_args()
    global WORK
    tinygpt = os.path.abspath(args.tinygpt)
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="peft-roundtrip-"))
    os.makedirs(work, exist_ok=True)
    WORK = work
    print(f"tinygpt {tinygpt}; WORK={work}; torch {torch.__version__}, peft {peft.__version__}, transformers {transformers.__version__}")
    torch.manual_seed(0)
    tok = tokenizer()
    probe_ids = tok.encode(PROBE).ids
    data = os.path.join(work, "text.txt")
    with open(data, "w") as f:
        f.write(TEXT)

    base_dir = os.path.join(work, "gpt2")
    shutil.rmtree(base_dir, ignore_errors=True)
    run(tinygpt, "import", "--format", "hf-gpt2", "--in", BASE, "--out", base_dir)
    hf = GPT2LMHeadModel.from_pretrained(BASE).eval()
    base_logits = peft_logits(hf, probe_ids)
    summary = {"probe_tokens": len(probe_ids)}

    # 1. ours -> peft.
    ours = os.path.join(base_dir, "adapters", "ours")
    line = run(tinygpt, "lora", "train", "--base", base_dir, "--data", data, "--preset", "qvo-r8",
               "--steps", "60", "--lr", "0.01", "--batch", "4", "--threads", "2", "--out", ours)
    print("  " + line.strip())
    exported = os.path.join(work, "peft-from-tinygpt")
    shutil.rmtree(exported, ignore_errors=True)
    run(tinygpt, "lora", "export", "--format", "peft", "--base", base_dir, "--adapter", ours,
        "--out", exported, "--base-model-name-or-path", BASE)
    loaded = PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(BASE), exported).eval()
    ids, logits = ours_logits(tinygpt, work, base_dir, ours)
    assert ids == probe_ids, f"tinygpt's BPE gave {ids}, tokenizers {probe_ids}"
    summary["tinygpt_to_peft"] = compare("tinygpt -> peft", logits, peft_logits(loaded, ids), base_logits)

    # 2. peft -> ours.
    model = get_peft_model(
        GPT2LMHeadModel.from_pretrained(BASE),
        LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj", "c_fc"], fan_in_fan_out=True,
                   lora_dropout=0.0, bias="none", task_type="CAUSAL_LM"),
    )
    tokens = torch.tensor(tok.encode(TEXT).ids)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)
    model.train()
    for step in range(60):
        starts = torch.randint(0, len(tokens) - 33, (4,))
        x = torch.stack([tokens[s:s + 33] for s in starts])
        logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"peft: 60 AdamW steps on the text, last train loss {loss.item():.4f}")
    model.eval()
    saved = os.path.join(work, "peft-trained")
    shutil.rmtree(saved, ignore_errors=True)
    model.save_pretrained(saved)
    theirs = os.path.join(base_dir, "adapters", "theirs")
    run(tinygpt, "lora", "import", "--format", "peft", "--base", base_dir, "--in", saved, "--out", theirs)
    ids, logits = ours_logits(tinygpt, work, base_dir, theirs)
    summary["peft_to_tinygpt"] = compare("peft -> tinygpt", logits, peft_logits(model, ids), base_logits)

    print(json.dumps(summary))


if __name__ == "__main__":
    main()
