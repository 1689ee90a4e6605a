"""Where a surveyed row's chain of relations breaks, measured on the forward order without the values that did not
resolve (both surveys: the decoder parts' rows, generator/survey/measure.py, and the encoder parts',
generator/survey/encoders.py)."""

from __future__ import annotations

from typing import Any

from generator.survey.failures import one_line


def chain(model: Any, args: tuple, kwargs: dict, held: set[str], values: dict[str, str | None]) -> str | None:
    """Where the chain of the relations that ``held`` breaks (None: it is whole), on the forward order measured
    without the values that did not resolve; a value of a block the reads did not reach (a later block kind's) that
    the tree has no module for leaves no order to measure, and the row says so in its place."""
    from generator.facts.chain import survey_gap
    from nncanon.core.model import FamilyMismatch

    unserved(model, values)
    try:
        return survey_gap(model, args, kwargs, held.__contains__)
    except FamilyMismatch as error:
        return f"the forward order cannot be measured: {one_line(error)}"


def unserved(model: Any, values: dict[str, str | None]) -> None:
    """Every value that did not resolve, recorded as one the tree does not serve (``StandardModel.missing_op``): the
    forward order the chain is measured on (nncanon.guards.order) then leaves it out, as a release's moved op."""
    from generator.facts.proof import envoys, pattern

    kinds = {pattern(envoy._std_path): type(envoy) for envoy in envoys(model)}
    missing = model.__dict__.setdefault("_missing_ops", {})
    for key, why in values.items():
        host, _, name = key.rpartition(".")
        if why is not None and host in kinds:
            missing.setdefault((kinds[host], name), why)
