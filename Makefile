# Every target sets up what it needs: a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= scenarios/quickstart.yaml

.PHONY: run test test-fast lint bench crosscheck golden notebooks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dask]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/avsim run $(SCENARIO) --force

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m 'not slow and not bench and not crosscheck' -x -q

lint: $(STAMP)
	$(BIN)/ruff check sim protocols tests bench
	$(BIN)/ruff format --check sim protocols tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

golden: $(STAMP)
	$(BIN)/python -m tests.golden.regenerate

crosscheck: $(STAMP)
	$(BIN)/python -m pytest -m crosscheck -ra

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
