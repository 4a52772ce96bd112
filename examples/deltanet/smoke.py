"""CPU smoke test of the training example (tiny model, reference backend), where torch is:
20 steps of every CPU solver from the same seed on the real KJV file (the solvers agree on the
losses, and the loss falls), a checkpoint resume that continues bit-for-bit, and a sample.
Usage: python smoke.py WORKDIR. Prints `N passed, N failed` last."""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402
from sample import generate  # noqa: E402

work = sys.argv[1] if len(sys.argv) > 1 else "/tmp/deltanet_smoke"
os.makedirs(work, exist_ok=True)
torch.set_num_threads(2)
passed = failed = 0


def check(name, ok, info=""):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + name + (f"  ({info})" if info else ""), flush=True)
    passed, failed = passed + bool(ok), failed + (not ok)


def run(solver, steps, extra=()):
    out = os.path.join(work, f"{solver}.jsonl")
    if os.path.exists(out):
        os.remove(out)
    a = train.parse(["--tiny", "--device", "cpu", "--solver", solver, "--steps", str(steps), "--T", "64",
                     "--batch", "4", "--micro", "2", "--warmup", "5", "--eval-every", "10", "--eval-windows", "4",
                     "--log-every", "1", "--warm-steps", "2", "--out", out, *extra])
    s = train.train(a)
    rows = [json.loads(line) for line in open(out)]
    return s, [r["loss"] for r in rows if r["kind"] == "train"], rows


curves = {}
for solver in ("delta", "cr", "scan_hs", "torch"):
    s, losses, rows = run(solver, 20)
    curves[solver] = losses
    check(f"{solver}: 20 steps, finite, the loss falls, rows name the solver and chains",
          len(losses) == 20 and all(map(math.isfinite, losses)) and losses[-1] < losses[0] - 0.3
          and all(r["solver"] == solver and r["chains"] in ("ssmh", "torch") for r in rows),
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, val ppl {s['val_ppl']:.2f}, chains {rows[0]['chains']}")
for solver in ("delta", "cr", "scan_hs"):
    d = max(abs(x - y) for x, y in zip(curves[solver], curves["torch"]))
    check(f"{solver} and the torch token loop give the same loss curve", d < 2e-3, f"max |diff| {d:.2e}")

ck = os.path.join(work, "ckpt.pt")
s_full, full, _ = run("delta", 20, ["--chains", "torch"])
run("delta", 20, ["--chains", "torch", "--stop-after", "12", "--ckpt", ck])
s_res, resumed, _ = run("delta", 20, ["--chains", "torch", "--resume", ck])
check("a resumed run continues where the checkpoint stopped (data position, optimizer)",
      len(resumed) == 8 and max(abs(x - y) for x, y in zip(resumed, full[12:])) < 1e-5,
      f"step 20 loss {resumed[-1]:.6f} vs {full[-1]:.6f}")
check("the resumed run's summary covers both parts (10 + 6 steps timed after 2 warm-up steps each)",
      s_res["parts"] == 2 and s_res["steps_timed"] == 16 and s_res["step"] == 20,
      f"parts {s_res['parts']}, steps timed {s_res['steps_timed']}")
d = max(abs(x - y) for x, y in zip(full, curves["delta"]))
check("chains ssmh and chains torch train the same model", d < 2e-3, f"max |diff| {d:.2e}")
model, _ = train.load_model(ck, "cpu")
text = generate(model, "In the beginning", 40, top_k=5, T=64)
check("sample: 40 bytes after the prompt", text.startswith("In the beginning") and len(text.encode()) >= 56,
      repr(text[-40:]))
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
