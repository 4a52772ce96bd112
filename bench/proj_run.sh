#!/bin/sh
# One GPU run of the projection / output chains: build, the proj and outchain case-table rows
# on CUDA (f32 / f16 / bf16), compute-sanitizer on them, bench/cuda_proj.cu, the PyTorch peers.
# Usage (repository root, on the GPU machine): COMMIT=<hash> OUT=<dir> sh bench/proj_run.sh
OUT=${OUT:-.}
COMMIT=${COMMIT:-unknown}
build() { make -j16 $1 build/test_cuda build/cuda_proj COMMIT=$COMMIT > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }; }
# binaries built elsewhere (carried) are used when they link and see the GPU; else rebuilt here
if [ ! -x build/test_cuda ] || [ ! -x build/cuda_proj ] || ldd build/test_cuda build/cuda_proj | grep -q 'not found'; then build; fi
SSM_TEST_CUDA_ONLY=proj ./build/test_cuda > $OUT/test_proj.log 2>&1
if grep -q "no CUDA device\|driver version is insufficient" $OUT/test_proj.log; then
    build -B
    SSM_TEST_CUDA_ONLY=proj ./build/test_cuda > $OUT/test_proj.log 2>&1
fi
echo "tests: $(tail -1 $OUT/test_proj.log)"
grep FAIL $OUT/test_proj.log | head -20
./build/cuda_proj > $OUT/bench.log 2>&1
cat $OUT/bench.log
SSM_COMMIT=$COMMIT timeout ${PEER_S:-150} python3 bench/peers/torch_proj.py > $OUT/torch.log 2>&1
cat $OUT/torch.log | tail -12
SSM_TEST_CUDA_ONLY=proj timeout ${SAN_S:-90} compute-sanitizer --tool memcheck ./build/test_cuda > $OUT/sanitizer.log 2>&1
echo "sanitizer: rc $? $(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' $OUT/sanitizer.log) issues; $(grep 'ERROR SUMMARY' $OUT/sanitizer.log | tail -1); $(tail -1 $OUT/sanitizer.log)"
cp bench/results/cuda_proj.jsonl $OUT/ 2>/dev/null
