#!/bin/bash
# The GPU session of the DeltaNet experiment (run from the repository root; logs to $OUT).
#   examples/deltanet/run_gpu.sh check                  smoke (CPU), solver agreement, breakdown, step-time probe
#   examples/deltanet/run_gpu.sh train "SOLVER:ARGS" ... train each solver (ARGS go to train.py), then a sample
# Needs: nvcc + torch on the machine; fla wheels in $FLA_WHEELS (optional).
set -u
OUT=${OUT:-/tmp/deltanet_out}; mkdir -p "$OUT"
ROOT=$(pwd); EX=$ROOT/examples/deltanet
LOG=$OUT/${1}.log
exec > >(tee -a "$LOG") 2>&1
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit ${SSMH_COMMIT:-?}"
PKG=/tmp/pyssmh; FLA=/tmp/fla
# a package built elsewhere for this GPU (nvcc sm_90, SSMH_CFLAGS=-O2, SSMH_BLAS=0: no BLIS on the GPU machine) may come along as $SSMH_PREBUILT
if [ -n "${SSMH_PREBUILT:-}" ] && PYTHONPATH=$SSMH_PREBUILT python3 -c "import torch, ssmh; assert ssmh.HAS_CUDA"; then
  PKG=$SSMH_PREBUILT; echo "== using the prebuilt package $PKG"
fi
if [ ! -f $PKG/ssmh/__init__.py ]; then
  t=$(date +%s)
  SSMH_CUDA=1 SSMH_CUDA_ARCHS=90 python3 -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --target $PKG . >$OUT/pip.log 2>&1 || { tail -30 $OUT/pip.log; exit 1; }
  echo "== ssmh built in $(( $(date +%s) - t )) s"
fi
if [ -n "${FLA_WHEELS:-}" ] && [ ! -d $FLA/fla ]; then
  python3 -m pip install -q --disable-pip-version-check --no-deps --target $FLA $FLA_WHEELS/*.whl >>$OUT/pip.log 2>&1 || echo "# fla install failed"
fi
export PYTHONPATH=$PKG:$FLA
python3 -c "import ssmh, torch; print('==', ssmh.build_info(), 'torch', torch.__version__)"
mode=$1; shift
if [ "$mode" = check ]; then
  echo "== CPU smoke (tiny model, reference backend)"; t=$(date +%s)
  timeout 150 python3 $EX/smoke.py /tmp/dn_smoke 2>&1 | tail -20; echo "== smoke took $(( $(date +%s) - t )) s"
  echo "== solver agreement"; t=$(date +%s)
  timeout 120 python3 $EX/check_solvers.py agree; echo "== agree took $(( $(date +%s) - t )) s"
  echo "== breakdown"; timeout 90 python3 $EX/check_solvers.py breakdown $OUT/breakdown.jsonl
  echo "== probe"; t=$(date +%s)
  timeout 200 python3 $EX/check_solvers.py probe $OUT/probe.jsonl ${PROBE_STEPS:-8} 2>&1 | grep -v '"kind": "train"'
  echo "== probe took $(( $(date +%s) - t )) s"
  grep '"summary"' $OUT/probe.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(f\"{r['solver']:8s} chains {r['chains']:5s} micro {r['shape']['micro']:3d} {r['ms']:8.1f} ms/step {r['tokens_per_s']:10.0f} tok/s peak {r['peak_mem_bytes']/2**30:6.2f} GiB\")"
elif [ "$mode" = train ]; then
  for spec in "$@"; do
    s=${spec%%:*}; args=${spec#*:}; [ "$args" = "$spec" ] && args=""
    echo "== train $s $args"; t=$(date +%s)
    python3 $EX/train.py --solver $s --out $OUT/deltanet_train.jsonl --ckpt /tmp/ckpt_$s.pt $args 2>&1 | grep -v '"kind": "train"' | tail -40
    echo "== $s took $(( $(date +%s) - t )) s"
    if [ -f /tmp/ckpt_$s.pt ] && [ -z "${NO_SAMPLE:-}" ]; then
      python3 $EX/sample.py --ckpt /tmp/ckpt_$s.pt --prompt "And God said" --n 300 --top-k 1 >> $OUT/samples.txt 2>&1
      python3 $EX/sample.py --ckpt /tmp/ckpt_$s.pt --prompt "In the beginning" --n 300 --top-k 5 --seed 0 >> $OUT/samples.txt 2>&1
    fi
  done
  grep '"summary"' $OUT/deltanet_train.jsonl
fi
echo "== done $(date -u)"
