"""Collecting several families at once (``verify --jobs N``, ``build --jobs N``): the families whose facts are not
current are collected by N worker processes, each taking the next family as it finishes one, so a slow family does
not hold the others back. A worker writes the facts cache exactly as a sequential collect does (``cached_facts``);
the caller then reads every family from that cache in order, and a family a worker could not collect is collected
again in the caller's own process, so its error is raised (or recorded) as a sequential run's would be, traceback
and all. Each worker is a fresh interpreter (spawn): torch and nnsight are not fork-safe once imported.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from generator.recipe.family import Family


def stale(families: list[Family], kernels_only: bool) -> list[Family]:
    """The families whose facts the cache does not hold under their current key."""
    from generator.facts.collect import is_current

    return [family for family in families if not is_current(family, kernels_only)]


def _collect_one(family: Family, force: bool, kernels_only: bool,
                 then: Callable[[Family], None] | None = None) -> tuple[str, float, str | None]:
    """In a worker: one family's facts into the cache (the Family the caller resolved, pickled); (name, seconds,
    None) or (name, seconds, the error's line)."""
    from generator.facts.collect import cached_facts

    start = time.perf_counter()
    try:
        cached_facts(family, progress=lambda line: print(line, flush=True), force=force, kernels_only=kernels_only)
        if then is not None:  # the caller's next step on this family, in the same worker
            then(family)
    except Exception as error:  # noqa: BLE001 (the caller collects it again in its own process, where it is raised)
        return family.family, time.perf_counter() - start, \
            f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    return family.family, time.perf_counter() - start, None


def collect_in_parallel(families: list[Family], jobs: int, progress: Callable[[str], None], force: bool,
                        kernels_only: bool, keep_going: bool,
                        then: Callable[[Family], None] | None = None) -> dict[str, float]:
    """Collect ``families`` (those not current, or all with ``force``) in ``jobs`` workers; returns the seconds of
    each family a worker collected. Without ``keep_going`` the first failure stops handing out families (the ones
    running finish); the failed family is left to the caller, which collects it again and raises."""
    todo = families if force else stale(families, kernels_only)
    if len(todo) < 2:
        return {}
    progress(f"collecting {len(todo)} families in {min(jobs, len(todo))} processes")
    done: dict[str, float] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        pending = {pool.submit(_collect_one, family, force, kernels_only, then) for family in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            failed = False
            for future in finished:
                name, seconds, error = future.result()
                if error is None:
                    done[name] = seconds
                    progress(f"{name}: collected in {seconds:.1f} s")
                else:
                    failed = True
                    progress(f"{name}: failed in a worker ({error}); collecting it again here")
            if failed and not keep_going:
                for future in pending:
                    future.cancel()
                break
    return done
