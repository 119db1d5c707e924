"""TinyGPT's batch sampler, reproduced bit for bit, so PyTorch scores the very windows
`tinygpt eval` and `tinygpt debug-state` score.

- The generator is SplitMix64 (tensor/src/rng.rs): `state += 0x9E3779B97F4A7C15`, then
  `z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; z ^ z>>31`,
  all mod 2^64. `below(n)` is `(next() * n) >> 64` (no rejection).
- The text is its bytes (one token per byte). The train split is the first
  `len * 9 // 10` bytes, the validation split the rest.
- A batch of B windows of T tokens (model/src/data.rs): for each row, `i = below(len(split) - T)`,
  inputs `split[i:i+T]`, targets `split[i+1:i+T+1]`.
- `tinygpt eval` (optim/src/evaluation.rs) averages the mean loss of `eval_batches` batches of
  the run's `batch_size`, drawn from `Rng(seed ^ salt)` (salt 0xE7A1000000000002 for the train
  split, 0xE7A1000000000003 for validation), the average taken in f64.
- `tinygpt debug-state --seed S --batch B` draws one batch from the train split with `Rng(S)`.
"""

import numpy as np

MASK = (1 << 64) - 1
EVAL_SALT = {"train": 0xE7A1_0000_0000_0002, "val": 0xE7A1_0000_0000_0003}


class Rng:
    def __init__(self, seed):
        self.state = seed & MASK

    def next_u64(self):
        self.state = (self.state + 0x9E37_79B9_7F4A_7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next_u64() * n) >> 64


def splits(text):
    """(train, val) token arrays of `text` (bytes)."""
    tokens = np.frombuffer(text, dtype=np.uint8)
    cut = len(tokens) * 9 // 10
    return tokens[:cut], tokens[cut:]


def batch(split, rows, seq, rng):
    """(inputs, targets), int64 [rows, seq] each."""
    starts = [rng.below(len(split) - seq) for _ in range(rows)]
    x = np.stack([split[i : i + seq] for i in starts]).astype(np.int64)
    y = np.stack([split[i + 1 : i + seq + 1] for i in starts]).astype(np.int64)
    return x, y


def eval_batches(split, name, seed, count, rows, seq):
    """The batches `tinygpt eval` scores for split `name` ("train" or "val")."""
    rng = Rng(seed ^ EVAL_SALT[name])
    return [batch(split, rows, seq, rng) for _ in range(count)]
