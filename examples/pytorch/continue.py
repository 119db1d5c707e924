"""Continues a TinyGPT run in PyTorch with DistributedDataParallel, then hands it back.

    tinygpt export --format nanogpt --model runs/small --out small.safetensors
    torchrun --nproc_per_node 2 examples/pytorch/continue.py --init small.safetensors \
        --steps 200 --out continued.safetensors          # CPU: gloo; GPUs: nccl, one per process
    tinygpt import --format nanogpt --in continued.safetensors --out runs/continued

Each process trains on its own batches (TinyGPT's sampler, seeded per rank) of
`batch_size / world_size` rows (the run's batch size is the global batch), DDP averages
the gradients, and AdamW follows the run's training config (betas, eps, weight decay on
rank >= 2 tensors, gradient clipping) with a cosine decay from --lr (default: the run's
learning_rate) to a tenth of it over --steps. Rank 0 reports the validation loss on
`tinygpt eval`'s batches before and after, and writes the file `tinygpt import --format
nanogpt` reads (a new run at step 0 with the same training config and dataset).
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import model as nano
import sampler

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "tinyshakespeare.txt")
# Rank r draws its batches from Rng(seed ^ RANK_SALT ^ r): streams of their own, unlike
# any TinyGPT draws.
RANK_SALT = 0xDD9_0000_0000_0000


def val_loss(model, val, cfg, seq, device):
    batches = sampler.eval_batches(val, "val", cfg["seed"], cfg["eval_batches"], cfg["batch_size"], seq)
    model.eval()
    with torch.no_grad():
        total = sum(float(model(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))[1]) for x, y in batches)
    model.train()
    return total / len(batches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True, help="a `tinygpt export --format nanogpt` file")
    ap.add_argument("--out", required=True, help="the .safetensors file to write")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, help="peak learning rate (default: the run's learning_rate)")
    ap.add_argument("--data", default=DEFAULT_DATA, help="text file (default: TinyShakespeare)")
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    model, meta = nano.load(args.init)
    cfg = nano.training_config(meta)
    assert cfg, "the file carries no tinygpt.training_config.json: export it with tinygpt export --format nanogpt"
    model.to(device)
    seq = model.config.block_size
    train, val = sampler.splits(open(args.data, "rb").read())
    if rank == 0:
        print(f"{world} processes ({'nccl' if cuda else 'gloo'}), {cfg['batch_size']} rows a step in all; "
              f"val loss before: {val_loss(model, val, cfg, seq, device):.4f}", flush=True)
    ddp = DDP(model)
    rows = max(1, cfg["batch_size"] // world)
    peak = args.lr or cfg["learning_rate"]
    opt = model.optimizer(peak, (cfg["beta1"], cfg["beta2"]), cfg["eps"], cfg["weight_decay"])
    rng = sampler.Rng(cfg["seed"] ^ RANK_SALT ^ rank)
    start = time.time()
    for step in range(args.steps):
        lr = peak / 10 + (peak - peak / 10) * 0.5 * (1 + math.cos(math.pi * step / max(1, args.steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = (torch.from_numpy(a).to(device) for a in sampler.batch(train, rows, seq, rng))
        _, loss = ddp(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients over the processes here
        if cfg["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if rank == 0:
                print(f"step {step + 1}/{args.steps}: train loss {float(mean) / world:.4f}, lr {lr:.2e}, "
                      f"{time.time() - start:.1f} s", flush=True)
    if rank == 0:
        print(f"val loss after: {val_loss(model, val, cfg, seq, device):.4f}", flush=True)
        nano.save(model, args.out, meta)
        print(f"wrote {args.out}; bring it back with: tinygpt import --format nanogpt --in {args.out} --out DIR")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
