"""ssm.h's ops as torch.library custom ops (namespace `ssmh`), each with a fake (meta)
implementation and a registered autograd formula, dispatching to the C library on CPU tensors
(f32, f64) and CUDA tensors (f32, f16, bf16; linrec and decay today, the rest where the CUDA
backend has the op).

Why it composes with torch.compile and CUDA graphs:
  - the ops are opaque to Dynamo (custom ops), so the stream lookup below runs at run time,
    never while tracing (torch.Stream under tracing has no cuda_stream);
  - a CUDA call builds a light context on the caller's current stream with PyTorch's cuBLAS
    handle and PyTorch's caching allocator as the workspace hooks: no cudaMalloc, no sync, so
    it captures into a CUDA graph (workspace comes from the graph's private pool);
  - tensors go in as strided views (no .contiguous()); only when the C side refuses a call
    with non-contiguous inputs is it retried once on contiguous copies (see _call).
Final states are outputs like any other and carry gradients.
"""
import ctypes
import functools
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _abi
from ._abi import C, DELTA_METHODS, METHODS, SSMError, lib

_CODES = {torch.float32: (C["SSM_DTYPE_FLOAT"], 32), torch.float64: (C["SSM_DTYPE_FLOAT"], 64),
          torch.float16: (C["SSM_DTYPE_FLOAT"], 16), torch.bfloat16: (C["SSM_DTYPE_BFLOAT"], 16),
          torch.int32: (C["SSM_DTYPE_INT"], 32), torch.int64: (C["SSM_DTYPE_INT"], 64),
          torch.uint8: (C["SSM_DTYPE_UINT"], 8)}
_byref = ctypes.byref
_CUDA, _CPU = C["SSM_DEVICE_CUDA"], (C["SSM_DEVICE_CPU"], 0)
_UNSUPPORTED = C["SSM_ERROR_UNSUPPORTED"]


def _view(t):
    """The ssm_tensor struct viewing a torch tensor."""
    if t.dtype not in _CODES:
        raise TypeError(f"ssmh: unsupported dtype {t.dtype}")
    dev = (_CUDA, t.device.index or 0) if t.is_cuda else _CPU
    return _abi.make_tensor(t.data_ptr(), _CODES[t.dtype], t.shape, t.stride(), dev)


def _v(t):
    """An ssm_tensor argument viewing a torch tensor (None -> NULL)."""
    return None if t is None else _byref(_view(t))


# ---- contexts ---------------------------------------------------------------------------------

@_abi.ALLOC_FN
def _cuda_alloc(user, nbytes, stream):
    try:
        return torch.cuda.caching_allocator_alloc(nbytes, device=user or 0, stream=stream or 0)
    except Exception:  # noqa: BLE001 (NULL -> SSM_ERROR_OUT_OF_MEMORY on the C side)
        return None


@_abi.FREE_FN
def _cuda_free(user, ptr, stream):
    try:
        torch.cuda.caching_allocator_delete(ptr)
    except Exception:  # noqa: BLE001
        pass


_shared_cublas = None


def _blas_handle(device):
    """PyTorch's cuBLAS handle (stream and workspace already set for the current stream) when
    our libcublas is PyTorch's (same CUDA major), else NULL: the context then makes its own."""
    global _shared_cublas
    if _shared_cublas is None:
        ours = lib.ssmh_cuda_runtime_version() // 1000
        theirs = int((torch.version.cuda or "0").split(".")[0])
        _shared_cublas = ours == theirs
    if not _shared_cublas:
        return None
    with torch.cuda.device(device):
        return torch.cuda.current_blas_handle()


class _Ctx:
    """`with _Ctx(t) as ctx:` the C context for the device of tensor t (or of the torch.device t)."""

    def __init__(self, t):
        self.device, self.ctx, self.own = t if isinstance(t, torch.device) else t.device, None, False

    def __enter__(self):
        if self.device.type == "cuda":
            if not _abi.HAS_CUDA:
                raise RuntimeError("ssmh: this build has no CUDA backend (nvcc was not found when it was installed)")
            dev = self.device.index or 0
            stream = torch.cuda.current_stream(self.device).cuda_stream
            self.ctx = lib.ssmh_cuda_ctx(dev, stream, _blas_handle(dev), _cuda_alloc, _cuda_free, dev)
            if not self.ctx:
                raise RuntimeError(f"ssmh: cannot create a CUDA context on device {dev}")
            self.own = True
        else:
            self.ctx = _abi.cpu_ctx(torch.get_num_threads())
        return self.ctx

    def __exit__(self, *exc):
        if self.own:
            lib.ssm_ctx_destroy(self.ctx)  # frees the workspace back to the caching allocator


def _call(fn, *ins):
    """fn(ctx, *views of ins) on the device of the first input. Views go in as they are; only
    when the backend refuses a call that has non-contiguous tensors (a stride or alignment
    pattern it cannot take) is it retried once on contiguous copies (outputs are ours and
    contiguous already); the retry's error, if any, is the one raised."""
    dev_t = next(t for t in ins if t is not None)
    with _Ctx(dev_t) as ctx:
        r = fn(ctx, *(_v(t) for t in ins))
        if r not in (0, _UNSUPPORTED) and any(t is not None and not t.is_contiguous() for t in ins):
            ins = [t.contiguous() if t is not None else None for t in ins]
            r = fn(ctx, *(_v(t) for t in ins))
        _abi.check(ctx, r)


def _empty(shape, like):
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def _none():
    return None


# ---- linrec -----------------------------------------------------------------------------------

def _linrec_desc(method, chunk, reverse):
    d = lib.ssm_linrec_desc_init()
    d.method, d.chunk, d.reverse = method, chunk, int(reverse)
    return d


@torch.library.custom_op("ssmh::linrec_fwd", mutates_args=())
def linrec_fwd(A: Tensor, b: Tensor, h0: Optional[Tensor], method: int, chunk: int,
               reverse: bool) -> Tuple[Tensor, Tensor]:
    """h_t = A_t h_{t-1} + b_t: A [S,T,n,n], b [S,T,n,m] or [S,T,n], h0 like b[:, 0]. -> (h, hT)."""
    h, hT = _empty(b.shape, b), _empty(b.shape[:1] + b.shape[2:], b)
    d = _linrec_desc(method, chunk, reverse)
    _call(lambda c, A_, b_, h0_, h_, hT_: lib.ssm_linrec_forward(c, _byref(d), A_, b_, h0_, h_, hT_), A, b, h0, h, hT)
    return h, hT


@linrec_fwd.register_fake
def _(A, b, h0, method, chunk, reverse):
    return b.new_empty(b.shape), b.new_empty(b.shape[:1] + b.shape[2:])


@torch.library.custom_op("ssmh::linrec_bwd", mutates_args=())
def linrec_bwd(A: Tensor, h0: Optional[Tensor], h: Tensor, dh: Tensor, dhT: Optional[Tensor], method: int,
               chunk: int, reverse: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """-> (dA, db, dh0)."""
    dA, db, dh0 = _empty(A.shape, A), _empty(h.shape, h), _empty(h.shape[:1] + h.shape[2:], h)
    d = _linrec_desc(method, chunk, reverse)
    _call(lambda c, *v: lib.ssm_linrec_backward(c, _byref(d), *v), A, h0, h, dh, dhT, dA, db, dh0)
    return dA, db, dh0


@linrec_bwd.register_fake
def _(A, h0, h, dh, dhT, method, chunk, reverse):
    return A.new_empty(A.shape), h.new_empty(h.shape), h.new_empty(h.shape[:1] + h.shape[2:])


def _linrec_setup(ctx, inputs, output):
    A, b, h0, method, chunk, reverse = inputs
    ctx.save_for_backward(A, h0, output[0])
    ctx.cfg = (method, chunk, reverse)


def _linrec_grad(ctx, dh, dhT):
    A, h0, h = ctx.saved_tensors
    if dh is None:
        dh = torch.zeros_like(h)
    dA, db, dh0 = linrec_bwd(A, h0, h, dh, dhT, *ctx.cfg)
    return dA, db, (dh0 if h0 is not None else None), None, None, None


linrec_fwd.register_autograd(_linrec_grad, setup_context=_linrec_setup)


def linrec(A, b, h0=None, method="auto", chunk=0, reverse=False, output_final_state=False):
    """Dense linear recurrence h_t = A_t h_{t-1} + b_t (differentiable in A, b, h0).

    A [S,T,n,n], b [S,T,n,m] (or [S,T,n]), h0 [S,n,m] (or [S,n]) or None;
    method: auto, seq, scan_hs, blelloch, cr, chunked. Returns h, or (h, hT) when
    output_final_state (hT carries gradients too)."""
    h, hT = linrec_fwd(A, b, h0, METHODS[method], int(chunk), bool(reverse))
    return (h, hT) if output_final_state else h


# ---- decay scan -------------------------------------------------------------------------------

def _decay_desc(per_step):
    d = lib.ssm_decay_desc_init()
    d.input = C["SSM_DECAY_PER_STEP"] if per_step else C["SSM_DECAY_CUMULATIVE"]
    return d


@torch.library.custom_op("ssmh::decay_fwd", mutates_args=())
def decay_fwd(log_decay: Tensor, x: Tensor, h0: Optional[Tensor], per_step: bool) -> Tuple[Tensor, Tensor]:
    """out_t = sum_{j<=t} exp(cA_t - cA_j) x_j (+ exp(cA_t) h0): log_decay [B,T,R], x [B,T,R,C]. -> (out, hT)."""
    out, hT = _empty(x.shape, x), _empty(x.shape[:1] + x.shape[2:], x)
    d = _decay_desc(per_step)
    _call(lambda c, *v: lib.ssm_decay_forward(c, _byref(d), *v), log_decay, x, h0, out, hT)
    return out, hT


@decay_fwd.register_fake
def _(log_decay, x, h0, per_step):
    return x.new_empty(x.shape), x.new_empty(x.shape[:1] + x.shape[2:])


@torch.library.custom_op("ssmh::decay_bwd", mutates_args=())
def decay_bwd(log_decay: Tensor, h0: Optional[Tensor], out: Tensor, dout: Tensor, dhT: Optional[Tensor],
              per_step: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """-> (dx, dlog_decay, dh0)."""
    dx, dld, dh0 = _empty(out.shape, out), _empty(log_decay.shape, log_decay), _empty(out.shape[:1] + out.shape[2:], out)
    d = _decay_desc(per_step)
    _call(lambda c, *v: lib.ssm_decay_backward(c, _byref(d), *v), log_decay, h0, out, dout, dhT, dx, dld, dh0)
    return dx, dld, dh0


@decay_bwd.register_fake
def _(log_decay, h0, out, dout, dhT, per_step):
    return out.new_empty(out.shape), log_decay.new_empty(log_decay.shape), out.new_empty(out.shape[:1] + out.shape[2:])


def _decay_setup(ctx, inputs, output):
    log_decay, x, h0, per_step = inputs
    ctx.save_for_backward(log_decay, h0, output[0])
    ctx.per_step = per_step


def _decay_grad(ctx, dout, dhT):
    ld, h0, out = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dx, dld, dh0 = decay_bwd(ld, h0, out, dout, dhT, ctx.per_step)
    return dld, dx, (dh0 if h0 is not None else None), None


decay_fwd.register_autograd(_decay_grad, setup_context=_decay_setup)


def decay(log_decay, x, h0=None, per_step=False, output_final_state=False):
    """Decay scan h_t = exp(a_t) h_{t-1} + x_t in O(T), stable for any decay strength.

    log_decay [B,T,R]: cumulative cA_t = sum_{j<=t} a_j (default) or per-step a_t (per_step=True,
    -inf = reset); x [B,T,R,C]; h0 [B,R,C] or None. Returns out [B,T,R,C], or (out, hT)."""
    out, hT = decay_fwd(log_decay, x, h0, bool(per_step))
    return (out, hT) if output_final_state else out


def scan(gates, tokens):
    """accelerated-scan's `scan(gates, tokens)`: h_t = gates_t * h_{t-1} + tokens_t along the
    last axis, gates and tokens [B, D, T], returns h [B, D, T] (a strided view). Runs as the
    per-step decay scan on log(gates), so gates must be >= 0 (0 resets the state)."""
    ld = torch.log(gates).transpose(1, 2)               # [B,T,D] view
    out = decay(ld, tokens.transpose(1, 2).unsqueeze(-1), per_step=True)  # x: [B,T,D,1] view
    return out.squeeze(-1).transpose(1, 2)


# ---- block-ELL sparse linear ------------------------------------------------------------------

def bell_transpose_index(col_idx, C):
    """(t_offsets [C+1], t_slots [R*K]) i32 on col_idx's device: for each block-column c the
    slots s = r*K + k using it, ascending (the layout ssm_bell_transpose_index builds; a few
    torch ops so it also runs on the GPU and inside graphs)."""
    flat = col_idx.reshape(-1).long()
    t_slots = torch.sort(flat, stable=True).indices.to(torch.int32)
    counts = torch.zeros(C, dtype=torch.long, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
    t_offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)
    return t_offsets, t_slots


def bell_transpose_index_c(col_idx, C):
    """The C library's ssm_bell_transpose_index (CPU tensors), for tests and checks."""
    t_offsets = torch.empty(C + 1, dtype=torch.int32)
    t_slots = torch.empty(col_idx.numel(), dtype=torch.int32)
    _call(lambda c, *v: lib.ssm_bell_transpose_index(c, *v), col_idx, t_offsets, t_slots)
    return t_offsets, t_slots


@torch.library.custom_op("ssmh::bell_fwd", mutates_args=())
def bell_fwd(x: Tensor, values: Tensor, col_idx: Tensor, t_offsets: Tensor, t_slots: Tensor,
             bias: Optional[Tensor]) -> Tensor:
    """y = x W^T (+ bias): x [N, C*B], values [R,K,B,B], col_idx [R,K] i32. The transposed index
    (t_offsets, t_slots) is an input so the backward has it."""
    y = _empty((x.shape[0], values.shape[0] * values.shape[2]), x)
    _call(lambda c, *v: lib.ssm_bell_forward(c, *v), x, values, col_idx, bias, y)
    return y


@bell_fwd.register_fake
def _(x, values, col_idx, t_offsets, t_slots, bias):
    return x.new_empty((x.shape[0], values.shape[0] * values.shape[2]))


@torch.library.custom_op("ssmh::bell_bwd", mutates_args=())
def bell_bwd(x: Tensor, values: Tensor, col_idx: Tensor, t_offsets: Tensor, t_slots: Tensor, dy: Tensor,
             need_dx: bool, need_dvalues: bool, need_dbias: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """-> (dx, dvalues, dbias); the ones not needed come back empty (0 elements)."""
    dx = _empty(x.shape if need_dx else (0,), x)
    dv = _empty(values.shape if need_dvalues else (0,), values)
    db = _empty((dy.shape[1],) if need_dbias else (0,), dy)
    _call(lambda c, *v: lib.ssm_bell_backward(c, *v), x, values, col_idx, t_offsets if need_dx else None,
          t_slots if need_dx else None, dy, dx if need_dx else None, dv if need_dvalues else None,
          db if need_dbias else None)
    return dx, dv, db


@bell_bwd.register_fake
def _(x, values, col_idx, t_offsets, t_slots, dy, need_dx, need_dvalues, need_dbias):
    return (x.new_empty(x.shape if need_dx else (0,)), values.new_empty(values.shape if need_dvalues else (0,)),
            dy.new_empty((dy.shape[1],) if need_dbias else (0,)))


def _bell_setup(ctx, inputs, output):
    x, values, col_idx, t_offsets, t_slots, bias = inputs
    ctx.save_for_backward(x, values, col_idx, t_offsets, t_slots)
    ctx.has_bias = bias is not None


def _bell_grad(ctx, dy):
    x, values, col_idx, t_offsets, t_slots = ctx.saved_tensors
    need = ctx.needs_input_grad
    dx, dv, db = bell_bwd(x, values, col_idx, t_offsets, t_slots, dy, need[0], need[1],
                          ctx.has_bias and need[5])
    return (dx if need[0] else None, dv if need[1] else None, None, None, None,
            db if ctx.has_bias and need[5] else None)


bell_fwd.register_autograd(_bell_grad, setup_context=_bell_setup)


def block_sparse_linear(x, values, col_idx, bias=None, tindex=None):
    """Block-ELL y = x W^T + bias over the last axis of x [..., C*B] -> [..., R*B].
    tindex = (t_offsets, t_slots) from bell_transpose_index (computed when None)."""
    B = values.shape[2]
    Cb = x.shape[-1] // B
    t_offsets, t_slots = tindex if tindex is not None else bell_transpose_index(col_idx, Cb)
    y = bell_fwd(x.reshape(-1, x.shape[-1]), values, col_idx, t_offsets, t_slots, bias)
    return y.reshape(*x.shape[:-1], y.shape[-1])


# ---- projection chain -------------------------------------------------------------------------

ACTS = {lib.ssm_proj_act_name(i).decode(): i for i in range(C["SSM_PROJ_ACT_COUNT"])}


def _proj_desc(widths, acts, params, biases, l2_heads, fused, save_pre, l2_eps):
    d = lib.ssm_proj_desc_init()
    for w, a, p, b, l2 in zip(widths, acts, params, biases, l2_heads):
        if lib.ssm_proj_desc_add(_byref(d), w, a, p, b, l2) != 0:
            raise ValueError(f"ssmh: at most {C['SSM_PROJ_MAX_SEGMENTS']} segments")
    d.path = C["SSM_PROJ_FUSED"] if fused else C["SSM_PROJ_UNFUSED"]
    d.save = C["SSM_PROJ_SAVE_PRE"] if save_pre else C["SSM_PROJ_SAVE_NONE"]
    d.l2_eps = l2_eps
    return d


@torch.library.custom_op("ssmh::proj_fwd", mutates_args=())
def proj_fwd(x: Tensor, W: Tensor, bias: Optional[Tensor], A_log: Optional[Tensor], widths: List[int],
             acts: List[int], params: List[float], biases: List[int], l2_heads: List[int], fused: bool,
             save_pre: bool, l2_eps: float) -> Tuple[Tensor, Tensor]:
    """y = epilogue(x W^T + bias) per column segment: x [M,d], W [N,d]. -> (y [M,N], pre [M,N] or empty)."""
    y = _empty((x.shape[0], W.shape[0]), x)
    pre = _empty((x.shape[0], W.shape[0]) if save_pre else (0,), x)
    d = _proj_desc(widths, acts, params, biases, l2_heads, fused, save_pre, l2_eps)
    _call(lambda c, *v: lib.ssm_proj_forward(c, _byref(d), *v), x, W, bias, A_log, y, pre if save_pre else None)
    return y, pre


@proj_fwd.register_fake
def _(x, W, bias, A_log, widths, acts, params, biases, l2_heads, fused, save_pre, l2_eps):
    return x.new_empty((x.shape[0], W.shape[0])), x.new_empty((x.shape[0], W.shape[0]) if save_pre else (0,))


@torch.library.custom_op("ssmh::proj_bwd", mutates_args=())
def proj_bwd(x: Tensor, W: Tensor, bias: Optional[Tensor], A_log: Optional[Tensor], pre: Optional[Tensor],
             dy: Tensor, widths: List[int], acts: List[int], params: List[float], biases: List[int],
             l2_heads: List[int], fused: bool, l2_eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """-> (dx, dW, dbias [N] or empty, dA_log [G] or empty); pre None = recompute (SAVE_NONE)."""
    dx, dW = _empty(x.shape, x), _empty(W.shape, W)
    dbias = _empty(bias.shape if bias is not None else (0,), x)
    dA = _empty(A_log.shape if A_log is not None else (0,), x)
    d = _proj_desc(widths, acts, params, biases, l2_heads, fused, pre is not None, l2_eps)
    _call(lambda c, *v: lib.ssm_proj_backward(c, _byref(d), *v), x, W, bias, A_log, pre, dy, dx, dW,
          dbias if bias is not None else None, dA if A_log is not None else None)
    return dx, dW, dbias, dA


@proj_bwd.register_fake
def _(x, W, bias, A_log, pre, dy, widths, acts, params, biases, l2_heads, fused, l2_eps):
    return (x.new_empty(x.shape), W.new_empty(W.shape), x.new_empty(bias.shape if bias is not None else (0,)),
            x.new_empty(A_log.shape if A_log is not None else (0,)))


def _proj_setup(ctx, inputs, output):
    x, W, bias, A_log, widths, acts, params, biases, l2_heads, fused, save_pre, l2_eps = inputs
    ctx.save_for_backward(x, W, bias, A_log, output[1] if save_pre else None)
    ctx.cfg = (widths, acts, params, biases, l2_heads, fused, l2_eps)


def _proj_grad(ctx, dy, dpre):
    x, W, bias, A_log, pre = ctx.saved_tensors
    dx, dW, dbias, dA = proj_bwd(x, W, bias, A_log, pre, dy, *ctx.cfg)
    return (dx, dW, dbias if bias is not None else None, dA if A_log is not None else None,
            None, None, None, None, None, None, None, None)


proj_fwd.register_autograd(_proj_grad, setup_context=_proj_setup)


def _segments(segments):
    """[(width, act[, param, bias, l2_head])] or dicts -> the five lists of proj_fwd."""
    cols = ([], [], [], [], [])
    for s in segments:
        if isinstance(s, dict):
            s = (s["width"], s.get("act", "none"), s.get("param", 0.0), s.get("bias", False), s.get("l2_head", 0))
        full = [None, "none", 0.0, False, 0]
        full[:len(s)] = list(s)
        w, a, p, b, l2 = full
        cols[0].append(int(w))
        cols[1].append(ACTS[a] if isinstance(a, str) else int(a))
        cols[2].append(float(p))
        cols[3].append(int(bool(b)))
        cols[4].append(int(l2))
    return cols


def projection_chain(x, W, segments, bias=None, A_log=None, save_pre=True, fused=True, l2_eps=0.0):
    """The fused input projections of a linear-RNN layer: y = x W^T (+ bias) split into column
    segments, each with its activation (and optional per-head L2 norm). x [..., d], W [N, d];
    segments: (width, act, param, bias, l2_head) tuples (trailing fields optional) or dicts,
    act one of ssmh.ACTS. Returns the list of segment outputs (views of one [..., N] tensor)."""
    cols = _segments(segments)
    y, _ = proj_fwd(x.reshape(-1, x.shape[-1]), W, bias, A_log, *cols, bool(fused), bool(save_pre), float(l2_eps))
    y = y.reshape(*x.shape[:-1], W.shape[0])
    return list(torch.split(y, cols[0], dim=-1))


# ---- output chain -----------------------------------------------------------------------------

GATES = {"silu": C["SSM_OUTCHAIN_SILU"], "sigmoid": C["SSM_OUTCHAIN_SIGMOID"]}


def _oc_desc(gate, head_dim, eps):
    d = lib.ssm_outchain_desc_init()
    d.gate, d.head_dim, d.eps = gate, head_dim, eps
    return d


def _oc_heads(o, head_dim):
    return o.shape[1] // head_dim if head_dim else 1


@torch.library.custom_op("ssmh::outchain_fwd", mutates_args=())
def outchain_fwd(o: Tensor, g: Tensor, weight: Optional[Tensor], W_o: Tensor, gate: int, head_dim: int,
                 eps: float) -> Tuple[Tensor, Tensor]:
    """y = (RMSNorm_head(o) * weight * gate(g)) W_o^T: o, g [M,D], W_o [d_out,D]. -> (y, rstd [M, D/head_dim])."""
    y = _empty((o.shape[0], W_o.shape[0]), o)
    rstd = _empty((o.shape[0], _oc_heads(o, head_dim)), o)
    d = _oc_desc(gate, head_dim, eps)
    _call(lambda c, *v: lib.ssm_outchain_forward(c, _byref(d), *v), o, g, weight, W_o, y, rstd)
    return y, rstd


@outchain_fwd.register_fake
def _(o, g, weight, W_o, gate, head_dim, eps):
    return o.new_empty((o.shape[0], W_o.shape[0])), o.new_empty((o.shape[0], _oc_heads(o, head_dim)))


@torch.library.custom_op("ssmh::outchain_bwd", mutates_args=())
def outchain_bwd(o: Tensor, g: Tensor, weight: Optional[Tensor], W_o: Tensor, rstd: Optional[Tensor], dy: Tensor,
                 gate: int, head_dim: int, eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """-> (do, dg, dweight [head_dim] or empty, dW_o)."""
    do, dg, dW = _empty(o.shape, o), _empty(g.shape, g), _empty(W_o.shape, W_o)
    dw = _empty(weight.shape if weight is not None else (0,), o)
    d = _oc_desc(gate, head_dim, eps)
    _call(lambda c, *v: lib.ssm_outchain_backward(c, _byref(d), *v), o, g, weight, W_o, rstd, dy, do, dg,
          dw if weight is not None else None, dW)
    return do, dg, dw, dW


@outchain_bwd.register_fake
def _(o, g, weight, W_o, rstd, dy, gate, head_dim, eps):
    return (o.new_empty(o.shape), g.new_empty(g.shape), o.new_empty(weight.shape if weight is not None else (0,)),
            W_o.new_empty(W_o.shape))


def _oc_setup(ctx, inputs, output):
    o, g, weight, W_o, gate, head_dim, eps = inputs
    ctx.save_for_backward(o, g, weight, W_o, output[1])
    ctx.cfg = (gate, head_dim, eps)


def _oc_grad(ctx, dy, drstd):
    o, g, weight, W_o, rstd = ctx.saved_tensors
    do, dg, dw, dW = outchain_bwd(o, g, weight, W_o, rstd, dy, *ctx.cfg)
    return do, dg, (dw if weight is not None else None), dW, None, None, None


outchain_fwd.register_autograd(_oc_grad, setup_context=_oc_setup)


def output_chain(o, g, W_o, weight=None, gate="silu", head_dim=0, eps=0.0):
    """y = (RMSNorm per head(o) * weight * gate(g)) W_o^T over the last axis: o, g [..., D],
    W_o [d_out, D], weight [head_dim] or None (ones); gate "silu" or "sigmoid"; head_dim 0 = D."""
    D = o.shape[-1]
    y, _ = outchain_fwd(o.reshape(-1, D), g.reshape(-1, D), weight, W_o, GATES[gate], int(head_dim), float(eps))
    return y.reshape(*o.shape[:-1], W_o.shape[0])


# ---- delta rule (DeltaNet, Gated DeltaNet, DeltaProduct) -------------------------------------

def _delta_desc(method, chunk, scale, saved=None):
    d = lib.ssm_delta_desc_init()
    d.method, d.chunk, d.scale = method, chunk, scale
    if saved is not None and saved.numel():
        d.saved = ctypes.pointer(_view(saved))  # the pointer object keeps the view alive
    return d


def _delta_saved_bytes(q, k, v, method, chunk, scale):
    """Bytes the forward keeps for the backward (desc.saved; 0 = nothing: host backends, the
    recurrent method). Without cu_seqlens only: the query knows no sequence count."""
    n_h = k.shape[3] if k.dim() == 5 else 1
    dev = q.device if q.device.type != "cuda" else torch.device("cuda", q.device.index or 0)
    # int(): fake tensors (opcheck) carry SymInts, which do not hash; this specializes on the
    # sizes as the C call did before
    return _delta_saved_query(dev, q.dtype, *(int(x) for x in q.shape[:4]), int(v.shape[-1]), int(n_h), method,
                              chunk, scale)


@functools.lru_cache(maxsize=256)
def _delta_saved_query(dev, dtype, B, T, H, K, V, n_h, method, chunk, scale):
    """The size query behind _delta_saved_bytes, once per shape: a training loop asks the same
    question every step, and each answer would otherwise open a context on the device."""
    d, n = _delta_desc(method, chunk, scale), ctypes.c_size_t(0)
    code, bits = _CODES[dtype]
    with _Ctx(dev) as ctx:
        _abi.check(ctx, lib.ssm_delta_workspace_size(ctx, _byref(d), _abi.DType(code, bits, 1), B, T, H, K, V, n_h, 3,
                                                     _byref(n)))
    return n.value


def _delta_state_shape(q, v, cu_seqlens):
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else q.shape[0]
    return (N, q.shape[2], q.shape[3], v.shape[-1])


def _delta_keep_bytes(q, k, v, cu_seqlens, method, chunk, scale, keep):
    return _delta_saved_bytes(q, k, v, method, chunk, scale) if keep and q.is_cuda and cu_seqlens is None else 0


@torch.library.custom_op("ssmh::delta_fwd", mutates_args=())
def delta_fwd(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Optional[Tensor], s0: Optional[Tensor],
              cu_seqlens: Optional[Tensor], method: int, chunk: int, scale: float,
              keep: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """S <- alpha (I - beta k k^T) S + beta k v^T per factor, o = scale S^T q: q [B,T,H,K],
    k [B,T,H,K] or [B,T,H,n_h,K], v [B,T,H,V] or [B,T,H,n_h,V], beta [B,T,H(,n_h)], g [B,T,H],
    s0 [N,H,K,V], cu_seqlens [N+1] (B = 1). -> (o [B,T,H,V], sT [N,H,K,V], saved): with keep, saved
    holds the chunk quantities for the backward (u8; empty where the backend keeps none)."""
    o = _empty(q.shape[:3] + v.shape[-1:], q)
    sT = _empty(_delta_state_shape(q, v, cu_seqlens), q)
    saved = torch.empty(_delta_keep_bytes(q, k, v, cu_seqlens, method, chunk, scale, keep), dtype=torch.uint8,
                        device=q.device)
    d = _delta_desc(method, chunk, scale, saved)
    _call(lambda c, *a: lib.ssm_delta_forward(c, _byref(d), *a), q, k, v, beta, g, s0, cu_seqlens, o, sT)
    return o, sT, saved


@delta_fwd.register_fake
def _(q, k, v, beta, g, s0, cu_seqlens, method, chunk, scale, keep):
    return (q.new_empty(q.shape[:3] + v.shape[-1:]), q.new_empty(_delta_state_shape(q, v, cu_seqlens)),
            q.new_empty(_delta_keep_bytes(q, k, v, cu_seqlens, method, chunk, scale, keep), dtype=torch.uint8))


@torch.library.custom_op("ssmh::delta_bwd", mutates_args=())
def delta_bwd(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Optional[Tensor], s0: Optional[Tensor],
              cu_seqlens: Optional[Tensor], dout: Tensor, dsT: Optional[Tensor], method: int, chunk: int,
              scale: float, saved: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """-> (dq, dk, dv, dbeta, dg or empty, ds0 [N,H,K,V]); recomputes the forward, less what the
    forward kept in saved (when given and not empty)."""
    dq, dk, dv, db = _empty(q.shape, q), _empty(k.shape, k), _empty(v.shape, v), _empty(beta.shape, beta)
    dg = _empty(g.shape if g is not None else (0,), q)
    ds0 = _empty(_delta_state_shape(q, v, cu_seqlens), q)
    d = _delta_desc(method, chunk, scale, saved)
    _call(lambda c, *a: lib.ssm_delta_backward(c, _byref(d), *a), q, k, v, beta, g, s0, cu_seqlens, dout, dsT,
          dq, dk, dv, db, dg if g is not None else None, ds0)
    return dq, dk, dv, db, dg, ds0


@delta_bwd.register_fake
def _(q, k, v, beta, g, s0, cu_seqlens, dout, dsT, method, chunk, scale, saved):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), beta.new_empty(beta.shape),
            q.new_empty(g.shape if g is not None else (0,)), q.new_empty(_delta_state_shape(q, v, cu_seqlens)))


def _delta_setup(ctx, inputs, output):
    q, k, v, beta, g, s0, cu, method, chunk, scale, keep = inputs
    ctx.save_for_backward(q, k, v, beta, g, s0, cu, output[2])
    ctx.cfg = (method, chunk, scale)
    ctx.set_materialize_grads(False)  # no zero-filled gradient for sT or the kept bytes


def _delta_grad(ctx, do, dsT, _dsaved):
    q, k, v, beta, g, s0, cu, saved = ctx.saved_tensors
    if do is None:
        do = q.new_zeros(q.shape[:3] + v.shape[-1:])
    dq, dk, dv, db, dg, ds0 = delta_bwd(q, k, v, beta, g, s0, cu, do, dsT, *ctx.cfg, saved)
    return (dq, dk, dv, db, (dg if g is not None else None), (ds0 if s0 is not None else None),
            None, None, None, None, None)


delta_fwd.register_autograd(_delta_grad, setup_context=_delta_setup)


@torch.library.custom_op("ssmh::delta_step", mutates_args=("state",))
def delta_step_op(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Optional[Tensor], state: Tensor,
                  scale: float) -> Tensor:
    """One decode step, state [B,H,K,V] updated in place: q [B,H,K], k/v [B,H(,n_h),K/V],
    beta [B,H(,n_h)], g [B,H]. -> o [B,H,V]."""
    o = _empty(q.shape[:2] + v.shape[-1:], q)
    d = _delta_desc(0, 0, scale)
    _call(lambda c, *a: lib.ssm_delta_step(c, _byref(d), *a), q, k, v, beta, g, state, o)
    return o


@delta_step_op.register_fake
def _(q, k, v, beta, g, state, scale):
    return q.new_empty(q.shape[:2] + v.shape[-1:])


def _l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def delta_rule(q, k, v, beta, g=None, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
               method="auto", chunk=0, use_qk_l2norm_in_kernel=False):
    """The delta-rule family with fla's conventions: q, k [B,T,H,K], v [B,T,H,V], beta [B,T,H],
    g [B,T,H] log gate (Gated DeltaNet) or None (DeltaNet); k/v [B,T,H,n_h,K/V] with beta
    [B,T,H,n_h] is DeltaProduct. scale None = 1/sqrt(K); initial_state [N,H,K,V]; cu_seqlens
    [N+1] (B = 1) for packed variable-length batches. Returns (o [B,T,H,V], final_state or None);
    both carry gradients. method: auto, recurrent, chunked."""
    if use_qk_l2norm_in_kernel:  # fla's flag; here a separate (differentiable) torch op
        q, k = _l2norm(q), _l2norm(k)
    # a forward that will be differentiated keeps its chunk quantities for the backward (CUDA, eager:
    # under torch.compile the kept size would be queried on symbolic shapes)
    keep = (torch.is_grad_enabled() and not torch.compiler.is_compiling()
            and any(t is not None and t.requires_grad for t in (q, k, v, beta, g, initial_state)))
    o, sT, _ = delta_fwd(q, k, v, beta, g, initial_state, cu_seqlens, DELTA_METHODS[method], int(chunk),
                         float(scale) if scale else 0.0, keep)
    return o, (sT if output_final_state else None)


def _fla_extra(kw):
    """fla keywords with no effect here are accepted; anything that would change the result is not."""
    for key, val in kw.items():
        if key == "head_first" and not val:
            continue
        raise TypeError(f"ssmh: unsupported fla argument {key}={val!r} (head-first tensors: pass "
                        "q.transpose(1, 2) etc., they go in as strided views)")


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
                     use_qk_l2norm_in_kernel=False, **kw):
    """fla.ops.delta_rule.chunk_delta_rule's signature."""
    _fla_extra(kw)
    return delta_rule(q, k, v, beta, None, scale, initial_state, output_final_state, cu_seqlens, "chunked", 0,
                      use_qk_l2norm_in_kernel)


def fused_recurrent_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, use_qk_l2norm_in_kernel=False, **kw):
    """fla.ops.delta_rule.fused_recurrent_delta_rule's signature."""
    _fla_extra(kw)
    return delta_rule(q, k, v, beta, None, scale, initial_state, output_final_state, cu_seqlens, "recurrent", 0,
                      use_qk_l2norm_in_kernel)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False, **kw):
    """fla.ops.gated_delta_rule.chunk_gated_delta_rule's signature (g before beta, as fla)."""
    _fla_extra(kw)
    return delta_rule(q, k, v, beta, g, scale, initial_state, output_final_state, cu_seqlens, "chunked", 0,
                      use_qk_l2norm_in_kernel)


def fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                     cu_seqlens=None, use_qk_l2norm_in_kernel=False, **kw):
    """fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule's signature."""
    _fla_extra(kw)
    return delta_rule(q, k, v, beta, g, scale, initial_state, output_final_state, cu_seqlens, "recurrent", 0,
                      use_qk_l2norm_in_kernel)


def chunk_gated_delta_product(q, k, v, g, beta, num_householder, scale=None, initial_state=None,
                              output_final_state=False, cu_seqlens=None, use_qk_l2norm_in_kernel=False, **kw):
    """fla.ops.gated_delta_product's layout: k, v [B, T*n_h, H, D], beta [B, T*n_h, H] (the n_h
    factors of token t at rows t*n_h ..), g [B,T,H] or None. Passed as strided views
    [B,T,H,n_h,D] (no copy)."""
    _fla_extra(kw)
    B, Tn, H = k.shape[:3]
    n = num_householder
    k5 = k.unflatten(1, (Tn // n, n)).transpose(2, 3)
    v5 = v.unflatten(1, (Tn // n, n)).transpose(2, 3)
    b4 = beta.unflatten(1, (Tn // n, n)).transpose(2, 3)
    return delta_rule(q, k5, v5, b4, g, scale, initial_state, output_final_state, cu_seqlens, "auto", 0,
                      use_qk_l2norm_in_kernel)


def delta_step(q, k, v, beta, state, g=None, scale=None):
    """One decode step (recurrent), the state [B,H,K,V] updated in place; returns o [B,H,V]."""
    return delta_step_op(q, k, v, beta, g, state, float(scale) if scale else 0.0)
