"""fla peer for the delta-rule benchmark: chunk_delta_rule / chunk_gated_delta_rule forward and
forward+backward, and the one-token decode through fused_recurrent_delta_rule, on the shapes of
issue #12 (bf16). Prints one JSON row per measurement (BENCH.md), impl peer:fla.
Usage: python3 fla_peer.py [fwd|all]   (needs fla-core, carried as a wheel)"""
import json, os, sys, time, torch
import torch.nn.functional as F
from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

dev = torch.device("cuda")
NAME = torch.cuda.get_device_name(0)
DATE = time.strftime("%Y-%m-%d", time.gmtime())
COMMIT = os.environ.get("SSM_COMMIT", "unknown")
SHAPES = [(8, 4096, 16, 64, 0), (4, 8192, 16, 128, 0), (1, 32768, 32, 128, 0), (1, 32768, 32, 128, 8), (32, 2048, 8, 32, 0)]


def timeit(fn, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]


def row(op, shape, ms):
    print(json.dumps({"op": op, "impl": "peer:fla", "backend": "torch", "dtype": "bf16", "shape": shape, "ms": ms,
                      "floor_ms": None, "peak_mem_bytes": None, "relerr": None, "device": NAME, "date": DATE,
                      "commit": COMMIT}), flush=True)


def main():
    torch.manual_seed(0)
    pick = os.environ.get("FLA_SHAPES")  # e.g. "2,3,4": a subset of SHAPES (indices)
    shapes = [SHAPES[int(i)] for i in pick.split(",")] if pick else SHAPES
    for B, T, H, D, seqs in shapes:
        dt = torch.bfloat16
        q = torch.randn(B, T, H, D, device=dev, dtype=dt)
        k = F.normalize(torch.randn(B, T, H, D, device=dev, dtype=torch.float32), dim=-1).to(dt)
        v = torch.randn(B, T, H, D, device=dev, dtype=dt)
        beta = (0.05 + 0.95 * torch.rand(B, T, H, device=dev)).to(dt)
        g = -0.5 * torch.rand(B, T, H, device=dev, dtype=torch.float32)
        do = torch.randn(B, T, H, D, device=dev, dtype=dt)
        cu = None
        shape = {"B": B, "T": T, "H": H, "K": D, "V": D}
        if seqs:
            c = [T * i // seqs + ((1000 if i % 2 else -1000) if 0 < i < seqs else 0) for i in range(seqs + 1)]
            cu = torch.tensor(c, dtype=torch.long, device=dev)
            shape["seqs"] = seqs
        for gated in (0, 1):
            def fwd():
                if gated: return chunk_gated_delta_rule(q, k, v, g, beta, scale=D ** -0.5, cu_seqlens=cu)[0]
                return chunk_delta_rule(q, k, v, beta, scale=D ** -0.5, cu_seqlens=cu)[0]
            with torch.no_grad():
                row("gated_delta_fwd" if gated else "delta_fwd", shape, timeit(fwd))
            if len(sys.argv) > 1 and sys.argv[1] == "fwd": continue
            for t in (q, k, v, beta, g): t.requires_grad_(True)
            def fb():
                for t in (q, k, v, beta, g): t.grad = None
                fwd().backward(do)
            try:
                row("gated_delta_fwdbwd" if gated else "delta_fwdbwd", shape, timeit(fb))
            except RuntimeError as e:  # fla refuses its gated backward on Triton < 3.7.1 on Hopper (fla #640)
                print("# fla %s: %s" % ("gated_delta_fwdbwd", str(e).splitlines()[0]), flush=True)
            for t in (q, k, v, beta, g): t.requires_grad_(False)
        del q, k, v, beta, g, do
        torch.cuda.empty_cache()
    # decode: one token, B64 H16 D128, state in and out
    B, H, D = 64, 16, 128
    q = torch.randn(B, 1, H, D, device=dev, dtype=torch.bfloat16)
    k = F.normalize(torch.randn(B, 1, H, D, device=dev), dim=-1).bfloat16()
    v = torch.randn(B, 1, H, D, device=dev, dtype=torch.bfloat16)
    beta = torch.rand(B, 1, H, device=dev).bfloat16()
    h0 = torch.randn(B, H, D, D, device=dev, dtype=torch.float32)
    with torch.no_grad():
        row("delta_decode", {"B": B, "T": 1, "H": H, "K": D, "V": D},
            timeit(lambda: fused_recurrent_delta_rule(q, k, v, beta, scale=D ** -0.5, initial_state=h0,
                                                      output_final_state=True), 50))


if __name__ == "__main__":
    main()
