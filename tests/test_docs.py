"""The hand-written pages' code runs: every ```python block of the home page and of getting started,
in order, on the qwen3_5_moe_text tiny checkpoint (standing in for the path the page names); and every
```python block of the pages that set up their own environment (Large models: a hub cache in HF_HOME),
in order, in a fresh process."""

from __future__ import annotations

import linecache
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs_src"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
LOAD = re.compile(r'nncanon\.load\("path/to/[^"]*"')


@pytest.mark.parametrize("page", ["index.md", "getting-started.md"])
def test_the_pages_code_runs(page, checkpoint):
    blocks = BLOCK.findall((DOCS / page).read_text())
    assert blocks, f"{page} has no python block"
    namespace: dict = {}
    for n, block in enumerate(blocks):
        code = LOAD.sub(f"nncanon.load({str(checkpoint)!r}", block)
        name = f"<docs_src/{page} block {n + 1}>"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # nnsight reads trace bodies back
        try:
            exec(compile(code, name, "exec"), namespace)
        except Exception as error:  # name the page and block, as the build does for notes
            pytest.fail(f"docs_src/{page}, python block {n + 1} fails: {type(error).__name__}: {error}")


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
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
