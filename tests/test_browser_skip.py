"""Without chromium, the browser tests fail the run under CI and are skipped loudly elsewhere.

Runs pytest on tests/test_browser.py in a subprocess with ``$NNCANON_CHROMIUM`` pointing at a
path that does not exist (tests/conftest.py and tests/test_browser.py read it), so no browser starts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from limits import HANG

ROOT = Path(__file__).resolve().parents[1]
#: the browser tests of tests/test_browser.py (its module is marked ``browser``, and none is parametrized)
BROWSER_TESTS = len(re.findall(r"^def test_", (ROOT / "tests" / "test_browser.py").read_text(), re.M))


def run_browser_tests(ci: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, NNCANON_CHROMIUM="/nonexistent/chromium")
    env.pop("CI", None)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_browser.py", "-p", "no:cacheprovider", "-rfEs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_chromium_fails_every_browser_test(ci):
    run = run_browser_tests(ci)
    assert run.returncode == 1, run.stdout[-3000:]
    assert re.search(rf"\b{BROWSER_TESTS} (failed|errors)\b", run.stdout), run.stdout[-3000:]
    assert "chromium is missing" in run.stdout and "/nonexistent/chromium" in run.stdout
    assert "skipped" not in run.stdout.splitlines()[-1]


def test_without_ci_a_missing_chromium_is_skipped_and_said_loudly():
    run = run_browser_tests(None)
    assert run.returncode == 0, run.stdout[-3000:]
    assert re.search(rf"\b{BROWSER_TESTS} skipped\b", run.stdout), run.stdout[-3000:]
    summary = run.stdout[run.stdout.index("browser tests NOT RUN") :]
    assert f"{BROWSER_TESTS} browser tests were SKIPPED" in summary and "/nonexistent/chromium" in summary
