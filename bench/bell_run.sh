#!/bin/sh
# One GPU run for the block-ELL kernels: build, test, variants, benchmark; logs to $OUT.
# usage (repository root): COMMIT=<hash> sh bench/bell_run.sh
OUT=${OUT:-/tmp/bell_out}
mkdir -p "$OUT" bench/results
C=${COMMIT:-unknown}
nvidia-smi -L > "$OUT/device.txt" 2>&1
make -k -j3 build/test_cuda build/cuda_bell build/dev_bell COMMIT=$C > "$OUT/build.log" 2>&1 || grep -B2 -A8 error "$OUT/build.log" | head -40
echo "== build done $(date)"
SSM_TEST_CUDA_ONLY=bell timeout 120 ./build/test_cuda > "$OUT/test_bell.log" 2>&1; echo "test rc $?"
grep -E "FAIL|passed" "$OUT/test_bell.log" | tail -15
timeout 120 ./build/dev_bell all > "$OUT/dev_bell.log" 2>&1; echo "dev rc $?"
cat "$OUT/dev_bell.log"
BELL_GRID=${BELL_GRID:-prio} timeout 300 ./build/cuda_bell > "$OUT/bench_bell.log" 2>&1; echo "bench rc $?"
cp bench/results/cuda_bell.jsonl "$OUT/" 2>/dev/null
grep -E "rate|ours:bell|cublas|cusparse|vs cuSPARSE|fwd\+bwd" "$OUT/bench_bell.log" | head -150
if [ -n "$BELL_NCU" ] && command -v ncu >/dev/null 2>&1; then
  for b in $BELL_NCU; do
    timeout 150 ncu --clock-control none -k regex:"ssm__bl_(mm|dw)_kernel" -c 3 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats ./build/dev_bell prof $b > "$OUT/ncu_B$b.txt" 2>&1
    echo "ncu B$b rc $?"; grep -E "ssm__bl_|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|Stall|Registers Per|Theoretical Occ" "$OUT/ncu_B$b.txt" | head -60
  done
fi
