#!/bin/sh
# One GPU run for the block-ELL kernels: build, test, benchmark, variants, profiles, the full
# CUDA suite and the sanitizers, most important first; logs to $OUT.
# usage (repository root): COMMIT=<hash> [BELL_GRID=full] [BELL_NCU="16 64"] sh bench/bell_run.sh
OUT=${OUT:-/tmp/bell_out}
mkdir -p "$OUT" bench/results
C=${COMMIT:-unknown}
{ nvidia-smi -L; date -u; echo "commit $C"; } > "$OUT/device.txt" 2>&1
make -k -j3 build/test_cuda build/cuda_bell build/dev_bell COMMIT=$C > "$OUT/build.log" 2>&1 || grep -B2 -A8 error "$OUT/build.log" | head -40
echo "== build done $(date -u)"
T="$OUT/test_bell.log"
{ nvidia-smi -L; date -u; echo "commit $C"; } > "$T"
SSM_TEST_CUDA_ONLY=bell timeout 120 ./build/test_cuda >> "$T" 2>&1; echo "test bell rc $?"
grep -E "FAIL|passed" "$T" | tail -5
BELL_GRID=${BELL_GRID:-prio} timeout 240 ./build/cuda_bell > "$OUT/bench_bell.log" 2>&1; echo "bench rc $?"
cp bench/results/cuda_bell.jsonl "$OUT/" 2>/dev/null
grep -E "rate|ours:bell|cublas|cusparse|vs cuSPARSE|fwd\+bwd" "$OUT/bench_bell.log" | head -400
timeout 90 ./build/dev_bell all > "$OUT/dev_bell.log" 2>&1; echo "dev rc $?"
cat "$OUT/dev_bell.log"
if [ -n "$BELL_NCU" ] && command -v ncu >/dev/null 2>&1; then
  for b in $BELL_NCU; do
    timeout 100 ncu --clock-control none -k regex:"ssm__bl_(mm|dw)_kernel" -c 3 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats ./build/dev_bell prof $b > "$OUT/ncu_B$b.txt" 2>&1
    echo "ncu B$b rc $?"; grep -E "ssm__bl_|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Achieved Occupancy|Issue Slots Busy|Registers Per" "$OUT/ncu_B$b.txt" | head -40
  done
fi
echo "== full CUDA suite" >> "$T"
timeout 200 ./build/test_cuda >> "$T" 2>&1; echo "test_cuda full rc $?"; tail -1 "$T"
if command -v compute-sanitizer >/dev/null 2>&1; then
  echo "== compute-sanitizer memcheck (bell)" >> "$T"
  SSM_TEST_CUDA_ONLY=bell timeout 100 compute-sanitizer --tool memcheck ./build/test_cuda >> "$T" 2>&1; echo "memcheck rc $?"
  echo "== compute-sanitizer racecheck (bell)" >> "$T"
  SSM_TEST_CUDA_ONLY=bell timeout 100 compute-sanitizer --tool racecheck ./build/test_cuda >> "$T" 2>&1; echo "racecheck rc $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed" "$T" | tail -6
fi
