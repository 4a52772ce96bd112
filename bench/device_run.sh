#!/bin/bash
# One device session: build, compute-sanitizer (memcheck, racecheck) on a short test, test-cuda,
# quickstart, bench-cuda and the PyTorch peers. Logs under $OUT (default ./device_out).
OUT=${OUT:-device_out}; mkdir -p $OUT bench/results
export SSM_COMMIT=${SSM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/device.txt
make -j8 COMMIT=$SSM_COMMIT build/test_cuda build/cuda_bench build/quickstart_cuda build/libssm.so 2>&1 | tail -5 | tee $OUT/build.log
./build/quickstart_cuda 2>&1 | tee $OUT/quickstart.log
SSM_TEST_SEED=1 timeout 120 ./build/test_cuda > $OUT/test_cuda.log 2>&1; echo "test-cuda rc=$?" | tee -a $OUT/test_cuda.log
grep -E "FAIL|passed" $OUT/test_cuda.log | tail -40
timeout 180 ./build/cuda_bench 2>&1 | tee $OUT/bench_cuda.log
timeout 150 python3 bench/peers/torch_peers.py 2>&1 | tee $OUT/bench_peers.log
cp bench/results/cuda_linrec.jsonl bench/results/cuda_decay.jsonl $OUT/ 2>/dev/null
(SSM_SANITIZE=1 timeout 60 compute-sanitizer --tool memcheck ./build/quickstart_cuda 2>&1 | tail -5) | tee $OUT/sanitizer.log
(timeout 40 compute-sanitizer --tool racecheck ./build/quickstart_cuda 2>&1 | tail -5) | tee -a $OUT/sanitizer.log
