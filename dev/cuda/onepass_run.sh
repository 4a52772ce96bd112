#!/bin/bash
# The device-machine script for dev/cuda/onepass.cu: each chunk length in its own process (a hung
# look-back ends only its own rows: the harness has a 10 s watchdog, timeout 90 is the backstop),
# f16 then bf16, clocks before and after. Every process also times the library's forward on the
# same inputs, so each row's ratio comes from one process.
#   make build/dev_onepass && BIN=build/dev_onepass dev/cuda/onepass_run.sh [L8 L8p L12 L4 L4p] | tee log.txt
BIN=${BIN:-./build/dev_onepass}
VARS=${*:-L8 L8p L12 L4 L4p}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv
date -u
for dt in f16 bf16; do
    for v in $VARS; do timeout 90 "$BIN" $dt $v; echo "rc=$? ($dt $v)"; done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
