"""The loader on the real file (CI, no torch): the text is the KJV from bible-kjv-text, the
split is fixed, windows line up with their targets, and the batch order depends on (seed, step)
alone. Prints `N passed, N failed` last."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402

passed = failed = 0


def check(name, ok):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + name)
    passed, failed = passed + bool(ok), failed + (not ok)


raw = data.load()
check("the file is the whole KJV (Genesis 1:1 .. Revelation 22:21, plain ASCII)",
      len(raw) > 4_000_000 and raw[:60].split(b"\n")[1] == b"Genesis 1"
      and b"In the beginning God created the heaven and the earth." in raw[:200]
      and raw.rstrip().endswith(b"The grace of our Lord Jesus Christ be with you all. Amen.")
      and max(raw) < 128)
train, val = data.split(raw)
check("95/5 split, contiguous, nothing lost", len(train) == int(len(raw) * 0.95) and train + val == raw)
check("validation starts in Revelation's neighbourhood (the end of the book)", b"Revelation" in val)
small = raw[:50_000]  # a small slice, as the CI budget wants
T, B = 64, 8
offs = data.batch_offsets(len(small), T, B, step=3, seed=1)
check("batch order is fixed by (seed, step)", offs == data.batch_offsets(len(small), T, B, 3, 1)
      and offs != data.batch_offsets(len(small), T, B, 4, 1) and offs != data.batch_offsets(len(small), T, B, 3, 2))
check("offsets stay inside the split", all(0 <= o <= len(small) - T - 1 for o in offs) and len(offs) == B)
wins = data.windows(small, offs, T)
check("targets are the inputs shifted by one byte",
      all(len(x) == T and len(y) == T and x[1:] == y[:-1] and y[-1] == small[o + T] for (x, y), o in zip(wins, offs)))
vo = data.val_offsets(len(small), T, 10)
check("validation windows do not overlap", len(vo) == 10 and all(b - a == T for a, b in zip(vo, vo[1:])))
try:
    data.batch_offsets(10, 64, 1, 0)
    check("a split shorter than a window is refused", False)
except ValueError:
    check("a split shorter than a window is refused", True)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
