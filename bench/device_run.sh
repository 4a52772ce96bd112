#!/bin/bash
# The GPU session, in parts (each one device call of under 10 minutes):
#   bash bench/device_run.sh tests     # quickstart, make test-cuda, the CUDA API fuzzer
#   bash bench/device_run.sh sanitize  # compute-sanitizer memcheck, racecheck, synccheck per kernel family
#   bash bench/device_run.sh python    # make test-python (the torch suite on CUDA)
#   bash bench/device_run.sh bench     # make bench-cuda and the PyTorch peers, JSON rows
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
    echo "commit $SSM_COMMIT"
} > "$OUT/run_$part.log"
[ -x build/test_cuda ] && [ -x build/cuda_bench ] && [ -x build/fuzz_cuda ] || make -j16 compile-cuda >> "$OUT/run_$part.log" 2>&1
case "$part" in
tests)
    ./build/quickstart_cuda >> "$OUT/run_tests.log" 2>&1
    (timeout 300 ./build/test_cuda; echo "test_cuda rc=$?") > "$OUT/test_cuda.log" 2>&1
    grep -E "^FAIL|passed|rc=" "$OUT/test_cuda.log" | tail -20
    (timeout 150 ./build/fuzz_cuda ${FUZZ_SECONDS:-100} ${FUZZ_SEED:-}; echo "fuzz_cuda rc=$?") > "$OUT/fuzz_cuda.log" 2>&1
    tail -25 "$OUT/fuzz_cuda.log"
    ;;
sanitize)
    # every kernel family: the table rows and special suites of one op at a time
    for suite in decay linrec bell delta; do
        for tool in memcheck racecheck synccheck; do
            echo "== $tool: test_cuda, CUDA $suite suite"
            SSM_TEST_CUDA_ONLY=$suite timeout 100 compute-sanitizer --tool $tool --print-limit 20 ./build/test_cuda 2>&1 |
                grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|Hazard|Invalid|rror" | tail -4
            echo "rc=${PIPESTATUS[0]}"
        done
    done > "$OUT/sanitizer.log" 2>&1
    echo "== memcheck: the CUDA API fuzzer, 60 s" >> "$OUT/sanitizer.log"
    timeout 120 compute-sanitizer --tool memcheck --print-limit 20 ./build/fuzz_cuda 60 ${FUZZ_SEED:-} 2>&1 | tail -6 >> "$OUT/sanitizer.log"
    cat "$OUT/sanitizer.log"
    ;;
python)
    (timeout 500 make test-python; echo "test-python rc=$?") > "$OUT/python_torch.log" 2>&1
    tail -15 "$OUT/python_torch.log"
    ;;
bench)
    timeout 300 ./build/cuda_bench > "$OUT/bench_cuda.log" 2>&1
    echo "cuda_bench rc=$?" >> "$OUT/bench_cuda.log"
    timeout 150 ./build/cuda_bell > "$OUT/bench_bell.log" 2>&1
    echo "cuda_bell rc=$?" >> "$OUT/bench_bell.log"
    timeout 150 python3 bench/peers/torch_peers.py > "$OUT/bench_peers.log" 2>&1
    echo "torch_peers rc=$?" >> "$OUT/bench_peers.log"
    cp bench/results/cuda_linrec.jsonl bench/results/cuda_decay.jsonl bench/results/cuda_bell.jsonl "$OUT/" 2>/dev/null
    tail -45 "$OUT/bench_cuda.log"
    tail -25 "$OUT/bench_peers.log"
    ;;
esac
