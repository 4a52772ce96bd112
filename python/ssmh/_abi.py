"""The C ABI of libssmh.so through ctypes: struct mirrors checked against the compiler's layout
(ssmh_abi() in csrc/ssmh.c reports sizeof/offsetof and the enum values), function prototypes,
contexts, and tensor views of anything with a data pointer and element strides (numpy arrays
here; torch tensors in ssmh.ops)."""
import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
LIB_PATH = os.environ.get("SSMH_LIB", os.path.join(_HERE, "libssmh.so"))

try:  # torch first: its libcublas is then the one the loader gives ours (same soname)
    import torch  # noqa: F401
except ImportError:
    pass

lib = ctypes.CDLL(LIB_PATH)

_i32, _i64, _u8, _u16, _u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint64
_int, _dbl, _P, _sz = ctypes.c_int, ctypes.c_double, ctypes.c_void_p, ctypes.c_size_t


class Device(ctypes.Structure):
    _fields_ = [("type", _i32), ("id", _i32)]


class DType(ctypes.Structure):
    _fields_ = [("code", _u8), ("bits", _u8), ("lanes", _u16)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", _P), ("device", Device), ("ndim", _i32), ("dtype", DType),
                ("shape", _i64 * 8), ("strides", _i64 * 8)]


class LinrecStats(ctypes.Structure):
    _fields_ = [("method", _int), ("mat_mat", _i64), ("mat_state", _i64), ("flops", _dbl), ("workspace_bytes", _sz)]


class LinrecDesc(ctypes.Structure):
    _fields_ = [("method", _int), ("transition", _int), ("chunk", _i64), ("reverse", _int),
                ("stats", ctypes.POINTER(LinrecStats))]


class DecayDesc(ctypes.Structure):
    _fields_ = [("input", _int)]


class ProjSegment(ctypes.Structure):
    _fields_ = [("width", _i64), ("act", _int), ("param", _dbl), ("bias", _int), ("l2_head", _i64)]


class ProjStats(ctypes.Structure):
    _fields_ = [("gemm_calls", _i64), ("gemm_flops", _dbl), ("workspace_bytes", _sz)]


class ProjDesc(ctypes.Structure):
    _fields_ = [("nseg", _int), ("seg", ProjSegment * 16), ("path", _int), ("save", _int), ("block_rows", _i64),
                ("l2_eps", _dbl), ("stats", ctypes.POINTER(ProjStats))]


class OutchainDesc(ctypes.Structure):
    _fields_ = [("gate", _int), ("head_dim", _i64), ("eps", _dbl), ("block_rows", _i64)]


class Allocator(ctypes.Structure):
    _fields_ = [("user", _P), ("alloc", _P), ("free", _P)]


class BellTopologyConfig(ctypes.Structure):
    _fields_ = [("period", _i64), ("prune_frac", _dbl), ("swap_ratio", _dbl), ("epsilon", _dbl),
                ("keep_alpha", _dbl), ("grow_alpha", _dbl), ("drop_score", _int), ("cosine_decay", _int),
                ("stop_step", _i64), ("seed", _u64), ("layer_id", _u64), ("allreduce", _P), ("allreduce_user", _P)]


class BellTopology(ctypes.Structure):
    _fields_ = [("config", BellTopologyConfig), ("R", _i64), ("C", _i64), ("K", _i64),
                ("keep_score", ctypes.POINTER(_dbl)), ("grow_score", ctypes.POINTER(_dbl)),
                ("observations", _i64), ("allocator", Allocator), ("device_type", ctypes.c_int32),
                ("device_state", _P), ("device_release", _P)]


class BellTopologyReport(ctypes.Structure):
    _fields_ = [("updated", _int), ("pruned", _i64), ("grown", _i64), ("explored", _i64), ("rejected", _i64),
                ("rows_changed", _i64), ("churn", _dbl), ("prune_frac", _dbl), ("checksum", _u64)]


class DeltaStats(ctypes.Structure):
    _fields_ = [("method", _int), ("chunk", _i64), ("flops", _dbl), ("workspace_bytes", _sz)]


class DeltaDesc(ctypes.Structure):
    _fields_ = [("method", _int), ("chunk", _i64), ("scale", _dbl), ("stats", ctypes.POINTER(DeltaStats)),
                ("saved", ctypes.POINTER(Tensor))]


STRUCTS = {"ssm_device": Device, "ssm_dtype": DType, "ssm_tensor": Tensor, "ssm_linrec_stats": LinrecStats,
           "ssm_linrec_desc": LinrecDesc, "ssm_decay_desc": DecayDesc, "ssm_proj_segment": ProjSegment,
           "ssm_proj_stats": ProjStats, "ssm_proj_desc": ProjDesc, "ssm_outchain_desc": OutchainDesc,
           "ssm_allocator": Allocator, "ssm_bell_topology_config": BellTopologyConfig,
           "ssm_bell_topology": BellTopology, "ssm_bell_topology_report": BellTopologyReport,
           "ssm_delta_stats": DeltaStats, "ssm_delta_desc": DeltaDesc}

lib.ssmh_abi.restype = ctypes.c_char_p
lib.ssmh_build_info.restype = ctypes.c_char_p


def c_layout():
    """The compiler's view: ({struct: size}, {struct.field: (offset, size)}, {CONST: value})."""
    sizes, fields, consts = {}, {}, {}
    for line in lib.ssmh_abi().decode().splitlines():
        kind, name, *v = line.split()
        if kind == "size":
            sizes[name] = int(v[0])
        elif kind == "field":
            fields[name] = (int(v[0]), int(v[1]))
        else:
            consts[name] = int(v[0])
    return sizes, fields, consts


def layout_mismatches():
    """Every difference between the ctypes mirrors and the C layout (empty = they agree)."""
    sizes, fields, _ = c_layout()
    bad = []
    for cname, py in STRUCTS.items():
        if ctypes.sizeof(py) != sizes.get(cname):
            bad.append(f"sizeof({cname}): C {sizes.get(cname)}, ctypes {ctypes.sizeof(py)}")
        cf = {k.split(".", 1)[1]: v for k, v in fields.items() if k.split(".", 1)[0] == cname}
        pf = {f[0]: (getattr(py, f[0]).offset, getattr(py, f[0]).size) for f in py._fields_}
        if set(cf) != set(pf):
            bad.append(f"{cname} fields: C {sorted(cf)}, ctypes {sorted(pf)}")
        for f in set(cf) & set(pf):
            if cf[f] != pf[f]:
                bad.append(f"{cname}.{f}: C offset/size {cf[f]}, ctypes {pf[f]}")
    return bad


_bad = layout_mismatches()
if _bad:
    raise ImportError("ssmh: the ctypes mirrors disagree with the compiled headers:\n  " + "\n  ".join(_bad))
C = c_layout()[2]  # enum values as compiled

METHODS = {"auto": C["SSM_LINREC_AUTO"], "seq": C["SSM_LINREC_SEQUENTIAL"], "scan_hs": C["SSM_LINREC_SCAN_HS"],
           "blelloch": C["SSM_LINREC_BLELLOCH"], "cr": C["SSM_LINREC_CR"], "chunked": C["SSM_LINREC_CHUNKED"]}
DELTA_METHODS = {"auto": C["SSM_DELTA_AUTO"], "recurrent": C["SSM_DELTA_RECURRENT"], "chunked": C["SSM_DELTA_CHUNKED"]}

# ---- prototypes --------------------------------------------------------------------------
_T = ctypes.POINTER(Tensor)
_PROTOS = {
    "ssmh_cpu_ctx": (_P, [_int]),
    "ssm_ctx_destroy": (None, [_P]),
    "ssm_ctx_last_error": (ctypes.c_char_p, [_P]),
    "ssm_result_string": (ctypes.c_char_p, [_int]),
    "ssm_ctx_backend_name": (ctypes.c_char_p, [_P]),
    "ssm_linrec_method_name": (ctypes.c_char_p, [_int]),
    "ssm_proj_act_name": (ctypes.c_char_p, [_int]),
    "ssm_linrec_desc_init": (LinrecDesc, []),
    "ssm_decay_desc_init": (DecayDesc, []),
    "ssm_proj_desc_init": (ProjDesc, []),
    "ssm_outchain_desc_init": (OutchainDesc, []),
    "ssm_bell_topology_config_init": (BellTopologyConfig, []),
    "ssm_proj_desc_add": (_int, [ctypes.POINTER(ProjDesc), _i64, _int, _dbl, _int, _i64]),
    "ssm_linrec_forward": (_int, [_P, ctypes.POINTER(LinrecDesc), _T, _T, _T, _T, _T]),
    "ssm_linrec_backward": (_int, [_P, ctypes.POINTER(LinrecDesc), _T, _T, _T, _T, _T, _T, _T, _T]),
    "ssm_decay_forward": (_int, [_P, ctypes.POINTER(DecayDesc), _T, _T, _T, _T, _T]),
    "ssm_decay_backward": (_int, [_P, ctypes.POINTER(DecayDesc), _T, _T, _T, _T, _T, _T, _T, _T]),
    "ssm_bell_validate": (_int, [_P, _T, _T, _i64]),
    "ssm_bell_transpose_index": (_int, [_P, _T, _T, _T]),
    "ssm_bell_forward": (_int, [_P, _T, _T, _T, _T, _T]),
    "ssm_bell_backward": (_int, [_P, _T, _T, _T, _T, _T, _T, _T, _T, _T]),
    "ssm_bell_checksum": (_int, [_P, _T, ctypes.POINTER(_u64)]),
    "ssm_bell_topology_create": (_int, [_P, ctypes.POINTER(BellTopologyConfig), _i64, _i64, _i64,
                                        ctypes.POINTER(ctypes.POINTER(BellTopology))]),
    "ssm_bell_topology_destroy": (None, [ctypes.POINTER(BellTopology)]),
    "ssm_bell_topology_observe": (_int, [_P, ctypes.POINTER(BellTopology), _T, _T, _T]),
    "ssm_bell_topology_step": (_int, [_P, ctypes.POINTER(BellTopology), _i64, _T, _T, _T, _T,
                                      ctypes.POINTER(_T), _int, ctypes.POINTER(BellTopologyReport)]),
    "ssm_proj_forward": (_int, [_P, ctypes.POINTER(ProjDesc), _T, _T, _T, _T, _T, _T]),
    "ssm_proj_backward": (_int, [_P, ctypes.POINTER(ProjDesc), _T, _T, _T, _T, _T, _T, _T, _T, _T, _T]),
    "ssm_delta_desc_init": (DeltaDesc, []),
    "ssm_delta_method_name": (ctypes.c_char_p, [_int]),
    "ssm_delta_forward": (_int, [_P, ctypes.POINTER(DeltaDesc), _T, _T, _T, _T, _T, _T, _T, _T, _T]),
    "ssm_delta_backward": (_int, [_P, ctypes.POINTER(DeltaDesc), _T, _T, _T, _T, _T, _T, _T, _T, _T, _T, _T, _T, _T,
                                  _T, _T]),
    "ssm_delta_workspace_size": (_int, [_P, ctypes.POINTER(DeltaDesc), DType, _i64, _i64, _i64, _i64, _i64, _i64,
                                        _int, ctypes.POINTER(_sz)]),
    "ssm_delta_step": (_int, [_P, ctypes.POINTER(DeltaDesc), _T, _T, _T, _T, _T, _T, _T]),
    "ssm_outchain_forward": (_int, [_P, ctypes.POINTER(OutchainDesc), _T, _T, _T, _T, _T, _T]),
    "ssm_outchain_backward": (_int, [_P, ctypes.POINTER(OutchainDesc), _T, _T, _T, _T, _T, _T, _T, _T, _T, _T]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args

ALLOC_FN = ctypes.CFUNCTYPE(_P, _P, _sz, _P)
FREE_FN = ctypes.CFUNCTYPE(None, _P, _P, _P)
ALLREDUCE_FN = ctypes.CFUNCTYPE(_int, _P, _P, _i64)  # ssm_bell_allreduce_fn
HAS_CUDA = hasattr(lib, "ssmh_cuda_ctx")
if HAS_CUDA:
    lib.ssmh_cuda_ctx.restype = _P
    lib.ssmh_cuda_ctx.argtypes = [_int, _P, _P, ALLOC_FN, FREE_FN, _P]
    lib.ssmh_cuda_runtime_version.restype = _int


class SSMError(RuntimeError):
    """A non-zero ssm_result: .code is the result, the message is ssm_ctx_last_error()."""

    def __init__(self, code, message):
        super().__init__(f"ssm.h error {code} ({lib.ssm_result_string(code).decode()}): {message}")
        self.code = code


def check(ctx, r):
    if r != 0:
        raise SSMError(r, lib.ssm_ctx_last_error(ctx).decode())


_tls = threading.local()


def cpu_ctx(threads=0):
    """This thread's CPU context (contexts are not thread-safe; one per thread, kept)."""
    ctx = getattr(_tls, "cpu", None)
    if ctx is None:
        ctx = lib.ssmh_cpu_ctx(threads)
        if not ctx:
            raise RuntimeError("ssmh: cannot create a CPU context")
        _tls.cpu = ctx
    return ctx


# One struct.pack per view (half the cost of filling the ctypes fields one by one); the
# format is checked here against the ctypes mirror, itself checked against the compiler above.
_PACK = __import__("struct").Struct("<Q ii i BBH 8q 8q")
_ZEROS = (0,) * 8
if (_PACK.size, Tensor.shape.offset, Tensor.strides.offset) != (ctypes.sizeof(Tensor), 24, 88):
    raise ImportError("ssmh: ssm_tensor's packed layout disagrees with its ctypes mirror")


def make_tensor(ptr, dtype, shape, strides, device=(1, 0)):
    """An ssm_tensor view: dtype (code, bits), shape/strides in elements."""
    n = len(shape)
    if n > 8:
        raise ValueError("ssmh: more than 8 dimensions")
    return Tensor.from_buffer_copy(_PACK.pack(ptr or 0, device[0], device[1], n, dtype[0], dtype[1], 1, *shape,
                                              *_ZEROS[n:], *strides, *_ZEROS[n:]))


_NP_CODES = {"f4": (2, 32), "f8": (2, 64), "f2": (2, 16), "i4": (0, 32), "i8": (0, 64)}


def numpy_view(a):
    """An ssm_tensor view of a numpy array (no copy; strides converted to elements)."""
    if a is None:
        return None
    key = a.dtype.kind + str(a.dtype.itemsize)
    if key not in _NP_CODES or not a.dtype.isnative:
        raise TypeError(f"ssmh: unsupported numpy dtype {a.dtype}")
    if any(s % a.itemsize for s in a.strides):
        raise ValueError("ssmh: strides are not multiples of the element size")
    return ctypes.byref(make_tensor(a.ctypes.data, _NP_CODES[key], a.shape, [s // a.itemsize for s in a.strides]))
