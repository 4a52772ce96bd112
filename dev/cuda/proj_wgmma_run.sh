#!/bin/sh
# The device-machine script behind bench/results/cuda_proj_wgmma_*.log: dev/cuda/proj_wgmma.cu's
# table (every kernel-3 variant checked against the library and timed beside cuBLAS), the
# default-vs-forced context experiment with SM clock probes, then ncu: both contexts' kernel 3 at
# M 32768 (launch, duration, clocks), kernel 3 / variants / cuBLAS at M 8192 (stall reasons,
# issue, pipes), and the per-kernel durations of one forward + backward at M 8192.
#   make build/dev_proj_wgmma && OUT=dir sh dev/cuda/proj_wgmma_run.sh
# (make build/dev_proj_wgmma builds build/dev_whole, dev/cuda/whole.cu, and links build/dev_proj_wgmma to it;
# BIN="./build/dev_whole proj_wgmma" runs the same)
OUT=${OUT:-.}
B=${BIN:-./build/dev_proj_wgmma}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi_trace.csv 2>&1 &
SMI=$!
echo "== table"; $B table 5
echo "== order"; $B order 32768
kill $SMI 2>/dev/null
NCU="ncu --clock-control none"
S1="--section SpeedOfLight --section LaunchStats --section Occupancy"
S2="$S1 --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
{
    echo "== ncu: kernel 3 at M32768, default context then forced (proj_kernel 3)"
    for c in lib k3; do $NCU --kernel-name regex:pjw -c 1 $S1 --metrics sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max $B one $c 32768 1; done
} > $OUT/ncu_ctx.txt 2>&1
{
    echo "== ncu: M8192 library kernel 3 (default context), variants, cuBLAS"
    $NCU --kernel-name regex:pjw -c 1 $S2 --section SourceCounters $B one lib 8192 1
    for v in f2o id; do $NCU --kernel-name regex:dv_pjw -c 1 $S2 $B one $v 8192 1; done
    $NCU --kernel-name regex:'gemm|xmma|cutlass|sm90' -c 1 $S2 $B one cublas 8192 1
} > $OUT/ncu_8192.txt 2>&1
echo "== ncu: forward (SAVE_PRE) + backward at M8192, twice: per-kernel durations"
$NCU --metrics gpu__time_duration.sum -c 40 $B fb 8192 2 > $OUT/ncu_fb.txt 2>&1
awk '/^  [a-zA-Z_].*\(/ {n=$0; sub(/\(.*/, "", n)} /gpu__time_duration/ {printf "  %-60s %10s us\n", n, $NF}' $OUT/ncu_fb.txt
grep -E "pjw_kernel|Duration|Grid Size|Registers|Shared Memory Config|Dynamic Shared|SM Frequency|sm__cycles_elapsed.avg.per_second" $OUT/ncu_ctx.txt
