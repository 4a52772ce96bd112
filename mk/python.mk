# The Python package `ssmh` (pyproject.toml, python/): ctypes + torch.library bindings.
#   test-pip    (in `make test` when python3 is present) a fresh venv, `pip install numpy .`
#               as a user would (the build backend compiles libssmh.so from the headers), then
#               the numpy smoke test through the C ABI (python/tests/test_abi.py). The build is
#               CPU-only here (SSMH_CUDA=0): the CUDA half compiles in compile-cuda.
#               PyTorch is not installed for CI: its PyPI wheel pulls the CUDA runtime wheels
#               (4.7 GB installed, ~3 min here) and the CPU torch suite adds ~3 min on 2 cores,
#               over this step's 3-minute budget; the torch suite runs where torch is (below).
#   test-python the torch suite (python/tests/test_torch.py: opcheck, gradcheck, compile, CUDA
#               graphs) against the python that has torch; installs offline (--no-deps
#               --no-build-isolation) into $(BUILD)/pyssmh, with CUDA when nvcc is present.
PYTHON ?= python3
PYVENV := $(abspath $(BUILD))/pyvenv
PYSSMH := $(abspath $(BUILD))/pyssmh

.PHONY: test-pip test-python

ifneq ($(shell command -v $(PYTHON) 2>/dev/null),)
EXTRA_TEST_DEPS += test-pip
endif

test-pip: | $(BUILD)
	@echo "== python package: pip install . into a fresh venv, numpy smoke test through the C ABI"
	@start=$$(date +%s); \
	rm -rf $(PYVENV) && $(PYTHON) -m venv $(PYVENV) && \
	$(PYVENV)/bin/python -m pip install -q --disable-pip-version-check numpy && \
	SSMH_CUDA=0 $(PYVENV)/bin/python -m pip install -q --disable-pip-version-check . && \
	(cd $(PYVENV) && bin/python $(CURDIR)/python/tests/test_abi.py) && \
	echo "== test-pip took $$(( $$(date +%s) - start )) s"

test-python: | $(BUILD)
	rm -rf $(PYSSMH)
	$(PYTHON) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --target $(PYSSMH) .
	cd $(PYSSMH) && PYTHONPATH=$(PYSSMH) $(PYTHON) $(CURDIR)/python/tests/test_torch.py
