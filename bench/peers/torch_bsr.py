"""PyTorch BSR peer for the block-ELL benchmark: the forward y = x W^T with W as a torch BSR
tensor (the layout of Tensor.to_sparse_bsr: crow_indices, col_indices, values [nnz, B, B]),
computed as (W @ x^T)^T, which is what a PyTorch user of a block-sparse weight runs.
Usage: python3 torch_bsr.py --from DIR   the inputs bench/cuda_bell.cu wrote with BELL_PEER_DIR
       (same col_idx, tiles and x, same run): the peer's rows beside ours and the dense cuBLAS
       GEMM, JSON rows (op bell_fwd, impl peer:torch_bsr) appended to bench/results/cuda_bell.jsonl.
Each input file is deleted once read (a full grid writes several GB)."""
import json, os, sys, time, warnings
import numpy as np
import torch

warnings.filterwarnings("ignore", message=".*(Sparse|sparse|bsr_dense_addmm).*")  # beta-state and tuning notices, once per row

NAME = torch.cuda.get_device_name(0)
DATE = time.strftime("%Y-%m-%d", time.gmtime())
COMMIT = os.environ.get("SSM_COMMIT", "unknown")
DT = {"f32": (torch.float32, np.float32), "f16": (torch.float16, np.uint16), "bf16": (torch.bfloat16, np.uint16)}


def timeit(fn, reps=10):
    for _ in range(2): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
        if ts[-1] > 1000 and len(ts) >= 3: break
    ts.sort()
    return ts[len(ts) // 2]


def load(r):
    s, K = r["shape"], r["K"]
    N, n_in, n_out, B = s["N"], s["in"], s["out"], s["B"]
    R = n_out // B
    tdt, ndt = DT[r["dtype"]]
    raw = open(r["input"], "rb").read()
    os.remove(r["input"])
    o = 0
    ci = np.frombuffer(raw, dtype=np.int32, count=R * K, offset=o); o += 4 * R * K
    es = np.dtype(ndt).itemsize
    v = np.frombuffer(raw, dtype=ndt, count=R * K * B * B, offset=o); o += es * R * K * B * B
    x = np.frombuffer(raw, dtype=ndt, count=N * n_in, offset=o)
    dev = torch.device("cuda")
    as_t = lambda a: torch.from_numpy(a.copy()).to(dev).view(tdt)
    crow = torch.arange(0, R * K + 1, K, dtype=torch.int64, device=dev)
    col = torch.from_numpy(ci.astype(np.int64)).to(dev)
    W = torch.sparse_bsr_tensor(crow, col, as_t(v).view(R * K, B, B), size=(n_out, n_in))
    return W, as_t(x).view(N, n_in)


def main(d):
    rows = [json.loads(l) for l in open(os.path.join(d, "ours.jsonl"))]
    out = open("bench/results/cuda_bell.jsonl", "a")
    print("%-6s %-40s %9s %9s %9s %10s %10s" % ("dtype", "shape", "ours ms", "bsr ms", "dense ms", "bsr/ours", "dense/bsr"))
    for r in rows:
        try:
            W, x = load(r)
            ms = timeit(lambda: (W @ x.t()).t())
        except Exception as e:  # a dtype or block size torch's BSR matmul does not take
            print("%-6s %-40s  peer:torch_bsr failed: %s" % (r["dtype"], json.dumps(r["shape"]), str(e).splitlines()[0][:90]))
            continue
        print("%-6s %-40s %9.3f %9.3f %9.3f %10.2f %10.2f" % (r["dtype"], json.dumps(r["shape"]), r["ours_ms"], ms,
              r["dense_ms"], ms / r["ours_ms"], r["dense_ms"] / ms), flush=True)
        out.write(json.dumps({"op": "bell_fwd", "impl": "peer:torch_bsr", "backend": "torch", "dtype": r["dtype"],
                              "shape": r["shape"], "ms": ms, "floor_ms": r["floor_ms"],
                              "speedup_vs_dense": r["dense_ms"] / ms, "device": NAME, "date": DATE,
                              "commit": COMMIT}) + "\n")
        out.flush()
        del W, x
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--from":
        sys.exit(__doc__)
    main(sys.argv[2])
