"""The public API is named in nncanon/__init__.py, and the imports the README and the docs teach work: every
``import nncanon...`` / ``from nncanon... import ...`` line of their python blocks, run in a fresh interpreter,
and the public modules by their public names (``nncanon.lens``, ``from nncanon import sae``, ``from nncanon.sae
import TopKSAE``) whichever layer's folder keeps them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from import_graph import REPO

PUBLIC = ("weights", "lens", "decompose", "sae", "sae_jumprelu", "grads", "errors", "stale", "releases", "precision",
          "hubcache")
_BLOCK = re.compile(r"```python[^\n]*\n(.*?)```", re.S)


def _taught_imports() -> list[tuple[str, str]]:
    """(where, statement) for every nncanon import in a python block of the README, docs_src and families, and in
    the families' SAE sections."""
    pages = [REPO / "README.md", *sorted((REPO / "docs_src").glob("*.md")), *sorted((REPO / "families").rglob("*.md"))]
    found = []
    for page in pages:
        for block in _BLOCK.findall(page.read_text(encoding="utf-8")):
            code = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("{{"))
            try:
                tree = ast.parse(code)
            except SyntaxError:  # a block with a notes expression in it: its imports are read line by line
                tree = ast.parse("\n".join(line.strip() for line in block.splitlines() if re.match(r"\s*(from|import) nncanon", line)))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and "nncanon" in ast.unparse(node).split()[1]:
                    found.append((page.relative_to(REPO).as_posix(), ast.unparse(node)))
    for recipe in sorted((REPO / "families").glob("*.yaml")):  # the SAE sections' usage code, run on the page
        for line in recipe.read_text(encoding="utf-8").splitlines():
            if re.match(r"\s*(from|import) nncanon", line):
                found.append((recipe.relative_to(REPO).as_posix(), line.strip()))
    return found


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n{code}"],
                          capture_output=True, text=True, cwd=REPO)


def test_the_taught_imports_work():
    taught = _taught_imports()
    assert len(taught) > 20, taught  # the pages do teach imports: an empty list would pass for nothing
    statements = sorted({statement for _, statement in taught})
    code = "failed = []\n" + "".join(f"try:\n    {s}\nexcept Exception as e:\n    failed.append(({s!r}, repr(e)))\n"
                                     for s in statements) + "assert not failed, failed"
    done = _run(code)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_public_modules_answer_to_their_public_names():
    checks = [f"import nncanon\nassert nncanon.{name}.__name__.endswith('.{name}')" for name in PUBLIC]
    checks += [f"from nncanon import {name}" for name in PUBLIC]
    checks += [f"import nncanon.{name} as m; import nncanon; assert m is nncanon.{name}" for name in PUBLIC]
    checks += ["from nncanon.sae import TopKSAE, layer_file", "from nncanon.sae_jumprelu import JumpReLUSAE, release_folder",
               "from nncanon.lens import unembed", "from nncanon.weights import Layout, Projection",
               "from nncanon.errors import ReadOrderError", "from nncanon.stale import StaleValueWarning",
               "import nncanon; assert callable(nncanon.lens.unembed) and nncanon.releases.VERIFIED"]
    done = _run("\n".join(checks))
    assert done.returncode == 0, done.stderr[-3000:]


def test_init_names_every_public_name_and_the_top_level_is_its_layers():
    done = _run("import nncanon\nmissing = [n for n in nncanon.__all__ if not hasattr(nncanon, n)]\nassert not missing, missing\n"
                f"assert set({PUBLIC!r}) <= set(nncanon.__all__)")
    assert done.returncode == 0, done.stderr[-3000:]
    # nncanon/ holds its public API (__init__.py) and its layers' folders, no module of its own
    top = sorted(p.name for p in (REPO / "nncanon").glob("*.py"))
    assert top == ["__init__.py"], top
    layers = sorted(p.name for p in (REPO / "nncanon").iterdir() if (p / "__init__.py").is_file())
    assert layers == ["core", "families", "guards", "parts", "research"], layers
