#!/bin/bash
# One GPU call: build the delta harness and test_cuda, oracle checks, the library's delta suite,
# timings with the per-kernel split, fla side by side (wheels carried in .whl). Logs under $OUT.
# (make build/dev_delta builds build/dev_whole, dev/cuda/whole.cu, and links build/dev_delta to it)
set -u
OUT=${OUT:-delta_out}; mkdir -p "$OUT"
export SSM_COMMIT=$(cat build/.commit 2>/dev/null || echo unknown)
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; echo "commit $SSM_COMMIT"; } > "$OUT/env.log"
t0=$(date +%s)
mkdir -p build && make -j16 COMMIT="$SSM_COMMIT" build/dev_delta build/test_cuda build/cuda_delta > "$OUT/build.log" 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/env.log"
[ "${CHECK:-1}" = 1 ] && (timeout ${CHECK_TIMEOUT:-120} ./build/dev_delta check; echo "check rc=$?") > "$OUT/check.log" 2>&1
(SSM_TEST_CUDA_ONLY=${TEST_ONLY:-delta} timeout ${TEST_TIMEOUT:-150} ./build/test_cuda; echo "test_cuda rc=$?") > "$OUT/test_cuda.log" 2>&1
[ "${DEVBENCH:-1}" = 1 ] && { timeout ${DEVBENCH_TIMEOUT:-120} ./build/dev_delta ${DEVBENCH_ARGS:-bench} > "$OUT/bench_ours.jsonl" 2>&1; echo "# rc=$?" >> "$OUT/bench_ours.jsonl"; }
if [ -n "${EXTRA_CMD:-}" ]; then bash -c "$EXTRA_CMD" > "$OUT/extra.log" 2>&1; echo "extra rc=$?" >> "$OUT/extra.log"; fi
W=${WHL:-../../.whl}    # fla wheels; TRITON_TGZ: a Triton cache from an earlier run (saved below)
if [ -d $W ] && [ "${FLA:-1}" = 1 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W/*.whl >> "$OUT/env.log" 2>&1
    T=${TRITON_TGZ:-../../triton_cache.tgz}
    [ -f $T ] && mkdir -p ~/.triton && tar xzf $T -C ~/.triton
    export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
fi
BT=${BENCH_TIMEOUT:-$(( ${BUDGET:-330} - ($(date +%s) - t0) ))}; [ $BT -lt 30 ] && BT=30   # what is left of BUDGET s
(timeout $BT make --no-print-directory COMMIT="$SSM_COMMIT" bench-cuda-delta; echo "bench-cuda-delta rc=$?") > "$OUT/bench_delta.log" 2>&1
cp bench/results/cuda_delta.jsonl "$OUT/cuda_delta.jsonl" 2>/dev/null
[ -d ~/.triton/cache ] && tar czf "$OUT/triton_cache.tgz" -C ~/.triton cache 2>/dev/null
echo "== summary $(( $(date +%s) - t0 )) s"
cat "$OUT/env.log"; tail -3 "$OUT/build.log"
grep -E "FAIL|passed|rc=" "$OUT/check.log" | tail -12
grep -E "FAIL|passed|rc=" "$OUT/test_cuda.log" | tail -12
tail -3 "$OUT/extra.log" 2>/dev/null
python3 - "$OUT" <<'PY'
import json, sys, os
d = sys.argv[1]; rows = {}
for f in ("bench_ours.jsonl",):
    p = os.path.join(d, f)
    if not os.path.exists(p): continue
    for l in open(p):
        if l.startswith("{"):
            r = json.loads(l); rows[(r["op"], json.dumps(r["shape"], sort_keys=True), r["impl"].split(":")[0])] = r
        elif l.strip(): print(f, l.strip()[:330])
print("%-20s %-52s %9s %9s %9s %7s" % ("op", "shape", "ours ms", "fla ms", "floor", "fla/us"))
for op, sh in sorted({(a, b) for a, b, _ in rows}):
    o, p = rows.get((op, sh, "ours")), rows.get((op, sh, "peer"))
    print("%-20s %-52s %9s %9s %9s %7s" % (op, sh, "%.4f" % o["ms"] if o else "-", "%.4f" % p["ms"] if p else "-",
          "%.4f" % o["floor_ms"] if o and o.get("floor_ms") else "-", "%.2f" % (p["ms"] / o["ms"]) if o and p else "-"))
PY
cat "$OUT/bench_delta.log" | grep -v "^#" | tail -40
