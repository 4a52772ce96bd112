"""ctypes shim over build/libssm.so (`make lib`): runs ssm.h's CUDA ops on torch tensors (or any
DLPack producer, converted with torch.from_dlpack) as zero-copy views, on the caller's current CUDA
stream, and wraps them as autograd functions.

    import torch, ssm
    h = ssm.linrec(A, b, h0=None, method="auto")      # A [S,T,n,n], b [S,T,n,m]; differentiable
    out = ssm.decay(log_decay, x, per_step=False)     # log_decay [B,T,R], x [B,T,R,C]; differentiable
"""
import ctypes
import os

_lib = ctypes.CDLL(os.environ.get("SSM_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "libssm.so")))


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]


class DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DType),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


class LinrecDesc(ctypes.Structure):
    _fields_ = [("method", ctypes.c_int), ("transition", ctypes.c_int), ("chunk", ctypes.c_int64),
                ("reverse", ctypes.c_int), ("stats", ctypes.c_void_p)]


class DecayDesc(ctypes.Structure):
    _fields_ = [("input", ctypes.c_int)]


METHODS = {"auto": 0, "seq": 1, "scan_hs": 2, "blelloch": 3, "cr": 4, "chunked": 5}
_P = ctypes.c_void_p
_lib.ssm_py_cuda_ctx.restype = _P
_lib.ssm_py_cuda_ctx.argtypes = [ctypes.c_int, _P]
_lib.ssm_ctx_last_error.restype = ctypes.c_char_p
_lib.ssm_ctx_last_error.argtypes = [_P]
_lib.ssm_cuda_set_stream.argtypes = [_P, _P]
for _f, _n in (("ssm_linrec_forward", 7), ("ssm_linrec_backward", 10), ("ssm_decay_forward", 7), ("ssm_decay_backward", 10)):
    getattr(_lib, _f).argtypes = [_P] * _n
    getattr(_lib, _f).restype = ctypes.c_int
_ctxs = {}


def _torch(t):
    import torch
    return t if t is None or isinstance(t, torch.Tensor) else torch.from_dlpack(t)


def _view(t):
    """An ssm_tensor view of a torch tensor (None -> NULL)."""
    import torch
    if t is None:
        return None
    codes = {torch.float32: (2, 32), torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.float64: (2, 64)}
    if t.dtype not in codes:
        raise TypeError(f"ssm: unsupported dtype {t.dtype}")
    v = Tensor()
    v.data = t.data_ptr()
    v.device = Device(2 if t.is_cuda else 1, t.device.index or 0 if t.is_cuda else 0)
    v.ndim = t.dim()
    c, b = codes[t.dtype]
    v.dtype = DType(c, b, 1)
    for i in range(t.dim()):
        v.shape[i], v.strides[i] = t.shape[i], t.stride(i)
    return ctypes.byref(v)


def _ctx(t):
    import torch
    dev = t.device.index or 0
    if dev not in _ctxs:
        _ctxs[dev] = _lib.ssm_py_cuda_ctx(dev, None)
        if not _ctxs[dev]:
            raise RuntimeError("ssm: cannot create a CUDA context")
    _lib.ssm_cuda_set_stream(_ctxs[dev], ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream))
    return _ctxs[dev]


def _check(ctx, r):
    if r != 0:
        raise RuntimeError(f"ssm error {r}: {_lib.ssm_ctx_last_error(ctx).decode()}")


def linrec_forward(A, b, h0=None, method="auto", reverse=False, chunk=0):
    """h_t = A_t h_{t-1} + b_t; returns (h, hT)."""
    import torch
    A, b, h0 = _torch(A), _torch(b), _torch(h0)
    h = torch.empty_like(b)
    hT = torch.empty_like(b[:, 0])
    ctx = _ctx(A)
    d = LinrecDesc(METHODS[method], 0, chunk, int(reverse), None)
    _check(ctx, _lib.ssm_linrec_forward(ctx, ctypes.byref(d), _view(A), _view(b), _view(h0), _view(h), _view(hT)))
    return h, hT


def linrec_backward(A, h0, h, dh, dhT=None, method="auto", reverse=False, chunk=0):
    """Returns (dA, db, dh0 or None)."""
    import torch
    dA, db = torch.empty_like(A), torch.empty_like(h)
    dh0 = torch.empty_like(h0) if h0 is not None else None
    ctx = _ctx(A)
    d = LinrecDesc(METHODS[method], 0, chunk, int(reverse), None)
    _check(ctx, _lib.ssm_linrec_backward(ctx, ctypes.byref(d), _view(A), _view(h0), _view(h), _view(dh), _view(dhT),
                                         _view(dA), _view(db), _view(dh0)))
    return dA, db, dh0


def decay_forward(log_decay, x, h0=None, per_step=False):
    """out_t = sum_{j<=t} exp(cA_t - cA_j) x_j (+ exp(cA_t) h0); returns (out, hT)."""
    import torch
    log_decay, x, h0 = _torch(log_decay), _torch(x), _torch(h0)
    out = torch.empty_like(x)
    hT = torch.empty_like(x[:, 0])
    ctx = _ctx(x)
    d = DecayDesc(int(per_step))
    _check(ctx, _lib.ssm_decay_forward(ctx, ctypes.byref(d), _view(log_decay), _view(x), _view(h0), _view(out), _view(hT)))
    return out, hT


def decay_backward(log_decay, h0, out, dout, dhT=None, per_step=False):
    """Returns (dx, dlog_decay, dh0 or None)."""
    import torch
    dx, dld = torch.empty_like(out), torch.empty_like(log_decay)
    dh0 = torch.empty_like(h0) if h0 is not None else None
    ctx = _ctx(out)
    d = DecayDesc(int(per_step))
    _check(ctx, _lib.ssm_decay_backward(ctx, ctypes.byref(d), _view(log_decay), _view(h0), _view(out), _view(dout),
                                        _view(dhT), _view(dx), _view(dld), _view(dh0)))
    return dx, dld, dh0


def _autograd():
    import torch

    class LinRec(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A, b, h0, method, reverse, chunk):
            A, b = A.contiguous(), b.contiguous()
            h0 = h0.contiguous() if h0 is not None else None
            h, _ = linrec_forward(A, b, h0, method, reverse, chunk)
            ctx.save_for_backward(A, h0 if h0 is not None else torch.empty(0), h)
            ctx.cfg = (h0 is not None, method, reverse, chunk)
            return h

        @staticmethod
        def backward(ctx, dh):
            A, h0, h = ctx.saved_tensors
            has_h0, method, reverse, chunk = ctx.cfg
            dA, db, dh0 = linrec_backward(A, h0 if has_h0 else None, h, dh.contiguous(), None, method, reverse, chunk)
            return dA, db, dh0, None, None, None

    class Decay(torch.autograd.Function):
        @staticmethod
        def forward(ctx, log_decay, x, h0, per_step):
            log_decay, x = log_decay.contiguous(), x.contiguous()
            h0 = h0.contiguous() if h0 is not None else None
            out, _ = decay_forward(log_decay, x, h0, per_step)
            ctx.save_for_backward(log_decay, h0 if h0 is not None else torch.empty(0), out)
            ctx.cfg = (h0 is not None, per_step)
            return out

        @staticmethod
        def backward(ctx, dout):
            ld, h0, out = ctx.saved_tensors
            has_h0, per_step = ctx.cfg
            dx, dld, dh0 = decay_backward(ld, h0 if has_h0 else None, out, dout.contiguous(), None, per_step)
            return dld, dx, dh0, None

    return LinRec, Decay


_fns = None


def linrec(A, b, h0=None, method="auto", reverse=False, chunk=0):
    """Differentiable h = linrec(A, b, h0): A [S,T,n,n], b [S,T,n,m], h0 [S,n,m] or None."""
    global _fns
    _fns = _fns or _autograd()
    return _fns[0].apply(_torch(A), _torch(b), _torch(h0), method, reverse, chunk)


def decay(log_decay, x, h0=None, per_step=False):
    """Differentiable decay scan: log_decay [B,T,R], x [B,T,R,C], h0 [B,R,C] or None."""
    global _fns
    _fns = _fns or _autograd()
    return _fns[1].apply(_torch(log_decay), _torch(x), _torch(h0), per_step)
