# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test install clean gpu-check

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

clean:
	rm -rf $(VENV) runs .pytest_cache
