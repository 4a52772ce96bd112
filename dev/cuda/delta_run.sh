#!/bin/bash
# One GPU call for the delta-rule work: build (or reuse the carried binary), check against the
# f64 oracle, time ours, time fla (wheels carried in .whl), summary last. Logs under $OUT.
#   bash dev/cuda/delta_run.sh [check|bench|all] [fla-mode]
set -u
OUT=${OUT:-delta_out}
mkdir -p "$OUT"
what=${1:-all}
export SSM_COMMIT=$(cat build/.commit 2>/dev/null || echo unknown)
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader; echo "commit $SSM_COMMIT"; } > "$OUT/env.log"
if ! ./build/dev_delta none >/dev/null 2>&1; then
    echo "building dev_delta there" >> "$OUT/env.log"
    mkdir -p build && nvcc -O3 -arch=sm_90 -std=c++17 dev/cuda/delta.cu -lcublas -o build/dev_delta >> "$OUT/env.log" 2>&1
fi
if [ "$what" != bench ]; then
    timeout 200 ./build/dev_delta check > "$OUT/check.log" 2>&1; echo "check rc=$?" >> "$OUT/check.log"
fi
if [ "$what" != check ]; then
    timeout 150 ./build/dev_delta bench > "$OUT/bench_ours.jsonl" 2>&1; echo "# rc=$?" >> "$OUT/bench_ours.jsonl"
    if [ -d ../../.whl ] || [ -d .whl ]; then
        W=$( [ -d .whl ] && echo .whl || echo ../../.whl )
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W/*.whl >> "$OUT/env.log" 2>&1
        PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 300 python3 bench/peers/fla_peer.py ${2:-all} > "$OUT/bench_fla.jsonl" 2>"$OUT/fla_err.log"
        echo "# rc=$?" >> "$OUT/bench_fla.jsonl"
    fi
fi
if [ "$what" = all ] && command -v ncu >/dev/null; then
    timeout 120 ncu --clock-control none -k regex:ssm__dl --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis ./build/dev_delta bench 0 one > "$OUT/ncu.log" 2>&1
    echo "ncu rc=$?" >> "$OUT/ncu.log"
fi
echo "== summary"
cat "$OUT/env.log" | head -4
grep -E "FAIL|passed|rc=" "$OUT/check.log" 2>/dev/null | tail -30
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
