"""Shared fixtures: the family's tiny pinned checkpoint and the models loaded from it.

Loading is the slow part (a second or two each), so every load condition is one
session-scoped fixture; tests must not leave edits behind (nnsight edits last one trace).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from limits import HANG, WAIT

from generator.recipe.family import get_family

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# a test's build renders the Coverage page from the rows already surveyed and surveys none (generator/build.py)
os.environ.setdefault("NNCANON_SURVEY", "cached")
# and from the Recipes page's runs already kept, running none: make site runs it on every family,
# tests/test_recipe_runs.py on a sample (generator/build.py)
os.environ.setdefault("NNCANON_RECIPES", "cached")
# the family pages from the half-dtype results kept, running the stage on none (make site runs every family)
os.environ.setdefault("NNCANON_DTYPES", "kept")
# and from the TransformerLens results the build directory keeps, checking none (make site checks every family and
# refuses a disagreement, tests/test_transformer_lens.py checks a sample; generator/facts/tl_agreement.py)
os.environ.setdefault("NNCANON_TL", "kept")

FAMILY = "qwen3_5_moe_text"
#: two prompts of different lengths, so the batch is left-padded
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


def pytest_configure(config):
    import torch

    # the tiny models' ops are too small to share among threads; one is faster and steadier
    torch.set_num_threads(1)


# ---------------------------------------------------------------- two workers (make test: pytest -n 2)
#
# pytest-xdist sends whole work units to its workers; a unit is a test module, except that the modules
# sharing an expensive session fixture form one unit, so each worker computes that fixture at most once
# (the whole site built from every family's facts; the browser tests' site), and each shard of the
# capability comparison (one capability's kernels-only collection of a share of the families,
# tests/kernel_shards.py) is a unit of its own, so the shards spread over both workers and none runs for
# minutes. The units are named by file (and shard) because the scheduler sees node ids only;
# pytest_collection_modifyitems checks that every test using such a fixture is in its unit's files.

#: expensive session fixture -> (its unit, the test files that use it)
SHARED = {
    "site": ("site", {"test_site_index.py", "test_compare.py", "test_sae_index.py"}),
    "base": ("browser", {"test_browser.py", "test_browser_interiors.py", "test_browser_mobile.py",
                         "test_browser_coverage.py", "test_browser_mechanics.py"}),
}
UNITS = {name: unit for unit, files in SHARED.values() for name in files}
#: the modules whose tests are parametrized by a kernel shard (``[default-0]``): one unit per shard
SHARDED = {"test_portable_facts.py", "test_portable_pins.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        parametrized = getattr(getattr(item, "callspec", None), "params", {})  # a test's own argument, no fixture
        for fixture, (_, files) in SHARED.items():
            if fixture in getattr(item, "fixturenames", ()) and fixture not in parametrized \
                    and item.path.name not in files:
                raise pytest.UsageError(f"{item.nodeid} uses the session fixture {fixture!r}: add {item.path.name!r} "
                                        f"to its unit's files in tests/conftest.py SHARED (so one worker computes it)")
        if "kernel_facts" in getattr(item, "fixturenames", ()) and item.path.name not in SHARDED:
            raise pytest.UsageError(f"{item.nodeid} uses kernel_facts: add {item.path.name!r} to tests/conftest.py "
                                    f"SHARDED and parametrize it by kernel_shards.SHARDS")


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its shard's for a sharded module, its shared fixture's, else its module."""
    import re

    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    shard = re.search(r"\[(\w+-\d+)\]$", nodeid) if name in SHARDED else None
    if shard:
        return f"kernels-{shard.group(1)}"
    return UNITS.get(name, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            # the longest units first (the browser's site and sweeps, the site built whole, the shards), so none
            # ends the run alone: each moved to the front in turn
            for unit in [u for u in self.workqueue if u.startswith("kernels-")] + ["site", "browser"]:
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return SharedFixtureScheduling(config, log)


@pytest.fixture(scope="session")
def native_facts() -> Path:
    """Every family's facts under this machine's own kernels: the site's (``<build>/facts``), as ``make site``
    and ``make test``'s first step (``generator verify --jobs 2``) collected them; verified here again, which
    collects only a family whose cache key changed since (every family, on a fresh clone run without make)."""
    import subprocess
    import sys

    from generator.facts.collect import facts_dir

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("NNCANON_FAMILIES", None)  # the repository's families, whatever a test set
    run = subprocess.run([sys.executable, "-m", "generator", "verify"], cwd=repo, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=HANG)
    assert run.returncode == 0, f"verifying every family: {run.stderr[-3000:]}"
    return facts_dir()


#: a shard's generator commands in one process: each step's argv (JSON, the first argument) to generator's main
_STEPS = """import json, sys
from generator.__main__ import main
for argv in json.loads(sys.argv[1]):
    if main(argv) != 0:
        sys.exit(f"generator {argv[0]} failed (its error above)")
"""


@pytest.fixture(scope="session")
def kernel_facts(tmp_path_factory, native_facts):
    """``kernel_facts(shard)``: the facts-kernels directory of one shard's work under the shard's capability: the
    tiny checkpoints (and their variants') of the share's families ``kernel_shards.built`` names built anew in the
    shard's own cache,
    ``<build>/checkpoints``, which ``checkpoint_dir`` checks against the pins; then the kernels-only facts of the
    share's families in the kernel cover (``kernel_shards.compared``, from the kernels the native collection
    recorded). Done on first use; the scheduler keeps each shard's tests on one worker, so each is done once."""
    import json
    import subprocess
    import sys

    from capabilities import environment
    from kernel_shards import built, compared

    repo = Path(__file__).resolve().parent.parent
    done: dict[str, Path] = {}

    def run(shard: str, env: dict, *steps: list[str]) -> None:
        """``python -m generator <step>`` for each step in turn, in one process (one start of torch, transformers
        and nnsight a shard, not one a step); the first step that fails stops it, named with its error."""
        result = subprocess.run([sys.executable, "-c", _STEPS, json.dumps(steps)], cwd=repo, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=HANG)
        assert result.returncode == 0, f"shard {shard}: {result.stderr[-3000:]}"

    def collect(shard: str) -> Path:
        if shard not in done:
            capability = shard.rsplit("-", 1)[0]
            build = tmp_path_factory.mktemp(f"kernels-{shard}")
            env = environment(capability, NNCANON_BUILD=str(build), NNCANON_CACHE=str(build / "checkpoints"),
                              OMP_NUM_THREADS="1")
            env.pop("NNCANON_FAMILIES", None)
            chosen = compared(shard, native_facts)
            run(shard, env, ["checkpoint", "--variants", *built(shard, native_facts)],
                *([["verify", "--force", "--kernels-only", *chosen]] if chosen else []))
            (build / "facts-kernels").mkdir(exist_ok=True)  # a share with no family of the cover compares none
            done[shard] = build / "facts-kernels"
        return done[shard]

    return collect


@pytest.fixture(scope="session")
def all_facts(native_facts) -> dict[str, dict]:
    """Every family's facts as collected natively, by family."""
    import json

    facts_dir = native_facts
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(facts_dir.glob("*.json"))
            if p.name != "index.json"}


@pytest.fixture(scope="session")
def site(tmp_path_factory, native_facts):
    """The whole site built from every family's facts with ``site_url`` set, served: (its directory, its base
    URL). tests/test_site_index.py and tests/test_compare.py read it (one unit: built once)."""
    import logging

    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from generator.site.render import MKDOCS_YML, render_site
    from generator.site.serve import site_server

    tmp = tmp_path_factory.mktemp("site-index")
    out = tmp / "site"
    out.mkdir()
    server = site_server(out)
    render_site(native_facts, tmp / "docs")
    level = logging.getLogger("mkdocs").level
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    try:
        build(load_config(str(MKDOCS_YML), docs_dir=str(tmp / "docs"), site_dir=str(out),
                          site_url=server.url + "/", strict=True))
    finally:
        logging.getLogger("mkdocs").setLevel(level)
    server.start()
    yield out, server.url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def checkpoint():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family(FAMILY))


@pytest.fixture(scope="session")
def prompts():
    return list(PROMPTS)


@pytest.fixture(scope="session")
def model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint)


@pytest.fixture(scope="session")
def eager_model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint, attn_implementation="eager")


# ---------------------------------------------------------------- the browser tests without chromium
#
# The browser tests (marker ``browser``) drive Debian's chromium. Without it they are skipped on a
# developer's machine, said loudly at the end of the run, and fail under CI (``$CI`` set, as
# .ci/run and every CI service do): a CI run that skipped them would pass without testing the pages.

CHROMIUM = Path(os.environ.get("NNCANON_CHROMIUM") or "/usr/bin/chromium")
NO_CHROMIUM = f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)"
_skipped_browser_tests: list[str] = []


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pytest_runtest_setup(item):
    if item.get_closest_marker("browser") is None or CHROMIUM.exists():
        return
    if in_ci():
        pytest.fail(f"CI={os.environ['CI']}: the browser tests must run, but chromium is missing: {NO_CHROMIUM}",
                    pytrace=False)
    pytest.skip(NO_CHROMIUM)


def pytest_runtest_logreport(report):
    # counted from the reports, not in setup: with pytest-xdist the summary is written by the controller,
    # which runs no test but receives every worker's reports
    if report.skipped and NO_CHROMIUM in str(report.longrepr):
        _skipped_browser_tests.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    if not _skipped_browser_tests:
        return
    terminalreporter.section("browser tests NOT RUN", sep="!", red=True, bold=True)
    terminalreporter.write_line(
        f"{len(_skipped_browser_tests)} browser tests were SKIPPED: {NO_CHROMIUM}. "
        f"The pages' diagrams, links and accessibility are untested; under CI this fails the run.",
        red=True,
        bold=True,
    )


# ---------------------------------------------------------------- the browser tests' site (tests/browser_site.py)


@pytest.fixture(scope="session")
def site_facts() -> dict:
    from browser_site import site_facts as make

    return make()


@pytest.fixture(scope="session")
def base(tmp_path_factory, site_facts):
    """The browser tests' site, built once and served: its base URL (no trailing slash)."""
    from browser_site import build_site

    server = build_site(tmp_path_factory.mktemp("browser"), site_facts)
    server.start()
    yield server.url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    from browser_site import ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        b.new_context, b.new_page = _patient(b.new_context), _patient(b.new_page)
        yield b
        b.close()


def _patient(make):
    """``browser.new_context``/``new_page`` whose waits (Playwright's default is 30 s) give up only on a hang:
    a page on a machine at 8x load can take longer than 30 s to run its scripts, and is not wrong for it."""
    def made(*args, **kwargs):
        thing = make(*args, **kwargs)
        thing.set_default_timeout(WAIT * 1000)
        thing.set_default_navigation_timeout(WAIT * 1000)
        return thing
    return made


@pytest.fixture
def tab(browser):
    """One fresh browser context per test (1280 × 900, light); no console errors allowed."""
    from browser_site import Tab

    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    t = Tab(context.new_page())
    yield t
    context.close()
    assert not t.errors, t.errors


@pytest.fixture(scope="session")
def crawl(base):
    """Every internal URL reachable from the home page (and 404.html): {url: (status, ids, links)}."""
    from browser_site import crawl_site

    return crawl_site(base)
