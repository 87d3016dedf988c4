# `make demo` and `make test` are the whole set-up on a fresh clone: each creates .venv and
# installs the project with its test extras the first time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[sandbox,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/provisioner validate examples/fleet.yaml
	$(BIN)/provisioner render examples/fleet.yaml

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
