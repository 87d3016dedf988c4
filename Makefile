# `make demo`, `make test` and `make bench` are the whole set-up on a fresh clone: each creates .venv and
# installs the project with its test extras the first time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[sandbox,test]'
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh

bench: $(STAMP)
	$(BIN)/python -m bench.run

# Each test module whole on one worker, the slowest of the last run first (tests/ordering.py).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 3 --dist loadscope --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
