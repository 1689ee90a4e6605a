"""Where a value read at an operation is read, as the line of transformers' source that operation stands for.

A value read inside a forward is located by nnsight's operation names (``F_linear_0``, ``nn_functional_dropout_0
inside attention_interface_1``); a reader wants the line those names stand for. nnsight compiles each forward it
sources and keeps, per operation, its line in that source (`nnsight.intervention.source.Compiled.lines`): the line
is read from there, and checked against the file itself, so a page never shows a line the file does not have.

An operation inside a called function (``... inside attention_interface_1``) is only known when the call runs, so
those are resolved in a trace of the tiny checkpoint, one per value (the drill parks until the call fires).
"""

from __future__ import annotations

import linecache
import os
from typing import Any


def annotate(models: Any, hosts: list[dict], family_module: Any, prompts: list[str], run_inputs: Any) -> None:
    """Give each value read at an operation ``read_line``: ``{"file", "line", "code"}`` of that operation's call
    (for a nested one, the innermost), under the first load that serves it."""
    from generator.facts.measure import nnsight_path
    from nncanon.core.locators import Tap

    entries = {(h["path"], h["host_class"]): {v["name"]: v for v in h["values"]} for h in hosts}
    for load in models.all:
        model = models.get(load.label)
        with load.within(model):
            inputs, compiled = None, {}
            for kind in model.host_kinds():
                rows = entries.get((kind.host, kind.cls.__name__), {})
                for value in kind.cls.values():
                    locator, row = value.locator, rows.get(value.name)
                    if (row is None or "read_line" in row or isinstance(locator, Tap) or not getattr(locator, "ops", ())
                            or not row["availability"].get(load.label)):
                        continue
                    host = model.get(nnsight_path(kind.paths[0])) if kind.paths[0] != "model" else model
                    if len(locator.ops) > 1 and inputs is None:
                        inputs = run_inputs(model, family_module, prompts)
                    envoy = locator.base(host)
                    key = (envoy.path, locator.ops[:-1])  # the values read inside one call share its drill
                    if key not in compiled:
                        compiled[key] = _compiled(model, envoy, locator.ops[:-1], inputs)
                    row["read_line"] = _at(compiled[key], locator.ops[-1])


def forget_compiled() -> None:
    """Empty nnsight's memo of instrumented code, so each line is read from the file of the model now loaded."""
    from nnsight.intervention import source

    source.FORWARD_CACHE.clear()


def _compiled(model: Any, envoy: Any, outer: tuple[str, ...], inputs: tuple | None) -> Any:
    """nnsight's compiled source of the function the ``outer`` operations lead to from the envoy's forward."""
    from nncanon.core.locators import resolve

    if not outer:
        return envoy.source.compiled
    found: dict = {}
    args, kwargs = inputs
    with model.trace(*args, **kwargs):
        source = envoy.source
        for op in outer:
            source = getattr(source, resolve(op, source.compiled)).source
        found["compiled"] = source.compiled
    return found["compiled"]


def _at(compiled: Any, op: str) -> dict | None:
    """The operation's line: its file, line number and code (a trailing comment dropped), or None when the file
    does not have that line (a forward compiled from a string, a file changed on disk)."""
    from nncanon.core.locators import resolve

    within = compiled.lines.get(resolve(op, compiled))
    if within is None:
        return None
    code = compiled.source.split("\n")[within - 1].strip()
    path, number = compiled.code.co_filename, compiled.code.co_firstlineno + within - 1
    if linecache.getline(path, number).strip() != code:
        return None
    return {"file": os.path.basename(path), "line": number, "code": code.split("  # ")[0].rstrip()}
