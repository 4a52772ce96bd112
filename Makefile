# ssm.h - build, test and benchmark.  `make test` (CPU tests) and `make run` (quickstart +
# a benchmark smoke run, under two minutes) are all a fresh machine needs; `make bench` runs
# the full benchmark tables.  GPU targets run on a machine with a GPU.
CC      ?= cc
CXX     ?= c++
NVCC    ?= nvcc
BUILD   ?= build
OPT     ?= -O2 -march=native
STRICT  := -std=c99 -Wall -Wextra -Werror -pedantic
SAN     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
HEADERS := ssm.h $(wildcard ssm_blas.h ssm_cuda.h)
TESTSRC := $(wildcard tests/test_*.c)
LIBS    := -lm -pthread

.PHONY: test test-suites run examples check-examples bench clean compile-checks test-fast fuzz fuzz-libfuzzer

# How to run a built program: ./build/x, or an absolute BUILD as is.
B := $(if $(filter /%,$(BUILD)),,./)$(BUILD)

# Independent compiles (the examples in check-examples, the CUDA programs in compile-cuda) run
# JOBS at a time in a make of their own, each target's output printed together (make -O), so
# the log reads as in a serial build: by default one a core, and no more than one per 4 GiB of
# memory (a compile of ssm_cuda.h's implementation takes minutes and up to ~2 GiB). When make
# was given -j, those makes share its job slots instead.
ifeq ($(origin JOBS),undefined)
JOBS := $(shell c=$$(nproc 2>/dev/null || echo 1); m=$$(awk '/^MemTotal:/ {print int($$2 / 4194304)}' /proc/meminfo 2>/dev/null); \
	[ -n "$$m" ] && [ "$$m" -lt "$$c" ] && c=$$m; [ "$$c" -ge 1 ] 2>/dev/null && echo $$c || echo 1)
endif
PAR = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(JOBS)) $(if $(filter 3.%,$(MAKE_VERSION)),,-O)

# Backend makefiles (mk/*.mk) add their own targets and may append to these hooks.
EXTRA_TEST_DEPS :=
EXTRA_RUN :=
EXTRA_BENCH :=
TEST_FLAGS :=   # extra compile flags for the test binaries (mk/blas.mk: -DSSM_TEST_BLAS ...)
BENCH_FLAGS :=  # extra compile flags for bench/cpu_*.c (mk/blas.mk: -DSSM_BENCH_BLAS ...)
FUZZ_FLAGS :=   # extra compile flags for tests/fuzz_api.c (mk/blas.mk: -DSSM_FUZZ_BLAS ...)
-include $(wildcard mk/*.mk)

# The test binaries are rebuilt when their flags change (e.g. BLIS was installed meanwhile).
TEST_STAMP := $(BUILD)/.test-flags
$(shell mkdir -p $(BUILD); echo '$(TEST_FLAGS) $(LIBS)' | cmp -s - $(TEST_STAMP) 2>/dev/null || echo '$(TEST_FLAGS) $(LIBS)' > $(TEST_STAMP))

# The API fuzzer for FUZZ_SECONDS, then the suites (left to right: make runs no -j here), so the
# last line is the suites' "N passed, N failed".
test: fuzz test-suites

test-suites: compile-checks check-examples $(EXTRA_TEST_DEPS) $(BUILD)/test_asan $(BUILD)/test
	@echo "== test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
	ASAN_OPTIONS=detect_leaks=1 $(B)/test_asan
	@echo "== test suite (optimized build)"
	$(B)/test

test-fast: $(BUILD)/test
	$(B)/test

$(BUILD):
	@mkdir -p $(BUILD)

$(BUILD)/test: $(TESTSRC) tests/test.h tests/cases.h $(HEADERS) $(TEST_STAMP) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -g $(TEST_FLAGS) $(TESTSRC) $(LIBS) -o $@

$(BUILD)/test_asan: $(TESTSRC) tests/test.h tests/cases.h $(HEADERS) $(TEST_STAMP) | $(BUILD)
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
	$(FUZZ_ASAN) $(B)/fuzz_api $(FUZZ_SECONDS) $(FUZZ_SEED)

$(BUILD)/fuzz_api: tests/fuzz_api.c $(HEADERS) $(TEST_STAMP) | $(BUILD)
	$(CC) $(STRICT) $(SAN) $(FUZZ_FLAGS) tests/fuzz_api.c $(LIBS) -o $@

# The same generator driven by libFuzzer's coverage-guided inputs (needs clang; BLIS without
# OpenMP when present): make fuzz-libfuzzer FUZZ_SECONDS=600
LF_BLIS := $(if $(filter yes,$(HAVE_BLIS)),-DSSM_FUZZ_BLAS -lblis)
fuzz-libfuzzer: | $(BUILD)
	clang -std=c99 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSSM_FUZZ_LIBFUZZER \
		tests/fuzz_api.c $(LF_BLIS) -lm -o $(BUILD)/fuzz_libfuzzer
	@mkdir -p $(BUILD)/fuzz_corpus
	$(FUZZ_ASAN) $(B)/fuzz_libfuzzer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 $(BUILD)/fuzz_corpus

# Every header compiles as C99 (strict), as C++ and through nvcc (when present).
compile-checks: | $(BUILD)
	@echo "== compile checks: C99 strict, C++, nvcc"
	$(CC) $(STRICT) -c tests/compile_c.c -o $(BUILD)/compile_c.o
	$(CXX) -std=c++11 -Wall -Wextra -Werror -x c++ -c tests/compile_c.c -o $(BUILD)/compile_cpp.o
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		echo "$(NVCC) -x cu -c tests/compile_c.c"; \
		$(NVCC) -x cu -c tests/compile_c.c -o $(BUILD)/compile_nvcc.o || exit 1; \
	else echo "nvcc not found: skipping the nvcc compile check"; fi

# Every example builds with exactly the command in its first comment line (`/* cc ... */`),
# run from a copy of the repository's layout; README.md must show each of these lines verbatim,
# so the lines README and the examples show are the lines CI runs. nvcc lines run only where nvcc exists, -lblis lines only where BLIS does.
# The examples build JOBS at a time (PAR), each into the same copy.
EXAMPLE_SRCS := $(wildcard examples/*.c examples/*.cu)
EXAMPLE_BUILT := $(EXAMPLE_SRCS:%=$(BUILD)/examples-check/%.built)
examples: check-examples
check-examples: | $(BUILD)
	@echo "== examples: each built with the command in its first line"
	@rm -rf $(BUILD)/examples-check && mkdir -p $(BUILD)/examples-check && cp -R ssm*.h examples $(BUILD)/examples-check/
	@$(MAKE) --no-print-directory $(PAR) $(EXAMPLE_BUILT)
$(EXAMPLE_BUILT): $(BUILD)/examples-check/%.built: %
	@cd $(BUILD)/examples-check && f=$<; \
		cmd=$$(head -n 1 $$f | sed -e 's|^/\* *||' -e 's| *\*/ *$$||'); \
		case "$$cmd" in nvcc*) command -v $(NVCC) >/dev/null 2>&1 || { echo "skipped (no nvcc): $$cmd"; exit 0; };; esac; \
		case "$$cmd" in *-lblis*) [ "$(HAVE_BLIS)" = yes ] || { echo "skipped (no BLIS): $$cmd"; exit 0; };; esac; \
		grep -qxF "$$cmd" $(CURDIR)/README.md || { echo "README.md does not show the first line of $$f: $$cmd"; exit 1; }; \
		echo "$$cmd"; sh -c "$$cmd" || { echo "example $$f: its first-line command failed"; exit 1; }; \
		touch $$f.built

# CPU benchmarks are picked up by name: bench/cpu_*.c.
COMMIT   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BENCHES  := $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/cpu_*.c))
LINEBUF  := $(shell command -v stdbuf >/dev/null 2>&1 && echo stdbuf -oL)

$(BUILD)/quickstart: examples/quickstart.c $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -I. $< -lm -o $@

$(BUILD)/cpu_%: bench/cpu_%.c bench/bench.h $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -D_POSIX_C_SOURCE=200809L $(BENCH_FLAGS) -DSSM_BENCH_COMMIT='"$(COMMIT)"' $< $(LIBS) -o $@

# The full tables (minutes on a 2-core machine); rows are appended to bench/results/*.jsonl.
bench: $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; $(LINEBUF) $(if $(filter /%,$(BUILD)),,./)$$b || exit 1; done
	@for t in $(EXTRA_BENCH); do $(MAKE) --no-print-directory $$t || exit 1; done

# The quickstart, then a few small rows of every CPU benchmark (no JSON written): under two
# minutes with output as it goes. `make bench` runs the full tables.
SMOKE := BENCH_QUICK=1 BENCH_NO_JSON=1
run: $(BUILD)/quickstart $(BENCHES)
	@echo "== quickstart"
	$(B)/quickstart
	@echo "== benchmark smoke (small rows, nothing appended to bench/results; full tables: make bench)"
	$(SMOKE) SSM_BENCH_N=32 $(LINEBUF) $(B)/cpu_linrec
	$(SMOKE) BENCH_N=32 BENCH_N_BLIS=512 $(LINEBUF) $(B)/cpu_bell
	$(SMOKE) BENCH_M=8 BENCH_M_BLIS=64 $(LINEBUF) $(B)/cpu_proj
	@for t in $(EXTRA_RUN); do $(MAKE) --no-print-directory $$t || exit 1; done

clean:
	rm -rf $(BUILD)
