"""PyTorch peers of bench/cuda_proj.cu on the same shapes: the Gated DeltaNet input projections
(d = 2048, 16 heads of 128: q, k SiLU + L2 per head, v SiLU, g, beta sigmoid, a decay gate;
N = 8224) as layer code runs them - one nn.Linear per projection, then its activation and
norm kernels (peer:torch_unfused) - and the concatenated GEMM + activations under
torch.compile (peer:torch_compiled); the output chain RMSNorm-gate + o_proj (eager, compiled).
Forward and forward+backward. Appends rows to bench/results/cuda_proj.jsonl.
PROJ_PEER_COMPILE=0 skips torch.compile (its compile time dominates a short run)."""
import json, os, time, torch
import torch.nn.functional as F

dev = torch.device("cuda")
NAME = torch.cuda.get_device_name(0)
DATE = time.strftime("%Y-%m-%d", time.gmtime())
COMMIT = os.environ.get("SSM_COMMIT", "unknown")
COMPILE = os.environ.get("PROJ_PEER_COMPILE", "1") != "0"
OUT = open("bench/results/cuda_proj.jsonl", "a")


def timeit(fn, reps=10):
    fn(); fn(); torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]


def row(op, impl, dt, shape, ms):
    OUT.write(json.dumps({"op": op, "impl": impl, "backend": "torch", "dtype": dt, "shape": shape, "ms": round(ms, 5),
                          "floor_ms": None, "peak_mem_bytes": None, "relerr": None, "device": NAME, "date": DATE,
                          "commit": COMMIT}) + "\n"); OUT.flush()


D, H, HD = 2048, 16, 128
WID = [D, D, D, D, H, H]


def proj_unfused(x, Ws, bias_a, A_log):
    q = F.normalize(F.silu(F.linear(x, Ws[0])).view(-1, H, HD), dim=-1, eps=1e-6).view(-1, D)
    k = F.normalize(F.silu(F.linear(x, Ws[1])).view(-1, H, HD), dim=-1, eps=1e-6).view(-1, D)
    v = F.silu(F.linear(x, Ws[2]))
    g = F.linear(x, Ws[3])
    beta = torch.sigmoid(F.linear(x, Ws[4]))
    a = -A_log.exp() * F.softplus(F.linear(x, Ws[5]) + bias_a)
    return q, k, v, g, beta, a


def proj_concat(x, W, bias_a, A_log):
    z = F.linear(x, W)
    q, k, v, g, b, a = z.split(WID, dim=-1)
    q = F.normalize(F.silu(q).view(-1, H, HD), dim=-1, eps=1e-6).view(-1, D)
    k = F.normalize(F.silu(k).view(-1, H, HD), dim=-1, eps=1e-6).view(-1, D)
    return q, k, F.silu(v), g, torch.sigmoid(b), -A_log.exp() * F.softplus(a + bias_a)


def outchain(o, g, w, Wo):
    M = o.shape[0]
    n = o.view(M, H, HD).float()
    n = (n * torch.rsqrt(n.pow(2).mean(-1, keepdim=True) + 1e-6)).to(o.dtype).view(M, D)
    return F.linear(n * w.repeat(H) * F.silu(g), Wo)


def fwdbwd(fn, args, grads):
    outs = fn(*args)
    torch.autograd.backward(outs, grads)


def rows(M, compiled):
    dt, tdt = "bf16", torch.bfloat16
    shape = {"M": M, "d": D, "N": sum(WID)}
    x = torch.randn(M, D, device=dev, dtype=tdt, requires_grad=True)
    W = (torch.randn(sum(WID), D, device=dev, dtype=tdt) * 0.02).requires_grad_()
    Ws = [w.detach().clone().requires_grad_() for w in W.split(WID, 0)]
    ba = torch.randn(H, device=dev, dtype=tdt, requires_grad=True)
    al = torch.randn(H, device=dev, dtype=tdt, requires_grad=True)
    grads = [torch.randn(M, w, device=dev, dtype=tdt) for w in WID]
    if not compiled:
        with torch.no_grad():
            f = timeit(lambda: proj_unfused(x, Ws, ba, al))
        fb = timeit(lambda: fwdbwd(proj_unfused, (x, Ws, ba, al), grads))
        print(f"  torch unfused   proj bf16 M{M}: fwd {f:8.3f} ms  fwd+bwd {fb:8.3f} ms", flush=True)
        row("proj_fwd", "peer:torch_unfused", dt, shape, f); row("proj_fwdbwd", "peer:torch_unfused", dt, shape, fb)
    else:
        cf = torch.compile(proj_concat)
        with torch.no_grad():
            f = timeit(lambda: cf(x, W, ba, al))
        fb = timeit(lambda: fwdbwd(cf, (x, W, ba, al), grads))
        print(f"  torch compiled  proj bf16 M{M}: fwd {f:8.3f} ms  fwd+bwd {fb:8.3f} ms", flush=True)
        row("proj_fwd", "peer:torch_compiled", dt, shape, f); row("proj_fwdbwd", "peer:torch_compiled", dt, shape, fb)
    del x, W, Ws, grads
    o = torch.randn(M, D, device=dev, dtype=tdt, requires_grad=True)
    g = (torch.randn(M, D, device=dev, dtype=tdt) * 2).requires_grad_()
    w = torch.randn(HD, device=dev, dtype=tdt, requires_grad=True)
    Wo = (torch.randn(D, D, device=dev, dtype=tdt) * 0.03).requires_grad_()
    gy = torch.randn(M, D, device=dev, dtype=tdt)
    oshape = {"M": M, "D": D, "hd": HD, "d_out": D}
    if not compiled:
        with torch.no_grad():
            f = timeit(lambda: outchain(o, g, w, Wo))
        fb = timeit(lambda: fwdbwd(outchain, (o, g, w, Wo), [gy]))
        print(f"  torch unfused   outchain bf16 M{M}: fwd {f:8.3f} ms  fwd+bwd {fb:8.3f} ms", flush=True)
        row("outchain_fwd", "peer:torch_unfused", dt, oshape, f); row("outchain_fwdbwd", "peer:torch_unfused", dt, oshape, fb)
    else:
        co = torch.compile(outchain)
        with torch.no_grad():
            f = timeit(lambda: co(o, g, w, Wo))
        fb = timeit(lambda: fwdbwd(co, (o, g, w, Wo), [gy]))
        print(f"  torch compiled  outchain bf16 M{M}: fwd {f:8.3f} ms  fwd+bwd {fb:8.3f} ms", flush=True)
        row("outchain_fwd", "peer:torch_compiled", dt, oshape, f); row("outchain_fwdbwd", "peer:torch_compiled", dt, oshape, fb)
    del o, g, w, Wo, gy

# eager first (every M), then torch.compile at the largest M (its compile time dominates)
for M in (2048, 8192, 32768):
    rows(M, False)
if COMPILE:
    rows(32768, True)
OUT.close()
