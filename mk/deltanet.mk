# The DeltaNet language model of examples/deltanet/ (PyTorch; README there).
#   kjv                 writes examples/deltanet/data/kjv.txt, the King James Bible as plain text,
#                       from Debian's bible-kjv-text (installed with apt-get when missing; its
#                       compressed format is read with the package's own `bible` program).
#                       The text is committed, so a checkout (and the GPU machine) has it already.
#   test-deltanet-data  (in `make test` when python3 is present) the loader on the real file,
#                       pure Python, no torch: split, windows, batch order.
#   test-deltanet-smoke (in `make test` when python3 imports torch, and always under CI=true)
#                       20 training steps of a tiny model on the CPU (reference backend) for
#                       every solver that runs on the CPU, a checkpoint resume and a sample
#                       (installs the package CPU-only). Under CI=true without torch it first
#                       installs torch from PyPI into $(BUILD)/torch-site (about 5 GB, a minute);
#                       if that fails (no network) the smoke run says so and is skipped.
KJV_TXT := examples/deltanet/data/kjv.txt
PYTHON ?= python3
DN_PKG := $(abspath $(BUILD))/pyssmh_deltanet
DN_TORCH_SITE := $(abspath $(BUILD))/torch-site
HAVE_TORCH := $(shell $(PYTHON) -c 'import torch' 2>/dev/null && echo yes)
# torch importable, from the system or from the CI install (a shell condition)
DN_TORCH_OK = { [ "$(HAVE_TORCH)" = yes ] || PYTHONPATH=$(DN_TORCH_SITE) $(PYTHON) -c 'import torch' 2>/dev/null; }

.PHONY: kjv test-deltanet-data test-deltanet-smoke

kjv:
	@command -v bible >/dev/null 2>&1 && test -f /usr/lib/bible.data || \
		(apt-get install -y bible-kjv-text || (apt-get update && apt-get install -y bible-kjv-text))
	@mkdir -p $(dir $(KJV_TXT))
	bible -l10000 "Genesis 1:1-Revelation 22:21" </dev/null > $(KJV_TXT).tmp && mv $(KJV_TXT).tmp $(KJV_TXT)
	@wc -c $(KJV_TXT)

ifneq ($(shell command -v $(PYTHON) 2>/dev/null),)
EXTRA_TEST_DEPS += test-deltanet-data
ifneq ($(HAVE_TORCH)$(filter true,$(CI)),)
EXTRA_TEST_DEPS += test-deltanet-smoke
endif
endif

test-deltanet-data:
	@echo "== examples/deltanet: the KJV loader (pure Python)"
	$(PYTHON) examples/deltanet/test_data.py

test-deltanet-smoke: | $(BUILD)
	@echo "== examples/deltanet: 20-step CPU smoke run of every CPU solver, resume, sample"
	@if ! $(DN_TORCH_OK); then \
		echo "installing torch into $(DN_TORCH_SITE)"; \
		$(PYTHON) -m pip install -q --disable-pip-version-check --target $(DN_TORCH_SITE) torch || rm -rf $(DN_TORCH_SITE); fi
	@if $(DN_TORCH_OK); then \
		rm -rf $(DN_PKG) && \
		SSMH_CUDA=0 $(PYTHON) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --target $(DN_PKG) . && \
		PYTHONPATH=$(DN_PKG):$(DN_TORCH_SITE) $(PYTHON) examples/deltanet/smoke.py $(abspath $(BUILD))/deltanet_smoke; \
	else echo "torch could not be installed: the DeltaNet smoke run is skipped"; fi
