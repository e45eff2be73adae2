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
	@# SimGrid (Debian's python3-simgrid) serves /usr/bin/python3; the tests run it in a subprocess
	@/usr/bin/python3 -c 'import simgrid' 2>/dev/null || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  command -v apt-get >/dev/null \
	  && $$sudo apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq python3-simgrid >/dev/null \
	  || echo "crosscheck: could not install python3-simgrid; the SimGrid tests will skip"; }
	$(BIN)/python -m pytest -m crosscheck -ra

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
