# Two set-up commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Run the dry-run on the example snapshot bundled inside the package.
demo: $(STAMP)
	$(VENV)/bin/scaler dry-run --snapshot scaler/examples/bitbrains-gke-day1

## Lint, type-check and run the whole test suite.
test: lint typecheck unit

lint: $(STAMP)
	$(VENV)/bin/ruff check scaler plugins tests
	$(VENV)/bin/ruff format --check scaler plugins

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(VENV)/bin/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
