"""The whole build: checkpoint -> facts (cached) -> docs tree -> mkdocs --strict -> site/.

A failed build leaves the previous site/ as it was: everything is built beside it and swapped
in with two renames at the end. The build survives faults:

- two builds at once: the whole build (collect, render, mkdocs, swap) holds an exclusive lock
  (``flock`` on ``build/.lock``); a second build says so in one line and waits (or gives up after
  ``timeout`` seconds with :class:`BuildBusy`); builds from two build directories into one site take
  turns on a second lock, ``.<site>.lock`` beside it, wherever they touch the site (recover, stage, swap);
- a kill between the swap's two renames leaves no site/ but ``.site.old``: every build first
  puts it back (:func:`recover`), so a later failed build still leaves the old site;
- a kill anywhere else leaves leftovers (``.tmp-*`` and ``.old-*`` trees, half-written facts of a dead process,
  ``.site.new``, a half-deleted build/docs): the next build removes them; it holds the lock, so
  none of them belongs to a live build;
- a ``--site`` or build directory the build did not make is refused, naming it, before anything is
  written or deleted (:mod:`generator.ownership`): only what carries the build's marker is replaced;
- facts in the cache of a family whose YAML was removed are not published: only the registered
  families (``families/*.yaml``) are rendered.

``$NNCANON_TEST_PAUSE_SWAP`` (seconds; tests only) sleeps between the swap's two renames, so a
test can kill a build there or start a second one while the first holds the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from generator.facts.collect import build_dir, cached_facts, facts_dir
from generator.facts.dtype_runs import cached_dtypes
from generator.notes.docs_run import run_pages
from generator.notes.recipe_runs import cached_run
from generator.ownership import NotOurDirectory, check_build_dir, check_leftover, check_site_dir, claim_site
from generator.recipe.family import Family, all_families, families_dir, get_family
from generator.recipe.fields import REPO_ROOT, FamilyYamlError

SITE = REPO_ROOT / "site"
LOCK = ".lock"
PAUSE_SWAP = "NNCANON_TEST_PAUSE_SWAP"


class BuildBusy(RuntimeError):
    """Another build held the lock for longer than this one was willing to wait."""


_held: set[Path] = set()  # lock files this process holds (a nested build_lock is a no-op)


@contextlib.contextmanager
def build_lock(progress: Callable[[str], None] = print, timeout: float | None = None) -> Iterator[None]:
    """Hold ``build/.lock`` exclusively: one build (or verify) at a time in one build directory.

    If another process holds it, says so in one line and waits for it, forever or ``timeout`` seconds.
    """
    directory = build_dir()
    if (directory / LOCK).resolve() not in _held:
        check_build_dir(directory)  # before anything is written or removed in it
    with _exclusive((directory / LOCK).resolve(), f"another build is running in {directory}", progress, timeout):
        yield


@contextlib.contextmanager
def site_lock(site: Path, progress: Callable[[str], None] = print, timeout: float | None = None) -> Iterator[None]:
    """Hold ``.<site>.lock`` beside the site exclusively while its leftovers are cleared, its staging tree is
    written and swapped in: two builds from two build directories (two build locks) into one site take turns
    there instead of writing one ``.<site>.new`` at once."""
    path = (site.parent / f".{site.name}.lock").resolve()
    with _exclusive(path, f"another build is writing {site}", progress, timeout):
        yield


@contextlib.contextmanager
def _exclusive(path: Path, busy: str, progress: Callable[[str], None], timeout: float | None) -> Iterator[None]:
    """The open file's ``flock``: the kernel drops it when its holder exits, killed or not. Reentrant in a process."""
    if path in _held:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            busy += f" (pid {holder})" if holder.isdigit() else ""
            wait = "waiting for it" if timeout is None else f"waiting up to {timeout:g} s"
            progress(f"{busy}; {wait}")
            _wait_for(fd, timeout, busy)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held.add(path)
        try:
            yield
        finally:
            _held.discard(path)
    finally:
        os.close(fd)  # releases the lock


def _wait_for(fd: int, timeout: float | None, busy: str) -> None:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise BuildBusy(f"{busy}; gave up after {timeout:g} s") from None
            time.sleep(0.1)


@dataclass
class Outcome:
    """One family's verification: ``result`` is "verified" (collected now), "cached" (its facts were current),
    "failed" (``error`` the exception) or "left out" (its YAML's releases leave out the installed release)."""
    family: str
    result: str
    seconds: float | None = None
    error: BaseException | None = None
    note: str = ""


def collect_each(names: list[str | Family] | None = None, progress: Callable[[str], None] = print,
                 force: bool = False, kernels_only: bool = False, keep_going: bool = False,
                 jobs: int = 1, dtypes: bool = False) -> list[Outcome]:
    """Facts for each family (collected only where their cache key changed), each family's outcome in order.
    ``keep_going``: a family that fails (any error but an interrupt; a family named whose YAML does not validate
    too) is recorded as failed and the next one runs; else every family is resolved first and the first failure
    ends the run. ``kernels_only``: only the facts a CPU's kernels compute (``generator.facts.collect.KERNEL_FREE``).
    ``jobs`` > 1: the families to collect are collected by that many processes first (generator/facts/jobs.py), each
    worker then running the Recipes page (and with ``dtypes`` the half-dtype stage) on the family it collected."""
    import transformers

    if names and keep_going:
        families: list[str | Family] = list(names)  # each resolved in its own row
    else:
        families = [get_family(name) for name in names] if names else all_families()  # each resolved once, here
    if not families:
        raise FamilyYamlError(families_dir(), None, "no family YAML (*.yaml) in it: nothing to verify; add one "
                              "(python -m generator new NAME --like llama), or point NNCANON_FAMILIES at the families")
    pooled = _collect_pooled(families, jobs, progress, force, kernels_only, keep_going, dtypes) if jobs > 1 else {}
    outcomes, left_out = [], []
    for item in families:
        name = item.family if isinstance(item, Family) else str(item)
        start = time.perf_counter()
        try:
            family = get_family(item)
            if not family.verified_under(transformers.__version__):  # its release record leaves it out, and says so
                note = f"not verified on transformers {transformers.__version__} (families/{name}.yaml releases: " \
                       f"{family.get('releases')})"
                progress(f"{name}: {note}")
                left_out.append(family)
                outcomes.append(Outcome(name, "left out", note=note))
                continue
            if name in pooled:  # a worker collected it: its facts are in the cache now
                outcomes.append(Outcome(name, "verified", pooled[name]))
                continue
            _, fresh = cached_facts(family, progress=progress, force=force, kernels_only=kernels_only)
        except Exception as error:  # noqa: BLE001 (keep_going: every family's error goes in its row)
            if not keep_going:
                raise
            outcomes.append(Outcome(name, "failed", time.perf_counter() - start, error))
            progress(f"{name}: failed after {time.perf_counter() - start:.1f} s")
            continue
        outcomes.append(Outcome(name, "verified" if fresh else "cached", time.perf_counter() - start))
        if fresh:
            progress(f"{name}: collected in {time.perf_counter() - start:.1f} s")
    if left_out and len(left_out) == len(families):  # a run that verified nothing must not pass as one that verified
        first, more = left_out[0], len(left_out) - 1
        raise FamilyYamlError(first.path, "releases", f"{first.get('releases')!r} leaves out transformers "
                              f"{transformers.__version__}, the one installed"
                              + (f" (and so do the {more} other families asked for)" if more else "")
                              + ": nothing was verified; run under a release it names, or widen releases")
    return outcomes


def _collect_pooled(families: list, jobs: int, progress: Callable[[str], None], force: bool, kernels_only: bool,
                    keep_going: bool, dtypes: bool = False) -> dict[str, float]:
    """The families that resolve and are verified under the installed release, collected by ``jobs`` processes."""
    import transformers

    from generator.facts.jobs import collect_in_parallel

    resolved = []
    for item in families:
        try:
            family = get_family(item)
        except Exception:  # noqa: BLE001 (the sequential pass below reports it in its row, or raises it)
            continue
        if family.verified_under(transformers.__version__):
            resolved.append(family)
    # the Recipes page (unless the suite reads the runs kept) and the dtypes on each family in the worker that
    # collected it: the runs below then find them kept
    hook = _recipes_and_dtypes_of if dtypes else _recipes_of if recipes_run() else None
    return collect_in_parallel(resolved, jobs, progress, force, kernels_only, keep_going,
                               then=None if kernels_only or keep_going else hook)


def _recipes_of(family: Family) -> None:
    """In a collecting worker: the Recipes page on the family it just collected."""
    run_recipes([family], progress=lambda line: print(line, flush=True))


def _recipes_and_dtypes_of(family: Family) -> None:
    """In a collecting worker: the Recipes page and the half-dtype stage on the family it just collected."""
    _recipes_of(family)
    run_dtypes([family], progress=lambda line: print(line, flush=True))


def run_recipes(names: list[str | Family] | None = None, progress: Callable[[str], None] = print,
                force: bool = False) -> None:
    """The Recipes page on every family (generator/notes/recipe_runs.py), kept beside the facts under each
    family's facts key: a rerun with nothing changed runs nothing (and none under ``NNCANON_RECIPES=cached``)."""
    from generator.facts.collect import cache_key

    if not recipes_run():
        return
    for family in [get_family(n) if isinstance(n, str) else n for n in names] if names else all_families():
        cached_run(family, recipe_runs_dir(), cache_key(family), progress, force)


def run_dtypes(names: list[str | Family] | None = None, progress: Callable[[str], None] = print,
               force: bool = False) -> None:
    """Every relation and edit of every family in bfloat16 and float16 (generator/facts/dtype_runs.py), kept beside
    the facts under each family's facts key: a rerun with nothing changed runs nothing."""
    for family in [get_family(n) if isinstance(n, str) else n for n in names] if names else all_families():
        cached_dtypes(family, progress, force)


def recipe_runs_dir() -> Path:
    return build_dir() / "docs_run" / "recipes"


def collect_all(names: list[str | Family] | None = None, progress: Callable[[str], None] = print,
                force: bool = False, kernels_only: bool = False, jobs: int = 1, dtypes: bool = False) -> list[str]:
    """Facts for each family (collected only where their cache key changed); returns the names collected. The
    first family that fails ends it."""
    outcomes = collect_each(names, progress=progress, force=force, kernels_only=kernels_only, jobs=jobs, dtypes=dtypes)
    return [outcome.family for outcome in outcomes if outcome.result == "verified"]


def verify(progress: Callable[[str], None] = print, force: bool = False, timeout: float | None = None,
           names: list[str] | None = None, kernels_only: bool = False, jobs: int = 1, dtypes: bool = False) -> list[str]:
    """Collect (checking every claim) without rendering, holding the build lock: every family, or ``names``;
    ``dtypes``: and the half-dtype stage on them (``verify --dtypes``; the build runs it on every family)."""
    with build_lock(progress, timeout):
        _clean_facts()
        collected = collect_all(names or None, progress=progress, force=force, kernels_only=kernels_only, jobs=jobs,
                                dtypes=dtypes and not kernels_only)
        if not kernels_only:
            run_recipes(names or None, progress=progress, force=force)  # the Recipes page on every family
            if dtypes:
                run_dtypes(names or None, progress=progress, force=force)
        return collected


def verify_each(progress: Callable[[str], None] = print, force: bool = False, timeout: float | None = None,
                names: list[str] | None = None, kernels_only: bool = False, jobs: int = 1) -> list[Outcome]:
    """`verify` that goes on past a failing family (``verify --keep-going``): every family's outcome."""
    with build_lock(progress, timeout):
        _clean_facts()
        return collect_each(names or None, progress=progress, force=force, kernels_only=kernels_only,
                            keep_going=True, jobs=jobs)


#: ``cached``: the Coverage page shows the rows already surveyed and surveys none. The suite's builds set it
#: (tests/conftest.py): they check the build, not transformers' 353 model types, which a whole survey takes minutes
#: of CPU over and ``make site`` surveys; tests/test_survey*.py survey samples of each kind
SURVEY_ENV = "NNCANON_SURVEY"
#: ``cached``: the Recipes page lists the runs already kept and runs none (neither ``verify`` nor ``build``). The
#: suite sets it (its prelude, the Makefile; its builds, tests/conftest.py): ``make site`` runs the page on every
#: family, tests/test_recipe_runs.py on a sample
RECIPES_ENV = "NNCANON_RECIPES"


def recipes_run() -> bool:
    return os.environ.get(RECIPES_ENV) != "cached"


#: ``kept``: the family pages show the half-dtype results already kept and the build runs the stage on none. The
#: suite's builds set it (tests/conftest.py): each would otherwise run every family in two dtypes again, which
#: ``make site`` does; tests/test_dtypes.py runs the stage on a sample
DTYPES_ENV = "NNCANON_DTYPES"


def build(site: Path = SITE, progress: Callable[[str], None] = print, force: bool = False,
          timeout: float | None = None, jobs: int = 1) -> list[str]:
    """Build the whole site into ``site``; returns the families whose facts were collected anew (by ``jobs``
    processes)."""
    from generator.site.render import mkdocs_build, render_site

    site = Path(site)
    check_site_dir(site, build_dir())
    with build_lock(progress, timeout):
        with site_lock(site, progress, timeout):
            recover(site, progress)
        import transformers

        # a family whose YAML narrows its releases is left out of a site built under another release
        families = [family for family in all_families() if family.verified_under(transformers.__version__)]
        names = [family.family for family in families]
        dtypes = os.environ.get(DTYPES_ENV) != "kept"
        collected = collect_all(families, progress=progress, force=force, jobs=jobs, dtypes=dtypes)
        run_pages(build_dir() / "docs_run", progress=progress, force=force)  # the hand-written pages' code
        run_recipes(families, progress=progress, force=force)  # and the Recipes page on every family
        if dtypes:  # and every family in bfloat16 and float16
            run_dtypes(families, progress=progress, force=force)
        from generator.survey.run import survey_all, survey_dir

        if os.environ.get(SURVEY_ENV) != "cached":  # the Coverage page's rows; cached (also across build directories)
            survey_all(progress=progress, jobs=jobs)
        docs, staged = build_dir() / "docs", _beside(site, "new")
        from generator.facts.tl_agreement import for_the_site

        # each family's and each variant's ("opt.350m": the Layouts table's TransformerLens column), a
        # disagreement refused
        variants = [family.variant(v["name"]) for family in families for v in family.variants]
        transformer_lens = for_the_site(families + variants, build_dir() / "transformer_lens", progress)
        progress("render: pages from facts")
        render_site(facts_dir(), docs, families=names, transformer_lens=transformer_lens, survey=survey_dir())
        progress("mkdocs: build --strict")
        with site_lock(site, progress, timeout):
            _recover_site(site, progress)  # a build killed since the first recover() left its staging tree
            staged.mkdir(parents=True, exist_ok=True)
            claim_site(staged)  # mkdocs keeps dot files, so a killed build's leftover is known as ours
            mkdocs_build(docs, staged)
            _swap(staged, site, progress)
        progress(f"site: {site}")
    return collected


def _beside(site: Path, what: str) -> Path:
    return site.parent / f".{site.name}.{what}"


def recover(site: Path, progress: Callable[[str], None] = print) -> None:
    """Undo what a killed build left (call it holding both locks): the old site back if the swap was
    cut between its renames, and every leftover of a build removed."""
    _recover_site(site, progress)
    directory = build_dir()
    if directory.is_dir():
        for stale in [*directory.glob(".tmp-*"), *directory.glob(".old-*")]:
            _remove(stale)
        docs = directory / "docs"
        if docs.is_dir() and not (docs / ".nncanon-docs").exists():  # half deleted by an older build
            shutil.rmtree(docs, ignore_errors=True)
    _clean_facts()


def _recover_site(site: Path, progress: Callable[[str], None]) -> None:
    _restore_site(site, progress)
    _remove_ours(_beside(site, "new"))


def _clean_facts() -> None:
    """Remove the half-written facts of killed collections (``.{family}.json.{pid}.tmp``, collect.py), not those
    a live process is still writing."""
    if facts_dir().is_dir():
        for stale in [*facts_dir().glob("*.json.tmp"), *facts_dir().glob(".*.json.*.tmp")]:
            pid = stale.name.rsplit(".", 2)[-2]
            if pid.isdigit() and _alive(int(pid)):
                continue
            stale.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _restore_site(site: Path, progress: Callable[[str], None]) -> None:
    old = _beside(site, "old")
    if old.exists() and not site.exists():
        progress(f"site: a build was cut off mid-swap; restoring {site} from {old.name}")
        old.rename(site)
    _remove_ours(old)


def _remove_ours(path: Path) -> None:
    """Delete a ``.<site>.new``/``.old`` beside the site only if a build made it: never a user's directory."""
    if not path.exists() and not path.is_symlink():
        return
    if not check_leftover(path):
        raise NotOurDirectory(f"{path}: a build would delete it but did not make it (no .nncanon-site); move it away")
    shutil.rmtree(path, ignore_errors=True)


def _swap(staged: Path, site: Path, progress: Callable[[str], None] = print) -> None:
    _restore_site(site, progress)
    old = _beside(site, "old")
    if site.exists():
        claim_site(site)  # checked as ours before the build (check_site_dir); a legacy site/ gets the marker here
        site.rename(old)
    pause = os.environ.get(PAUSE_SWAP)
    if pause:
        print(f"site: pausing {pause} s between the swap's renames (${PAUSE_SWAP})", flush=True)
        time.sleep(float(pause))
    staged.rename(site)
    _remove_ours(old)
