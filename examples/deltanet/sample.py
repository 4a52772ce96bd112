"""Text from a checkpoint: greedy (--top-k 1) or top-k sampling from a prompt.

  python sample.py --ckpt ckpt.pt --prompt "In the beginning" --n 400 --top-k 5 --seed 0

Each new byte re-reads the last T bytes (any solver works; the model has no decode cache)."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import load_model  # noqa: E402


@torch.no_grad()
def generate(model, prompt, n, top_k=1, temperature=1.0, T=2048, seed=0, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    ids = list(prompt.encode("utf-8", "replace"))
    use_ac = torch.device(device).type == "cuda"
    model.eval()
    for _ in range(n):
        x = torch.tensor([ids[-T:]], device=device)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=use_ac):
            logits = model(x)[0, -1].float() / max(temperature, 1e-6)
        if top_k <= 1:
            nxt = int(logits.argmax())
        else:
            v, i = logits.topk(top_k)
            nxt = int(i[torch.multinomial(torch.softmax(v, -1), 1, generator=g)])
        ids.append(nxt)
    return bytes(ids).decode("utf-8", "replace")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--prompt", default="In the beginning")
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--top-k", type=int, default=1)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--solver", default=None, help="override the checkpoint's solver (same weights)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    model, ck = load_model(a.ckpt, a.device, a.solver)
    print(f"# {a.ckpt}: solver {model.solver}, step {ck['step']}, top-k {a.top_k}, seed {a.seed}")
    print(generate(model, a.prompt, a.n, a.top_k, a.temperature, ck["args"]["T"], a.seed, a.device))


if __name__ == "__main__":
    main()
