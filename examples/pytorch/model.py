"""A nanoGPT-style GPT (karpathy/nanoGPT model.py, trimmed) and the safetensors file
`tinygpt export --format nanogpt` writes and `tinygpt import --format nanogpt` reads.

The one architectural difference from nanoGPT's model.py: TinyGPT's GELU is the tanh
approximation (GPT-2's), so the MLP uses nn.GELU(approximate="tanh"). Everything else
(pre-LayerNorm blocks with eps 1e-5, q/k/v fused in c_attn in that order, scaled causal
attention, tied lm_head) is nanoGPT's, with the same parameter names.
"""

import json
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file


@dataclass
class GPTConfig:
    block_size: int
    vocab_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as in nanoGPT and TinyGPT

    def forward(self, idx, targets=None):
        _, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def optimizer(self, lr, betas, eps, weight_decay):
        """nanoGPT's configure_optimizers: decay every tensor of rank >= 2, nothing else."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


# The GPTConfig keys of the file's __metadata__ (strings, as safetensors requires).
CONFIG_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")


def load(path):
    """(model, metadata) from a `tinygpt export --format nanogpt` file."""
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    config = GPTConfig(
        **{k: int(meta[k]) for k in CONFIG_KEYS},
        dropout=float(meta.get("dropout", "0")),
        bias=meta["bias"].lower() == "true",
    )
    model = GPT(config)
    # strict: every parameter present and nothing else (lm_head is wte's copy).
    model.load_state_dict(tensors, strict=True)
    assert torch.equal(model.lm_head.weight, tensors["transformer.wte.weight"])
    return model, meta


def save(model, path, meta):
    """Writes `model` as `tinygpt import --format nanogpt` reads it: every parameter under
    its nanoGPT name, F32, lm_head.weight a copy of wte (safetensors stores no shared
    tensors), the config in __metadata__. `meta` is the loaded file's metadata; our run
    documents in it that the PyTorch run made stale (progress, loss history) are dropped,
    so the import starts a new run at step 0 that keeps the training config and dataset."""
    c = model.config
    out = {k: v for k, v in meta.items() if k not in ("tinygpt.progress.json", "tinygpt.loss_history.json")}
    out.update({k: str(getattr(c, k)) for k in CONFIG_KEYS})
    out.update(bias=str(c.bias).lower(), dropout=repr(float(c.dropout)), format="pt")
    state = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, path, metadata=out)


def training_config(meta):
    """The run's training_config.json, as the export carries it (None if absent)."""
    text = meta.get("tinygpt.training_config.json")
    return json.loads(text) if text else None

