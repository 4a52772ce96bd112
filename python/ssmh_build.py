"""PEP 517 build backend of the `ssmh` package (pyproject.toml: backend-path = ["python"]).

It needs nothing but the standard library, so `pip install .` works offline and without
build isolation concerns. It compiles the headers into one shared library, ssmh/libssmh.so,
loaded with ctypes (no CPython extension: the wheel is tagged py3-none-<platform>):
  - CPU: `cc` compiles ssm.h's implementation (python/ssmh/csrc/ssmh.c), with the BLIS backend
    when `blis.h` + `-lblis` link (probed), else the reference backend.
  - CUDA: when `nvcc` is found (SSMH_NVCC, $CUDA_HOME/bin, PATH), nvcc compiles ssm_cuda.h
    (python/ssmh/csrc/ssmh_cuda.cu) for sm_80 + sm_90a + PTX (SSMH_CUDA_ARCHS overrides:
    "80;90a" means sm_80, sm_90a and compute_90 PTX; sm_90a code is what runs the Hopper-only
    projection kernel) and links both halves with -lcublas.
Environment: SSMH_CUDA=0 (CPU only) / 1 (fail without nvcc), SSMH_BLAS=0/1 likewise,
CC, SSMH_CFLAGS (default -O2 -march=native: the library is built where it runs).
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "ssmh"
HERE = os.path.dirname(os.path.abspath(__file__))  # python/
ROOT = os.path.dirname(HERE)                       # the repository (the headers)
SUMMARY = "PyTorch and ctypes bindings of ssm.h (linear recurrences, decay scans, block-sparse and projection-chain kernels)"


def _version():
    with open(os.path.join(ROOT, "ssm.h")) as f:
        return re.search(r'#define SSM_VERSION_STRING "([^"]+)"', f.read()).group(1)


def _log(msg):
    print(f"ssmh build: {msg}", file=sys.stderr, flush=True)


def _run(cmd):
    _log(" ".join(cmd))
    subprocess.run(cmd, check=True)


def _flag(name):
    v = os.environ.get(name, "")
    return None if v == "" else v not in ("0", "no", "off", "false")


def _find_nvcc():
    if _flag("SSMH_CUDA") is False:
        return None
    cands = [os.environ.get("SSMH_NVCC", "")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", "nvcc"))
    cands.append(shutil.which("nvcc") or "")
    nvcc = next((c for c in cands if c and os.access(c, os.X_OK)), None)
    if nvcc is None and _flag("SSMH_CUDA"):
        raise RuntimeError("SSMH_CUDA=1 but no nvcc found (set SSMH_NVCC or CUDA_HOME)")
    return nvcc


def _probe_blis(cc, tmp):
    if _flag("SSMH_BLAS") is False:
        return False
    src = os.path.join(tmp, "probe_blis.c")
    with open(src, "w") as f:
        f.write("#include <blis.h>\nint main(void){return bli_info_get_version_str()[0]==0;}\n")
    ok = subprocess.run([cc, src, "-o", os.path.join(tmp, "probe_blis"), "-D_POSIX_C_SOURCE=200809L", "-fopenmp",
                         "-lblis", "-fopenmp", "-lm"], capture_output=True).returncode == 0
    if not ok and _flag("SSMH_BLAS"):
        raise RuntimeError("SSMH_BLAS=1 but blis.h / -lblis not found (apt-get install libblis-dev)")
    return ok


def _gencode(archs):
    archs = [a.strip() for a in archs.split(";") if a.strip()]
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    ptx = archs[-1].rstrip("a")  # PTX for newer GPUs: arch-specific (a) PTX would run nowhere else
    flags += ["-gencode", f"arch=compute_{ptx},code=compute_{ptx}"]
    return flags


def build_library(out_dir):
    """Compiles libssmh.so into out_dir; returns (path, description)."""
    cc = os.environ.get("CC", "cc")
    cflags = os.environ.get("SSMH_CFLAGS", "-O2 -march=native").split()
    with tempfile.TemporaryDirectory() as tmp:
        blis = _probe_blis(cc, tmp)
        nvcc = _find_nvcc()
        obj = os.path.join(tmp, "ssmh.o")
        defs = ["-DSSMH_BLAS", "-D_POSIX_C_SOURCE=200809L", "-fopenmp"] if blis else []
        _run([cc, "-std=c99", *cflags, "-fPIC", *defs, "-I", ROOT, "-c",
              os.path.join(HERE, "ssmh", "csrc", "ssmh.c"), "-o", obj])
        libs = ["-lblis", "-lgomp"] if blis else []
        out = os.path.join(out_dir, "libssmh.so")
        if nvcc:
            archs = os.environ.get("SSMH_CUDA_ARCHS", "80;90a")
            cuda_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "lib64")
            _run([nvcc, "-O3", "-std=c++17", "--threads", "0", *_gencode(archs), "-I", ROOT, "-Xcompiler", "-fPIC", "-shared",
                  os.path.join(HERE, "ssmh", "csrc", "ssmh_cuda.cu"), obj, "-lcublas", *libs,
                  "-Xlinker", "-rpath", "-Xlinker", cuda_lib, "-o", out])
            what = f"cpu={'blas' if blis else 'reference'} cuda=sm_{archs}"
        else:
            _run([cc, "-shared", obj, *libs, "-lm", "-o", out])
            what = f"cpu={'blas' if blis else 'reference'} (no nvcc: CPU only)"
    _log(f"built {out}: {what}")
    return out, what


# ---- PEP 517 hooks ---------------------------------------------------------------------------

def _tag():
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _dist_info(version):
    return f"{NAME}-{version}.dist-info"


def _metadata(version):
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\nSummary: {SUMMARY}\n"
            "License: MIT\nRequires-Python: >=3.9\nProvides-Extra: torch\nRequires-Dist: torch>=2.4; extra == \"torch\"\n"
            "Provides-Extra: numpy\nRequires-Dist: numpy; extra == \"numpy\"\n")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    d = os.path.join(metadata_directory, _dist_info(version))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata(version))
    return _dist_info(version)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    tag = _tag()
    name = f"{NAME}-{version}-{tag}.whl"
    files = []
    pkg = os.path.join(HERE, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                files.append((f"{NAME}/{fn}", f.read()))
    with tempfile.TemporaryDirectory() as tmp:
        lib, what = build_library(tmp)
        with open(lib, "rb") as f:
            files.append((f"{NAME}/libssmh.so", f.read()))
    files.append((f"{NAME}/_build_info.txt", (what + "\n").encode()))
    di = _dist_info(version)
    files.append((f"{di}/METADATA", _metadata(version).encode()))
    files.append((f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: ssmh_build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()))
    record = [_record_line(p, d) for p, d in files] + [f"{di}/RECORD,,"]
    files.append((f"{di}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            info = zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if p.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The headers, the package sources and this backend: enough to build the wheel anywhere."""
    version = _version()
    base = f"{NAME}-{version}"
    paths = ["pyproject.toml", "ssm.h", "ssm_blas.h", "ssm_cuda.h", "LICENSE", "README.md", "python/ssmh_build.py"]
    for d, _, fns in os.walk(os.path.join(HERE, NAME)):
        paths += [os.path.relpath(os.path.join(d, fn), ROOT) for fn in fns
                  if fn.endswith((".py", ".c", ".cu", ".h")) and "__pycache__" not in d]
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for p in sorted(paths):
            if os.path.exists(os.path.join(ROOT, p)):
                t.add(os.path.join(ROOT, p), arcname=f"{base}/{p}")
        data = _metadata(version).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
