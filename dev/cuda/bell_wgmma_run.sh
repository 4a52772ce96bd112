#!/bin/bash
# The device-machine script behind bench/results/cuda_bell_wgmma_*.log: every variant of
# dev/cuda/bell_wgmma.cu in its own process (a hung variant ends only its own rows: the harness
# has a 10 s watchdog, timeout 120 is the backstop), the B = 64 swapped-role variants a second
# time (ratios drift with cuBLAS's own row-to-row spread), clocks before and after.
#   make build/dev_bell_wgmma && BIN=build/dev_bell_wgmma dev/cuda/bell_wgmma_run.sh [variants] | tee log.txt
BIN=${BIN:-./build/dev_bell_wgmma}
VARS=${*:-w128 pw128 t64w0 pt64w0 t64 pt64 c64 pc64 c64x4 pc64x4}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv
date -u
echo "== pass 1"
hung=" "
for v in $VARS; do timeout 120 "$BIN" $v; rc=$?; echo "rc=$rc ($v)"; [ $rc -ge 2 ] && hung="$hung$v "; done
echo "== pass 2 (swapped-role variants; not those that hung or crashed in pass 1:$hung)"
for v in t64 pt64 c64 pc64 c64x4 pc64x4; do
    case "$hung" in *" $v "*) continue ;; esac
    timeout 120 "$BIN" $v; echo "rc=$? ($v)"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
