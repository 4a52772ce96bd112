"""Train the DeltaNet LM of model.py on the King James Bible (byte tokens) with a chosen
recurrence solver; JSON lines (deltanet_train rows in the row format of bench/bench.h) go to --out.

  python train.py --solver delta --steps 1000 --out ../../bench/results/deltanet_train.jsonl
  python train.py --solver cr --micro 8 ...          # gradient accumulation: 4 x 8 sequences
  python train.py --resume ckpt.pt --steps 1000      # continues at the checkpoint's step
  python train.py --tiny --device cpu --steps 20     # the CPU smoke configuration

Same --seed = same initial weights and same batches at every step for every solver (data.py).
Rows: kind "train" (every --log-every steps), "eval" (every --eval-every steps and at the end),
"summary" (tokens/s median after warm-up, peak memory, last validation). Each row says which
solver and which chains (ssmh or torch) ran. A checkpoint keeps the step times and peak memory
of the run so far, so a resumed run's summary covers the whole run (each part's first
--warm-steps steps left out of the median).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
from model import SOLVERS, DeltaNetLM  # noqa: E402

IMPL = {"delta": "ours:chunked", "cr": "ours:cr", "scan_hs": "ours:scan_hs", "fla": "peer:fla", "torch": "peer:torch_seq"}
TINY = dict(d=32, layers=2, heads=2, head_dim=16, mlp_hidden=64)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--solver", default="delta", choices=SOLVERS)
    p.add_argument("--chains", default="auto", choices=("auto", "ssmh", "torch"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--stop-after", type=int, default=0, help="stop (checkpoint) after this step; 0 = --steps")
    p.add_argument("--max-seconds", type=float, default=0, help="stop early (checkpoint + summary) after this long")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--micro", type=int, default=0, help="sequences per forward (0 = --batch)")
    p.add_argument("--T", type=int, default=2048)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warm-steps", type=int, default=10, help="steps left out of the tokens/s median")
    p.add_argument("--dense-dtype", default="f32", choices=("f32", "bf16"))
    p.add_argument("--no-autocast", action="store_true", help="f32 throughout (CPU runs always are)")
    p.add_argument("--tiny", action="store_true", help="the smoke-test model (d 32, 2 layers, 2 heads of 16)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default="")
    p.add_argument("--ckpt", default="", help="checkpoint written at the end (and every --ckpt-every steps)")
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--resume", default="")
    p.add_argument("--data", default=data.KJV)
    p.add_argument("--tag", default="")
    return p.parse_args(argv)


def commit():
    c = os.environ.get("SSMH_COMMIT")
    if c:
        return c
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def device_name(dev):
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else (platform.processor() or platform.machine())


def lr_at(step, a):
    """Linear warm-up, then cosine from lr to lr * min_lr_frac at --steps."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def build(a, dev):
    torch.manual_seed(a.seed)
    kw = TINY if a.tiny else {}
    model = DeltaNetLM(solver=a.solver, chains=a.chains,
                       dense_dtype=torch.float32 if a.dense_dtype == "f32" else torch.bfloat16, **kw).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    return model, opt


def save_ckpt(path, model, opt, step, a, run):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "args": vars(a),
                "cfg": model.cfg, "data_position": {"seed": a.seed, "next_step": step}, "run": run}, tmp)
    os.replace(tmp, path)


def load_model(path, dev, solver=None, chains="auto"):
    """(model, checkpoint) from a checkpoint (sample.py); solver None = the one it trained with."""
    ck = torch.load(path, map_location=dev, weights_only=False)
    cfg = dict(ck["cfg"])
    model = DeltaNetLM(solver=solver or ck["args"]["solver"], chains=chains, **cfg).to(dev)
    model.load_state_dict(ck["model"])
    return model, ck


class Windows:
    """The split on the device; windows gathered by offset (x, y: [B, T] int64)."""

    def __init__(self, raw, dev):
        self.t = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(dev)
        self.n = len(raw)

    def get(self, offsets, T):
        o = torch.tensor(offsets, device=self.t.device)[:, None] + torch.arange(T + 1, device=self.t.device)
        w = self.t[o].long()
        return w[:, :-1], w[:, 1:]


def evaluate(model, val, a, dev, use_ac):
    model.eval()
    offs = data.val_offsets(val.n, a.T, a.eval_windows)
    micro = a.micro or a.batch
    tot = cnt = 0.0
    with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_ac):
        for i in range(0, len(offs), micro):
            x, y = val.get(offs[i:i + micro], a.T)
            logits = model(x)
            tot += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            cnt += y.numel()
    model.train()
    return tot / cnt


def train(a):
    dev = torch.device(a.device)
    use_ac = dev.type == "cuda" and not a.no_autocast
    raw = data.load(a.data)
    tr_raw, va_raw = data.split(raw)
    tr, va = Windows(tr_raw, dev), Windows(va_raw, dev)
    model, opt = build(a, dev)
    step0 = 0
    before = {"steady_s": [], "peak_mem_bytes": 0, "wall_s": 0.0, "parts": 0}  # the run's earlier parts
    if a.resume:
        ck = torch.load(a.resume, map_location=dev, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step0 = ck["data_position"]["next_step"]
        before = ck.get("run", before)
    chains = model.resolve_chains(dev)
    micro = a.micro or a.batch
    assert a.batch % micro == 0, "--batch must be a multiple of --micro"
    n_micro = a.batch // micro
    base = {"op": "deltanet_train", "impl": IMPL[a.solver], "backend": "cuda" if dev.type == "cuda" else "ref",
            "dtype": "bf16" if use_ac else "f32", "solver": a.solver, "chains": chains,
            "shape": {"B": a.batch, "micro": micro, "T": a.T, "layers": model.cfg["layers"], "d": model.cfg["d"],
                      "H": model.cfg["heads"], "K": model.cfg["head_dim"]},
            "dense_dtype": a.dense_dtype if a.solver in ("cr", "scan_hs") else None,
            "device": device_name(dev), "date": time.strftime("%Y-%m-%d"), "commit": commit(), "tag": a.tag}
    out = open(a.out, "a") if a.out else None

    def emit(row):
        row = {**base, **row}
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
        print(json.dumps({k: v for k, v in row.items() if k not in ("shape", "device", "date", "commit", "op")}),
              flush=True)

    print(f"# {base['impl']} solver={a.solver} chains={chains} params={sum(p.numel() for p in model.parameters())} "
          f"steps {step0}..{a.steps} batch {a.batch} (micro {micro}) T {a.T} on {base['device']}", flush=True)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    stop = min(a.steps, a.stop_after or a.steps)
    times, losses, t_start = [], [], time.time()

    def run_so_far():
        peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0
        return {"steady_s": before["steady_s"] + times[a.warm_steps:], "wall_s": before["wall_s"] + time.time() - t_start,
                "peak_mem_bytes": max(before["peak_mem_bytes"], peak), "parts": before["parts"] + 1}

    val_loss = None
    step = step0
    for step in range(step0, stop):
        t0 = time.perf_counter()
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        offs = data.batch_offsets(tr.n, a.T, a.batch, step, a.seed)
        loss_sum = 0.0
        for m in range(n_micro):
            x, y = tr.get(offs[m * micro:(m + 1) * micro], a.T)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_ac):
                logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)) / n_micro
            loss.backward()
            loss_sum += loss.detach()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip) if a.clip else torch.zeros(())
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_v = float(loss_sum)  # syncs: the step's time is the whole step
        dt = time.perf_counter() - t0
        if not math.isfinite(loss_v):
            emit({"kind": "error", "step": step + 1, "loss": loss_v, "msg": "non-finite loss"})
            break
        times.append(dt)
        losses.append(loss_v)
        if (step + 1) % a.log_every == 0 or step == step0:
            emit({"kind": "train", "step": step + 1, "loss": loss_v, "lr": lr, "grad_norm": float(gnorm),
                  "ms": dt * 1e3, "tokens_per_s": a.batch * a.T / dt})
        if (step + 1) % a.eval_every == 0 or step + 1 == stop:
            val_loss = evaluate(model, va, a, dev, use_ac)
            emit({"kind": "eval", "step": step + 1, "val_loss": val_loss, "val_ppl": math.exp(val_loss)})
        if a.ckpt and a.ckpt_every and (step + 1) % a.ckpt_every == 0:
            save_ckpt(a.ckpt, model, opt, step + 1, a, run_so_far())
        if a.max_seconds and time.time() - t_start > a.max_seconds:
            print(f"# stopping after {time.time() - t_start:.0f} s (--max-seconds)", flush=True)
            if (step + 1) % a.eval_every:
                val_loss = evaluate(model, va, a, dev, use_ac)
                emit({"kind": "eval", "step": step + 1, "val_loss": val_loss, "val_ppl": math.exp(val_loss)})
            break
    last = step + 1
    run = run_so_far()
    if a.ckpt:
        save_ckpt(a.ckpt, model, opt, last, a, run)
    steady = run["steady_s"] or times
    med = statistics.median(steady) if steady else float("nan")
    summary = {"kind": "summary", "step": last, "steps_timed": len(steady), "ms": med * 1e3, "floor_ms": None,
               "peak_mem_bytes": run["peak_mem_bytes"] if dev.type == "cuda" else None, "relerr": None,
               "tokens_per_s": a.batch * a.T / med, "loss": losses[-1] if losses else None, "val_loss": val_loss,
               "val_ppl": math.exp(val_loss) if val_loss is not None else None,
               "wall_s": run["wall_s"], "parts": run["parts"]}
    emit(summary)
    if out:
        out.close()
    return summary


if __name__ == "__main__":
    train(parse())
