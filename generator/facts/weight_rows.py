"""The standard weights each host kind carries (nncanon.weights), measured on the tiny model: for the page's
Weights section (generator/site/weights_section.py).

Each row says what a read gives, measured, not declared: ``view`` (it shares its storage with a parameter the model
holds, so an edit lands), ``gathered`` (heads no stride walks in order: a copy whose every edit is written back
into the parameter, nncanon.research.gathered), ``computed`` (the forward makes it from a parameter: Gemma's ``1 + weight``; served to
read, edits refused), ``none`` (the projection has no such bias), or ``refused`` with the one-line reason the read
raises. The full-size shape is the layout's dimensions at the printout checkpoint, filled in by the page.
"""

from __future__ import annotations

from typing import Any


def _status(model: Any, host: Any, name: str, storages: set[int]) -> tuple[str, str] | None:
    """(status, why) of reading ``name`` on ``host``; None where the host turns out not to have it."""
    import torch

    from nncanon.core.values import NotOnHost, Unavailable
    from nncanon.research.gathered import Gathered

    try:
        value = getattr(host, name)
    except NotOnHost:
        return None
    except Unavailable as error:
        return "refused", str(error).split(": ", 1)[-1] if " is unavailable on " in str(error) else str(error)
    if value is None:
        return "none", "the module has no such parameter"
    if isinstance(value, Gathered):
        return "gathered", ("no stride walks these heads in order in the parameter: a copy gathered from it, every "
                            "edit written back into it (the edit lands)")
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
        return "computed", "computed by the forward from a parameter: served to read, an edit is refused"
    if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in storages:
        # named where the host holds it (Gemma 4's k_eq_v W_V is k_proj.weight), measured, not declared
        own = next((n for n, p in host._module.named_parameters()
                    if p.untyped_storage().data_ptr() == value.untyped_storage().data_ptr()), None)
        return "view", f"a view of {own or 'the parameter'}: an edit lands in the model"
    return "computed", "not the storage of any parameter: served to read"


def weight_rows(model: Any) -> list[dict]:
    """One entry per host kind (standard path pattern and host class) with weights: its rows, in declaration order."""
    from nncanon.core.hosts import index, pattern
    from nncanon.research.weights import names

    storages = {p.untyped_storage().data_ptr() for p in model._module.parameters()}
    kinds: dict[tuple, dict] = {}
    for host in {id(h): h for h in [model, *model._hosts]}.values():
        path = host._std_path or "model"
        block = index(path)
        rows = []
        for name in names(type(host)):
            found = _status(model, host, name, storages)
            if found is not None:
                weight = getattr(type(host), name)
                rows.append({"name": name, "dims": weight.dims, "description": weight.description,
                             "status": found[0], "why": found[1]})
        # every host measured: blocks of one kind whose reads differ (Gemma 4's KV-shared blocks refuse W_K, naming
        # their source block) are kinds of their own
        key = (pattern(path), type(host).__name__, tuple((r["name"], r["status"], r["why"]) for r in rows))
        if key in kinds:
            if block is not None:
                kinds[key]["blocks"].append(block)
            continue
        kinds[key] = {"host": key[0], "class": key[1], "blocks": [] if block is None else [block], "weights": rows}
    return [kind for kind in kinds.values() if kind["weights"]]
