"""The whole build: checkpoint -> facts (cached) -> docs tree -> mkdocs --strict -> site/.

A failed build leaves the previous site/ as it was: everything is built beside it and swapped
in with two renames at the end.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from generator.collect import build_dir, cached_facts, facts_dir
from generator.family import REPO_ROOT, all_families

SITE = REPO_ROOT / "site"


def collect_all(names: list[str] | None = None, progress: Callable[[str], None] = print,
                force: bool = False) -> list[str]:
    """Facts for each family (collected only where their cache key changed); returns the names collected."""
    names = names or [family.family for family in all_families()]
    collected = []
    for name in names:
        start = time.perf_counter()
        _, fresh = cached_facts(name, progress=progress, force=force)
        if fresh:
            collected.append(name)
            progress(f"{name}: collected in {time.perf_counter() - start:.1f} s")
    return collected


def build(site: Path = SITE, progress: Callable[[str], None] = print, force: bool = False) -> list[str]:
    """Build the whole site into ``site``; returns the families whose facts were collected anew."""
    from generator.render import mkdocs_build, render_site

    collected = collect_all(progress=progress, force=force)
    docs, staged = build_dir() / "docs", site.parent / f".{site.name}.new"
    progress("render: pages from facts")
    render_site(facts_dir(), docs)
    progress("mkdocs: build --strict")
    shutil.rmtree(staged, ignore_errors=True)
    mkdocs_build(docs, staged)
    _swap(staged, site)
    progress(f"site: {site}")
    return collected


def _swap(staged: Path, site: Path) -> None:
    old = site.parent / f".{site.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if site.exists():
        site.rename(old)
    staged.rename(site)
    shutil.rmtree(old, ignore_errors=True)
