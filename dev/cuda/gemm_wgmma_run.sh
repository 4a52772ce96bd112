#!/bin/bash
# The device-machine script behind bench/results/cuda_gemm_wgmma_*.log: every variant of
# dev/cuda/gemm_wgmma.cu in its own process (a hung variant ends only its own rows: the harness
# has a 10 s watchdog, timeout 60 is the backstop), two passes, clocks before and after.
#   make build/dev_gemm_wgmma && BIN=build/dev_gemm_wgmma dev/cuda/gemm_wgmma_run.sh | tee log.txt
BIN=${BIN:-./build/dev_gemm_wgmma}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv
for pass in 1 2; do
    echo "== table pass $pass"
    for v in q128 p256 n256 c128 c128r c128s p128 n128; do timeout 60 "$BIN" $v; echo "rc=$? ($v)"; done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
