"""Host overhead of one ssmh op call (the torch.library dispatch, the ctypes call, a CUDA
context on the current stream with PyTorch's allocator hooks) on a tiny decay scan, beside a
torch op of similar size (torch.cumsum), and per call inside a replayed CUDA graph (where
the host cost is gone). Wall clock over many calls, synchronised at the end; not a kernel
benchmark (the tensors are tiny on purpose)."""
import time

import torch

import ssmh


def per_call_us(fn, n=2000, sync=lambda: None):
    for _ in range(50):
        fn()
    sync()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(ts)[2]


def main():
    devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() and ssmh.HAS_CUDA else [])
    print(f"ssmh {ssmh.build_info()}, torch {torch.__version__}"
          + (f", {torch.cuda.get_device_name()}" if "cuda" in devs else ""))
    for dev in devs:
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        ld = -torch.rand(1, 16, 2, device=dev).cumsum(1)
        x = torch.randn(1, 16, 2, 8, device=dev)
        us_ours = per_call_us(lambda: ssmh.decay(ld, x), sync=sync)
        us_raw = per_call_us(lambda: torch.ops.ssmh.decay_fwd(ld, x, None, False), sync=sync)
        us_torch = per_call_us(lambda: torch.cumsum(x, 1), sync=sync)
        line = (f"{dev:4s} decay [1,16,2,8]: ssmh.decay {us_ours:.1f} us/call, torch.ops.ssmh.decay_fwd "
                f"{us_raw:.1f} us/call, torch.cumsum {us_torch:.1f} us/call")
        if dev == "cuda":
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                ssmh.decay(ld, x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(100):
                    out = ssmh.decay(ld, x)
            us_graph = per_call_us(g.replay, n=50, sync=sync) / 100
            torch.testing.assert_close(out, ssmh.decay(ld, x))
            line += f", in a CUDA graph {us_graph:.2f} us/call"
        print(line, flush=True)


if __name__ == "__main__":
    main()
