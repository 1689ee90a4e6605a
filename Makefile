# Two commands a new user runs on a fresh machine: `make site` and `make test`. The venv carries the
# TransformerLens extra, so a newcomer's `make test` runs what CI runs (the TransformerLens checks too).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
JOBS ?= 2

.PHONY: setup site test newest-venv verify-newest release-watch release-accept releases lint bench serve clean

# constraints.txt locks the releases the site is built on, inside the range pyproject declares
$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[dev,transformer-lens]" -c constraints.txt

setup: $(PY)

# JOBS processes collect the families whose facts are not current (generator/facts/jobs.py)
COLLECTORS = $(if $(filter 0,$(JOBS)),1,$(JOBS))
site: $(PY)
	$(PY) -m generator build --jobs $(COLLECTORS)

# first the site's facts, as make site collects them (cached: after make site, nothing to collect), which the
# suite reads; then two workers (tests/conftest.py: the modules sharing an expensive fixture are one unit, the
# capability comparison in shards); JOBS=0: one process. The suite surveys no model type and runs the Recipes page on
# no family but its samples' (NNCANON_SURVEY, NNCANON_RECIPES, generator/build.py): make site surveys every model type
# and runs the Recipes page on every family (CI runs both, .ci/run); tests/test_survey*.py, test_recipe_runs.py samples.
# --durations: every run ends with its 25 slowest tests (where the suite's time goes: bench/bench_suite.py per file)
test: $(PY)
	NNCANON_RECIPES=cached $(PY) -m generator verify --jobs $(COLLECTORS)
	$(PY) -m pytest -n $(JOBS) --durations=25

# every family verified again on the newest transformers published (pip's index says which: no number here), in a
# venv of its own with its own dependencies, into build/transformers-<release>/: facts apart from the site's; then
# `pip check`, and what moved against the newest kept record. A failure fails inside the declared range only
# (generator/facts/newest.py); RELEASE=5.24.0 verifies that release instead
VENV_NEWEST := .venv-transformers-newest
newest-venv:
	test -x $(VENV_NEWEST)/bin/python || $(PYTHON) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/python -m pip install -q --upgrade pip

verify-newest: newest-venv
	$(VENV_NEWEST)/bin/python -m generator.facts.newest --python $(VENV_NEWEST)/bin/python $(if $(RELEASE),--release $(RELEASE))

# what a maintainer runs when a transformers release comes out (.ci/release-watch, the scheduled job, runs it too):
# verify-newest's cycle, then the candidate record of the families that verified and REPORT.md (each family's result,
# what moved, the triage steps) in build/release-watch/<release>/ (generator/facts/watch.py); RELEASE=5.26.0 watches
# that release, FAMILIES="falcon gpt2" only those (a triage's second look). Then, once triaged:
# make release-accept RELEASE=5.26.0 keeps the candidate in releases/ and writes nncanon/verified_releases.json
release-watch: newest-venv
	$(VENV_NEWEST)/bin/python -m generator.facts.watch --python $(VENV_NEWEST)/bin/python $(if $(RELEASE),--release $(RELEASE)) $(FAMILIES)

ifneq ($(filter release-accept,$(MAKECMDGOALS)),)
ifndef RELEASE
$(error make release-accept needs RELEASE=<the release watched>, e.g. RELEASE=5.26.0)
endif
endif
release-accept: $(PY)
	$(PY) -m generator.facts.watch --accept $(RELEASE) $(if $(DROP),--drop $(DROP))

# after a family or a release changes: the kept records (releases/, nncanon/verified_releases.json) from the facts
# of the locked release (build/) and of the newest make verify-newest verified (build/newest-transformers names it)
releases: $(PY)
	$(PY) -m generator releases
	NNCANON_BUILD=build/transformers-$$(cat build/newest-transformers) $(PY) -m generator releases

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
