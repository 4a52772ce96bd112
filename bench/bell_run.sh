#!/bin/sh
# One GPU run for the block-ELL kernels: build, test, variants, benchmark; logs to $OUT.
# usage (repository root): COMMIT=<hash> sh bench/bell_run.sh
OUT=${OUT:-/tmp/bell_out}
mkdir -p "$OUT" bench/results
C=${COMMIT:-unknown}
nvidia-smi -L > "$OUT/device.txt" 2>&1
( make -j3 build/test_cuda build/cuda_bell build/dev_bell COMMIT=$C > "$OUT/build.log" 2>&1 ) || { tail -30 "$OUT/build.log"; exit 1; }
echo "== build done $(date)"
SSM_TEST_CUDA_ONLY=bell timeout 120 ./build/test_cuda > "$OUT/test_bell.log" 2>&1; echo "test rc $?"
grep -E "FAIL|passed" "$OUT/test_bell.log" | tail -15
timeout 120 ./build/dev_bell all > "$OUT/dev_bell.log" 2>&1; echo "dev rc $?"
cat "$OUT/dev_bell.log"
BELL_GRID=${BELL_GRID:-prio} timeout 300 ./build/cuda_bell > "$OUT/bench_bell.log" 2>&1; echo "bench rc $?"
cp bench/results/cuda_bell.jsonl "$OUT/" 2>/dev/null
grep -E "rate|ours:bell|cublas|cusparse|vs cuSPARSE|fwd\+bwd" "$OUT/bench_bell.log" | head -150
