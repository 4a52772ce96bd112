# The DeltaNet language model of examples/deltanet/ (PyTorch; README there).
#   kjv                 writes examples/deltanet/data/kjv.txt, the King James Bible as plain text,
#                       from Debian's bible-kjv-text (installed with apt-get when missing; its
#                       compressed format is read with the package's own `bible` program).
#                       The text is committed, so a checkout (and the GPU machine) has it already.
#   test-deltanet-data  (in `make test` when python3 is present) the loader on the real file,
#                       pure Python, no torch: split, windows, batch order.
#   test-deltanet-smoke (in `make test` when python3 imports torch) 20 training steps of a tiny
#                       model on the CPU (reference backend) for every solver that runs on the
#                       CPU, a checkpoint resume and a sample (installs the package CPU-only).
KJV_TXT := examples/deltanet/data/kjv.txt
PYTHON ?= python3
DN_PKG := $(abspath $(BUILD))/pyssmh_deltanet

.PHONY: kjv test-deltanet-data test-deltanet-smoke

kjv:
	@command -v bible >/dev/null 2>&1 && test -f /usr/lib/bible.data || \
		(apt-get install -y bible-kjv-text || (apt-get update && apt-get install -y bible-kjv-text))
	@mkdir -p $(dir $(KJV_TXT))
	bible -l10000 "Genesis 1:1-Revelation 22:21" </dev/null > $(KJV_TXT).tmp && mv $(KJV_TXT).tmp $(KJV_TXT)
	@wc -c $(KJV_TXT)

ifneq ($(shell command -v $(PYTHON) 2>/dev/null),)
EXTRA_TEST_DEPS += test-deltanet-data
ifeq ($(shell $(PYTHON) -c 'import torch' 2>/dev/null && echo yes),yes)
EXTRA_TEST_DEPS += test-deltanet-smoke
endif
endif

test-deltanet-data:
	@echo "== examples/deltanet: the KJV loader (pure Python)"
	$(PYTHON) examples/deltanet/test_data.py

test-deltanet-smoke: | $(BUILD)
	@echo "== examples/deltanet: 20-step CPU smoke run of every CPU solver, resume, sample"
	rm -rf $(DN_PKG)
	SSMH_CUDA=0 $(PYTHON) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --target $(DN_PKG) .
	PYTHONPATH=$(DN_PKG) $(PYTHON) examples/deltanet/smoke.py $(abspath $(BUILD))/deltanet_smoke
