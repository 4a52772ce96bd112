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

.PHONY: test run examples bench clean compile-checks test-fast

test: compile-checks $(BUILD)/test_asan $(BUILD)/test
	@echo "== test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
	ASAN_OPTIONS=detect_leaks=1 ./$(BUILD)/test_asan
	@echo "== test suite (optimized build)"
	./$(BUILD)/test

test-fast: $(BUILD)/test
	./$(BUILD)/test

$(BUILD):
	@mkdir -p $(BUILD)

$(BUILD)/test: $(TESTSRC) tests/test.h $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) -g $(TESTSRC) $(LIBS) -o $@

$(BUILD)/test_asan: $(TESTSRC) tests/test.h $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(SAN) $(TESTSRC) $(LIBS) -o $@

# Every header compiles as C99 (strict), as C++ and through nvcc (when present).
compile-checks: | $(BUILD)
	@echo "== compile checks: C99 strict, C++, nvcc"
	$(CC) $(STRICT) -c tests/compile_c.c -o $(BUILD)/compile_c.o
	$(CXX) -std=c++11 -Wall -Wextra -Werror -x c++ -c tests/compile_c.c -o $(BUILD)/compile_cpp.o
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		echo "$(NVCC) -x cu -c tests/compile_c.c"; \
		$(NVCC) -x cu -c tests/compile_c.c -o $(BUILD)/compile_nvcc.o || exit 1; \
	else echo "nvcc not found: skipping the nvcc compile check"; fi

examples: $(BUILD)/quickstart

$(BUILD)/quickstart: examples/quickstart.c ssm.h | $(BUILD)
	$(CC) $(STRICT) $(OPT) examples/quickstart.c $(LIBS) -o $@

$(BUILD)/bench_cpu: bench/bench_cpu.c bench/bench.h $(HEADERS) | $(BUILD)
	$(CC) $(STRICT) $(OPT) bench/bench_cpu.c $(LIBS) -o $@

bench: $(BUILD)/bench_cpu
	./$(BUILD)/bench_cpu

run: examples bench
	@echo "== quickstart"
	./$(BUILD)/quickstart
	@echo "== CPU benchmarks"
	./$(BUILD)/bench_cpu

clean:
	rm -rf $(BUILD)
