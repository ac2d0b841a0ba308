# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test install clean

install: $(INSTALLED)

# torch is pinned first: 2.13.0 is already on our machines, any other version pulls several GB.
$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(BIN)/lmaudit demo

test: $(INSTALLED)
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
