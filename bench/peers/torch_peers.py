"""PyTorch peers for bench-cuda, what a researcher writes today, on the same shapes: sequential
loop, Hillis-Steele scan, Blelloch scan and cyclic reduction with torch.bmm, the naive einsum decay scan and a
chunked PyTorch decay scan. Appends peer rows to bench/results/cuda_*.jsonl and prints
one side-by-side table with our rows of this run (speedup = peer ms / our best ms)."""
import json, os, sys, time, torch

dev = torch.device("cuda")
NAME = torch.cuda.get_device_name(0)
DATE = time.strftime("%Y-%m-%d", time.gmtime())
COMMIT = os.environ.get("SSM_COMMIT", "unknown")
DT = {"f16": torch.float16, "f32": torch.float32, "bf16": torch.bfloat16}


def timeit(fn, reps=10):
    fn(); torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
        if i == 2 and ts[-1] > 1000: break
    ts.sort(); return ts[len(ts) // 2]


def peak(fn):
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    fn(); torch.cuda.synchronize(); return torch.cuda.max_memory_allocated() - base


def lr_seq(A, b):
    S, T, n, _ = A.shape; h = torch.zeros_like(b[:, 0]); out = []
    for t in range(T):
        h = torch.bmm(A[:, t], h) + b[:, t]; out.append(h)
    return torch.stack(out, 1)


def lr_hs(A, b):
    M, v = A.clone(), b.clone(); T = A.shape[1]; d = 1
    while d < T:
        v2 = v.clone(); v2[:, d:] = v[:, d:] + torch.matmul(M[:, d:], v[:, :-d])
        M2 = M.clone(); M2[:, d:] = torch.matmul(M[:, d:], M[:, :-d])
        M, v, d = M2, v2, d * 2
    return v


def lr_blelloch(A, b):
    # Blelloch / Brent-Kung in place at stride 2^l (the library's method): up-sweep k = 2s-1 (mod 2s):
    # v_k += M_k v_{k-s}, M_k = M_k M_{k-s}; down-sweep k = 3s-1 (mod 2s): v_k += M_k v_{k-s}
    M, v = A.clone(), b.clone(); T = A.shape[1]; s = 1; top = 0
    while 2 * s <= T:
        Mk = M[:, 2 * s - 1::2 * s]; c = Mk.shape[1]
        vp, Mp = v[:, s - 1::2 * s][:, :c], M[:, s - 1::2 * s][:, :c]
        v[:, 2 * s - 1::2 * s] = v[:, 2 * s - 1::2 * s] + torch.matmul(Mk, vp)
        M[:, 2 * s - 1::2 * s] = torch.matmul(Mk, Mp)
        top, s = s, s * 2
    s = top
    while s >= 1:
        if 3 * s - 1 < T:
            c = v[:, 3 * s - 1::2 * s].shape[1]
            v[:, 3 * s - 1::2 * s] = v[:, 3 * s - 1::2 * s] + torch.matmul(M[:, 3 * s - 1::2 * s], v[:, 2 * s - 1::2 * s][:, :c])
        s //= 2
    return v


def lr_cr(A, b):
    T = A.shape[1]
    if T == 1: return b
    if T % 2: # pad to even with identity steps at the end
        S, _, n, _ = A.shape
        A = torch.cat([A, torch.eye(n, dtype=A.dtype, device=A.device).expand(S, 1, n, n)], 1)
        b = torch.cat([b, torch.zeros_like(b[:, :1])], 1)
    Ae, Ao, be, bo = A[:, 0::2], A[:, 1::2], b[:, 0::2], b[:, 1::2]
    A2 = torch.matmul(Ao[:, 1:], Ae[:, 1:]) if Ao.shape[1] > 1 else Ao[:, 1:]
    b2 = torch.matmul(Ao, be) + bo
    A2 = torch.cat([Ao[:, :1] * 0, A2], 1)  # first odd step starts from h_0 = b_0 (h_{-1} = 0)
    b2[:, 0] = torch.matmul(Ao[:, 0], be[:, 0]) + bo[:, 0]
    ho = lr_cr(A2, b2)
    he = be.clone(); he[:, 1:] = torch.matmul(Ae[:, 1:], ho[:, :-1]) + be[:, 1:]
    h = torch.stack([he, ho], 2).flatten(1, 2)
    return h[:, :T]


def dk_einsum(cA, x):
    logM = cA.unsqueeze(2) - cA.unsqueeze(1)  # (B, T, T, D): t, j
    T = cA.shape[1]
    mask = torch.tril(torch.ones(T, T, device=cA.device, dtype=torch.bool)).unsqueeze(0).unsqueeze(-1)
    M = torch.exp(logM.masked_fill(~mask, float("-inf")))
    return torch.einsum("btjr,bjrc->btrc", M, x)


def dk_chunked(cA, x, L=64):
    B, T, R, C = x.shape; nc = T // L
    a = cA.view(B, nc, L, R); xx = x.view(B, nc, L, R, C)
    logM = a.unsqueeze(3) - a.unsqueeze(2)
    mask = torch.tril(torch.ones(L, L, device=x.device, dtype=torch.bool)).view(1, 1, L, L, 1)
    M = torch.exp(logM.masked_fill(~mask, float("-inf")))
    local = torch.einsum("bntjr,bnjrc->bntrc", M, xx)
    start = torch.cat([torch.zeros_like(a[:, :1, :1]), a[:, :-1, -1:]], 1)  # cA before each chunk
    h = torch.zeros(B, R, C, device=x.device, dtype=x.dtype); outs = []
    for k in range(nc):
        dec = torch.exp(a[:, k] - start[:, k])  # (B, L, R)
        outs.append(local[:, k] + dec.unsqueeze(-1) * h.unsqueeze(1))
        h = outs[-1][:, -1]
    return torch.stack(outs, 1).view(B, T, R, C)


def grid_seqs(dt, T, n):  # bench/cuda_common.h's grid_seqs: S so that A holds >= 256 MB
    per = T * n * n * (4 if dt == "f32" else 2)
    return ((256 << 20) + per - 1) // per


def grid_shapes():
    """cuda_bench.cu's grid_rows, the same shapes in the same order (BENCH_GRID_DT / _N / _T / _MAT pick a part)."""
    pick = {k: int(os.environ[f"BENCH_GRID_{k}"]) for k in ("DT", "N", "T", "MAT") if os.environ.get(f"BENCH_GRID_{k}")}
    def want(**kv): return all(pick.get(k, v) == v for k, v in kv.items())
    for di, dt in enumerate(("f16", "bf16", "f32")):
        for n in (32, 64, 128):
            for T in (1024, 2048, 4096, 8192):
                for mi in (0, 1):
                    if want(DT=di, N=n, T=T, MAT=mi): yield (grid_seqs(dt, T, n), T, n, dt, n if mi else 1)
        if want(DT=di, N=64, T=8192, MAT=0): yield (1, 8192, 64, dt, 1)
        if di == 0 and want(DT=di, N=64, T=4096, MAT=0): yield (16, 4096, 64, dt, 1)


def targets(ours, peers):
    """The grid's targets, from this run's rows: auto's floor ratio, each scan method against its PyTorch
    counterpart (peer ms / ours), and backward over forward."""
    def one(impl, op, shape, dt, rows):
        r = [x for x in rows if x["impl"] == impl and x["op"] == op and x["shape"] == shape and x["dtype"] == dt]
        return r[-1] if r else None
    print("\n== targets (auto x floor <= 2.5; cr / blelloch / scan_hs >= 5x PyTorch's; bwd / fwd <= 1.5)")
    print(f"  {'dt':4s} {'shape':36s} {'auto':>7s} {'->':9s} {'xfloor':>6s} {'cr':>6s} {'blell':>6s} {'hs':>6s}  bwd/fwd auto cr blell hs")
    seen = []
    for p in peers:
        key = (p["dtype"], json.dumps(p["shape"]))
        if key in seen: continue
        seen.append(key)
        dt, sh = p["dtype"], p["shape"]
        a = one("ours:auto", "linrec", sh, dt, ours)
        if not a: continue
        def vs(meth, peer):
            o, q = one("ours:" + meth, "linrec", sh, dt, ours), one("peer:" + peer, "linrec", sh, dt, peers)
            return f"{q['ms'] / o['ms']:6.2f}" if o and q else "     -"
        def bf(meth):
            f, b = one("ours:" + meth, "linrec", sh, dt, ours), one("ours:" + meth, "linrec_bwd", sh, dt, ours)
            return f"{b['ms'] / f['ms']:.2f}" if f and b else "-"
        print(f"  {dt:4s} {json.dumps(sh):36s} {a['ms']:7.3f} {a.get('resolved', ''):9s} {a['ms'] / a['floor_ms']:6.2f} "
              f"{vs('cr', 'torch_cr')} {vs('blelloch', 'torch_blelloch')} {vs('scan_hs', 'torch_scan_hs')}  "
              f"{bf('auto')} {bf('cr')} {bf('blelloch')} {bf('scan_hs')}")


def main():
    rows = []
    jl = open("bench/results/cuda_linrec.jsonl", "a"); jd = open("bench/results/cuda_decay.jsonl", "a")
    def emit(f, op, impl, dt, shape, ms, mem):
        r = dict(op=op, impl="peer:" + impl, backend="torch", dtype=dt, shape=shape, ms=ms, floor_ms=None,
                 peak_mem_bytes=mem, relerr=None, device=NAME, date=DATE, commit=COMMIT)
        f.write(json.dumps(r) + "\n"); f.flush(); rows.append(r)
        print(f"  peer {op:7s} {impl:15s} {dt:4s} {shape} {ms:9.3f} ms  peak {mem/1e6:8.1f} MB", flush=True)
    torch.manual_seed(0)
    # the scan peers against the loop on a small shape (a peer that is wrong would be timed for nothing)
    A = (torch.rand(2, 37, 8, 8, device=dev) - 0.5).mul(0.6); b = torch.randn(2, 37, 8, 3, device=dev); ref = lr_seq(A, b)
    for name, fn in [("torch_cr", lr_cr), ("torch_blelloch", lr_blelloch), ("torch_scan_hs", lr_hs)]:
        err = (fn(A, b) - ref).abs().max().item()
        if err > 1e-4: sys.exit(f"peer {name} disagrees with the loop: max |diff| {err:.2e}")
    # PEER_LINREC="S:T:n:dt[:m],...": those linrec shapes only (no decay rows), e.g. beside `cuda_bench narrow`;
    # m columns of the state (default 1; m = n: matrix states, as `cuda_bench cr` runs them)
    only = [tuple(x if i == 3 else int(x) for i, x in enumerate(f.split(":"))) for f in os.environ.get("PEER_LINREC", "").split(",") if f]
    only = [o if len(o) == 5 else o + (1,) for o in only]
    # PEER_DECAY=1: the decay rows alone (beside `cuda_bench decay`)
    decay_only = os.environ.get("PEER_DECAY") == "1"
    # PEER_GRID=1: cuda_bench's dense-recurrence grid (`cuda_bench grid`), no decay rows
    if os.environ.get("PEER_GRID") == "1": only = list(grid_shapes())
    for (S, T, n, dt, m) in only or ([] if decay_only else [(16, 4096, 64, "f16", 1), (1, 8192, 64, "f16", 1), (128, 1024, 32, "f16", 1), (32, 1024, 64, "f16", 1), (8, 1024, 128, "f16", 1)]):
        A = (torch.rand(S, T, n, n, device=dev) - 0.5).mul(1.8 / n ** 0.5).to(DT[dt]); b = torch.randn(S, T, n, m, device=dev, dtype=DT[dt])
        shape = dict(S=S, T=T, n=n, m=m)
        for name, fn in [("torch_cr", lr_cr), ("torch_blelloch", lr_blelloch), ("torch_scan_hs", lr_hs), ("torch_seq", lr_seq)]:
            try:
                ms = timeit(lambda: fn(A, b), 3 if name == "torch_seq" else 10); mem = peak(lambda: fn(A, b))
                emit(jl, "linrec", name, dt, shape, ms, mem)
            except torch.OutOfMemoryError:
                print(f"  peer {name} {shape}: out of memory"); torch.cuda.empty_cache()
        del A, b; torch.cuda.empty_cache()
    for (B, T, D, dt) in [] if only else [(8, 4096, 64, "f32"), (2, 1024, 64, "f32"), (8, 4096, 64, "f16"), (2, 1024, 64, "bf16"),
                                          (1, 65536, 64, "f16"), (1, 65536, 64, "f32")]:
        x = torch.randn(B, T, D, D, device=dev, dtype=DT[dt]); cA = torch.cumsum(-0.05 * torch.rand(B, T, D, device=dev), 1).to(DT[dt])
        shape = dict(B=B, T=T, D=D)
        for name, fn in [("torch_chunked", dk_chunked), ("nanossm_einsum", dk_einsum)]:
            if name == "nanossm_einsum" and B * T * T * D * 4 > 8e9:
                print(f"  peer {name} {shape}: skipped, its (B,T,T,D) decay matrix needs {B*T*T*D*4/1e9:.0f} GB"); continue
            try:
                ms = timeit(lambda: fn(cA, x)); mem = peak(lambda: fn(cA, x))
                emit(jd, "decay", name, dt, shape, ms, mem)
            except torch.OutOfMemoryError:
                print(f"  peer {name} {shape}: out of memory"); torch.cuda.empty_cache()
        del x, cA; torch.cuda.empty_cache()
    # side by side: our rows of this commit vs peers
    ours = []
    for fn in ("bench/results/cuda_linrec.jsonl", "bench/results/cuda_decay.jsonl"):
        for line in open(fn):
            r = json.loads(line)
            if r["impl"].startswith("ours") and r.get("commit") == COMMIT and r["op"] in ("linrec", "linrec_bwd", "decay"): ours.append(r)
    if os.environ.get("PEER_GRID") == "1": return targets(ours, rows)
    print("\n== side by side (speedup = peer ms / our ms)")
    for p in rows:
        mine = [r for r in ours if r["op"] == p["op"] and r["dtype"] == p["dtype"] and r["shape"] == p["shape"]]
        for r in sorted(mine, key=lambda r: r["ms"]):
            print(f"  {p['op']:6s} {p['dtype']:4s} {json.dumps(p['shape']):40s} {r['impl']:15s} {r['ms']:9.3f} ms (floor x{r['ms']/r['floor_ms']:.2f})"
                  f"  vs {p['impl']:20s} {p['ms']:9.3f} ms: {p['ms']/r['ms']:7.2f}x")


if __name__ == "__main__":
    main()
