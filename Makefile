PYTHON ?= python3
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: most tests wait on servers and subprocesses, not the CPU
TEST_WORKERS ?= 2

.PHONY: setup demo test test-all lint bench

setup:            ## install everything (CPU) and convert the embedded model
	bash scripts/setup.sh

demo:             ## the main job on the embedded default model
	$(PYTHON) -m openclaw.demo

test:             ## the default (fast) suite; CI runs this
	$(PYTHON) -m pytest -q -m "not slow and not gpu" -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

test-all:         ## everything that can run without a GPU, slow tests included
	$(PYTHON) -m pytest -q -m "not gpu" $(PYTEST_ARGS)

lint:
	$(PYTHON) -m ruff check .

bench:            ## all benchmarks (see bench/RESULTS.md)
	for b in bench/*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done
