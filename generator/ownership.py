"""The directories the build may replace or delete in: only ones it made.

``build --site DIR`` swaps a new site in for ``DIR`` and deletes the old one, and the build directory
(``build/`` or ``$NNCANON_BUILD``) has leftovers removed from it, so a mistyped path would otherwise
delete a user's files. Each directory the build writes carries a marker file (:data:`SITE_MARKER`,
:data:`BUILD_MARKER`); a directory is only used if it is absent, empty or carries the marker. Two
cases made before the markers existed are taken as ours: the default ``site/`` under the repository
when it holds a built site (``sitemap.xml`` and ``search/``), and a build directory that is the
repository's own ``build/`` or holds nothing but what the build writes there (``facts``, ``docs``, ...). Neither may ever be the repository, one of
its source directories, an ancestor of either, or the directory the command runs in.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from generator.recipe.fields import REPO_ROOT

SITE_MARKER = ".nncanon-site"
BUILD_MARKER = ".nncanon-build"
_SOURCES = ("docs_src", "families", "generator", "nncanon", "site_templates", "tests", "bench", ".git")
_BUILD_ENTRIES = frozenset({"facts", "docs", "docs_run", "transformer_lens", "survey", "checkpoints", ".lock",
                            BUILD_MARKER})


class NotOurDirectory(ValueError):
    """A directory the build was told to write that it did not make: replacing it would lose files."""


def _real(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


def _forbidden(path: Path, what: str) -> None:
    real = _real(path)
    cwd = _real(Path.cwd())
    if str(path) in ("", "."):
        raise NotOurDirectory(f"{what} {str(path)!r}: the current directory cannot be replaced; name a new directory")
    if real == cwd or real in cwd.parents:
        raise NotOurDirectory(f"{what} {path}: it holds the directory the command runs in; name a new directory")
    root = _real(REPO_ROOT)
    if real == root or real in root.parents:
        raise NotOurDirectory(f"{what} {path}: it is the repository {root} or holds it; name a new directory")
    for name in _SOURCES:
        source = root / name
        if real == source or source in real.parents:
            raise NotOurDirectory(f"{what} {path}: it is the repository's source {name}/; name a new directory")


def _is_ours(path: Path, marker: str) -> bool:
    if not path.exists():
        return True
    if path.is_symlink() or not path.is_dir():
        return False
    entries = os.listdir(path)
    return not entries or marker in entries


def check_site_dir(site: Path, build: Path) -> None:
    """Refuse (:class:`NotOurDirectory`, one line) a ``--site`` the build would not own after replacing it."""
    site = Path(site)
    _forbidden(site, "--site")
    real, real_build = _real(site), _real(build)
    if real == real_build or real_build in real.parents or real in real_build.parents:
        raise NotOurDirectory(f"--site {site}: it overlaps the build directory {build}; name a directory outside it")
    if site.is_symlink():
        raise NotOurDirectory(f"--site {site}: it is a symlink; name the directory itself")
    if site.exists() and not site.is_dir():
        raise NotOurDirectory(f"--site {site}: it is a file, not a directory; name a new directory")
    if _is_ours(site, SITE_MARKER) or _legacy_site(site):
        return
    raise NotOurDirectory(
        f"--site {site}: it exists and was not built by `python -m generator build` (no {SITE_MARKER}); "
        f"name a new or empty directory, or move it away first"
    )


def _legacy_site(site: Path) -> bool:
    # the default site/ of a build from before the marker: mkdocs' own output, at the one path it used
    return _real(site) == _real(REPO_ROOT / "site") and (site / "sitemap.xml").is_file() and (site / "search").is_dir()


def check_leftover(path: Path) -> bool:
    """Whether a ``.<site>.new``/``.old`` beside the site may be deleted: ours, or absent."""
    return _is_ours(path, SITE_MARKER)


def claim_site(staged: Path) -> None:
    (Path(staged) / SITE_MARKER).write_text("built by python -m generator build; the next build replaces it\n")


def check_build_dir(build: Path) -> None:
    """Refuse a build directory (``$NNCANON_BUILD``) holding anything the build did not write; mark it."""
    build = Path(build)
    _forbidden(build, "the build directory (NNCANON_BUILD)")
    if build.exists() and not build.is_dir():
        raise NotOurDirectory(f"NNCANON_BUILD={build}: it is a file, not a directory; set a new directory")
    if build.is_dir() and _real(build) != _real(REPO_ROOT / "build"):  # the repository's own (gitignored) build/
        foreign = sorted(e for e in os.listdir(build)
                         if e not in _BUILD_ENTRIES and not e.startswith((".tmp-", ".old-")))
        if foreign and BUILD_MARKER not in os.listdir(build):
            raise NotOurDirectory(
                f"NNCANON_BUILD={build}: it holds {foreign[0]!r}, which the build did not write (no {BUILD_MARKER}); "
                f"set a new or empty directory"
            )
    build.mkdir(parents=True, exist_ok=True)
    marker = build / BUILD_MARKER
    if not marker.exists():
        marker.write_text("facts and docs written by python -m generator; deleted and rewritten freely\n")


def replace_dir(new: Path, target: Path) -> None:
    """Put the tree ``new`` at ``target`` by renames: ``target`` is never half-deleted.

    The old tree is renamed aside to ``.old-<name>-*`` and deleted after; a kill in between leaves
    that aside (the build removes it, see generator/build.py) and at worst no ``target``, which the
    next render writes again.
    """
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".old-{target.name}-", dir=target.parent))
        target.rename(old / target.name)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
