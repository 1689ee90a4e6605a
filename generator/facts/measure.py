"""Measuring values: every value of every host kind under every load, its shape against its layout."""

from __future__ import annotations

import re
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.facts.loads import Models
from generator.recipe.family import Family

# -- paths ------------------------------------------------------------------------------

_INDEX = re.compile(r"\[i\]")


def concrete(path: str, index: int) -> str:
    """``layers[i].mlp`` -> ``layers.3.mlp`` (nnsight's get() walks ModuleList entries by name)."""
    return _INDEX.sub(f".{index}", path).replace("[", ".").replace("]", "")


def relative(host: str) -> str:
    """``model.layers[i].mlp`` -> ``layers[i].mlp``; ``model`` -> ``""``."""
    return host[len("model."):] if host.startswith("model.") else ""


def block_index(model: Any, host: str) -> int:
    """A block that has ``host`` (the first DeltaNet block for linear_attn, ...)."""
    leaf = relative(host).split(".")[1:2] if relative(host).startswith("layers[i].") else []
    for index in range(model.num_layers):
        if not leaf or hasattr(model.get(concrete("layers[i]", index)), leaf[0]):
            return index
    raise LookupError(host)


# -- measuring values --------------------------------------------------------------------


def run_inputs(model: Any, family_module: Any, prompts: list[str]) -> tuple[tuple, dict]:
    """What a trace of this model is called with (the family says how images go in, and a speech family, whose
    model takes no text, what its every load is called with: ``speech_inputs``)."""
    if model.task == "image-text-to-text" and hasattr(family_module, "trace_inputs"):
        return family_module.trace_inputs(model)
    if hasattr(family_module, "speech_inputs"):
        return family_module.speech_inputs(model)
    return (prompts,), {}


def measure_many(model: Any, wanted: list[tuple[str, str]], args: tuple, kwargs: dict) -> dict[tuple[str, str], dict]:
    """Shape and dtype of each (concrete host path, value name) of ``wanted``, read in one forward by the
    relations' reader (`generator.facts.proof.read_all`: an empty invoke per read, so the reads need no order)."""
    from generator.facts.proof import read_all

    envoys = {(path, name): model.get(path) if path else model for path, name in wanted}
    return {key: _described(read) for key, read in read_all(model, envoys, args, kwargs).items()}


def _described(read: Any) -> dict:
    import torch

    if read is None:
        return {"shape": None, "dtype": "None", "value": None}
    if isinstance(read, torch.Tensor):
        return {"shape": list(read.shape), "dtype": str(read.dtype).removeprefix("torch."), "value": None}
    return {"shape": None, "dtype": type(read).__name__, "value": read if isinstance(read, (int, list)) else None}


def check_dims(family: str, where: str, dims: tuple[str, ...], shape: list[int] | None, sizes: dict) -> None:
    if shape is None:
        return
    if len(dims) != len(shape):
        raise ClaimError(family, f"layout of {where}", f"the layout has {len(dims)} dims {list(dims)} but the "
                                                          f"value measured {shape} on the tiny checkpoint")
    for dim, size in zip(dims, shape):
        if dim in sizes and sizes[dim] != size:
            raise ClaimError(family, f"layout of {where}",
                             f"dim {dim!r} should be {sizes[dim]} on the tiny checkpoint but measured {size} "
                             f"(shape {shape})")


# -- the family's values, by host ------------------------------------------------------------


def host_rows(models: Models, family: Family, family_module: Any, prompts: list[str]) -> list[dict]:
    """:func:`_host_rows`, with a value whose read point does not resolve on this model (a module copied from another
    family reading a child this one names otherwise) one ClaimError line, as the library words it, not a traceback
    (issue 48: `claims` and `verify` on a llama copy pointed at glm4)."""
    from nncanon.core.locators import FamilyMismatch

    try:
        return _host_rows(models, family, family_module, prompts)
    except FamilyMismatch as e:
        raise ClaimError(family.family, "values", f"{e}; point the family module's RENAME, ENVOYS or the value's "
                                                  "locator at this family's own modules (python -m generator survey "
                                                  "<model_type> lists what the generic parts resolve)") from None


def _host_rows(models: Models, family: Family, family_module: Any, prompts: list[str]) -> list[dict]:
    """One entry per host kind (standard path, module class) with the blocks it covers and every value:
    layout, read at, conditions, availability per load, measured shape."""
    by_kind: dict[tuple[str, str], dict] = {}
    #: per host kind, (how many values a load serves, the order its forward produces them in), best load first
    orders: dict[tuple[str, str], list[tuple[int, list[str]]]] = {}
    pending: list[tuple[Any, Any, dict]] = []  # (kind, row, value entry) to measure under the current load
    for load in models.all:
        model = models.get(load.label)
        with load.within(model):
            rows = model.support()
        for kind in model.host_kinds():
            # a host class is one kind on the page, whichever module class it wraps under this load (the root
            # is the causal LM or the multimodal wrapper; the wrapper's is shown, as the printout's)
            key = (kind.host, kind.cls.__name__)
            entry = by_kind.setdefault(key, {"path": kind.host, "class": kind.native, "host_class": kind.cls.__name__,
                                             "part": part_of(kind.cls), "section": section_of(kind.host),
                                             "values": {}, "blocks": None})
            if load.task == "image-text-to-text":
                entry["class"] = kind.native
            if kind.blocks is not None:
                entry["blocks"] = sorted(set(entry["blocks"] or []) | set(kind.blocks))
            # by blocks too: one module class may stand under two host classes (mllama's MLP in a cross-attention block)
            mine = [row for row in rows if (row.host, row.host_class, row.blocks) == (kind.host, kind.native, kind.blocks)]
            orders.setdefault(key, []).append((sum(row.available for row in mine), [row.name for row in mine]))
            for row in mine:
                value = entry["values"].setdefault(row.name, _value_entry(row, kind.cls))
                value["availability"][load.label] = row.available
                if row.available and value["measured"] is None:
                    pending.append((kind, row, value))
        if pending:
            # every value this load is the first to serve, measured in one forward
            with load.within(model):
                args, kwargs = run_inputs(model, family_module, prompts)
                measured = measure_many(model, [(nnsight_path(k.paths[0]), r.name) for k, r, _ in pending], args, kwargs)
                for kind, row, value in pending:
                    value["measured"] = _checked(model, family, family_module, kind, row,
                                                 measured[(nnsight_path(kind.paths[0]), row.name)], args, kwargs)
                _check_other_sizes(model, family, family_module, [(k, r) for k, r, _ in pending], args, kwargs)
            pending.clear()
    hosts = []
    for key, entry in by_kind.items():
        # in the forward order of the load that serves the most of them (support() measures it per load:
        # the token-by-token DeltaNet route serves states before attention_head_outputs)
        best = max(orders[key], key=lambda order: order[0])[1]
        rank = {name: i for i, name in enumerate(best)}
        entry["values"] = sorted(entry["values"].values(), key=lambda v: rank.get(v["name"], len(rank)))
        hosts.append(entry)
    return hosts


def section_of(host: str) -> str:
    return "vision" if host.startswith("model.vision") else "text"


def part_of(cls: type) -> str:
    """The shared part a host class is a family's version of: its furthest base short of ``Host`` (a family's
    ``host("NemotronSSD", SSD)`` is the SSD part; the Recurrent state page groups mixers by it)."""
    from nncanon.core.hosts import Host

    bases = [k for k in cls.__mro__ if isinstance(k, type) and issubclass(k, Host) and k is not Host]
    return bases[-1].__name__


def _value_entry(row: Any, cls: type) -> dict:
    value = next(v for v in cls.values() if v.name == row.name)
    conditions = [{"needs": c.needs, "why": c.why} for c in value.conditions]
    return {"name": row.name, "layout": value.layout.name, "dims": list(value.layout.dims),
            "description": row.description, "read_at": row.read_at, "conditions": conditions,
            "note": value.note if isinstance(value.note, str) else None, "availability": {}, "measured": None,
            "writable": value.writable, "gradient": value.gradient}


def full_size_notes(hosts: list[dict], full: Any, checkpoint_id: str) -> None:
    """Notes that depend on the config (the size of ``states``) are given for the full-size checkpoint."""
    for kind in full.host_kinds():
        entry = next((h for h in hosts if (h["path"], h["host_class"]) == (kind.host, kind.cls.__name__)), None)
        for value in kind.cls.values():
            if entry is not None and callable(value.note):
                row = next(v for v in entry["values"] if v["name"] == value.name)
                row["note"] = f"{value.note(full)} on {checkpoint_id}"


def nnsight_path(standard: str) -> str:
    """``model.layers[3].mlp`` -> ``layers.3.mlp`` (what ``model.get`` walks); ``model`` -> ``""``."""
    return relative(standard).replace("[", ".").replace("]", "")


def _block(std_path: str) -> int | None:
    found = re.search(r"layers\[(\d+)\]", std_path)
    return int(found.group(1)) if found else None


def _check_other_sizes(model: Any, family: Family, family_module: Any, kinds_rows: list, args: tuple,
                       kwargs: dict) -> None:
    """A family whose blocks differ in size (``block_dim_sizes``: Gemma 4's full-attention heads): each value
    measured again, in one forward, on the first block of every other set of sizes of its kind, its shape checked
    against that block's own sizes (`StandardModel.dim_sizes(block=...)`)."""
    if not hasattr(family_module, "block_dim_sizes"):
        return
    extra = []  # (kind, row, concrete standard path)
    for kind, row in kinds_rows:
        blocks = [(_block(p), p) for p in kind.paths if _block(p) is not None and p.startswith("model.layers[")]
        seen = {tuple(sorted(model.dim_sizes(block=blocks[0][0]).items()))} if blocks else set()
        for block, path in blocks[1:]:
            sizes = tuple(sorted(model.dim_sizes(block=block).items()))
            if sizes not in seen:
                seen.add(sizes)
                extra.append((kind, row, path))
    if extra:
        measured = measure_many(model, [(nnsight_path(p), r.name) for _, r, p in extra], args, kwargs)
        for kind, row, path in extra:
            _checked(model, family, family_module, kind, row, measured[(nnsight_path(path), row.name)], args, kwargs,
                     path)


def _checked(model: Any, family: Family, family_module: Any, kind: Any, row: Any, measured: dict, args: tuple,
             kwargs: dict, at: str | None = None) -> dict:
    """The value measured on the first module of its kind (or on ``at``), its shape checked against its layout
    and the sizes of the block it was read on."""
    at = at or kind.paths[0]
    path = nnsight_path(at)
    where = f"{kind.host}.{row.name}" + ("" if at == kind.paths[0] else f" (on {at})")
    if row.dims and measured["shape"] is None and not (measured["dtype"] == "None" and "None" in row.layout):
        raise ClaimError(family.family, f"layout of {where}",
                         f"the layout {row.layout} [{' '.join(row.dims)}] promises a tensor, but the value read on "
                         f"{at} is a {measured['dtype']}")
    per_block = hasattr(family_module, "block_dim_sizes") and at.startswith("model.layers[")
    sizes = {**model.dim_sizes(block=_block(at) if per_block else None),
             **_input_sizes(model, family_module, args, kwargs)}
    if hasattr(family_module, "host_sizes"):  # a speech encoder's seq is its source positions, not the decoder's
        sizes.update(family_module.host_sizes(kind.host, sizes))
    if kind.host.startswith("model.vision.layers"):
        # the vision blocks' layouts reuse the text dimension names with the encoder's sizes
        sizes.update(model.vision.dim_sizes(patches=sizes["patches"]))
    elif path and isinstance(getattr(model.get(path)._module, "intermediate_size", None), int):
        sizes["intermediate_size"] = model.get(path)._module.intermediate_size  # this MLP's own width
    check_dims(family.family, where, row.dims, measured["shape"], sizes)
    return measured


def _input_sizes(model: Any, family_module: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    cached = getattr(model, "_collect_input_sizes", None)
    if cached is None:
        cached = model._collect_input_sizes = _measure_input_sizes(model, family_module, args, kwargs)
    return cached


def _measure_input_sizes(model: Any, family_module: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    import torch

    if hasattr(family_module, "input_sizes"):  # a speech family: no input_ids at the root
        return family_module.input_sizes(model, args, kwargs)
    with torch.no_grad(), model.trace(*args, **kwargs):
        ids = model.input_ids.save()
    batch, seq = ids.shape
    sizes = {"batch": batch, "seq": seq, "query": seq, "key": seq}
    if model.task == "image-text-to-text" and hasattr(family_module, "image_sizes"):
        sizes.update(family_module.image_sizes(model, args, kwargs))
    return sizes
