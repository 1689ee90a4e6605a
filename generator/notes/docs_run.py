"""Running the hand-written pages' ```` ```python ```` blocks at build, as family notes run.

Every page in :data:`PAGES` runs its python blocks in order, in one namespace, under the notes'
time limit (generator/notes/note_clock.py), with their claims: ``assert`` statements and ``# True``
lines (generator/notes/note_runner.py's ``instrument``). A block written ```` ```python display ```` is
shown, not run. ``nncanon.load("path/to/<family>")`` loads the tiny checkpoint of ``<family>``
(``path/to/checkpoint``, or any other name: :data:`DEFAULT_FAMILY`'s), so a page reads as a user
writes it and runs where the build runs.

A failing block fails the build with one line naming the page, the block and its line
(:class:`DocsError`). A page that passed is not run again until it, the library, the runner or
torch, transformers and nnsight change (a key like the facts' cache key, in
``build/docs_run/<page>.key``).
"""

from __future__ import annotations

import ast
import hashlib
import linecache
import re
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from generator.notes.note_clock import TIMEOUT_ENV, NoteTimeout, note_timeout, time_limit
from generator.notes.note_runner import (
    _CHECK,
    _check_true,
    _describe,
    _error_line,
    _FalseLine,
    _short,
    instrument,
)
from generator.recipe.fields import REPO_ROOT

DOCS_SRC = REPO_ROOT / "docs_src"
#: the hand-written pages whose python blocks run at build: the one list to add a page to
PAGES = ("index.md", "getting-started.md")  # the Recipes page runs on every family (recipe_runs.py)
DEFAULT_FAMILY = "qwen3_5_moe_text"

_BLOCK = re.compile(r"^```python( display)?[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_PATH = re.compile(r"""(["'])path/to/([A-Za-z0-9_.\-]+)\1""")


class DocsError(RuntimeError):
    """A page's python block fails: one line naming the page, the block and the line."""


def blocks(text: str) -> list[tuple[int, int, str]]:
    """(block number from 1, the block's first code line in the page, code) of every block that runs."""
    found = []
    for number, match in enumerate(_BLOCK.finditer(text), 1):
        if match.group(1):
            continue
        found.append((number, text.count("\n", 0, match.start(2)) + 1, match.group(2)))
    return found


def _checkpoints(code: str) -> str:
    """``"path/to/<family>"`` -> the tiny checkpoint of that family (or of the default one)."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import all_families

    families = {family.family: family for family in all_families()}

    def replace(match: re.Match) -> str:
        return repr(str(checkpoint_dir(families.get(match.group(2)) or families[DEFAULT_FAMILY])))

    return _PATH.sub(replace, code)


def run_page(page: str | Path, text: str | None = None) -> None:
    """Run every python block of ``page`` (a name in docs_src, or a path) in order; raise `DocsError` on failure."""
    path = Path(page) if Path(page).is_absolute() else DOCS_SRC / page
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    text = path.read_text() if text is None else text
    found = blocks(text)
    if not found:
        return
    lines = [""] * (text.count("\n") + 2)
    owner: dict[int, int] = {}
    for number, first, code in found:
        for offset, line in enumerate(_checkpoints(code).split("\n")):
            lines[first - 1 + offset] = line
            owner[first + offset] = number
    source = "\n".join(lines) + "\n"

    def fail(line: int | None, message: str) -> DocsError:
        block = owner.get(line or 0)
        where = f"{shown}, python block {block} (line {line})" if block else f"{shown}"
        return DocsError(f"{where}: {message}")

    try:
        source, originals = instrument(source)
    except SyntaxError as error:
        raise fail(error.lineno, f"the code does not parse: {error.msg}") from None
    except ValueError as error:
        raise fail(error.args[0], "a '# True' comment on a line that does not end an expression statement") from None
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<nncanon docs {shown} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # nnsight reads it
    namespace: dict[str, Any] = {_CHECK: _check_true, "__name__": "__nncanon_docs__"}
    seconds = note_timeout()
    from nncanon.core import kernels

    routes = dict(kernels._routes)
    try:
        with time_limit(seconds, f"{shown}"):
            run_statements(source, filename, lines, originals, namespace, fail)
    except NoteTimeout:
        raise fail(None, f"the page's code runs over its time limit of {seconds:g} s; make it faster, or raise "
                         f"the limit with {TIMEOUT_ENV}=<seconds>") from None
    finally:
        kernels._routes.clear()
        kernels._routes.update(routes)


def run_statements(source: str, filename: str, lines: list[str], originals: dict[int, str], namespace: dict,
                   fail: Callable[[int | None, str], Exception],
                   refusal: Callable[[BaseException], str | None] = lambda error: None) -> str | None:
    """Run ``source`` (instrumented) statement by statement in ``namespace``: a claim that does not hold raises
    ``fail(line, message)``, and so does any error ``refusal`` does not name; returns the first it names."""
    for statement in ast.parse(source).body:
        code = compile(ast.Module([statement], []), filename, "exec", dont_inherit=True)
        try:
            exec(code, namespace)
        except _FalseLine as failed:
            text = originals.get(failed.line, lines[failed.line - 1]).strip()
            value = failed.value if isinstance(failed.value, str) else f"is {_short(failed.value)}"
            raise fail(failed.line, f"a '# True' line does not hold: {text}: the expression {value}") from None
        except AssertionError as error:
            line = _error_line(error, filename) or statement.lineno
            raise fail(line, f"an assert fails: {lines[line - 1].strip()}: {_describe(error)}") from None
        except NoteTimeout:
            raise
        except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of the code is the page's
            reason = refusal(error)
            if reason is None:
                line = _error_line(error, filename) or statement.lineno
                raise fail(line, f"the code raises {_describe(error)}") from None
            return reason
    return None


def page_key(page: str) -> str:
    """A hash of the page, the library, this runner and the versions its results depend on."""
    digest = hashlib.sha256()
    files = [DOCS_SRC / page, *sorted((REPO_ROOT / "nncanon").rglob("*.py")),
             *(REPO_ROOT / "generator" / name for name in ("notes/docs_run.py", "notes/note_runner.py",
                                                            "notes/note_clock.py", "checkpoint/checkpoints.py",
                                                            "checkpoint/tiny_weights.py")),
             *sorted((REPO_ROOT / "families").glob("*.yaml"))]
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for package in ("torch", "transformers", "nnsight"):
        digest.update(f"{package}=={version(package)}".encode())
    return digest.hexdigest()[:20]


def run_pages(directory: Path, progress: Callable[[str], None] = print, force: bool = False,
              pages: tuple[str, ...] = PAGES) -> list[str]:
    """Run every page of ``pages`` whose key changed (stamps in ``directory``); returns the pages run."""
    directory.mkdir(parents=True, exist_ok=True)
    ran = []
    for page in pages:
        key, stamp = page_key(page), directory / f"{page}.key"
        if not force and stamp.exists() and stamp.read_text().strip() == key:
            progress(f"docs: {page} ran before ({key})")
            continue
        stamp.unlink(missing_ok=True)
        progress(f"docs: running the python blocks of {page}")
        run_page(page)
        stamp.write_text(key + "\n")
        ran.append(page)
    return ran
