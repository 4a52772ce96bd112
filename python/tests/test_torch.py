"""The torch side of ssmh: every op through torch.library.opcheck, gradcheck in f64 on the CPU,
forwards against plain PyTorch f64 references on fresh random inputs (odd and prime sizes,
strided views), final-state gradients, torch.compile(fullgraph=True), CUDA graph capture and
replay, and the nn.Modules (BlockSparseLinear's topology step remapping AdamW states).
Runs on the CPU, and on CUDA when present (ops the CUDA backend lacks are skipped).
Usage: python tests/test_torch.py [cpu|cuda ...] [-k substring]; prints `N passed, N failed` last."""
import os
import sys
import time
import traceback

import torch

import ssmh
from ssmh import ops
from ssmh._abi import SSMError, C

torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
TESTS = []


class Skip(Exception):
    pass


def test(fn):
    TESTS.append(fn)
    return fn


def close(got, ref, tol, what=""):
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}"
    err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    assert err <= tol, f"{what}: rel err {err:.2e} > {tol:.0e}"


def fdt(dev):
    return torch.float64 if dev == "cpu" else torch.float32


def tol(dev):
    return 1e-10 if dev == "cpu" else 2e-5


def unsupported_on(dev, fn):
    """Runs fn; a backend without the op (SSM_ERROR_UNSUPPORTED) skips the test."""
    try:
        return fn()
    except SSMError as e:
        if e.code == C["SSM_ERROR_UNSUPPORTED"]:
            raise Skip(f"{dev} backend lacks the op: {e}")
        raise


# ---- references (plain PyTorch, f64) ----------------------------------------------------------

def ref_linrec(A, b, h0, reverse=False):
    T = A.shape[1]
    h, out = h0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        bt = b[:, t] if b.dim() == 4 else b[:, t, :, None]
        prev = h if h is None or h.dim() == 3 else h[..., None]
        h = A[:, t] @ prev + bt if prev is not None else bt
        if b.dim() == 3:
            h = h[..., 0]
        out[t] = h
    return torch.stack(out, 1), h


def ref_decay(ld, x, h0, per_step):
    a = ld if per_step else torch.cat([ld[:, :1], ld[:, 1:] - ld[:, :-1]], 1)
    h, out = h0, []
    for t in range(x.shape[1]):
        h = torch.exp(a[:, t])[..., None] * h + x[:, t] if h is not None else x[:, t]
        out.append(h)
    return torch.stack(out, 1), h


def ref_act(z, name, p, A_log):
    f = torch.nn.functional
    if name == "none":
        return z
    if name == "silu":
        return f.silu(z)
    if name == "sigmoid":
        return torch.sigmoid(z)
    if name == "sigmoid2":
        return 2 * torch.sigmoid(z)
    if name == "logsigmoid":
        return f.logsigmoid(z) / (p or 1.0)
    if name == "softplus":
        return f.softplus(z)
    if name == "relu":
        return torch.relu(z)
    if name == "gelu_tanh":
        return f.gelu(z, approximate="tanh")
    if name == "decay_gate":
        return -torch.exp(A_log) * f.softplus(z)
    if name == "softcap":
        p = p or 15.0
        return p * torch.tanh(z / p)
    raise ValueError(name)


def ref_proj(x, W, bias, A_log, segs, l2_eps=1e-6):
    z = x @ W.T
    outs, c, g = [], 0, 0
    for w, act, p, has_b, l2 in segs:
        zs = z[:, c:c + w] + (bias[c:c + w] if has_b else 0)
        al = None
        if act == "decay_gate":
            al, g = A_log[g:g + w], g + w
        a = ref_act(zs, act, p, al)
        if l2:
            a4 = a.reshape(a.shape[0], -1, l2)
            a = (a4 / torch.sqrt((a4 * a4).sum(-1, keepdim=True) + l2_eps)).reshape(a.shape)
        outs.append(a)
        c += w
    return outs


def ref_outchain(o, g, weight, W_o, gate, hd, eps=1e-6):
    M, D = o.shape
    hd = hd or D
    o3 = o.reshape(M, D // hd, hd)
    rstd = torch.rsqrt((o3 * o3).mean(-1, keepdim=True) + eps)
    z = (o3 * rstd * (weight if weight is not None else 1)).reshape(M, D)
    z = z * (torch.nn.functional.silu(g) if gate == "silu" else torch.sigmoid(g))
    return z @ W_o.T


def rand(*shape, dev="cpu", dt=torch.float64, scale=1.0, grad=False):
    return (torch.randn(*shape, dtype=torch.float64) * scale).to(dev, dt).requires_grad_(grad)


def rand_cols(R, Cb, K, dev):
    return torch.rand(R, Cb).argsort(1)[:, :K].sort(1).values.to(torch.int32).to(dev)


def bell_dense(values, col_idx, Cb):
    R, K, B, _ = values.shape
    W = values.new_zeros(R, Cb, B, B)
    W = W.index_put((torch.arange(R, device=W.device)[:, None], col_idx.long()), values)
    return W.permute(0, 2, 1, 3).reshape(R * B, Cb * B)


def linrec_inputs(dev, dt, S=3, T=13, n=5, m=2, grad=False):
    A = rand(S, T, n, n, dev=dev, dt=dt, scale=0.8 / n ** 0.5, grad=grad)
    b = rand(S, T, n, m, dev=dev, dt=dt, grad=grad)
    h0 = rand(S, n, m, dev=dev, dt=dt, grad=grad)
    return A, b, h0


def decay_inputs(dev, dt, per_step, B=2, T=11, R=3, Cc=5, grad=False):
    a = -torch.rand(B, T, R, dtype=torch.float64) * 1.5
    ld = (a if per_step else a.cumsum(1)).to(dev, dt).requires_grad_(grad)
    return ld, rand(B, T, R, Cc, dev=dev, dt=dt, grad=grad), rand(B, R, Cc, dev=dev, dt=dt, grad=grad)


SEGS = [(6, "silu", 0.0, False, 3), (4, "sigmoid2", 0.0, True, 0), (3, "decay_gate", 0.0, True, 0),
        (5, "logsigmoid", 16.0, False, 0), (2, "softcap", 4.0, True, 0), (3, "gelu_tanh", 0.0, False, 0),
        (2, "softplus", 0.0, False, 0), (3, "none", 0.0, False, 0), (2, "relu", 0.0, False, 0), (2, "sigmoid", 0, 0, 0)]


def proj_inputs(dev, dt, M=7, d=11, grad=False):
    N = sum(s[0] for s in SEGS)
    x = rand(M, d, dev=dev, dt=dt, grad=grad)
    W = rand(N, d, dev=dev, dt=dt, scale=0.4, grad=grad)
    bias = rand(N, dev=dev, dt=dt, scale=0.3, grad=grad)
    A_log = rand(3, dev=dev, dt=dt, scale=0.3, grad=grad)
    return x, W, bias, A_log


def oc_inputs(dev, dt, M=7, H=3, hd=4, dout=5, grad=False):
    D = H * hd
    return (rand(M, D, dev=dev, dt=dt, grad=grad), rand(M, D, dev=dev, dt=dt, grad=grad),
            (1 + 0.1 * torch.randn(hd, dtype=torch.float64)).to(dev, dt).requires_grad_(grad),
            rand(dout, D, dev=dev, dt=dt, scale=0.3, grad=grad))


def ref_delta(q, k, v, beta, g, s0, scale=None, cu=None):
    """The delta rule token by token (f64): per factor S <- alpha (I - b k k^T) S + b k v^T."""
    B, T, H, K = q.shape
    kk = k if k.dim() == 5 else k.unsqueeze(3)
    vv = v if v.dim() == 5 else v.unsqueeze(3)
    bb = beta if beta.dim() == 4 else beta.unsqueeze(-1)
    V, n = vv.shape[-1], kk.shape[3]
    scale = scale or K ** -0.5
    seqs = [(0, int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)] if cu is not None else \
        [(b, 0, T) for b in range(B)]
    o = [[None] * T for _ in range(B)]
    finals = []
    for i, (b, t0, t1) in enumerate(seqs):
        S = s0[i] if s0 is not None else q.new_zeros(H, K, V)
        for t in range(t0, t1):
            if g is not None:
                S = torch.exp(g[b, t])[:, None, None] * S
            for j in range(n):
                kj, vj, bj = kk[b, t, :, j], vv[b, t, :, j], bb[b, t, :, j]
                S = S - bj[:, None, None] * kj[:, :, None] * torch.einsum("hk,hkv->hv", kj, S)[:, None, :]
                S = S + bj[:, None, None] * kj[:, :, None] * vj[:, None, :]
            o[b][t] = scale * torch.einsum("hkv,hk->hv", S, q[b, t])
        finals.append(S)
    return torch.stack([torch.stack(r) for r in o]), torch.stack(finals)


def delta_inputs(dev, dt, B=2, T=9, H=2, K=5, V=3, n_h=1, gated=True, grad=False, cu=None):
    f = lambda x: x.to(dev, dt).requires_grad_(grad)  # noqa: E731
    kshape = (B, T, H, n_h, K) if n_h > 1 else (B, T, H, K)
    vshape = (B, T, H, n_h, V) if n_h > 1 else (B, T, H, V)
    k = torch.nn.functional.normalize(torch.randn(*kshape, dtype=torch.float64), dim=-1)
    N = len(cu) - 1 if cu is not None else B
    return dict(q=f(torch.randn(B, T, H, K, dtype=torch.float64)), k=f(k), v=f(torch.randn(*vshape, dtype=torch.float64)),
                beta=f(torch.rand(*kshape[:-1], dtype=torch.float64) * 0.9 + 0.05),
                g=f(-torch.rand(B, T, H, dtype=torch.float64) * 0.5) if gated else None,
                initial_state=f(torch.randn(N, H, K, V, dtype=torch.float64) * 0.5),
                cu_seqlens=torch.tensor(cu, dtype=torch.int64, device=dev) if cu is not None else None)


def _delta(d, **kw):
    return ssmh.delta_rule(d["q"], d["k"], d["v"], d["beta"], d["g"], initial_state=d["initial_state"],
                           output_final_state=True, cu_seqlens=d["cu_seqlens"], **kw)


@test
def delta_forward(dev):
    dt = fdt(dev)
    for n_h, gated, cu in ((1, False, None), (1, True, None), (2, True, None), (3, False, None),
                           (1, True, [0, 4, 11, 17]), (2, True, [0, 7, 17])):
        B = 1 if cu else 2
        T = 17 if cu else 23
        d = delta_inputs(dev, dt, B=B, T=T, H=3, K=6, V=5, n_h=n_h, gated=gated, cu=cu)
        ref = ref_delta(*(d[n].double() if d[n] is not None else None
                          for n in ("q", "k", "v", "beta", "g", "initial_state")), cu=cu)
        for method, chunk in (("recurrent", 0), ("chunked", 4), ("chunked", 0), ("auto", 0)):
            o, sT = unsupported_on(dev, lambda: _delta(d, method=method, chunk=chunk))
            close(o, ref[0], tol(dev) * 100, f"delta o n_h={n_h} g={gated} cu={cu} {method}/{chunk}")
            close(sT, ref[1], tol(dev) * 100, f"delta sT n_h={n_h} g={gated} cu={cu} {method}/{chunk}")


@test
def delta_fla_signatures_and_step(dev):
    dt = fdt(dev)
    d = delta_inputs(dev, dt, B=2, T=12, H=2, K=4, V=3)
    o, sT = unsupported_on(dev, lambda: _delta(d))
    q, k, v, g, beta, s0 = d["q"], d["k"], d["v"], d["g"], d["beta"], d["initial_state"]
    for fn in (ssmh.chunk_gated_delta_rule, ssmh.fused_recurrent_gated_delta_rule):
        o2, s2 = fn(q, k, v, g, beta, initial_state=s0, output_final_state=True)
        close(o2, o, tol(dev) * 100, fn.__name__)
        close(s2, sT, tol(dev) * 100, fn.__name__)
    o3, none = ssmh.chunk_delta_rule(q, k, v, beta, scale=0.3)
    assert none is None
    close(o3, ref_delta(q.double(), k.double(), v.double(), beta.double(), None, None, 0.3)[0], tol(dev) * 100, "scale")
    # fla's DeltaProduct layout: k, v [B, T*n_h, H, D], beta [B, T*n_h, H]
    d = delta_inputs(dev, dt, B=2, T=6, H=2, K=4, V=3, n_h=2)
    kf, vf = d["k"].transpose(2, 3).flatten(1, 2), d["v"].transpose(2, 3).flatten(1, 2)
    bf = d["beta"].transpose(2, 3).flatten(1, 2)
    o4, s4 = ssmh.chunk_gated_delta_product(d["q"], kf, vf, d["g"], bf, 2, initial_state=d["initial_state"],
                                            output_final_state=True)
    o5, s5 = _delta(d)
    close(o4, o5, tol(dev) * 100, "delta product layout")
    close(s4, s5, tol(dev) * 100, "delta product state")
    # decode: one step at a time equals the sequence
    d = delta_inputs(dev, dt, B=2, T=5, H=2, K=4, V=3)
    o, sT = _delta(d)
    S = d["initial_state"].clone()
    for t in range(5):
        ot = ssmh.delta_step(d["q"][:, t], d["k"][:, t], d["v"][:, t], d["beta"][:, t], S, g=d["g"][:, t])
        close(ot, o[:, t], tol(dev) * 100, f"step {t}")
    close(S, sT, tol(dev) * 100, "step state")


# ---- forward correctness, final states, strided views -----------------------------------------

@test
def linrec_forward_every_method(dev):
    dt = fdt(dev)
    for method in ssmh.METHODS:
        for reverse in (False, True):
            for m in (2, None):
                A, b, h0 = linrec_inputs(dev, dt, S=3, T=17, n=5, m=m or 1)
                if m is None:
                    b, h0 = b[..., 0], h0[..., 0]
                h, hT = ssmh.linrec(A, b, h0, method=method, reverse=reverse, output_final_state=True)
                hr, hTr = ref_linrec(A.double(), b.double(), h0.double(), reverse)
                close(h, hr, tol(dev), f"{method} reverse={reverse} m={m} h")
                close(hT, hTr, tol(dev), f"{method} hT")


@test
def linrec_strided_views(dev):
    dt = fdt(dev)
    A, b, h0 = linrec_inputs(dev, dt, S=3, T=13, n=5, m=3)
    At = A.transpose(2, 3).contiguous().transpose(2, 3)  # same values, column-major matrices
    bs = torch.cat([b, b], -1)[..., ::2]                 # strided last axis
    hs = ssmh.linrec(At, bs, h0.transpose(0, 0), method="cr")
    close(hs, ref_linrec(A.double(), bs.double(), h0.double())[0], tol(dev), "strided")


@test
def decay_forward(dev):
    dt = fdt(dev)
    for per_step in (False, True):
        for with_h0 in (False, True):
            ld, x, h0 = decay_inputs(dev, dt, per_step, B=2, T=37, R=3, Cc=7)
            h0 = h0 if with_h0 else None
            out, hT = ssmh.decay(ld, x, h0, per_step=per_step, output_final_state=True)
            o_r, hT_r = ref_decay(ld.double(), x.double(), h0.double() if with_h0 else None, per_step)
            close(out, o_r, tol(dev) * 10, "out")
            close(hT, hT_r, tol(dev) * 10, "hT")


@test
def scan_accelerated_scan_signature(dev):
    dt = fdt(dev)
    gates = torch.rand(2, 5, 19, dtype=torch.float64).to(dev, dt) * 0.9 + 0.05
    tokens = rand(2, 5, 19, dev=dev, dt=dt)
    h = ssmh.scan(gates, tokens)
    hr, ref = torch.zeros(2, 5, dtype=torch.float64, device=dev), []
    for t in range(19):
        hr = gates[..., t].double() * hr + tokens[..., t].double()
        ref.append(hr)
    close(h, torch.stack(ref, -1), tol(dev) * 10, "scan")


@test
def bell_forward_and_index(dev):
    dt = fdt(dev)
    R, Cb, K, B, N = 5, 7, 3, 4, 9
    values, x, bias = rand(R, K, B, B, dev=dev, dt=dt), rand(N, Cb * B, dev=dev, dt=dt), rand(R * B, dev=dev, dt=dt)
    cols = rand_cols(R, Cb, K, dev)
    y = unsupported_on(dev, lambda: ssmh.block_sparse_linear(x, values, cols, bias))
    close(y, x.double() @ bell_dense(values.double(), cols, Cb).T + bias.double(), tol(dev), "bell y")
    to, ts = ops.bell_transpose_index(cols, Cb)
    co, cs = ops.bell_transpose_index_c(cols.cpu(), Cb)
    assert torch.equal(to.cpu(), co) and torch.equal(ts.cpu(), cs), "torch transpose index != ssm_bell_transpose_index"


@test
def proj_forward(dev):
    dt = fdt(dev)
    x, W, bias, A_log = proj_inputs(dev, dt)
    ref = ref_proj(x.double(), W.double(), bias.double(), A_log.double(), SEGS)
    for fused in (True, False):
        for save_pre in (True, False):
            ys = unsupported_on(dev, lambda: ssmh.projection_chain(x, W, SEGS, bias, A_log, save_pre, fused))
            for i, (y, r) in enumerate(zip(ys, ref)):
                close(y, r, tol(dev) * 10, f"segment {i} {SEGS[i][1]}")


@test
def outchain_forward(dev):
    dt = fdt(dev)
    for gate in ("silu", "sigmoid"):
        for hd in (4, 0):
            o, g, w, W_o = oc_inputs(dev, dt)
            w = w if hd else None
            y = unsupported_on(dev, lambda: ssmh.output_chain(o, g, W_o, w, gate, hd))
            close(y, ref_outchain(o.double(), g.double(), w.double() if w is not None else None, W_o.double(), gate, hd),
                  tol(dev) * 10, f"outchain {gate} hd={hd}")


@test
def final_state_gradients(dev):
    """Gradients reach A, b, h0 through hT alone, and through h and hT together."""
    dt = fdt(dev)
    A, b, h0 = linrec_inputs(dev, dt, grad=True)
    h, hT = ssmh.linrec(A, b, h0, method="chunked", chunk=4, output_final_state=True)
    w1, w2 = torch.randn_like(h), torch.randn_like(hT)
    g = torch.autograd.grad((h * w1).sum() + (hT * w2).sum(), (A, b, h0))
    Ad, bd, h0d = (t.detach().double().requires_grad_() for t in (A, b, h0))
    hr, hTr = ref_linrec(Ad, bd, h0d)
    gr = torch.autograd.grad((hr * w1.double()).sum() + (hTr * w2.double()).sum(), (Ad, bd, h0d))
    for a, r, n in zip(g, gr, "A b h0".split()):
        close(a, r, tol(dev) * 100, f"linrec d{n}")
    ld, x, h0 = decay_inputs(dev, dt, False, grad=True)
    _, hT = ssmh.decay(ld, x, h0, output_final_state=True)
    g = torch.autograd.grad(hT.square().sum(), (ld, x, h0))
    ldd, xd, h0d = (t.detach().double().requires_grad_() for t in (ld, x, h0))
    gr = torch.autograd.grad(ref_decay(ldd, xd, h0d, False)[1].square().sum(), (ldd, xd, h0d))
    for a, r, n in zip(g, gr, ["log_decay", "x", "h0"]):
        close(a, r, tol(dev) * 100, f"decay d{n} via hT")


@test
def cuda_half_precision(dev):
    """f16 / bf16 inputs (f32 accumulation and state) against the f64 reference."""
    if dev != "cuda":
        raise Skip("CUDA only")
    for dt, tl in ((torch.float16, 5e-3), (torch.bfloat16, 3e-2)):
        for method in ssmh.METHODS:
            A, b, h0 = linrec_inputs(dev, dt, S=3, T=77, n=16, m=2)
            h = ssmh.linrec(A, b, h0, method=method)
            close(h, ref_linrec(A.double(), b.double(), h0.double())[0], tl, f"linrec {method} {dt}")
        ld, x, h0 = decay_inputs(dev, torch.float32, False, B=2, T=300, R=4, Cc=16)
        x, h0 = x.to(dt), h0.to(dt)
        out = ssmh.decay(ld.to(dt), x, h0)
        close(out, ref_decay(ld.to(dt).double(), x.double(), h0.double(), False)[0], tl, f"decay {dt}")
        A, b, h0 = linrec_inputs(dev, dt, S=2, T=40, n=8, m=2, grad=True)
        ssmh.linrec(A, b, h0).float().square().sum().backward()
        Ad, bd, h0d = (t.detach().double().requires_grad_() for t in (A, b, h0))
        ref_linrec(Ad, bd, h0d)[0].square().sum().backward()
        close(A.grad, Ad.grad, tl * 10, f"linrec dA {dt}")
        close(b.grad, bd.grad, tl * 10, f"linrec db {dt}")


# ---- gradcheck (f64, CPU) -------------------------------------------------------------------

def cpu_only(dev):
    if dev != "cpu":
        raise Skip("gradcheck runs in f64 on the CPU (CUDA has no f64 kernels)")


@test
def gradcheck_linrec(dev):
    cpu_only(dev)
    for method in ssmh.METHODS:
        for reverse in (False, True):
            A, b, h0 = linrec_inputs(dev, torch.float64, S=2, T=7, n=3, m=2, grad=True)
            f = lambda A, b, h0: ssmh.linrec(A, b, h0, method=method, chunk=3, reverse=reverse,  # noqa: E731
                                             output_final_state=True)
            assert torch.autograd.gradcheck(f, (A, b, h0)), method
    A, b, _ = linrec_inputs(dev, torch.float64, S=2, T=5, n=3, m=1, grad=True)
    assert torch.autograd.gradcheck(lambda A, b: ssmh.linrec(A, b[..., 0]), (A, b))


@test
def gradcheck_decay_and_scan(dev):
    cpu_only(dev)
    for per_step in (False, True):
        ld, x, h0 = decay_inputs(dev, torch.float64, per_step, B=2, T=6, R=2, Cc=3, grad=True)
        assert torch.autograd.gradcheck(lambda *a: ssmh.decay(*a, per_step=per_step, output_final_state=True),
                                        (ld, x, h0))
        assert torch.autograd.gradcheck(lambda ld, x: ssmh.decay(ld, x, per_step=per_step), (ld, x))
    gates = (torch.rand(2, 3, 6, dtype=torch.float64) * 0.8 + 0.1).requires_grad_()
    tokens = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ssmh.scan, (gates, tokens))


@test
def gradcheck_bell(dev):
    cpu_only(dev)
    R, Cb, K, B, N = 3, 5, 2, 3, 4
    cols = rand_cols(R, Cb, K, dev)
    values, x, bias = (rand(*s, grad=True) for s in ((R, K, B, B), (N, Cb * B), (R * B,)))
    assert torch.autograd.gradcheck(lambda x, v, b: ssmh.block_sparse_linear(x, v, cols, b), (x, values, bias))
    assert torch.autograd.gradcheck(lambda v: ssmh.block_sparse_linear(x.detach(), v, cols), (values,))


@test
def gradcheck_proj(dev):
    cpu_only(dev)
    x, W, bias, A_log = proj_inputs(dev, torch.float64, M=3, d=4, grad=True)
    for fused in (True, False):
        for save_pre in (True, False):
            assert torch.autograd.gradcheck(
                lambda *a: ssmh.projection_chain(*a[:2], SEGS, a[2], a[3], save_pre, fused), (x, W, bias, A_log))


@test
def gradcheck_delta(dev):
    cpu_only(dev)
    names = ("q", "k", "v", "beta", "g", "initial_state")
    for n_h, gated, cu, method, chunk in ((1, True, None, "recurrent", 0), (1, True, None, "chunked", 2),
                                          (1, False, None, "chunked", 3), (2, True, None, "chunked", 2),
                                          (1, True, [0, 2, 7], "chunked", 2), (2, False, [0, 3, 7], "recurrent", 0)):
        d = delta_inputs(dev, torch.float64, B=1 if cu else 2, T=7 if cu else 5, H=2, K=3, V=2, n_h=n_h,
                         gated=gated, grad=True, cu=cu)
        args = tuple(d[n] for n in names if d[n] is not None)

        def f(*a):
            kw = dict(zip([n for n in names if d[n] is not None], a))
            return ssmh.delta_rule(kw["q"], kw["k"], kw["v"], kw["beta"], kw.get("g"), initial_state=kw["initial_state"],
                                   output_final_state=True, cu_seqlens=d["cu_seqlens"], method=method, chunk=chunk)
        assert torch.autograd.gradcheck(f, args), (n_h, gated, cu, method)


@test
def gradcheck_outchain(dev):
    cpu_only(dev)
    for gate in ("silu", "sigmoid"):
        o, g, w, W_o = oc_inputs(dev, torch.float64, M=3, H=2, hd=3, dout=2, grad=True)
        assert torch.autograd.gradcheck(lambda o, g, w, W: ssmh.output_chain(o, g, W, w, gate, 3), (o, g, w, W_o))
        assert torch.autograd.gradcheck(lambda o, g, W: ssmh.output_chain(o, g, W, None, gate, 0), (o, g, W_o))


# ---- opcheck: schema, fake tensors, autograd registration, AOT dispatch -----------------------

def opcheck(op, args):
    r = torch.library.opcheck(op, args)
    bad = {k: v for k, v in r.items() if v != "SUCCESS"}
    assert not bad, f"{op}: {bad}"


@test
def opcheck_linrec(dev):
    dt = torch.float32
    for method in ssmh.METHODS.values():
        A, b, h0 = linrec_inputs(dev, dt, grad=True)
        opcheck(ops.linrec_fwd, (A, b, h0, method, 0, False))
    A, b, h0 = linrec_inputs(dev, dt)
    opcheck(ops.linrec_fwd, (A, b, None, 0, 0, True))
    h, hT = ops.linrec_fwd(A, b, h0, 0, 0, False)
    opcheck(ops.linrec_bwd, (A, h0, h, torch.randn_like(h), torch.randn_like(hT), 0, 0, False))
    opcheck(ops.linrec_bwd, (A, None, h, torch.randn_like(h), None, 5, 4, False))


@test
def opcheck_decay(dev):
    for per_step in (False, True):
        ld, x, h0 = decay_inputs(dev, torch.float32, per_step, grad=True)
        opcheck(ops.decay_fwd, (ld, x, h0, per_step))
        opcheck(ops.decay_fwd, (ld, x, None, per_step))
        ld, x, h0 = (t.detach() for t in (ld, x, h0))
        out, hT = ops.decay_fwd(ld, x, h0, per_step)
        opcheck(ops.decay_bwd, (ld, h0, out, torch.randn_like(out), torch.randn_like(hT), per_step))
        opcheck(ops.decay_bwd, (ld, None, out, torch.randn_like(out), None, per_step))


@test
def opcheck_bell(dev):
    R, Cb, K, B, N = 3, 5, 2, 4, 6
    cols = rand_cols(R, Cb, K, dev)
    to, ts = ops.bell_transpose_index(cols, Cb)
    values, x, bias = (rand(*s, dev=dev, dt=torch.float32, grad=True) for s in ((R, K, B, B), (N, Cb * B), (R * B,)))
    unsupported_on(dev, lambda: ops.bell_fwd(x, values, cols, to, ts, bias))
    opcheck(ops.bell_fwd, (x, values, cols, to, ts, bias))
    opcheck(ops.bell_fwd, (x, values, cols, to, ts, None))
    dy = torch.randn(N, R * B, device=dev)
    for need in ((True, True, True), (False, True, False), (True, False, False)):
        opcheck(ops.bell_bwd, (x.detach(), values.detach(), cols, to, ts, dy, *need))


@test
def opcheck_proj(dev):
    x, W, bias, A_log = proj_inputs(dev, torch.float32, grad=True)
    cols = ops._segments(SEGS)
    unsupported_on(dev, lambda: ops.proj_fwd(x, W, bias, A_log, *cols, True, True, 0.0))
    for fused in (True, False):
        for save_pre in (True, False):
            opcheck(ops.proj_fwd, (x, W, bias, A_log, *cols, fused, save_pre, 0.0))
    x, W, bias, A_log = (t.detach() for t in (x, W, bias, A_log))
    y, pre = ops.proj_fwd(x, W, bias, A_log, *cols, True, True, 0.0)
    opcheck(ops.proj_bwd, (x, W, bias, A_log, pre, torch.randn_like(y), *cols, True, 0.0))
    opcheck(ops.proj_bwd, (x, W, bias, A_log, None, torch.randn_like(y), *cols, False, 0.0))
    segs = ops._segments([(8, "silu", 0, False, 4), (6, "none")])
    opcheck(ops.proj_fwd, (x, W[:14], None, None, *segs, True, True, 0.0))


@test
def opcheck_outchain(dev):
    o, g, w, W_o = oc_inputs(dev, torch.float32, grad=True)
    unsupported_on(dev, lambda: ops.outchain_fwd(o, g, w, W_o, 0, 4, 0.0))
    for gate in (0, 1):
        opcheck(ops.outchain_fwd, (o, g, w, W_o, gate, 4, 0.0))
        opcheck(ops.outchain_fwd, (o, g, None, W_o, gate, 0, 1e-5))
    o, g, w, W_o = (t.detach() for t in (o, g, w, W_o))
    y, rstd = ops.outchain_fwd(o, g, w, W_o, 0, 4, 0.0)
    opcheck(ops.outchain_bwd, (o, g, w, W_o, rstd, torch.randn_like(y), 0, 4, 0.0))
    opcheck(ops.outchain_bwd, (o, g, None, W_o, None, torch.randn_like(y), 1, 4, 0.0))


@test
def opcheck_delta(dev):
    dt = torch.float32
    for n_h, gated, cu in ((1, True, None), (2, False, None), (1, True, [0, 3, 9])):
        d = delta_inputs(dev, dt, B=1 if cu else 2, T=9, H=2, K=4, V=3, n_h=n_h, gated=gated, grad=True, cu=cu)
        a = (d["q"], d["k"], d["v"], d["beta"], d["g"], d["initial_state"], d["cu_seqlens"])
        unsupported_on(dev, lambda: ops.delta_fwd(*a, 0, 0, 0.0, False))
        for method, chunk, keep in ((1, 0, False), (2, 4, False), (2, 4, True)):
            opcheck(ops.delta_fwd, (*a, method, chunk, 0.0, keep))
        a = tuple(t.detach() if t is not None else None for t in a)
        o, sT, saved = ops.delta_fwd(*a, 2, 4, 0.0, True)
        opcheck(ops.delta_bwd, (*a, torch.randn_like(o), torch.randn_like(sT), 2, 4, 0.0, None))
        opcheck(ops.delta_bwd, (*a, torch.randn_like(o), torch.randn_like(sT), 2, 4, 0.0, saved))
        opcheck(ops.delta_bwd, (*a, torch.randn_like(o), None, 1, 0, 0.5, None))


@test
def delta_saved_same_gradients(dev):
    """The forward's kept chunk quantities (desc.saved) give the backward's bits without them."""
    dt = fdt(dev)
    for n_h, gated in ((1, True), (1, False), (2, True)):
        d = delta_inputs(dev, dt, B=2, T=131, H=3, K=16, V=24, n_h=n_h, gated=gated)
        a = (d["q"], d["k"], d["v"], d["beta"], d["g"], d["initial_state"], None)
        o, sT, saved = ops.delta_fwd(*a, 2, 0, 0.0, True)
        assert (saved.numel() > 0) == (dev != "cpu"), saved.numel()
        do, dT = torch.randn_like(o), torch.randn_like(sT)
        g1 = ops.delta_bwd(*a, do, dT, 2, 0, 0.0, None)
        g2 = ops.delta_bwd(*a, do, dT, 2, 0, 0.0, saved)
        for x, y, n in zip(g1, g2, ("dq", "dk", "dv", "dbeta", "dg", "ds0")):
            assert torch.equal(x, y), (n_h, gated, n)
        if dev != "cpu":  # the size query runs once per shape, then comes from the cache
            hits = ops._delta_saved_query.cache_info().hits
            o2, _, saved2 = ops.delta_fwd(*a, 2, 0, 0.0, True)
            assert ops._delta_saved_query.cache_info().hits == hits + 1 and saved2.numel() == saved.numel()
            assert torch.equal(o2, o)
    d = delta_inputs(dev, dt, B=2, T=1, H=2, K=4, V=3)
    S = d["initial_state"].detach().clone()
    opcheck(ops.delta_step_op, (d["q"][:, 0].detach(), d["k"][:, 0].detach(), d["v"][:, 0].detach(),
                                d["beta"][:, 0].detach(), d["g"][:, 0].detach(), S, 0.0))


# ---- torch.compile, CUDA graphs ---------------------------------------------------------------

def _model_step(A, b, h0, ld, x):
    h, hT = ssmh.linrec(A, b, h0, method="chunked", output_final_state=True)
    h = h + ssmh.linrec(A, b, h0, method="cr")  # batched GEMMs (cuBLAS on the GPU)
    out, dT = ssmh.decay(ld, x, output_final_state=True)
    s = ssmh.scan(torch.sigmoid(x[..., 0].transpose(1, 2)), x[..., 1].transpose(1, 2))
    return (h.square().sum() + hT.sum() + (out * out).sum() + dT.sum() + s.sum())


@test
def compile_fullgraph(dev):
    dt = torch.float32
    A, b, h0 = linrec_inputs(dev, dt, grad=True)
    ld, x, _ = decay_inputs(dev, dt, False, grad=True)
    torch._dynamo.reset()
    f = torch.compile(_model_step, fullgraph=True)
    loss = f(A, b, h0, ld, x)
    g = torch.autograd.grad(loss, (A, b, h0, ld, x))
    loss_e = _model_step(A, b, h0, ld, x)
    ge = torch.autograd.grad(loss_e, (A, b, h0, ld, x))
    close(loss, loss_e, 1e-5, "compiled loss")
    for a, r in zip(g, ge):
        close(a, r, 1e-5, "compiled grad")


@test
def compile_fullgraph_layers(dev):
    """The other op families through their modules, compiled without graph breaks (fwd + bwd)."""
    R, Cb, K, B = 3, 5, 2, 4
    layer = ssmh.BlockSparseLinear(Cb * B, R * B, B, k=K, device=dev)
    pc = ssmh.ProjectionChain(11, SEGS, device=dev)
    oc = ssmh.OutputChain(12, 5, head_dim=4, device=dev)

    d = delta_inputs(dev, torch.float32, B=2, T=9, H=2, K=4, V=3, grad=True)

    def other(xb, xp, o, g, q, k, v, beta, gg, s0):
        ys = pc(xp)
        od, sT = ssmh.chunk_gated_delta_rule(q, k, v, gg, beta, initial_state=s0, output_final_state=True)
        return (layer(xb).square().sum() + sum(y.sum() for y in ys) + oc(o, g).square().sum()
                + od.square().sum() + sT.sum())
    xb, xp = torch.randn(2, 3, Cb * B, device=dev), torch.randn(7, 11, device=dev)
    o, g = torch.randn(7, 12, device=dev), torch.randn(7, 12, device=dev)
    args = (xb, xp, o, g, d["q"], d["k"], d["v"], d["beta"], d["g"], d["initial_state"])
    le = unsupported_on(dev, lambda: other(*args))
    ge = torch.autograd.grad(le, args[4:])
    torch._dynamo.reset()
    lc = torch.compile(other, fullgraph=True)(*args)
    close(lc, le, 1e-5, "compiled bell/proj/outchain/delta")
    gc = torch.autograd.grad(lc, args[4:], retain_graph=True)
    for a, r in zip(gc, ge):
        close(a, r, 1e-5, "compiled delta grads")
    lc.backward()
    assert layer.values.grad is not None and pc.weight.grad is not None and oc.o_proj.grad is not None


@test
def cuda_graph_capture_replay(dev):
    if dev != "cuda":
        raise Skip("CUDA only")
    A, b, h0 = linrec_inputs(dev, torch.float32, S=4, T=300, n=16, m=2, grad=True)
    ld, x, _ = decay_inputs(dev, torch.float32, False, B=2, T=500, R=4, Cc=64, grad=True)
    static = [A, b, h0, ld, x]

    def step():
        for t in static:
            t.grad = None
        loss = _model_step(*static)
        loss.backward()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up: cuBLAS handles, workspace sizes
            step()
    torch.cuda.current_stream().wait_stream(s)
    for t in static:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = _model_step(*static)
        static_loss.backward()
    static_grads = [t.grad for t in static]
    for trial in range(3):
        new = [linrec_inputs(dev, torch.float32, S=4, T=300, n=16, m=2),
               decay_inputs(dev, torch.float32, False, B=2, T=500, R=4, Cc=64)[:2]]
        new = list(new[0]) + list(new[1])
        with torch.no_grad():
            for t, n in zip(static, new):
                t.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        ref_in = [n.detach().clone().requires_grad_() for n in new]
        loss = _model_step(*ref_in)
        grads = torch.autograd.grad(loss, ref_in)
        close(static_loss, loss, 1e-5, f"replay {trial} loss")
        for a, r in zip(static_grads, grads):
            close(a, r, 1e-5, f"replay {trial} grad")


@test
def cuda_stream_is_callers(dev):
    """Ops run on the caller's current stream (a side stream here), ordered with torch's work."""
    if dev != "cuda":
        raise Skip("CUDA only")
    s = torch.cuda.Stream()
    A, b, h0 = linrec_inputs(dev, torch.float32, S=8, T=2000, n=16, m=4)
    with torch.cuda.stream(s):
        b2 = b * 2  # queued on s: the op must see it done without a sync
        h = ssmh.linrec(A, b2, h0, method="seq")
    torch.cuda.current_stream().wait_stream(s)
    close(h, ref_linrec(A.double(), 2 * b.double(), h0.double())[0], 1e-4, "side stream")


# ---- modules ----------------------------------------------------------------------------------

@test
def block_sparse_linear_topology_adamw(dev):
    torch.manual_seed(1)
    B, Cb, R, K = 4, 8, 6, 3
    layer = ssmh.BlockSparseLinear(Cb * B, R * B, B, k=K, topology=dict(period=2, prune_frac=0.5, epsilon=0.5, seed=7),
                                   device=dev, dtype=torch.float64 if dev == "cpu" else torch.float32)
    dt = layer.values.dtype
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-2)
    x = torch.randn(16, Cb * B, device=dev, dtype=dt)
    updated = 0
    for step in range(1, 7):
        try:
            y = layer(x)
        except SSMError as e:
            raise Skip(str(e)) if e.code == C["SSM_ERROR_UNSUPPORTED"] else e
        close(y, x.double() @ layer.to_dense().double().T + layer.bias.double(), tol(dev) * 10, "layer forward")
        y.square().mean().backward()
        opt.step()
        before = {k: t.detach().clone() for k, t in (("values", layer.values), ("cols", layer.col_idx),
                                                    ("m", opt.state[layer.values]["exp_avg"]),
                                                    ("v", opt.state[layer.values]["exp_avg_sq"]))}
        rep = layer.topology_step(step, opt)
        opt.zero_grad()
        updated += rep["updated"] and rep["grown"] > 0
        st = opt.state[layer.values]
        for r in range(R):
            old = {int(c): k for k, c in enumerate(before["cols"][r])}
            for k, c in enumerate(layer.col_idx[r].tolist()):
                if c in old:  # kept tile: value and both moments moved with it
                    ko = old[c]
                    assert torch.equal(layer.values[r, k], before["values"][r, ko]), "kept tile value moved wrong"
                    assert torch.equal(st["exp_avg"][r, k], before["m"][r, ko]), "exp_avg not remapped"
                    assert torch.equal(st["exp_avg_sq"][r, k], before["v"][r, ko]), "exp_avg_sq not remapped"
                else:  # grown tile: zero value, zero moments
                    assert not layer.values[r, k].any() and not st["exp_avg"][r, k].any() and not st["exp_avg_sq"][r, k].any()
        to, ts = ops.bell_transpose_index(layer.col_idx, Cb)
        assert torch.equal(to, layer.t_offsets) and torch.equal(ts, layer.t_slots), "transposed index stale"
    assert updated >= 1, "no topology update happened"
    sd = layer.state_dict()
    layer2 = ssmh.BlockSparseLinear(Cb * B, R * B, B, k=K, topology=dict(period=2), device=dev, dtype=dt)
    layer2.load_state_dict(sd)
    assert torch.equal(layer2.col_idx, layer.col_idx)
    assert torch.equal(layer2.get_extra_state()["keep_score"], layer.get_extra_state()["keep_score"])
    import copy
    layer3 = copy.deepcopy(layer)  # own score buffers (no double free), same scores
    assert layer3._topo is not None and ctypes_addr(layer3._topo) != ctypes_addr(layer._topo)
    assert torch.equal(layer3.get_extra_state()["grow_score"], layer.get_extra_state()["grow_score"])
    del layer3


def ctypes_addr(p):
    import ctypes
    return ctypes.cast(p, ctypes.c_void_p).value


@test
def block_sparse_linear_allreduce_hook(dev):
    """process_group= wires torch.distributed into the topology's all-reduce hook (one-rank
    gloo group through a file store: exercises the callback, the scores stay the same)."""
    import tempfile
    import torch.distributed as dist
    if dev != "cpu":
        raise Skip("the hook runs on the CPU scores; one device is enough")
    if not dist.is_available():
        raise Skip("torch.distributed unavailable")
    import ssmh.nn as snn
    hooked = []
    orig = snn._make_allreduce

    def counting(group):
        inner = orig(group)
        return lambda user, data, count: hooked.append(count) or inner(user, data, count)
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        snn._make_allreduce = counting
        try:
            calls = []
            layers = []
            for pg in ("default", None):
                torch.manual_seed(3)
                layers.append(ssmh.BlockSparseLinear(32, 24, 4, k=3, process_group=pg,
                                                     topology=dict(period=2, prune_frac=0.5, epsilon=0.0)))
            x = torch.randn(8, 32)
            for step in (1, 2):
                for layer in layers:
                    layer(x).square().sum().backward()
                    calls.append(layer.topology_step(step)["updated"])
                    layer.zero_grad()
            assert calls == [0, 0, 1, 1], calls
            assert torch.equal(layers[0].col_idx, layers[1].col_idx), "one-rank average changed the topology"
            assert hooked == [6 * 3, 6 * 8], f"all-reduce hook calls (keep, grow score counts): {hooked}"
        finally:
            snn._make_allreduce = orig
            dist.destroy_process_group()


@test
def modules_match_functional(dev):
    dt = fdt(dev)
    pc = ssmh.ProjectionChain(11, SEGS, device=dev, dtype=dt)
    x = torch.randn(2, 3, 11, device=dev, dtype=dt)
    ys = unsupported_on(dev, lambda: pc(x))
    ref = ref_proj(x.reshape(6, 11).double(), pc.weight.double(), pc.bias.double(), pc.A_log.double(), SEGS)
    for y, r in zip(ys, ref):
        close(y.reshape(6, -1), r, tol(dev) * 10, "ProjectionChain")
    oc = ssmh.OutputChain(12, 5, head_dim=4, gate="sigmoid", device=dev, dtype=dt)
    o, g = torch.randn(2, 3, 12, device=dev, dtype=dt), torch.randn(2, 3, 12, device=dev, dtype=dt)
    y = oc(o, g)
    close(y.reshape(6, 5), ref_outchain(o.reshape(6, 12).double(), g.reshape(6, 12).double(), oc.weight.double(),
                                        oc.o_proj.double(), "sigmoid", 4), tol(dev) * 10, "OutputChain")


@test
def errors_are_exceptions(dev):
    A, b, h0 = linrec_inputs(dev, torch.float32)
    try:
        ssmh.linrec(A, b[:, :5], h0)
    except SSMError as e:
        assert "shape" in str(e).lower() or e.code == -2, str(e)
    else:
        raise AssertionError("mismatched T accepted")


def main(argv):
    devs = [a for a in argv if a in ("cpu", "cuda")] or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    pat = argv[argv.index("-k") + 1] if "-k" in argv else ""
    if "cuda" in devs and not (torch.cuda.is_available() and ssmh.HAS_CUDA):
        print("cuda requested but unavailable (torch.cuda or this build)")
        devs.remove("cuda")
    print(f"ssmh {ssmh.build_info()}, torch {torch.__version__}, devices {devs}"
          + (f" ({torch.cuda.get_device_name()})" if "cuda" in devs else ""))
    passed = failed = skipped = 0
    for dev in devs:
        for fn in TESTS:
            if pat not in fn.__name__:
                continue
            t0 = time.time()
            try:
                fn(dev)
                passed += 1
                print(f"ok   {dev:4s} {fn.__name__} ({time.time() - t0:.1f}s)", flush=True)
            except Skip as e:
                skipped += 1
                print(f"skip {dev:4s} {fn.__name__}: {e}", flush=True)
            except Exception:  # noqa: BLE001
                failed += 1
                print(f"FAIL {dev:4s} {fn.__name__}\n{traceback.format_exc()}", flush=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
