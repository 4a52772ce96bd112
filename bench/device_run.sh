#!/bin/bash
# The GPU session, in two parts (each one device call of under 10 minutes):
#   bash bench/device_run.sh tests   # quickstart, make test-cuda, make test-python, compute-sanitizer
#   bash bench/device_run.sh bench   # make bench-cuda and the PyTorch peers, JSON rows
# Uses the binaries in build/ when present (`make compile-cuda` on a machine with nvcc, carried
# along), else builds them. Logs and results go under $OUT (at most 8 files).
set -u
OUT=${OUT:-device_out}
mkdir -p "$OUT" bench/results
part=${1:-tests}
export SSM_COMMIT=$(cat build/.commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    echo "commit $(cat build/.commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUT/run_$part.log"
[ -x build/test_cuda ] && [ -x build/cuda_bench ] || make -j16 compile-cuda >> "$OUT/run_$part.log" 2>&1
if [ "$part" = tests ]; then
    ./build/quickstart_cuda >> "$OUT/run_tests.log" 2>&1
    (timeout 240 ./build/test_cuda; echo "test_cuda rc=$?") > "$OUT/test_cuda.log" 2>&1
    grep -E "^FAIL|passed|rc=" "$OUT/test_cuda.log" | tail -20
    (timeout 300 make test-python; echo "test-python rc=$?") > "$OUT/python_torch.log" 2>&1
    tail -3 "$OUT/python_torch.log"
    {
        for suite in decay linrec; do
            echo "== memcheck: test_cuda, CUDA $suite suite"
            SSM_TEST_CUDA_ONLY=$suite timeout 110 compute-sanitizer --tool memcheck --print-limit 20 ./build/test_cuda 2>&1 | tail -4
        done
        echo "== racecheck: test_cuda, CUDA decay suite (the look-back and tiled scans use shared memory)"
        SSM_TEST_CUDA_ONLY=decay timeout 90 compute-sanitizer --tool racecheck --print-limit 20 ./build/test_cuda 2>&1 | tail -4
        echo "== racecheck + synccheck: quickstart_cuda"
        timeout 45 compute-sanitizer --tool racecheck ./build/quickstart_cuda 2>&1 | tail -3
        timeout 45 compute-sanitizer --tool synccheck ./build/quickstart_cuda 2>&1 | tail -3
    } > "$OUT/sanitizer.log" 2>&1
    cat "$OUT/sanitizer.log"
else
    timeout 300 ./build/cuda_bench > "$OUT/bench_cuda.log" 2>&1
    echo "cuda_bench rc=$?" >> "$OUT/bench_cuda.log"
    timeout 200 python3 bench/peers/torch_peers.py > "$OUT/bench_peers.log" 2>&1
    echo "torch_peers rc=$?" >> "$OUT/bench_peers.log"
    cp bench/results/cuda_linrec.jsonl bench/results/cuda_decay.jsonl "$OUT/" 2>/dev/null
    tail -45 "$OUT/bench_cuda.log"
    tail -25 "$OUT/bench_peers.log"
fi
