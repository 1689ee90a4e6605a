"""The hand-written pages' code runs: every ```python block of the home page and of getting started,
in order, on the qwen3_5_moe_text tiny checkpoint (standing in for the path the page names)."""

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
