# Every target sets up what it needs: a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= scenarios/quickstart.yaml
# test processes (pytest-xdist); CI's machine has 2 cores
TEST_WORKERS ?= 2
# hivemind (Moshpit's reference averager) and CPU torch: a venv of their own for the cross-check
HIVEMIND_VENV := .venv-hivemind
HIVEMIND_PIP := $(HIVEMIND_VENV)/bin/python -m pip install --quiet

.PHONY: run test test-fast fuzz lint bench bench-report bench-scaling crosscheck golden notebooks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dask,fast]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/avsim run $(SCENARIO) --force

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m 'not slow and not bench and not crosscheck' -x -q

# input fuzzing (issue 9) with a large profile; `make test` runs a small one
AVSIM_FUZZ_EXAMPLES ?= 2000
fuzz: $(STAMP)
	AVSIM_FUZZ_EXAMPLES=$(AVSIM_FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/property/test_fuzz_inputs.py -q

lint: $(STAMP)
	$(BIN)/ruff check sim protocols tests bench
	$(BIN)/ruff format --check sim protocols tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench

# issue 13's figures from one run, as a table with their targets (also in results/bench.json)
bench-report: $(STAMP)
	$(BIN)/python -m bench report

# the full scaling table (N up to 10^5 gossip peers, 4096 Moshpit peers: tens of minutes)
bench-scaling: $(STAMP)
	$(BIN)/python -m bench.bench_scaling full

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
	@# hivemind 1.1.12's manylinux wheel bundles the p2pd daemon (the sdist fetches it at build
	@# time); torch: a wheel the machine ships (find-links: the CPU build), else PyTorch's CPU
	@# index, else PyPI's
	@$(HIVEMIND_VENV)/bin/python -c 'import hivemind' 2>/dev/null || { \
	  echo "crosscheck: installing hivemind into $(HIVEMIND_VENV)"; \
	  $(PYTHON) -m venv $(HIVEMIND_VENV) \
	  && { $(HIVEMIND_PIP) --no-index --no-deps torch 2>/dev/null \
	       || $(HIVEMIND_PIP) --retries 0 --index-url https://download.pytorch.org/whl/cpu torch \
	       || $(HIVEMIND_PIP) torch; } \
	  && $(HIVEMIND_PIP) --only-binary hivemind torch hivemind==1.1.12 \
	  && $(HIVEMIND_VENV)/bin/python -c 'import hivemind' \
	  || echo "crosscheck: could not install hivemind into $(HIVEMIND_VENV); the hivemind tests will skip"; }
	$(BIN)/python -m pytest -m crosscheck -ra

clean:
	rm -rf $(VENV) $(HIVEMIND_VENV) build *.egg-info .pytest_cache .hypothesis
