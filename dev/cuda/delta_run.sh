#!/bin/bash
# One GPU call for the delta-rule work: build (or reuse the carried binary), check against the
# f64 oracle, time ours, time fla (wheels carried in .whl), summary last. Logs under $OUT.
#   bash dev/cuda/delta_run.sh [check|bench|all] [fla-mode]
# (build/dev_delta is a link to build/dev_whole, dev/cuda/whole.cu: carry both, or neither)
set -u
OUT=${OUT:-delta_out}
mkdir -p "$OUT"
what=${1:-all}
export SSM_COMMIT=$(cat build/.commit 2>/dev/null || echo unknown)
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader; echo "commit $SSM_COMMIT"; } > "$OUT/env.log"
if [ "${BUILD_THERE:-0}" = 1 ] || ! ./build/dev_delta none >/dev/null 2>&1; then
    echo "building dev_delta and test_cuda there" >> "$OUT/env.log"
    rm -f build/dev_delta build/dev_whole build/test_cuda # build/dev_delta: a link to build/dev_whole (dev/cuda/whole.cu)
    mkdir -p build && make -j8 build/dev_delta build/test_cuda >> "$OUT/build.log" 2>&1
    echo "build rc=$?" >> "$OUT/env.log"
fi
if [ "$what" != bench ]; then
    timeout 200 ./build/dev_delta check > "$OUT/check.log" 2>&1; echo "check rc=$?" >> "$OUT/check.log"
fi
if [ "$what" != check ]; then
    timeout 150 ./build/dev_delta bench > "$OUT/bench_ours.jsonl" 2>&1; echo "# rc=$?" >> "$OUT/bench_ours.jsonl"
    if [ -d ../../.whl ] || [ -d .whl ]; then
        W=$( [ -d .whl ] && echo .whl || echo ../../.whl )
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W/*.whl >> "$OUT/env.log" 2>&1
        [ -f triton_cache.tgz ] && mkdir -p ~/.triton && tar xzf triton_cache.tgz -C ~/.triton
        PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout ${FLA_TIMEOUT:-300} python3 bench/peers/fla_peer.py ${2:-all} > "$OUT/bench_fla.jsonl" 2>"$OUT/fla_err.log"
        echo "# rc=$?" >> "$OUT/bench_fla.jsonl"
        tar czf "$OUT/triton_cache.tgz" -C ~/.triton . 2>/dev/null
    fi
fi
if [ -x build/test_cuda ] && [ "${SANITIZE:-0}" = 1 ]; then
    (SSM_TEST_CUDA_ONLY=delta timeout 200 compute-sanitizer --tool memcheck --print-limit 10 ./build/test_cuda 2>&1 | tail -5;
     echo "memcheck rc=${PIPESTATUS[0]}") > "$OUT/sanitizer.log" 2>&1
fi
if [ -x build/test_cuda ] && [ "${TESTS:-1}" = 1 ]; then
    (SSM_TEST_CUDA_ONLY=delta timeout 150 ./build/test_cuda; echo "test_cuda rc=$?") > "$OUT/test_cuda.log" 2>&1
fi
if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    timeout 120 ncu --clock-control none -k regex:"ssm__dl_(prep|fwd|bwd)" -c 4 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section InstructionStats --section SchedulerStats \
        ./build/dev_delta bench 0 one > "$OUT/ncu.log" 2>&1
    echo "ncu rc=$?" >> "$OUT/ncu.log"
fi
echo "== summary"
cat "$OUT/env.log" | head -4
grep -E "FAIL|passed|rc=" "$OUT/check.log" 2>/dev/null | tail -30
grep -E "FAIL|passed|rc=" "$OUT/test_cuda.log" 2>/dev/null | tail -30
cat "$OUT/sanitizer.log" 2>/dev/null
python3 - "$OUT" <<'EOF'
import json, sys, os
d = sys.argv[1]; rows = {}
for f in ("bench_ours.jsonl", "bench_fla.jsonl"):
    p = os.path.join(d, f)
    if not os.path.exists(p): continue
    for l in open(p):
        if l.startswith("{"):
            r = json.loads(l); rows[(r["op"], json.dumps(r["shape"], sort_keys=True), r["impl"].split(":")[0])] = r
        elif l.strip(): print(f, l.strip()[:200])
keys = sorted({(a, b) for a, b, _ in rows})
print("%-20s %-52s %9s %9s %9s %7s" % ("op", "shape", "ours ms", "fla ms", "floor", "fla/us"))
for op, sh in keys:
    o, p = rows.get((op, sh, "ours")), rows.get((op, sh, "peer"))
    print("%-20s %-52s %9s %9s %9s %7s" % (op, sh, "%.4f" % o["ms"] if o else "-", "%.4f" % p["ms"] if p else "-",
          "%.4f" % o["floor_ms"] if o and o.get("floor_ms") else "-", "%.2f" % (p["ms"] / o["ms"]) if o and p else "-"))
EOF
tail -3 "$OUT/fla_err.log" 2>/dev/null
grep "^#" "$OUT/bench_ours.jsonl"
grep -E "ssm__dl_|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|ncu rc" "$OUT/ncu.log" 2>/dev/null | head -60
