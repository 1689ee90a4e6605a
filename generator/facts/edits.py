"""Edits proven: every writable value of every host kind, edited in place and by assignment, moves the
logits, and both ways move them identically.

A name that reads right but writes nowhere (a copy, a tensor the forward no longer uses) is a silent
wrong result in every steering or patching experiment; the build refuses it, naming the value.
"""

from __future__ import annotations

import re
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.facts.loads import Models
from generator.facts.measure import nnsight_path, run_inputs
from generator.facts.proof import unavailable
from generator.recipe.family import Family
from nncanon.core.precision import LEVELS, STEP, forward_bound


def nudge(x: Any, host: Any) -> Any:
    """A change no value survives unnoticed: floats scaled and shifted, indices moved to the next one
    (within the host's experts, so the edit stays a valid routing)."""
    if x.dtype.is_floating_point:
        return x * 1.5 + 0.25
    return (x + 1) % int(getattr(host, "num_experts", None) or int(x.max()) + 1)


def _edited_logits(model: Any, host: Any, name: str, args: tuple, kwargs: dict, how: str, step: int | None) -> Any:
    """The logits after an edit of ``host.name`` (``how``: "in place", "assign", or "none"). ``step``
    None: on one call; else in a two-token ``generate``, editing at decode step ``step`` and reading
    step 1's logits. None when the value reads None there. (nnsight runs the block's code: no return
    inside it.)"""
    import torch

    logits = None
    with torch.no_grad():
        if step is None:
            with model.trace(*args, **kwargs):
                logits = _edit(model, host, name, how, last=True)
        else:
            with model.generate(*args, max_new_tokens=2, min_new_tokens=2, do_sample=False, **kwargs) as tracer:
                for at in tracer.iter[:2]:
                    if at == step:
                        edited = _edit(model, host, name, how, last=step == 1)
                    if at == 1:
                        logits = edited if step == 1 else model.logits.save()
    return logits


def _edit(model: Any, host: Any, name: str, how: str, last: bool) -> Any:
    """Edit ``host.name`` inside a trace; when ``last``, the logits after it (the edited value itself
    when that is the logits); a value that reads None is left alone and gives None."""
    logits = None
    current = getattr(host, name) if how != "none" else None
    if how != "none" and current is None:
        return None
    if how == "in place":
        current[:] = nudge(current, host)
    elif how == "assign":
        setattr(host, name, nudge(current, host))
    if last:
        logits = current.save() if (host is model and name == "logits" and how == "in place") else model.logits.save()
    return logits


def forward_blocks(model: Any) -> tuple[int, str]:
    """The blocks of every stack (an upper bound on those after an edited value, whichever it is) and the widest
    level of the error model a block's relations recompute (a recurrence carries its state token by token)."""
    blocks = {path for kind in model.host_kinds() for path in kind.paths if re.search(r"layers\[\d+\]$", path)}
    levels = {relation.tolerance for kind in model.host_kinds() for relation in getattr(kind.cls, "RELATIONS", ())}
    widest = max((name for name, (level, _) in LEVELS.items() if level in levels | {LEVELS["SUBBLOCK"][0]}),
                 key=lambda name: LEVELS[name][0])
    return len(blocks), widest


def _paths_agree(family: Family, where: str, in_place: Any, assigned: Any, dtype: str, model: Any) -> None:
    """The same edit by two paths (a write into the tensor, a replaced tensor copied back through the value's view)
    runs the same ops after it, but the first op reading it may sum in another order (a strided slice, a contiguous
    copy). In float32 that is one reordered step, and its difference only propagates: within STEP. In a half dtype
    the step's float32 difference can flip the rounding of every store after it, so the two logits are two
    evaluations of the rest of the forward: within the error model's bound for it (``forward_bound``), relative to
    the logits' scale."""
    import torch

    from nncanon.core.relations import error

    if dtype == "float32":
        if not torch.allclose(in_place, assigned, rtol=STEP, atol=STEP, equal_nan=True):
            gap = float((in_place - assigned).abs().nan_to_num().max())
            raise ClaimError(family.family, where, f"an in-place edit and an assignment move the logits differently "
                                                   f"(by {gap:.3g})")
        return
    blocks, level = forward_blocks(model)
    limit = forward_bound(blocks, dtype, level)
    gap = error(in_place, assigned)
    if limit is not None and not gap <= limit:
        raise ClaimError(family.family, where, f"an in-place edit and an assignment move the logits differently in "
                                               f"{dtype} (by {gap:.3g} of the logits' scale; the error model bounds "
                                               f"two evaluations of {blocks} blocks and the head by {limit:.3g})")


def _prove_one(family: Family, model: Any, host: Any, kind: Any, value: Any, label: str, args: tuple,
               kwargs: dict, baselines: dict, dtype: str = "float32") -> dict:
    """One value's edit: on this call, or on the next decode step for a value that reaches only the next
    call or reads None on a prompt (a state entering the first call)."""
    import torch

    where = f"edit of {kind.paths[0]}.{value.name} under {label}"
    step = 0 if value.reaches == "the next call" else None
    in_place = _edited_logits(model, host, value.name, args, kwargs, "in place", step)
    if in_place is None and step is None:
        step = 1
        in_place = _edited_logits(model, host, value.name, args, kwargs, "in place", step)
    if in_place is None:
        raise ClaimError(family.family, where, "the value reads None on a prompt and on its first decode step")
    if (label, step) not in baselines:
        baselines[(label, step)] = _edited_logits(model, model, "", args, kwargs, "none", step)
    before = baselines[(label, step)]
    assigned = _edited_logits(model, host, value.name, args, kwargs, "assign", step)
    if torch.equal(in_place, before) or torch.equal(assigned, before):
        how = "an in-place edit" if torch.equal(in_place, before) else "an assignment"
        raise ClaimError(family.family, where, f"{how} does not reach the logits"
                         + (" of the next decode step" if step is not None else "")
                         + ": the value is writable but the write does not land")
    _paths_agree(family, where, in_place, assigned, dtype, model)
    return {"host": kind.host, "class": kind.cls.__name__, "value": value.name, "load": label,
            "reaches": "this call" if step is None else ("the next call" if step == 0 else "a decode step")}


def prove_edits(family: Family, models: Models, family_module: Any, prompts: list[str],
                dtype: str = "float32") -> list[dict]:
    """For each writable value, under the first load that serves it, on the first module of its kind; ``dtype``,
    the models' (the two paths' bound: :func:`_paths_agree`)."""

    done: set[tuple[str, str, str]] = set()
    facts = []
    baselines: dict[tuple, Any] = {}
    for load in models.all:
        model = models.get(load.label)
        with load.within(model):
            args, kwargs = run_inputs(model, family_module, prompts)
            for kind in model.host_kinds():
                host = model.get(nnsight_path(kind.paths[0])) if nnsight_path(kind.paths[0]) else model
                for value in kind.cls.values():
                    key = (kind.host, kind.cls.__name__, value.name)
                    if not value.writable or key in done or unavailable(model, host, value.name):
                        continue
                    done.add(key)
                    facts.append(_prove_one(family, model, host, kind, value, load.label, args, kwargs,
                                            baselines, dtype))
    return sorted(facts, key=lambda f: (f["host"], f["class"], f["value"]))
