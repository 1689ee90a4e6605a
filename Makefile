# Two commands a new user runs on a fresh machine: `make site` and `make test`. The venv carries the
# TransformerLens extra, so a newcomer's `make test` runs what CI runs (the TransformerLens checks too).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup site test verify-newest releases lint bench serve clean

# constraints.txt locks the releases the site is built on, inside the range pyproject declares
$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[dev,transformer-lens]" -c constraints.txt

setup: $(PY)

site: $(PY)
	$(PY) -m generator build

# two workers (tests/conftest.py: the modules sharing an expensive fixture are one unit); JOBS=0: one process.
# --durations: every run ends with its 25 slowest tests (where the suite's time goes: bench/bench_suite.py per file)
JOBS ?= 2
test: $(PY)
	$(PY) -m pytest -n $(JOBS) --durations=25

# every family verified again on the newest transformers of the range pyproject declares (the locked, oldest one is
# make site's and make test's), in a venv of its own, into build/transformers-<release>/: facts apart from the site's
NEWEST ?= 5.24.0
VENV_NEWEST := .venv-transformers-$(NEWEST)
verify-newest:
	test -x $(VENV_NEWEST)/bin/python || $(PYTHON) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_NEWEST)/bin/python -m pip install -q -e ".[site]" "transformers==$(NEWEST)" "torch==2.13.0" "nnsight==0.8.1"
	NNCANON_BUILD=build/transformers-$(NEWEST) NNCANON_CACHE=build/checkpoints $(VENV_NEWEST)/bin/python -m generator verify --force
	NNCANON_BUILD=build/transformers-$(NEWEST) $(VENV_NEWEST)/bin/python -m generator releases --check

# after a family or a release changes: the kept records (releases/, nncanon/verified_releases.json) from the facts
# of the locked release (build/) and of the newest (make verify-newest)
releases: $(PY)
	$(PY) -m generator releases
	NNCANON_BUILD=build/transformers-$(NEWEST) $(PY) -m generator releases

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
	rm -rf build site .venv-transformers-*
