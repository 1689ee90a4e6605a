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
import types
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
    """Mark ``tensor`` and the storage it views with ``run``: a slice of it (``h[:, pos]``) views the same base,
    so a name bound to the slice is traced back to its trace too."""
    if run is None:
        return
    for target in (tensor, getattr(tensor, "_base", None)):
        if target is not None:
            try:
                setattr(target, RUN, run)
            except (AttributeError, TypeError):
                pass


def _run_of(tensor: Any) -> int | None:
    """The trace that served ``tensor`` or the tensor it is a view of (a slice of a served value)."""
    run = getattr(tensor, RUN, None)
    return run if run is not None else getattr(getattr(tensor, "_base", None), RUN, None)


def _referenced(mediator: Any) -> set[str]:
    """The names the invoke's own code reads (its block and any function or comprehension inside it)."""
    names = mediator.__dict__.get("_nncanon_names")
    if names is None:
        names, codes = set(), [getattr(mediator.code, "__code__", mediator.code)]
        while codes:
            code = codes.pop()
            names.update(getattr(code, "co_names", ()), getattr(code, "co_varnames", ()),
                         getattr(code, "co_freevars", ()), getattr(code, "co_cellvars", ()))
            codes.extend(c for c in getattr(code, "co_consts", ()) if isinstance(c, types.CodeType))
        mediator.__dict__["_nncanon_names"] = names
    return names


def check(mediator: Any, run: int | None) -> None:
    """Warn about every name this invoke's snapshot holds from an earlier trace that a sibling bound anew."""
    scope = getattr(mediator, "lcls", None)
    shared = getattr(scope, "shared", None)
    if not shared or run is None:
        return
    warned = mediator.__dict__.setdefault("_nncanon_warned", set())
    referenced = _referenced(mediator)
    for name, fresh in list(shared.items()):
        if name in warned or name not in referenced or not dict.__contains__(scope, name):
            continue  # a name this invoke never reads cannot mislead it
        old = dict.__getitem__(scope, name)
        before = _run_of(old)
        if old is fresh or before is None or before == run:
            continue
        warned.add(name)
        warnings.warn(
            f"{name!r} in this invoke is the tensor an earlier trace left in the caller's scope, not the one a "
            f"sibling invoke of this trace bound: nnsight looks a name up in the scope the trace started from "
            f"first. Run each trace in a function of its own (a fresh scope), or del {name} before the trace; "
            f"see the Recipes page, 'Patching in a loop'", StaleValueWarning, stacklevel=3)
