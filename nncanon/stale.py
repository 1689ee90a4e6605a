"""Warn when an invoke reads a name an earlier trace left behind instead of the one a sibling invoke bound.

nnsight 0.8.1 runs each ``tracer.invoke`` body against a snapshot of the caller's locals taken
when the trace starts, then the names sibling invokes bind. A name that already existed before
the trace (the same variable of the previous iteration of a patching loop) is found in the
snapshot first: the second invoke silently reads the previous trace's tensor, not the one the
first invoke just read. nncanon cannot change that lookup, but it sees it cheaply: each tensor it
serves is stamped with its trace, and at each read an invoke makes, the names its siblings bound
are looked up in its snapshot. A snapshot tensor served by an earlier trace shadowing a sibling's
bind is the stale case, warned once per name and trace. The safe pattern (a function per trace,
so every trace starts from a fresh frame) is on the Recipes page.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

RUN = "_nncanon_run"
_runs = itertools.count(1)


class StaleValueWarning(UserWarning):
    """An invoke reads a tensor from an earlier trace where a sibling invoke bound a new one."""


def current_run(mediator: Any) -> int | None:
    """A number for the trace ``mediator`` runs in (one per batch nnsight assembles)."""
    interleaver = getattr(mediator, "interleaver", None)
    batcher = getattr(interleaver, "batcher", None)
    if batcher is None:
        return None
    run = getattr(batcher, RUN, None)
    if run is None:
        run = next(_runs)
        setattr(batcher, RUN, run)
    return run


def stamp(tensor: Any, run: int | None) -> None:
    if run is not None:
        try:
            setattr(tensor, RUN, run)
        except (AttributeError, TypeError):
            pass


def check(mediator: Any, run: int | None) -> None:
    """Warn about every name this invoke's snapshot holds from an earlier trace that a sibling bound anew."""
    scope = getattr(mediator, "lcls", None)
    shared = getattr(scope, "shared", None)
    if not shared or run is None:
        return
    warned = mediator.__dict__.setdefault("_nncanon_warned", set())
    for name, fresh in list(shared.items()):
        if name in warned or not dict.__contains__(scope, name):
            continue
        old = dict.__getitem__(scope, name)
        before = getattr(old, RUN, None)
        if old is fresh or before is None or before == run:
            continue
        warned.add(name)
        warnings.warn(
            f"{name!r} in this invoke is the tensor an earlier trace left in the caller's scope, not the one a "
            f"sibling invoke of this trace bound: nnsight looks a name up in the scope the trace started from "
            f"first. Run each trace in a function of its own (a fresh scope), or del {name} before the trace; "
            f"see the Recipes page, 'Patching in a loop'", StaleValueWarning, stacklevel=3)
