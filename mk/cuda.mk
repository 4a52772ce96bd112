# CUDA backend (ssm_cuda.h): `make test-cuda`, `make bench-cuda`, `make lib` need a GPU only to run.
# SSM_NVARCH picks the target of tests and benchmarks (NVARCH is taken: CUDA images set it to
# the CPU arch); by default sm_90a, the Hopper target whose arch-specific instructions (wgmma,
# setmaxnreg) the projection chains' proj_kernel 3 needs (other targets compile it as an empty
# stub and take kernel 1). The minimum architecture is sm_80 (cp.async); `make lib` builds sm_80
# and sm_90a code plus sm_90 PTX for later GPUs, so it is also the check that ssm_cuda.h
# compiles for sm_80, the minimum the README claims.
# `compile-cuda` (in CI through EXTRA_TEST_DEPS) compiles and links every CUDA source with nvcc.
# The test, fuzz, benchmark and dev programs link one object holding the CUDA implementation
# ($(CUDA_IMPL), tests/cuda_impl.cu): the kernels compile once per build, not once per program
# (each compile of them takes minutes). The examples, the library and the dev harnesses that
# call private kernels compile the implementation themselves (those harnesses together, once:
# dev/cuda/whole.cu). compile-cuda runs $(JOBS) compiles at a time (the Makefile's JOBS).
SSM_NVARCH ?= -arch=sm_90a
SSM_NVBASE := -O3 -I. -std=c++17 -Xcompiler -Wall
SSM_NVFLAGS ?= $(SSM_NVBASE) $(SSM_NVARCH)
SSM_LIBARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
CUDA_IMPL := $(BUILD)/cuda_impl.o
CUDALIBS  := -lcublas
CPUTESTS  := $(filter-out tests/test_main.c,$(TESTSRC))

.PHONY: compile-cuda test-cuda test-nccl bench-cuda-cp bench-cuda bench-cuda-bell bench-cuda-delta lib run-cuda fuzz-cuda

ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
EXTRA_TEST_DEPS += compile-cuda
# `make run` adds the GPU quickstart and benchmarks when a GPU is present.
ifneq ($(shell nvidia-smi -L 2>/dev/null | grep -c GPU),0)
EXTRA_RUN += run-cuda
EXTRA_BENCH += bench-cuda
endif
endif

DEV_CUDA  := $(patsubst dev/cuda/%.cu,$(BUILD)/dev_%,$(wildcard dev/cuda/*.cu))

# (examples/quickstart_cuda.cu is built by check-examples with its first-line command)
# The programs are built by a make of their own running $(JOBS) compiles at a time, the output
# of each compile printed together ($(PAR), Makefile); the longest (the implementation object,
# the library, dev_whole) first.
CUDA_PROGS = $(CUDA_IMPL) $(BUILD)/libssmh.so $(BUILD)/dev_whole $(if $(NCCL_SO),$(BUILD)/test_nccl $(BUILD)/cuda_cp_bench) $(BUILD)/test_cuda \
	$(BUILD)/fuzz_cuda $(BUILD)/cuda_bench $(BUILD)/cuda_bell $(BUILD)/cuda_proj $(BUILD)/cuda_delta $(filter-out $(BUILD)/dev_whole,$(DEV_CUDA))
compile-cuda: | $(BUILD)
	@echo "== CUDA programs: compile and link ($(or $(findstring -j,$(MAKEFLAGS)),$(JOBS)) at a time)"
	@$(MAKE) --no-print-directory $(PAR) $(CUDA_PROGS)

$(CUDA_IMPL): tests/cuda_impl.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $(IMPL_FLAGS) -c $< -o $@

$(BUILD)/test_main_cuda.o: tests/test_main.c tests/test.h tests/cases.h ssm.h | $(BUILD)
	$(CC) -std=c99 -O2 -g -Dmain=ssm_test_cpu_main -c $< -o $@

$(BUILD)/test_cuda: tests/test_cuda.cu $(BUILD)/test_main_cuda.o $(CUDA_IMPL) $(CPUTESTS) tests/test.h tests/cases.h ssm.h ssm_cuda.h | $(BUILD)
	$(CC) -std=c99 -O2 -g -c $(CPUTESTS) && mv $(notdir $(CPUTESTS:.c=.o)) $(BUILD)/
	$(NVCC) $(SSM_NVFLAGS) -g -Itests tests/test_cuda.cu $(BUILD)/test_main_cuda.o $(CUDA_IMPL) $(addprefix $(BUILD)/,$(notdir $(CPUTESTS:.c=.o))) $(IMPL_LIBS) -o $@

test-cuda: $(BUILD)/test_cuda
	$(B)/test_cuda

# NCCL (ssm_cuda.h's SSM_NCCL hook, tests/test_nccl.cu on 2 GPUs): nccl.h and libnccl under
# NCCL_HOME; by default the CUDA toolkit, /usr, or the nvidia-nccl wheel PyTorch ships.
# compile-cuda builds the 2-GPU test only where nccl.h and the library are found.
NCCL_HOME ?= $(firstword $(foreach d,/usr/local/cuda /usr $(shell python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null),$(if $(wildcard $(d)/include/nccl.h),$(d))))
NCCL_SO = $(firstword $(wildcard $(addprefix $(NCCL_HOME)/,lib/libnccl.so lib64/libnccl.so lib/x86_64-linux-gnu/libnccl.so lib/libnccl.so.2 lib64/libnccl.so.2 lib/x86_64-linux-gnu/libnccl.so.2)))

# Where NCCL is found, the one implementation object carries the hook (SSM_NCCL only adds
# functions) and every program linking it links NCCL, so the 2-GPU test and the
# context-parallel benchmark need no second compile of the kernels.
NCCL_FLAGS = -DSSM_NCCL -I$(NCCL_HOME)/include
IMPL_FLAGS = $(if $(NCCL_SO),$(NCCL_FLAGS))
NCCL_LINK = $(NCCL_SO) -Xlinker -rpath,$(dir $(NCCL_SO))
IMPL_LIBS = $(CUDALIBS) $(if $(NCCL_SO),$(NCCL_LINK))

$(BUILD)/test_nccl: tests/test_nccl.cu $(CUDA_IMPL) ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $(NCCL_FLAGS) $< $(CUDA_IMPL) $(IMPL_LIBS) -o $@

$(BUILD)/cuda_cp_bench: bench/cuda_cp.cu bench/cuda_common.h $(CUDA_IMPL) ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $(NCCL_FLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDA_IMPL) $(IMPL_LIBS) -o $@

test-nccl: $(BUILD)/test_nccl
	$(B)/test_nccl

bench-cuda-cp: $(BUILD)/cuda_cp_bench
	$(B)/cuda_cp_bench

# The API fuzzer with CUDA contexts as the second backend (tests/fuzz_api.c, SSM_FUZZ_CUDA):
# every call's memory mirrored to the device, the same contract checks, results compared with
# the reference backend; f64 and host-only tools must be refused as unsupported.
# `make fuzz-cuda FUZZ_SECONDS=120` on a machine with a GPU (the seed as in `make fuzz`).
$(BUILD)/fuzz_cuda: tests/fuzz_api.c $(CUDA_IMPL) ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -g -x cu -DSSM_FUZZ_CUDA -c tests/fuzz_api.c -o $@.o
	$(NVCC) $(SSM_NVFLAGS) $@.o $(CUDA_IMPL) $(IMPL_LIBS) -o $@

fuzz-cuda: $(BUILD)/fuzz_cuda
	$(B)/fuzz_cuda $(FUZZ_SECONDS) $(FUZZ_SEED)

# The benchmark programs, bench/cuda_*.cu: the linrec / decay tables (cuda_bench), block-ELL
# (cuda_bell; cuSPARSE Blocked-ELL is a peer), projection and output chains (cuda_proj; cuBLAS
# GEMMs of the same shapes are the floor and a peer), the delta rule (cuda_delta; fla's kernels on
# the same inputs in the same run when `import fla` works: the program writes its inputs, the
# peer script reads them).
$(BUILD)/cuda_%: bench/cuda_%.cu $(CUDA_IMPL) bench/cuda_common.h bench/bench.h ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDA_IMPL) $(IMPL_LIBS) -o $@
$(BUILD)/cuda_bell: CUDALIBS += -lcusparse
$(BUILD)/cuda_proj: CUDALIBS += -lcublasLt

# Kernel-variant harnesses, dev/cuda/*.cu (variants chosen by argv, forced through the
# kernel-choice fields of ssm_cuda_config, each timed beside the default and checked against it).
# bell, delta, proj_wgmma and onepass call private kernels or helpers and include the
# implementation themselves: they compile together as one program, $(BUILD)/dev_whole
# (dev/cuda/whole.cu includes the four: one compile of the implementation instead of four, and
# none waits for $(CUDA_IMPL)); $(BUILD)/dev_bell, dev_delta, dev_proj_wgmma and dev_onepass are
# links to it, each running its harness.
DEV_CUDA_LINKS := $(BUILD)/dev_bell $(BUILD)/dev_delta $(BUILD)/dev_proj_wgmma $(BUILD)/dev_onepass
$(BUILD)/dev_whole: dev/cuda/whole.cu dev/cuda/bell.cu dev/cuda/delta.cu dev/cuda/proj_wgmma.cu dev/cuda/onepass.cu \
		bench/cuda_common.h bench/bench.h \
		ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDALIBS) -o $@
$(DEV_CUDA_LINKS): $(BUILD)/dev_whole
	ln -sf dev_whole $@
$(BUILD)/dev_%: dev/cuda/%.cu $(CUDA_IMPL) bench/cuda_common.h bench/bench.h ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDA_IMPL) $(IMPL_LIBS) -o $@

bench-cuda-delta: $(BUILD)/cuda_delta
	@if python3 -c "import fla" 2>/dev/null; then d=$$(mktemp -d); DELTA_PEER_DIR=$$d $(B)/cuda_delta && \
	  python3 bench/peers/fla_peer.py --from $$d; rm -rf $$d; else $(B)/cuda_delta; fi

# Block-ELL: PyTorch BSR on the same inputs after the run when torch imports.
bench-cuda-bell: $(BUILD)/cuda_bell
	@if python3 -c "import torch" 2>/dev/null; then d=$$(mktemp -d); BELL_PEER_DIR=$$d $(B)/cuda_bell && \
	  SSM_COMMIT=$(COMMIT) python3 bench/peers/torch_bsr.py --from $$d; rm -rf $$d; else $(B)/cuda_bell; fi

# The linrec / decay tables, then PyTorch's peers on the same shapes when torch imports: the dense-
# recurrence grid (PEER_GRID=1, ending in the issue's target table) and the decay rows.
bench-cuda: $(BUILD)/cuda_bench $(BUILD)/cuda_bell $(BUILD)/cuda_proj $(BUILD)/cuda_delta
	$(B)/cuda_bench
	@if python3 -c "import torch" 2>/dev/null; then SSM_COMMIT=$(COMMIT) PEER_GRID=1 python3 bench/peers/torch_peers.py && \
	  SSM_COMMIT=$(COMMIT) PEER_DECAY=1 python3 bench/peers/torch_peers.py; fi
	$(MAKE) --no-print-directory bench-cuda-bell
	$(B)/cuda_proj
	$(MAKE) --no-print-directory bench-cuda-delta

$(BUILD)/quickstart_cuda: examples/quickstart_cuda.cu ssm.h ssm_cuda.h | $(BUILD)
	$(NVCC) $(SSM_NVFLAGS) $< $(CUDALIBS) -o $@

# The Python package's shared library (C ABI; pip install . builds the same).
$(BUILD)/libssmh.so: python/ssmh/csrc/ssmh.c python/ssmh/csrc/ssmh_cuda.cu ssm.h ssm_cuda.h | $(BUILD)
	$(CC) -std=c99 -O2 -fPIC -I. -c python/ssmh/csrc/ssmh.c -o $(BUILD)/ssmh.o
	$(NVCC) $(SSM_NVBASE) $(SSM_LIBARCH) --threads 0 -Xcompiler -fPIC -shared python/ssmh/csrc/ssmh_cuda.cu $(BUILD)/ssmh.o $(CUDALIBS) -o $@

lib: $(BUILD)/libssmh.so

# `make run` on a GPU machine: the CUDA quickstart (the full tables: make bench-cuda).
run-cuda: $(BUILD)/quickstart_cuda
	@echo "== CUDA quickstart (full GPU benchmark tables: make bench-cuda)"
	$(B)/quickstart_cuda

# dev/cuda/gemm_wgmma.cu uses wgmma and setmaxnreg: sm_90a machine code only (elsewhere the
# program says it needs sm_90a and exits 0). Explicit, so it wins over the $(BUILD)/dev_% rule.
$(BUILD)/dev_gemm_wgmma: dev/cuda/gemm_wgmma.cu bench/cuda_common.h bench/bench.h ssm.h | $(BUILD)
	$(NVCC) $(SSM_NVBASE) -gencode arch=compute_90a,code=sm_90a -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDALIBS) -o $@

# dev/cuda/bell_wgmma.cu (block-ELL forward, TMA + wgmma): sm_90a only, as dev_gemm_wgmma.
$(BUILD)/dev_bell_wgmma: dev/cuda/bell_wgmma.cu bench/cuda_common.h ssm.h | $(BUILD)
	$(NVCC) $(SSM_NVBASE) -gencode arch=compute_90a,code=sm_90a -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(CUDALIBS) -o $@
