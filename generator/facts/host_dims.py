"""The sizes a host kind has of its own, read off the full-size model's weights: for the page's shape cells.

``StandardModel.dim_sizes()`` sizes each layout dimension once for the whole model. A mixture has two MLP widths
(Qwen3-Next: each routed expert 512 wide, the shared expert 512 too but DeepSeek-V3's dense blocks 18432 beside its
experts' 2048), so the model-wide sizes leave ``intermediate_size`` out there, and the page printed the name where
the checkpoint has a number. A host's standard weights (``nncanon.weights``: ``W_in [num_experts hidden_size
intermediate_size]``) carry the dimension names of their layout and the shape the full-size model gives them (its
parameters on the meta device: no memory), so each size is read where it is, not declared per family.
"""

from __future__ import annotations

from typing import Any


def host_dims(model: Any) -> dict:
    """``{"host_dims": [{"host": pattern, "class": host class, "dims": {name: size}}]}``: per host kind, the sizes
    its weights give that the model-wide ``dim_sizes()`` lacks or sizes otherwise; nothing when no kind has any, so
    such a family's facts are as they were. Two weights of one kind that size one name differently refuse."""
    import torch

    from nncanon.core.hosts import pattern
    from nncanon.core.values import NotOnHost, Unavailable
    from nncanon.research.weights import names

    overall = model.dim_sizes()
    kinds: dict[tuple[str, str], dict[str, int]] = {}
    for host in {id(h): h for h in [model, *model._hosts]}.values():
        key = (pattern(host._std_path or "model"), type(host).__name__)
        if key in kinds:
            continue
        own: dict[str, tuple[int, str]] = {}
        for name in names(type(host)):
            try:
                weight = getattr(host, name)
            except (NotOnHost, Unavailable):
                continue
            dims = getattr(type(host), name).dims.split()
            shape = tuple(getattr(weight, "shape", ()))
            if not isinstance(weight, torch.Tensor) and not hasattr(weight, "shape") or len(shape) != len(dims):
                continue  # no such bias, or a weight whose layout the read does not keep: nothing to read a size from
            for dim, size in zip(dims, shape):
                if dim in own and own[dim][0] != size:
                    raise ValueError(f"{key[0]} ({key[1]}): {own[dim][1]} gives {dim}={own[dim][0]} and {name} "
                                     f"gives {dim}={size}: one host kind has one size per dimension")
                own[dim] = (int(size), name)
        kinds[key] = {dim: size for dim, (size, _) in own.items() if overall.get(dim) != size}
    rows = [{"host": host, "class": cls, "dims": dict(sorted(dims.items()))} for (host, cls), dims in kinds.items()
            if dims]
    return {"host_dims": rows} if rows else {}
