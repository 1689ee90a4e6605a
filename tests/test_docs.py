"""The hand-written pages' code runs: every ```python block of each page the build runs
(generator/docs_run.PAGES: the home page, getting started; the Recipes page runs on every family, read by
tests/test_recipe_runs.py), in order, on the tiny
checkpoints standing in for the paths the pages name; a failing block fails with one line naming the
page, the block and its line; and every ```python block of the pages that set up their own environment
(Large models: a hub cache in HF_HOME), in order, in a fresh process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from limits import HANG

from generator.notes.docs_run import PAGES, DocsError, run_page, run_pages

DOCS = Path(__file__).resolve().parent.parent / "docs_src"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_code_runs(page):
    run_page(page)


def test_a_failing_block_names_the_page_and_the_block(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n```python\nx = 1\n```\n\ntext\n\n```python display\nnot run at all(\n```\n\n"
                    "```python\nassert x == 2, 'x is one'\n```\n")
    with pytest.raises(DocsError) as caught:
        run_page(page)
    message = str(caught.value)
    assert message == f"{page}, python block 3 (line 14): an assert fails: assert x == 2, 'x is one': " \
                      f"AssertionError: x is one", message
    assert "\n" not in message


def test_pages_run_once_until_they_change(tmp_path, monkeypatch):
    import generator.notes.docs_run as docs_run

    monkeypatch.setattr(docs_run, "run_page", lambda page: None)
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == ["index.md"]
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == []
    monkeypatch.setattr(docs_run, "page_key", lambda page: "changed")
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == ["index.md"]


#: pages whose code sets up its own environment first (HF_HOME before huggingface_hub is imported), so they
#: run in a fresh process, every python block in order; ```py blocks are shown, not run (NDIF, a GPU)
FRESH_PROCESS_PAGES = ["large-models.md"]

RUNNER = """
import linecache, sys
blocks, page = eval(sys.argv[1]), sys.argv[2]
namespace = {"__name__": "__main__"}
for n, code in enumerate(blocks):
    name = f"<docs_src/{page} block {n + 1}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        exec(compile(code, name, "exec"), namespace)
    except Exception as error:
        sys.exit(f"docs_src/{page}, python block {n + 1} fails: {type(error).__name__}: {error}")
"""


@pytest.mark.parametrize("page", FRESH_PROCESS_PAGES)
def test_a_fresh_process_pages_code_runs(page):
    import os
    import subprocess
    import sys

    blocks = BLOCK.findall((DOCS / page).read_text())
    assert blocks, f"{page} has no python block"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_OFFLINE")}
    env["PYTHONPATH"] = os.pathsep.join([str(DOCS.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", RUNNER, repr(blocks), page], cwd=DOCS.parent, env=env,
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-3000:]
