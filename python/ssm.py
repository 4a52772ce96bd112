"""Minimal ctypes shim over build/libssm.so (make lib): passes torch tensors (or any object with
__dlpack__ / data_ptr, shape, stride) as ssm_tensor views, on the caller's current CUDA stream.
Unverified on a GPU in this commit (written last); see bench/device_run.sh."""
import ctypes, os

_lib = ctypes.CDLL(os.environ.get("SSM_LIB", os.path.join(os.path.dirname(__file__), "..", "build", "libssm.so")))


class Device(ctypes.Structure): _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]
class DType(ctypes.Structure): _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DType),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]
class LinrecDesc(ctypes.Structure):
    _fields_ = [("method", ctypes.c_int), ("transition", ctypes.c_int), ("chunk", ctypes.c_int64),
                ("reverse", ctypes.c_int), ("stats", ctypes.c_void_p)]
class DecayDesc(ctypes.Structure): _fields_ = [("input", ctypes.c_int)]

METHODS = {"auto": 0, "seq": 1, "scan_hs": 2, "blelloch": 3, "cr": 4, "chunked": 5}
_lib.ssm_py_cuda_ctx.restype = ctypes.c_void_p
_lib.ssm_py_cuda_ctx.argtypes = [ctypes.c_int, ctypes.c_void_p]
_lib.ssm_ctx_last_error.restype = ctypes.c_char_p
_lib.ssm_ctx_last_error.argtypes = [ctypes.c_void_p]
_lib.ssm_cuda_set_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_ctxs = {}


def _view(t):
    import torch
    codes = {torch.float32: (2, 32), torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.float64: (2, 64)}
    v = Tensor()
    v.data = t.data_ptr()
    v.device = Device(2 if t.is_cuda else 1, t.device.index or 0)
    v.ndim = t.dim()
    c, b = codes[t.dtype]
    v.dtype = DType(c, b, 1)
    for i in range(t.dim()):
        v.shape[i], v.strides[i] = t.shape[i], t.stride(i)
    return v


def _ctx(t):
    import torch
    dev = t.device.index or 0
    if dev not in _ctxs:
        _ctxs[dev] = _lib.ssm_py_cuda_ctx(dev, None)
        if not _ctxs[dev]: raise RuntimeError("ssm: cannot create a CUDA context")
    _lib.ssm_cuda_set_stream(_ctxs[dev], ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream))
    return _ctxs[dev]


def _check(ctx, r):
    if r != 0: raise RuntimeError(f"ssm error {r}: {_lib.ssm_ctx_last_error(ctx).decode()}")


def linrec_forward(A, b, h0=None, method="auto", reverse=False, chunk=0):
    import torch
    h = torch.empty_like(b)
    ctx = _ctx(A)
    d = LinrecDesc(METHODS[method], 0, chunk, int(reverse), None)
    vA, vb, vh = _view(A), _view(b), _view(h)
    v0 = ctypes.byref(_view(h0)) if h0 is not None else None
    _check(ctx, _lib.ssm_linrec_forward(ctypes.c_void_p(ctx), ctypes.byref(d), ctypes.byref(vA), ctypes.byref(vb), v0, ctypes.byref(vh), None))
    return h


def decay_forward(log_decay, x, per_step=False):
    import torch
    out = torch.empty_like(x)
    ctx = _ctx(x)
    d = DecayDesc(int(per_step))
    _check(ctx, _lib.ssm_decay_forward(ctypes.c_void_p(ctx), ctypes.byref(d), ctypes.byref(_view(log_decay)), ctypes.byref(_view(x)), None, ctypes.byref(_view(out)), None))
    return out
