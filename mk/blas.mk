# BLIS backend (ssm_blas.h): find BLIS, install it when missing, and build the tests and the
# CPU benchmarks against it.
#   - BLIS present: test binaries get -DSSM_TEST_BLAS (every suite runs on the reference AND
#     the BLIS backend), benchmarks get -DSSM_BENCH_BLAS; both link -lblis.
#   - BLIS missing, running as root: `apt-get install libblis-dev` (Debian/Ubuntu) first.
#   - BLIS missing, not root: a loud notice with the one command to run; only the BLIS part
#     is skipped, everything else still builds and runs.
# SSM_NO_BLIS=1 skips BLIS on purpose.
BLIS_CFLAGS := -D_POSIX_C_SOURCE=200809L -fopenmp
BLIS_LIBS   := -lblis -fopenmp
BLIS_APT    := apt-get update && apt-get install -y libblis-dev
BLIS_HASH   := \#
blis_probe   = $(shell printf '$(BLIS_HASH)include <blis.h>\nint main(void){return bli_info_get_version_str()[0]==0;}\n' | \
                 $(CC) -x c - -o /dev/null $(BLIS_CFLAGS) $(BLIS_LIBS) -lm >/dev/null 2>&1 && echo yes)

# Every goal but clean looks for BLIS; only goals that build tests or benchmarks install it.
BLIS_INSTALL_GOALS := $(if $(MAKECMDGOALS),$(filter test test-suites test-fast fuzz run bench compile-checks check-examples examples,$(MAKECMDGOALS)),test)
ifneq ($(SSM_NO_BLIS),1)
ifneq ($(MAKECMDGOALS),clean)
HAVE_BLIS := $(call blis_probe)
ifeq ($(HAVE_BLIS)$(if $(BLIS_INSTALL_GOALS),,no),)
ifeq ($(shell id -u),0)
$(info == BLIS (libblis-dev) not found: installing it: $(BLIS_APT))
BLIS_INSTALL_LOG := $(shell ( $(BLIS_APT) ) >$(or $(TMPDIR),/tmp)/ssm-blis-install.log 2>&1; echo $$?)
$(info == apt-get finished with status $(BLIS_INSTALL_LOG) (log: $(or $(TMPDIR),/tmp)/ssm-blis-install.log))
HAVE_BLIS := $(call blis_probe)
endif
endif
endif
endif

ifeq ($(HAVE_BLIS),yes)
TEST_FLAGS  += -DSSM_TEST_BLAS $(BLIS_CFLAGS)
BENCH_FLAGS += -DSSM_BENCH_BLAS $(BLIS_CFLAGS)
FUZZ_FLAGS  += -DSSM_FUZZ_BLAS $(BLIS_CFLAGS)
LIBS        += $(BLIS_LIBS)
EXTRA_TEST_DEPS += compile-checks-blas
else
EXTRA_TEST_DEPS += blis-missing
endif

.PHONY: compile-checks-blas blis-missing

# ssm_blas.h with its implementation: C99 strict, C++, nvcc (when present).
compile-checks-blas: | $(BUILD)
	@echo "== compile checks (BLIS backend): C99 strict, C++, nvcc"
	$(CC) $(STRICT) $(BLIS_CFLAGS) -c tests/compile_blas.c -o $(BUILD)/compile_blas_c.o
	$(CXX) -std=c++11 -Wall -Wextra -Werror $(BLIS_CFLAGS) -x c++ -c tests/compile_blas.c -o $(BUILD)/compile_blas_cpp.o
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		echo "$(NVCC) -x cu -c tests/compile_blas.c"; \
		$(NVCC) -x cu -D_POSIX_C_SOURCE=200809L -c tests/compile_blas.c -o $(BUILD)/compile_blas_nvcc.o || exit 1; \
	else echo "nvcc not found: skipping the nvcc compile check of ssm_blas.h"; fi

blis-missing:
	@echo "#####################################################################################"
	@echo "##  BLIS NOT FOUND: the BLIS backend (ssm_blas.h) is NOT built and NOT tested.      ##"
	@echo "##  Install it with:   sudo $(BLIS_APT)"
	@echo "##  then run make test again. Only the reference backend is tested in this run.    ##"
	@echo "#####################################################################################"
