# Two commands a new user runs on a fresh machine: `make site` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup site test lint bench serve clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[dev]"

setup: $(PY)

site: $(PY)
	$(PY) -m generator build

# two workers (tests/conftest.py groups the tests that share an expensive fixture); JOBS=0 runs in one process
JOBS ?= 2
test: $(PY)
	$(PY) -m pytest -n $(JOBS) --dist loadgroup

lint: $(PY)
	$(VENV)/bin/ruff check nncanon generator tests bench

bench: $(PY)
	$(PY) bench/bench_text.py
	$(PY) bench/bench_states.py
	$(PY) bench/bench_page.py
	$(PY) bench/bench_build.py
	$(PY) bench/bench_load.py
	$(PY) bench/bench_cache.py

serve: $(PY)
	$(PY) -m generator serve

clean:
	rm -rf build site
