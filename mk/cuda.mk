# CUDA backend (ssm_cuda.h): `make test-cuda`, `make bench-cuda`, `make lib` need a GPU only to run.
# SSM_NVARCH picks the target (NVARCH is taken: CUDA images set it to the CPU arch).
# `compile-cuda` (in CI through EXTRA_TEST_DEPS) compiles and links every CUDA source with nvcc.
SSM_NVARCH ?= -arch=sm_90
SSM_NVFLAGS ?= -O3 $(SSM_NVARCH) -I. -std=c++17 -Xcompiler -Wall
CUDALIBS  := -lcublas
CPUTESTS  := $(filter-out tests/test_main.c,$(TESTSRC))

.PHONY: compile-cuda test-cuda bench-cuda lib run-cuda

ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
EXTRA_TEST_DEPS += compile-cuda
# `make run` adds the GPU quickstart and benchmarks when a GPU is present.
ifneq ($(shell nvidia-smi -L 2>/dev/null | grep -c GPU),0)
EXTRA_RUN += run-cuda
endif
endif

compile-cuda: $(BUILD)/test_cuda $(BUILD)/cuda_bench $(BUILD)/quickstart_cuda $(BUILD)/libssmh.so \
              $(BUILD)/cuda_decay_variants $(BUILD)/cuda_linrec_perf

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

bench-cuda: $(BUILD)/cuda_bench
	./$(BUILD)/cuda_bench

$(BUILD)/quickstart_cuda: examples/quickstart_cuda.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $< $(CUDALIBS) -o $@

# The Python package's shared library (C ABI; pip install . builds the same for sm_80/sm_90).
$(BUILD)/libssmh.so: python/ssmh/csrc/ssmh.c python/ssmh/csrc/ssmh_cuda.cu ssm.h ssm_cuda.h | $(BUILD)
	$(CC) -std=c99 -O2 -fPIC -I. -c python/ssmh/csrc/ssmh.c -o $(BUILD)/ssmh.o
	$(NVCC) $(SSM_NVFLAGS) -Xcompiler -fPIC -shared python/ssmh/csrc/ssmh_cuda.cu $(BUILD)/ssmh.o $(CUDALIBS) -o $@

lib: $(BUILD)/libssmh.so

run-cuda: $(BUILD)/quickstart_cuda $(BUILD)/cuda_bench
	@echo "== CUDA quickstart"
	./$(BUILD)/quickstart_cuda
	@echo "== CUDA benchmarks"
	./$(BUILD)/cuda_bench
