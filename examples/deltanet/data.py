"""The King James Bible as byte-level tokens (vocabulary 256): a fixed 95/5 train/validation
split and a deterministic batch order. Pure Python (no numpy, no torch) so CI tests it as is.

The text comes from Debian's bible-kjv-text (`make kjv` writes data/kjv.txt with the package's
`bible` reader). Batch order: step s draws its sequences' start offsets from a generator seeded
by (seed, s), so every solver sees the same data at the same step and a resumed run needs only
the step number (the data position) to continue where it left off.
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
KJV = os.path.join(HERE, "data", "kjv.txt")
VOCAB = 256
TRAIN_FRAC = 0.95


def load(path=KJV):
    """The file's bytes (each byte one token)."""
    with open(path, "rb") as f:
        return f.read()


def split(data, frac=TRAIN_FRAC):
    """(train, val): the first frac of the bytes and the rest (contiguous, fixed)."""
    n = int(len(data) * frac)
    return data[:n], data[n:]


def batch_offsets(n_tokens, T, batch, step, seed=0):
    """Start offsets of the `batch` training windows of step `step`: each window is T + 1 bytes
    (inputs x = w[:-1], targets y = w[1:]), uniform over the train split, fixed by (seed, step)."""
    if n_tokens < T + 1:
        raise ValueError(f"data: {n_tokens} tokens cannot hold a window of {T + 1}")
    rng = random.Random(seed * 1_000_003 + step)
    return [rng.randrange(0, n_tokens - T) for _ in range(batch)]


def val_offsets(n_tokens, T, max_windows):
    """Non-overlapping validation windows from the start of the split (the same every eval)."""
    return list(range(0, n_tokens - T, T))[:max_windows]


def windows(data, offsets, T):
    """The (x, y) byte strings of each offset (for tests and small runs; the trainer gathers
    the same windows on the device)."""
    return [(data[o:o + T], data[o + 1:o + T + 1]) for o in offsets]
