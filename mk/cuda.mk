# CUDA backend (ssm_cuda.h): `make test-cuda`, `make bench-cuda`, `make lib` need a GPU only to run.
# SSM_NVARCH picks the target (NVARCH is taken: CUDA images set it to the CPU arch).
# `compile-cuda` (in CI through EXTRA_TEST_DEPS) compiles and links every CUDA source with nvcc.
SSM_NVARCH ?= -arch=sm_90
SSM_NVFLAGS ?= -O3 $(SSM_NVARCH) -I. -std=c++17 -Xcompiler -Wall
CUDALIBS  := -lcublas
CPUTESTS  := $(filter-out tests/test_main.c,$(TESTSRC))

.PHONY: compile-cuda test-cuda test-python bench-cuda lib run-cuda

ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
EXTRA_TEST_DEPS += compile-cuda
# `make run` adds the GPU quickstart and benchmarks when a GPU is present.
ifneq ($(shell nvidia-smi -L 2>/dev/null | grep -c GPU),0)
EXTRA_RUN += run-cuda
endif
endif

compile-cuda: $(BUILD)/test_cuda $(BUILD)/cuda_bench $(BUILD)/quickstart_cuda $(BUILD)/libssm.so \
              $(BUILD)/cuda_decay_variants $(BUILD)/cuda_linrec_perf $(BUILD)/dev_delta

$(BUILD)/test_main_cuda.o: tests/test_main.c tests/test.h ssm.h | $(BUILD)
	$(CC) -std=c99 -O2 -g -Dmain=ssm_test_cpu_main -c $< -o $@

$(BUILD)/test_cuda: tests/test_cuda.cu $(BUILD)/test_main_cuda.o $(CPUTESTS) tests/test.h ssm.h ssm_cuda.h | $(BUILD)
	$(CC) -std=c99 -O2 -g -c $(CPUTESTS) && mv $(notdir $(CPUTESTS:.c=.o)) $(BUILD)/
	$(NVCC) $(SSM_NVFLAGS) -g -Itests tests/test_cuda.cu $(BUILD)/test_main_cuda.o $(addprefix $(BUILD)/,$(notdir $(CPUTESTS:.c=.o))) $(CUDALIBS) -o $@

test-cuda: $(BUILD)/test_cuda
	./$(BUILD)/test_cuda

$(BUILD)/cuda_bench: bench/cuda_bench.cu bench/cuda_common.h bench/bench.h ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDALIBS) -o $@

# Kernel-variant harnesses (time each variant beside the default and check it against it).
$(BUILD)/cuda_%: bench/cuda_%.cu bench/cuda_common.h bench/bench.h ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDALIBS) -o $@

# Dev harness of the delta-rule kernels: f64 oracle checks (`check`) and timings (`bench`).
$(BUILD)/dev_delta: dev/cuda/delta.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $< $(CUDALIBS) -o $@

bench-cuda: $(BUILD)/cuda_bench
	./$(BUILD)/cuda_bench

$(BUILD)/quickstart_cuda: examples/quickstart_cuda.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $< $(CUDALIBS) -o $@

# A shared library of the headers (C ABI), for python/ssm.py and other FFI callers.
$(BUILD)/libssm.so: python/libssm.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -Xcompiler -fPIC -shared $< $(CUDALIBS) -o $@

lib: $(BUILD)/libssm.so

# The ctypes shim on torch tensors: forward and autograd gradients against PyTorch loops.
test-python: $(BUILD)/libssm.so
	cd python && SSM_LIB=../$(BUILD)/libssm.so python3 test_ssm.py

run-cuda: $(BUILD)/quickstart_cuda $(BUILD)/cuda_bench
	@echo "== CUDA quickstart"
	./$(BUILD)/quickstart_cuda
	@echo "== CUDA benchmarks"
	./$(BUILD)/cuda_bench
