"""fla peer for the delta-rule benchmark: chunk_delta_rule / chunk_gated_delta_rule forward and
forward+backward, and the one-token decode through fused_recurrent_delta_rule, on the shapes of
bench/cuda_delta.cu (bf16). Prints one JSON row per measurement (the row format of bench/bench.h), impl peer:fla.
Usage: python3 fla_peer.py [fwd|all]   (needs fla-core, carried as a wheel)
       python3 fla_peer.py --from DIR     the inputs bench/cuda_delta.cu wrote (same inputs, same
                                          run): fla's rows beside ours, ratio fla/ours, JSON rows
                                          appended to bench/results/cuda_delta.jsonl
FLA_PEER_ONLY=REGEX times only the ops it matches in full (e.g. 'gated_delta_fwdbwd').
FLA_PEER_UNGUARDED=1 lifts fla's refusal of its gated backward on Hopper with Triton 3.4-3.7.0
(fla issue 640: that Triton may compute it wrongly there); the row then times the same kernels
fla would launch, marked "note": "triton guard lifted"."""
import json, os, re, sys, time, torch
import torch.nn.functional as F
from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

dev = torch.device("cuda")
NAME = torch.cuda.get_device_name(0)
DATE = time.strftime("%Y-%m-%d", time.gmtime())
COMMIT = os.environ.get("SSM_COMMIT", "unknown")
ONLY = os.environ.get("FLA_PEER_ONLY")
UNGUARDED = os.environ.get("FLA_PEER_UNGUARDED") == "1"
if UNGUARDED:
    import fla.ops.common.chunk_o as _chunk_o
    _chunk_o.TRITON_ABOVE_3_7_1 = True  # the guard's flag, read at call time
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


def from_dir(d):
    import numpy as np
    from fla.ops.gated_delta_product import chunk_gated_delta_product
    ours, inputs = {}, []
    for l in open(os.path.join(d, "ours.jsonl")):
        r = json.loads(l)
        if "input" in r: inputs.append(r)
        else: ours[(r["op"], json.dumps(r["shape"], sort_keys=True))] = r["ms"]
    out = open("bench/results/cuda_delta.jsonl", "a")
    print("%-26s %-56s %9s %9s %8s" % ("op", "shape", "ours ms", "fla ms", "fla/ours"))
    def rowp(op, shape, ms):
        r = {"op": op, "impl": "peer:fla", "backend": "torch", "dtype": "bf16", "shape": shape, "ms": ms,
             "floor_ms": None, "peak_mem_bytes": None, "relerr": None, "device": NAME, "date": DATE, "commit": COMMIT}
        if UNGUARDED and op.startswith("gated") and op.endswith("fwdbwd"): r["note"] = "triton guard lifted"
        out.write(json.dumps(r) + "\n"); out.flush()
        o = ours.get((op, json.dumps(shape, sort_keys=True)))
        print("%-26s %-56s %9s %9.4f %8s" % (op, json.dumps(shape), "%.4f" % o if o else "-", ms,
              "%.2f" % (ms / o) if o else "-"), flush=True)
    for inp in inputs:
        B, T, H, D, nh, shape = inp["B"], inp["T"], inp["H"], inp["D"], inp["nh"], inp["shape"]
        raw = np.fromfile(inp["input"], dtype=np.uint16)
        n, nk = B * T * H * D, B * T * H * nh * D
        sizes = [n, nk, nk, B * T * H * nh, B * T * H, n]
        ts, o = [], 0
        for s in sizes:
            ts.append(torch.from_numpy(raw[o:o + s].astype(np.int16)).view(torch.bfloat16).to(dev)); o += s
        q = ts[0].view(B, T, H, D)
        # k, v, beta as the library's bench holds them: fla's interleaved layout [B, T n_h, H, D]
        k, v = ts[1].view(B, T * nh, H, D), ts[2].view(B, T * nh, H, D)
        beta, g, do = ts[3].view(B, T * nh, H), ts[4].view(B, T, H).float(), ts[5].view(B, T, H, D)
        cu = torch.tensor(inp["cu"], dtype=torch.long, device=dev) if inp["cu"] else None
        for gated in (0, 1):
            def fwd():
                if nh > 1:
                    return chunk_gated_delta_product(q, k, v, g if gated else None, beta, num_householder=nh,
                                                     scale=D ** -0.5, cu_seqlens=cu)[0]
                if gated: return chunk_gated_delta_rule(q, k, v, g, beta, scale=D ** -0.5, cu_seqlens=cu)[0]
                return chunk_delta_rule(q, k, v, beta, scale=D ** -0.5, cu_seqlens=cu)[0]
            base = ("gated_delta_product" if gated else "delta_product") if nh > 1 else ("gated_delta" if gated else "delta")
            want = lambda op: not ONLY or re.fullmatch(ONLY, op)
            if want(base + "_fwd"):
                try:
                    with torch.no_grad():
                        rowp(base + "_fwd", shape, timeit(fwd))
                except Exception as e:
                    print("# fla %s_fwd: %s" % (base, str(e).splitlines()[0] if str(e) else type(e).__name__), flush=True)
                    continue
            if not want(base + "_fwdbwd"): continue
            leaves = [q, k, v, beta] + ([g] if gated else [])
            for t in leaves: t.requires_grad_(True)
            def fb():
                for t in leaves: t.grad = None
                fwd().backward(do)
            try:
                rowp(base + "_fwdbwd", shape, timeit(fb))
            except Exception as e:  # e.g. fla refuses its gated backward on Triton < 3.7.1 on Hopper (fla #640)
                print("# fla %s_fwdbwd: %s" % (base, str(e).splitlines()[0] if str(e) else type(e).__name__), flush=True)
            for t in leaves: t.requires_grad_(False)
        del q, k, v, beta, g, do, ts, raw
        torch.cuda.empty_cache()
        os.remove(inp["input"])
    if not ONLY or re.fullmatch(ONLY, "delta_decode"): decode(rowp)


def decode(rowp):
    B, H, D = 64, 16, 128
    q = torch.randn(B, 1, H, D, device=dev, dtype=torch.bfloat16)
    k = F.normalize(torch.randn(B, 1, H, D, device=dev), dim=-1).bfloat16()
    v = torch.randn(B, 1, H, D, device=dev, dtype=torch.bfloat16)
    beta = torch.rand(B, 1, H, device=dev).bfloat16()
    h0 = torch.randn(B, H, D, D, device=dev, dtype=torch.float32)
    with torch.no_grad():
        rowp("delta_decode", {"B": B, "T": 1, "H": H, "K": D, "V": D},
             timeit(lambda: fused_recurrent_delta_rule(q, k, v, beta, scale=D ** -0.5, initial_state=h0,
                                                       output_final_state=True), 50))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--from":
        return from_dir(sys.argv[2])
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
