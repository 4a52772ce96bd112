"""GPU checks before training: (1) the solvers agree on one layer's recurrence, forward and
backward, against an f64 token loop; (2) the whole-step breakdown (recurrence, projections,
rest) on the training shapes; (3) a step-time probe of each solver in the full model.

  python check_solvers.py agree            # (1)
  python check_solvers.py breakdown OUT    # (2), rows appended to OUT
  python check_solvers.py probe OUT STEPS  # (3), train.py rows appended to OUT
  python check_solvers.py profile OUT      # (4) CUDA time per kernel over training steps, rows to OUT
"""
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402
from model import DeltaNetAttention, delta_torch, l2norm, recurrence  # noqa: E402

dev = torch.device("cuda")


def have_fla():
    try:
        import fla.ops.delta_rule  # noqa: F401
        return True
    except Exception as e:  # noqa: BLE001
        print(f"# fla not importable: {e}")
        return False


def inputs(B, T, H, K, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = l2norm(torch.randn(B, T, H, K, device=dev, generator=g, dtype=torch.float64)).to(dtype)
    k = l2norm(torch.randn(B, T, H, K, device=dev, generator=g, dtype=torch.float64)).to(dtype)
    v = torch.randn(B, T, H, K, device=dev, generator=g, dtype=torch.float64).to(dtype)
    beta = torch.sigmoid(torch.randn(B, T, H, device=dev, generator=g, dtype=torch.float64)).to(dtype)
    do = torch.randn(B, T, H, K, device=dev, generator=g, dtype=torch.float64).to(dtype)
    return [t.requires_grad_() for t in (q, k, v, beta)], do


def fwd_bwd(solver, xs, do, scale):
    xs = [t.detach().clone().requires_grad_() for t in xs]
    o = recurrence(solver, *xs, scale)
    (o.float() * do.float()).sum().backward()
    return [o.detach().double()] + [t.grad.double() for t in xs]


def agree():
    B, T, H, K = 2, 193, 8, 32  # a prime T: partial chunks everywhere
    solvers = ["delta", "cr", "scan_hs"] + (["fla"] if have_fla() else [])
    names = ["o", "dq", "dk", "dv", "dbeta"]
    ok = True
    for dtype, tol in ((torch.float32, 5e-3), (torch.bfloat16, 4e-2)):
        xs, do = inputs(B, T, H, K, torch.float64)
        ref = fwd_bwd("torch", xs, do, K ** -0.5)  # f64 token loop
        xs = [t.detach().to(dtype) for t in xs]
        for s in solvers:
            if s in ("cr", "scan_hs") and dtype != torch.float32:
                continue  # the dense path takes its own dtype (f32)
            try:
                got = fwd_bwd(s, xs, do.to(dtype), K ** -0.5)
            except Exception as e:  # noqa: BLE001
                print(f"FAIL {s} {dtype}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                ok = False
                continue
            errs = [float((g - r).norm() / r.norm()) for g, r in zip(got, ref)]
            good = max(errs) < tol
            ok &= good
            print(("ok  " if good else "FAIL") + f" {s:8s} {str(dtype)[6:]:9s} rel.err vs f64 loop: "
                  + " ".join(f"{n} {e:.1e}" for n, e in zip(names, errs)), flush=True)
    # one full layer (projections, conv, norms) under bf16 autocast: every solver vs the loop
    torch.manual_seed(0)
    layer = DeltaNetAttention(256, 8, 32).to(dev)
    x = torch.randn(2, 193, 256, device=dev)
    outs = {}
    for s in ["torch"] + solvers:
        layer.zero_grad()
        xx = x.clone().requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = layer(xx, s, "torch", torch.float32)
        y.float().square().sum().backward()
        outs[s] = (y.float(), xx.grad.clone(), layer.in_proj.grad.clone())
    for s in solvers:
        errs = [float((a - b).norm() / b.norm()) for a, b in zip(outs[s], outs["torch"])]
        good = max(errs) < 5e-2
        ok &= good
        print(("ok  " if good else "FAIL") + f" layer {s:8s} bf16 autocast vs loop: y {errs[0]:.1e} dx {errs[1]:.1e} "
              f"dW_in {errs[2]:.1e}", flush=True)
    print("agree:", "all ok" if ok else "SOME FAILED", flush=True)
    return ok


def cuda_ms(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def breakdown(out_path, micro=32):
    """Per-layer fwd+bwd of the recurrence alone and of the rest of the attention layer
    (projections, conv, norms, output chain; recurrence stubbed out), times 6 layers."""
    B, T, H, K, d = micro, 2048, 8, 32, 256
    rows = []
    solvers = ["delta"] + (["fla"] if have_fla() else [])
    xs, do = inputs(B, T, H, K, torch.bfloat16)
    xs = [t.detach().requires_grad_() for t in xs]

    def rec(s):
        def f():
            for t in xs:
                t.grad = None
            o = recurrence(s, *xs, K ** -0.5)
            o.backward(do)
        return f
    layer = DeltaNetAttention(d, H, K).to(dev)
    x = torch.randn(B, T, d, device=dev, requires_grad=True)
    import model as M
    real = M.recurrence

    def proj():
        M.recurrence = lambda s, q, k, v, beta, scale, dd: (q + k + v) * beta[..., None]  # stub
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = layer(x, "delta", "torch", torch.float32)
            y.backward(torch.ones_like(y))
        finally:
            M.recurrence = real
    p_ms = cuda_ms(proj)
    for s in solvers:
        r_ms = cuda_ms(rec(s))
        row = {"op": "deltanet_step_breakdown", "impl": train.IMPL[s], "solver": s, "backend": "cuda",
               "dtype": "bf16", "shape": {"B": B, "T": T, "H": H, "K": K, "d": d, "layers": 6},
               "recurrence_fwdbwd_ms_per_layer": r_ms, "attn_rest_fwdbwd_ms_per_layer": p_ms,
               "recurrence_ms_per_step": 6 * r_ms, "projections_ms_per_step": 6 * p_ms,
               "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "commit": train.commit()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out_path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def probe(out_path, steps):
    solvers = ["delta", "cr", "scan_hs"] + (["fla"] if have_fla() else [])
    for s in solvers:
        micro = "8" if s in ("cr", "scan_hs") else "32"
        a = train.parse(["--solver", s, "--steps", "1000", "--stop-after", str(steps), "--micro", micro,
                         "--warm-steps", "2", "--log-every", "1", "--eval-every", "100000", "--eval-windows", "8",
                         "--out", out_path, "--tag", "probe"])
        try:
            train.train(a)
        except Exception as e:  # noqa: BLE001
            print(f"# probe {s}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        torch.cuda.empty_cache()


# kernels of PyTorch and cuBLAS (the model around the recurrence); every other kernel is the solver's
TORCH_KERNELS = ("void at::", "void (anonymous namespace)::", "nvjet", "Memcpy", "Memset", "void cutlass",
                 "sm90_", "cutlass", "void cublas", "void gemv", "void splitKreduce", "std::enable_if")


def _kernel_ms(prof, n):
    """CUDA time (ms) per kernel name over a torch.profiler run, divided by n."""
    per = {}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = e.self_cuda_time_total
        if t and e.device_type.name == "CUDA":
            per[e.key] = per.get(e.key, 0.0) + t / 1e3 / n
    return per


def profile(out_path, steps=4, micro=32):
    """(4) Where a training step's GPU time goes, per solver: the model's step (forward, backward,
    optimizer) under torch.profiler after warm-up, CUDA time summed per kernel name. Rows: the
    top kernels and the total, per step."""
    from torch.profiler import ProfilerActivity, profile as tprof
    solvers = ["delta"] + (["fla"] if have_fla() else [])
    rows = []
    xs, do = inputs(micro, 2048, 8, 32, torch.bfloat16)
    for s in solvers:  # the recurrence alone: kernel time of one fwd+bwd, launch gaps left out
        def f():
            for t in xs:
                t.grad = None
            recurrence(s, *xs, 32 ** -0.5).backward(do)
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        with tprof(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                f()
            torch.cuda.synchronize()
        per = _kernel_ms(prof, 10)
        print(f"== {s} alone: {sum(per.values()):.3f} ms of kernels per fwd+bwd")
        for name, ms in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"  {ms:8.3f} ms  {name[:110]}")
    for s in solvers:
        a = train.parse(["--solver", s, "--micro", str(micro), "--chains", "torch"])
        model, opt = train.build(a, dev)
        x = torch.randint(0, 256, (micro, a.T), device=dev)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), x.reshape(-1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with tprof(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        per = _kernel_ms(prof, steps)
        total = sum(per.values())
        top = sorted(per.items(), key=lambda kv: -kv[1])[:25]
        rec = {n: ms for n, ms in per.items() if not n.startswith(TORCH_KERNELS)}
        print(f"== {s}: {total:.2f} ms of kernels per step (micro {micro}); recurrence kernels "
              f"{sum(rec.values()):.2f} ms, the rest {total - sum(rec.values()):.2f} ms")
        for name, ms in sorted(rec.items(), key=lambda kv: -kv[1]):
            print(f"  {ms:8.3f} ms  {name[:110]}")
        rows.append({"op": "deltanet_step_profile", "impl": train.IMPL[s], "solver": s, "backend": "cuda",
                     "dtype": "bf16", "micro": micro, "kernel_ms_per_step": total,
                     "recurrence_kernel_ms_per_step": sum(rec.values()),
                     "top": [[n[:160], round(ms, 4)] for n, ms in top],
                     "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
                     "commit": train.commit()})
        del model, opt
        torch.cuda.empty_cache()
    with open(out_path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "agree":
        sys.exit(0 if agree() else 1)
    if what == "breakdown":
        breakdown(sys.argv[2])
    if what == "probe":
        probe(sys.argv[2], int(sys.argv[3]))
    if what == "profile":
        profile(sys.argv[2])
