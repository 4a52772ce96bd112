"""Plots and the summary table of deltanet_train JSON lines (matplotlib):
  python plot.py bench/results/deltanet/deltanet_train.jsonl bench/results/deltanet
writes deltanet_loss.png (train and validation loss vs step, every solver on one chart) and
deltanet_speed_mem.png (tokens/s and peak memory as bars), and prints a markdown table with
validation perplexity at the last step every solver reached (equal steps) and at each one's end.
Rows tagged "probe" are left out."""
import collections
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["delta", "fla", "cr", "scan_hs", "torch"]
LABEL = {"delta": "(a) ssmh delta rule, chunked", "cr": "(b) ssmh linrec cr (dense)",
         "scan_hs": "(c) ssmh linrec scan_hs (dense)", "fla": "(d) fla chunk_delta_rule", "torch": "torch loop"}


def main(path, outdir):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows if r.get("tag") != "probe" and r.get("op") == "deltanet_train"]
    train, evals, summ = collections.defaultdict(list), collections.defaultdict(list), {}
    for r in rows:
        s = r["solver"]
        if r["kind"] == "train":
            train[s].append((r["step"], r["loss"]))
        elif r["kind"] == "eval":
            evals[s].append((r["step"], r["val_loss"], r["val_ppl"]))
        elif r["kind"] == "summary":
            summ[s] = r
    solvers = [s for s in ORDER if s in summ or s in train]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, s in enumerate(solvers):
        c = f"C{i}"
        if train[s]:
            x, y = zip(*sorted(dict(train[s]).items()))
            ax.plot(x, y, color=c, lw=1, alpha=0.6, label=f"{LABEL[s]} train")
        if evals[s]:
            x, y, _ = zip(*sorted({e[0]: e for e in evals[s]}.values()))
            ax.plot(x, y, "o-", color=c, ms=3, lw=1.5, label=f"{LABEL[s]} val")
    ax.set_xlabel("step (32 x 2048 tokens)")
    ax.set_ylabel("loss (nats / byte)")
    devs = sorted({r["device"] for r in summ.values()})
    commits = sorted({r["commit"] for r in summ.values()})
    ax.set_title(f"DeltaNet 6x256 on the KJV, bytes; {', '.join(devs)}, commit {', '.join(commits)}")
    ax.set_ylim(top=min(3.0, ax.get_ylim()[1]))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "deltanet_loss.png"), dpi=120)

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    names = [s for s in solvers if s in summ]
    lab = [LABEL[s].split(" ", 1)[0] + "\n" + s for s in names]
    tps = [summ[s]["tokens_per_s"] / 1e3 for s in names]
    mem = [(summ[s]["peak_mem_bytes"] or 0) / 2 ** 30 for s in names]
    a1.bar(lab, tps, color=[f"C{solvers.index(s)}" for s in names])
    a1.set_ylabel("k tokens / s (median after warm-up)")
    for i, v in enumerate(tps):
        a1.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
    a2.bar(lab, mem, color=[f"C{solvers.index(s)}" for s in names])
    a2.set_ylabel("peak GPU memory (GiB)")
    for i, v in enumerate(mem):
        a2.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    micro = {s: summ[s]["shape"]["micro"] for s in names}
    fig.suptitle("micro-batches: " + ", ".join(f"{s} {m}" for s, m in micro.items()), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "deltanet_speed_mem.png"), dpi=120)

    steps = [set(e[0] for e in evals[s]) for s in names if evals[s]]
    common = max(set.intersection(*steps)) if steps and set.intersection(*steps) else 0
    print(f"| solver | impl | chains | micro | steps | ms/step | tokens/s | peak GiB | val ppl @ {common} | "
          "val ppl @ end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in names:
        r = summ[s]
        at = {e[0]: e[2] for e in evals[s]}
        print(f"| {s} | {r['impl']} | {r['chains']} | {r['shape']['micro']} | {r['step']} | {r['ms']:.1f} | "
              f"{r['tokens_per_s']:.0f} | {(r['peak_mem_bytes'] or 0) / 2 ** 30:.2f} | "
              f"{at.get(common, float('nan')):.3f} | {r['val_ppl']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(sys.argv[1]))
