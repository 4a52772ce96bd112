"""GPU check of the ctypes shim (run on a machine with a GPU after `make lib`):
forward and autograd gradients of ssm.linrec / ssm.decay against plain PyTorch loops in f64.
Prints `N passed, N failed` last."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ssm  # noqa: E402

passed = failed = 0


def check(name, got, ref, tol):
    global passed, failed
    err = ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    ok = err <= tol
    passed += ok
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rel err {err:.2e} (tol {tol:.0e})")


def ref_linrec(A, b, h0):
    h, out = h0, []
    for t in range(A.shape[1]):
        h = A[:, t] @ h + b[:, t] if h is not None else b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def ref_decay(ld, x, h0, per_step):
    a = ld if per_step else torch.cat([ld[:, :1], ld[:, 1:] - ld[:, :-1]], 1)
    h, out = h0, []
    for t in range(x.shape[1]):
        h = torch.exp(a[:, t])[..., None] * h + x[:, t] if h is not None else x[:, t]
        out.append(h)
    return torch.stack(out, 1)


torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
dev = "cuda"
for method in ["seq", "scan_hs", "blelloch", "cr", "chunked", "auto"]:
    for dt, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        S, T, n, m = 3, 77, 16, 2
        A = (torch.randn(S, T, n, n, device=dev, dtype=torch.float64) * 0.9 / n**0.5)
        b = torch.randn(S, T, n, m, device=dev, dtype=torch.float64)
        h0 = torch.randn(S, n, m, device=dev, dtype=torch.float64)
        A, b, h0 = (t.to(dt).requires_grad_() for t in (A, b, h0))
        h = ssm.linrec(A, b, h0, method=method)
        Ad, bd, h0d = (t.detach().double().requires_grad_() for t in (A, b, h0))
        hr = ref_linrec(Ad, bd, h0d)
        check(f"linrec {method} {dt} forward", h.detach(), hr.detach(), tol)
        w = torch.randn_like(hr)
        (h.float() * w.float()).sum().backward()
        (hr * w).sum().backward()
        check(f"linrec {method} {dt} dA", A.grad, Ad.grad, tol * 10)
        check(f"linrec {method} {dt} db", b.grad, bd.grad, tol * 10)
        check(f"linrec {method} {dt} dh0", h0.grad, h0d.grad, tol * 10)
for per_step in (False, True):
    B, T, R, C = 2, 300, 8, 16
    a = -torch.rand(B, T, R, device=dev, dtype=torch.float64) * 2
    ld = a if per_step else a.cumsum(1)
    x = torch.randn(B, T, R, C, device=dev, dtype=torch.float64)
    h0 = torch.randn(B, R, C, device=dev, dtype=torch.float64)
    ld32, x32, h032 = (t.float().requires_grad_() for t in (ld, x, h0))
    out = ssm.decay(ld32, x32, h032, per_step=per_step)
    ldd, xd, h0d = (t.detach().double().requires_grad_() for t in (ld32, x32, h032))
    ref = ref_decay(ldd, xd, h0d, per_step)
    check(f"decay per_step={per_step} forward", out.detach(), ref.detach(), 1e-5)
    w = torch.randn_like(ref)
    (out * w.float()).sum().backward()
    (ref * w).sum().backward()
    check(f"decay per_step={per_step} dx", x32.grad, xd.grad, 1e-4)
    check(f"decay per_step={per_step} dlog_decay", ld32.grad, ldd.grad, 1e-3)
    check(f"decay per_step={per_step} dh0", h032.grad, h0d.grad, 1e-4)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
