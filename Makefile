# The README's two commands: `make serve` and `make test`. Both build .venv when missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint format bench bench-quick schema clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

serve: $(STAMP)
	CONVOGRAPH_LOG_FORMAT=$${CONVOGRAPH_LOG_FORMAT:-text} $(BIN)/convograph serve

lint: $(STAMP)
	$(BIN)/ruff check graph tests bench tools
	$(BIN)/ruff format --check graph tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test: $(STAMP) lint
	@tools/test_passes.sh

format: $(STAMP)
	$(BIN)/ruff check --fix graph tests bench tools
	$(BIN)/ruff format graph tests bench tools

schema: $(STAMP)
	$(BIN)/convograph export-schema > schema.graphql

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
