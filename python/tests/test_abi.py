"""The installed ssmh package without torch: the ctypes mirrors against the compiler's struct
layouts and enum values, and numpy forward passes through the C ABI (every linrec method,
strided views, decay scans, errors) against numpy f64 loops.
Prints `N passed, N failed` last (CI runs it from `make test`)."""
import ctypes
import sys
import traceback

import numpy as np

import ssmh
from ssmh import _abi

rng = np.random.default_rng()
passed = failed = 0


def check(name, fn):
    global passed, failed
    try:
        fn()
        passed += 1
        print(f"ok   {name}")
    except Exception:  # noqa: BLE001
        failed += 1
        print(f"FAIL {name}\n{traceback.format_exc()}")


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def layouts_agree():
    assert ssmh.layout_mismatches() == [], ssmh.layout_mismatches()
    sizes, fields, consts = _abi.c_layout()
    assert set(_abi.STRUCTS) <= set(sizes), "a mirrored struct is missing from ssmh_abi()"
    assert _abi.Tensor.shape.size // 8 == consts["SSM_MAX_DIMS"], "shape array length != SSM_MAX_DIMS"
    assert _abi.ProjDesc.seg.size // ctypes.sizeof(_abi.ProjSegment) == consts["SSM_PROJ_MAX_SEGMENTS"]
    names = [_abi.lib.ssm_linrec_method_name(v).decode() for v in _abi.METHODS.values()]
    assert len(set(names)) == len(names) == consts["SSM_LINREC_METHOD_COUNT"], names


def mismatch_is_detected():
    """A mirror that drifts from the header (a field dropped) is reported, not trusted."""
    class Drifted(ctypes.Structure):
        _fields_ = [f for f in _abi.LinrecDesc._fields_ if f[0] != "chunk"]
    saved = _abi.STRUCTS["ssm_linrec_desc"]
    _abi.STRUCTS["ssm_linrec_desc"] = Drifted
    try:
        bad = _abi.layout_mismatches()
    finally:
        _abi.STRUCTS["ssm_linrec_desc"] = saved
    assert any("ssm_linrec_desc" in b for b in bad), bad


def ref_linrec(A, b, h0, reverse=False):
    S, T = A.shape[:2]
    h = h0.astype(np.float64) if h0 is not None else np.zeros(b.shape[:1] + b.shape[2:])
    out = np.empty(b.shape)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h = A[:, t] @ h + b[:, t]
        out[:, t] = h
    return out, h


def linrec_every_method():
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        for method in ssmh.METHODS:
            for reverse in (False, True):
                S, T, n, m = 3, 31, 5, 2
                A = (rng.standard_normal((S, T, n, n)) * 0.8 / n ** 0.5).astype(dt)
                b = rng.standard_normal((S, T, n, m)).astype(dt)
                h0 = rng.standard_normal((S, n, m)).astype(dt)
                h, hT = ssmh.cpu.linrec(A, b, h0, method=method, reverse=reverse)
                hr, hTr = ref_linrec(A.astype(np.float64), b.astype(np.float64), h0, reverse)
                assert rel(h, hr) < tol and rel(hT, hTr) < tol, (method, dt, rel(h, hr), rel(hT, hTr))


def linrec_strided_views():
    S, T, n, m = 2, 23, 7, 3
    A = rng.standard_normal((S, T, n, n)) * 0.3
    At = np.ascontiguousarray(A.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # column-major matrices
    bb = rng.standard_normal((S, T, n, 2 * m))[..., ::2]                       # strided last axis
    h, _ = ssmh.cpu.linrec(At, bb, None, method="blelloch")
    assert rel(h, ref_linrec(A, bb, None)[0]) < 1e-12


def decay_scan():
    for per_step in (False, True):
        B, T, R, Cc = 2, 101, 3, 5
        a = -rng.random((B, T, R)) * 2
        ld = a if per_step else np.cumsum(a, 1)
        x, h0 = rng.standard_normal((B, T, R, Cc)), rng.standard_normal((B, R, Cc))
        out, hT = ssmh.cpu.decay(ld, x, h0, per_step=per_step)
        h, ref = h0, np.empty_like(x)
        for t in range(T):
            h = np.exp(a[:, t])[..., None] * h + x[:, t]
            ref[:, t] = h
        assert rel(out, ref) < 1e-12 and rel(hT, h) < 1e-12


def errors_raise():
    A = np.zeros((2, 5, 3, 3))
    b = np.zeros((2, 4, 3, 1))
    try:
        ssmh.cpu.linrec(A, b)
    except ssmh.SSMError as e:
        assert e.code == -2 and "ssm_linrec_forward" in str(e), str(e)
    else:
        raise AssertionError("mismatched T accepted")


print(f"ssmh {ssmh.build_info()} at {ssmh.__file__}")
for name, fn in [("layouts_agree", layouts_agree), ("mismatch_is_detected", mismatch_is_detected),
                 ("linrec_every_method", linrec_every_method), ("linrec_strided_views", linrec_strided_views),
                 ("decay_scan", decay_scan), ("errors_raise", errors_raise)]:
    check(name, fn)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
