"""numpy entry points (CPU, no torch needed): forward passes through the C ABI on numpy arrays
passed as strided views, for quick checks and for programs without PyTorch."""
import ctypes

from . import _abi
from ._abi import C, METHODS, lib


def _np():
    import numpy
    return numpy


def _out(shape, like):
    return _np().empty(shape, dtype=like.dtype)


def linrec(A, b, h0=None, method="auto", chunk=0, reverse=False):
    """h_t = A_t h_{t-1} + b_t on numpy arrays (f32 / f64): returns (h, hT)."""
    h, hT = _out(b.shape, b), _out(b.shape[:1] + b.shape[2:], b)
    d = lib.ssm_linrec_desc_init()
    d.method, d.chunk, d.reverse = METHODS[method], chunk, int(reverse)
    ctx = _abi.cpu_ctx()
    v = _abi.numpy_view
    _abi.check(ctx, lib.ssm_linrec_forward(ctx, ctypes.byref(d), v(A), v(b), v(h0), v(h), v(hT)))
    return h, hT


def decay(log_decay, x, h0=None, per_step=False):
    """The decay scan on numpy arrays: log_decay [B,T,R], x [B,T,R,C]; returns (out, hT)."""
    out, hT = _out(x.shape, x), _out(x.shape[:1] + x.shape[2:], x)
    d = lib.ssm_decay_desc_init()
    d.input = C["SSM_DECAY_PER_STEP"] if per_step else C["SSM_DECAY_CUMULATIVE"]
    ctx = _abi.cpu_ctx()
    v = _abi.numpy_view
    _abi.check(ctx, lib.ssm_decay_forward(ctx, ctypes.byref(d), v(log_decay), v(x), v(h0), v(out), v(hT)))
    return out, hT
