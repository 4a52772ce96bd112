# ssm.h - build, test and benchmark.  `make test` (CPU tests) and `make run` (quickstart +
# benchmarks) are all a fresh machine needs.  GPU targets run on a machine with a GPU.
CC      ?= cc
CXX     ?= c++
NVCC    ?= nvcc
BUILD   ?= build
OPT     ?= -O2 -march=native
STRICT  := -std=c99 -Wall -Wextra -Werror -pedantic
SAN     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
HEADERS := ssm.h $(wildcard ssm_blas.h ssm_cuda.h)
TESTSRC := $(wildcard tests/test_*.c)
LIBS    := -lm

.PHONY: test test-suites run examples bench clean compile-checks test-fast fuzz fuzz-libfuzzer

# Backend makefiles (mk/*.mk) add their own targets and may append to these hooks.
EXTRA_TEST_DEPS :=
EXTRA_RUN :=
TEST_FLAGS :=   # extra compile flags for the test binaries (mk/blas.mk: -DSSM_TEST_BLAS ...)
BENCH_FLAGS :=  # extra compile flags for bench/cpu_*.c (mk/blas.mk: -DSSM_BENCH_BLAS ...)
FUZZ_FLAGS :=   # extra compile flags for tests/fuzz_api.c (mk/blas.mk: -DSSM_FUZZ_BLAS ...)
-include $(wildcard mk/*.mk)

# The test binaries are rebuilt when their flags change (e.g. BLIS was installed meanwhile).
TEST_STAMP := $(BUILD)/.test-flags
$(shell mkdir -p $(BUILD); echo '$(TEST_FLAGS) $(LIBS)' | cmp -s - $(TEST_STAMP) 2>/dev/null || echo '$(TEST_FLAGS) $(LIBS)' > $(TEST_STAMP))

# The suites, then the API fuzzer for FUZZ_SECONDS (left to right: make runs no -j here).
test: test-suites fuzz

test-suites: compile-checks $(EXTRA_TEST_DEPS) $(BUILD)/test_asan $(BUILD)/test
	@echo "== test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
	ASAN_OPTIONS=detect_leaks=1 ./$(BUILD)/test_asan
	@echo "== test suite (optimized build)"
	./$(BUILD)/test

test-fast: $(BUILD)/test
	./$(BUILD)/test

$(BUILD):
	@mkdir -p $(BUILD)

$(BUILD)/test: $(TESTSRC) tests/test.h $(HEADERS) $(TEST_STAMP) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -g $(TEST_FLAGS) $(TESTSRC) $(LIBS) -o $@

$(BUILD)/test_asan: $(TESTSRC) tests/test.h $(HEADERS) $(TEST_STAMP) | $(BUILD)
	$(CC) $(STRICT) $(SAN) $(TEST_FLAGS) $(TESTSRC) $(LIBS) -o $@

# The API fuzzer (tests/fuzz_api.c): every public CPU entry point with random shapes, layouts
# and hostile arguments, reference against BLIS (when built), under ASan + UBSan for
# FUZZ_SECONDS. It prints "fuzz: N calls, N findings (seed S)"; a finding fails the build
# (replay one with ./build/fuzz_api 0 SEED ITERATION, as the finding says).
FUZZ_SECONDS ?= 120
FUZZ_SEED    ?= $(shell date +%s)
FUZZ_ASAN    := ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
fuzz: $(BUILD)/fuzz_api
	@echo "== API fuzzer: $(FUZZ_SECONDS) s under AddressSanitizer + UndefinedBehaviorSanitizer"
	$(FUZZ_ASAN) ./$(BUILD)/fuzz_api $(FUZZ_SECONDS) $(FUZZ_SEED)

$(BUILD)/fuzz_api: tests/fuzz_api.c $(HEADERS) $(TEST_STAMP) | $(BUILD)
	$(CC) $(STRICT) $(SAN) $(FUZZ_FLAGS) tests/fuzz_api.c $(LIBS) -o $@

# The same generator driven by libFuzzer's coverage-guided inputs (needs clang; BLIS without
# OpenMP when present): make fuzz-libfuzzer FUZZ_SECONDS=600
LF_BLIS := $(if $(filter yes,$(HAVE_BLIS)),-DSSM_FUZZ_BLAS -lblis)
fuzz-libfuzzer: | $(BUILD)
	clang -std=c99 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSSM_FUZZ_LIBFUZZER \
		tests/fuzz_api.c $(LF_BLIS) -lm -o $(BUILD)/fuzz_libfuzzer
	@mkdir -p $(BUILD)/fuzz_corpus
	$(FUZZ_ASAN) ./$(BUILD)/fuzz_libfuzzer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 $(BUILD)/fuzz_corpus

# Every header compiles as C99 (strict), as C++ and through nvcc (when present).
compile-checks: | $(BUILD)
	@echo "== compile checks: C99 strict, C++, nvcc"
	$(CC) $(STRICT) -c tests/compile_c.c -o $(BUILD)/compile_c.o
	$(CXX) -std=c++11 -Wall -Wextra -Werror -x c++ -c tests/compile_c.c -o $(BUILD)/compile_cpp.o
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		echo "$(NVCC) -x cu -c tests/compile_c.c"; \
		$(NVCC) -x cu -c tests/compile_c.c -o $(BUILD)/compile_nvcc.o || exit 1; \
	else echo "nvcc not found: skipping the nvcc compile check"; fi

# Examples and CPU benchmarks are picked up by name: examples/*.c, bench/cpu_*.c.
COMMIT   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/%,$(wildcard examples/*.c))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/cpu_*.c))

examples: $(EXAMPLES)

$(BUILD)/%: examples/%.c $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -I. $< $(LIBS) -o $@

$(BUILD)/cpu_%: bench/cpu_%.c bench/bench.h $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -D_POSIX_C_SOURCE=200809L $(BENCH_FLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(LIBS) -o $@

bench: $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; ./$$b || exit 1; done

run: examples $(BENCHES)
	@echo "== quickstart"
	./$(BUILD)/quickstart
	@$(MAKE) --no-print-directory bench
	@for t in $(EXTRA_RUN); do $(MAKE) --no-print-directory $$t || exit 1; done

clean:
	rm -rf $(BUILD)
