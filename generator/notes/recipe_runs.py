"""The Recipes page run on every family: each family's tiny checkpoint stands in for ``path/to/model``, every
recipe (a ``##`` section of docs_src/recipes.md) runs in one namespace per family, in order, after the page's
setup (the blocks before the first section), with its ``assert`` and ``# True`` claims checked.

A recipe serves a family when its blocks run and every claim holds. It cannot serve one when nncanon refuses
what it asks, in one line: a value the family does not have (``NotOnHost``: a Mamba block asked for
``self_attn``), a weight it cannot serve, a stream ``nncanon.decompose`` cannot take apart. That line is the
reason the page prints. Anything else (an assert that fails, a bare Python error) fails the build naming the
family, the page, the block and its line (:class:`RecipeError`): the recipe claims the family and is wrong there.

The result, ``{"served": [recipe, ...], "refused": {recipe: reason}, "cpu_seconds": s}``, is kept per family in
``<build>/docs_run/recipes/<family>.json`` under a key of the family's facts key and the page's text, so a
rerun with nothing changed runs nothing; ``generator verify`` and ``build`` write it, the Recipes page
(generator/site/recipes_page.py) and the tests read it.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.notes.docs_run import DOCS_SRC, DocsError, blocks, run_statements
from generator.notes.note_clock import NoteTimeout, note_timeout, time_limit
from generator.notes.note_runner import _CHECK, _check_true, instrument
from generator.recipe.family import Family

PAGE = "recipes.md"
_SECTION = re.compile(r"^## (.+)$", re.M)
_PATH = re.compile(r"""(["'])path/to/model\1""")
SETUP = "setup"
_NO_GENERATE = re.compile(r"'(\w+ForMaskedLM)' object has no attribute 'generate'")


class RecipeError(DocsError):
    """A recipe claims a family and fails there: one line naming the family, the page, the block and the line."""


def sections(text: str) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """``[(recipe title, blocks)]`` in page order, the blocks before the first ``##`` as :data:`SETUP`."""
    starts = [(m.start(), m.group(1).strip()) for m in _SECTION.finditer(text)]
    found: dict[str, list] = {}
    for block in blocks(text):
        offset = sum(len(line) + 1 for line in text.split("\n")[:block[1] - 1])
        title = next((t for start, t in reversed(starts) if start < offset), SETUP)
        found.setdefault(title, []).append(block)
    return [(title, found[title]) for title in [SETUP, *(t for _, t in starts)] if title in found]


def _refusal(error: BaseException) -> str | None:
    """nncanon's one-line refusal anywhere in ``error``'s chain, or None for any other failure."""
    from nncanon.core.cache import CacheError
    from nncanon.core.values import Unavailable
    from nncanon.research.decompose import NotDecomposable

    seen = error
    while seen is not None:
        if isinstance(seen, (Unavailable, NotDecomposable, CacheError)):
            return " ".join(str(seen.args[0] if isinstance(seen, KeyError) and seen.args else seen).split())
        no_generate = _NO_GENERATE.fullmatch(str(seen)) if isinstance(seen, AttributeError) else None
        if no_generate:  # transformers' own word that the module does not generate
            return f"{no_generate.group(1)} has no generate: an encoder, with no next token to generate"
        seen = seen.__cause__ or seen.__context__
    return None


def run_family(family: Family, text: str | None = None) -> dict:
    """Every recipe of the page on ``family``'s tiny checkpoint: which served it, and why each other could not."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.core import kernels

    text = (DOCS_SRC / PAGE).read_text() if text is None else text
    checkpoint = repr(str(checkpoint_dir(family)))
    shown = f"docs_src/{PAGE}"
    namespace: dict[str, Any] = {_CHECK: _check_true, "__name__": "__nncanon_recipes__"}
    served, refused = [], {}
    routes = dict(kernels._routes)
    started = time.process_time()
    seconds = note_timeout()
    try:
        with time_limit(seconds, f"{shown} on {family.family}"):
            setup_refused = None
            for title, found in sections(text):
                reason = setup_refused or _run_recipe(family.family, shown, title, found, namespace, checkpoint)
                if title == SETUP:
                    setup_refused = reason and f"the page's setup: {reason}"  # then no recipe serves the family
                elif reason:
                    refused[title] = reason
                else:
                    served.append(title)
    except NoteTimeout:
        raise RecipeError(f"{family.family}: {shown} runs over its time limit of {seconds:g} s") from None
    finally:
        kernels._routes.clear()
        kernels._routes.update(routes)
    return {"served": served, "refused": refused, "cpu_seconds": round(time.process_time() - started, 2)}


def _run_recipe(name: str, shown: str, title: str, found: list, namespace: dict, checkpoint: str) -> str | None:
    """Run one recipe's blocks in ``namespace``; nncanon's refusal (the reason) or None when every claim held."""
    lines = [""] * (max(first + code.count("\n") for _, first, code in found) + 2)
    owner: dict[int, int] = {}
    for number, first, code in found:
        for offset, line in enumerate(_PATH.sub(checkpoint, code).split("\n")):
            lines[first - 1 + offset] = line
            owner[first + offset] = number
    source, originals = instrument("\n".join(lines) + "\n")

    def fail(line: int | None, message: str) -> RecipeError:
        where = f"python block {owner.get(line or 0, '?')} (line {line})"
        return RecipeError(f"{name}: {shown}, recipe '{title}', {where}: {message}")

    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<nncanon recipes {name} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # nnsight reads it
    return run_statements(source, filename, lines, originals, namespace, fail, _refusal)


# -- the cache beside the facts ----------------------------------------------------------------------


def run_key(facts_key: str) -> str:
    """The family's facts key and the page's text: what a run's result depends on."""
    digest = hashlib.sha256(facts_key.encode())
    digest.update((DOCS_SRC / PAGE).read_bytes())
    return digest.hexdigest()[:20]


def cached_run(family: Family, directory: Path, facts_key: str, progress: Callable[[str], None] = print,
               force: bool = False) -> tuple[dict, bool]:
    """The family's recipe runs, kept in ``directory`` and run only when :func:`run_key` of its facts key changed.
    Returns (result, ran)."""
    path, key_path, key = directory / f"{family.family}.json", directory / f"{family.family}.key", run_key(facts_key)
    if not force and path.exists() and key_path.exists() and key_path.read_text().strip() == key:
        try:
            return json.loads(path.read_text()), False
        except ValueError:  # cut short: the cache only saves time
            pass
    progress(f"{family.family}: the Recipes page")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's ops are too small to share among threads
    try:
        result = run_family(family)
    finally:
        torch.set_num_threads(threads)
    directory.mkdir(parents=True, exist_ok=True)
    key_path.unlink(missing_ok=True)
    path.write_text(json.dumps(result, sort_keys=True, indent=1) + "\n")
    key_path.write_text(key + "\n")
    return result, True


def load_runs(directory: Path) -> dict[str, dict]:
    """The kept results in ``directory``, by family (what the Recipes page renders)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))} \
        if directory.is_dir() else {}
