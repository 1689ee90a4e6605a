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
    """``{"host_dims": [{"host": pattern, "class": host class, "dims": {name: size}, "weights": {weight: {name:
    size}}}]}``: per host kind, the sizes its weights give that the model-wide ``dim_sizes()`` lacks or sizes
    otherwise; where the kind's weights disagree on one name (Mllama's W_E has the image tokens' 8 rows past W_U's
    vocabulary), that name is sized per weight instead. Nothing when no kind has any, so such a family's facts are
    as they were."""
    import torch

    from nncanon.core.hosts import pattern
    from nncanon.core.values import NotOnHost, Unavailable
    from nncanon.research.weights import names

    overall = model.dim_sizes()
    rows = []
    seen: set[tuple[str, str]] = set()
    for host in {id(h): h for h in [model, *model._hosts]}.values():
        key = (pattern(host._std_path or "model"), type(host).__name__)
        if key in seen:
            continue
        seen.add(key)
        per_weight: dict[str, dict[str, int]] = {}
        for name in names(type(host)):
            try:
                weight = getattr(host, name)
            except (NotOnHost, Unavailable):
                continue
            dims = getattr(type(host), name).dims.split()
            shape = tuple(getattr(weight, "shape", ()))
            if not (isinstance(weight, torch.Tensor) or hasattr(weight, "shape")) or len(shape) != len(dims):
                continue  # no such bias, or a weight whose layout the read does not keep: nothing to read a size from
            per_weight[name] = {dim: int(size) for dim, size in zip(dims, shape)}
        sizes: dict[str, set[int]] = {}
        for own in per_weight.values():
            for dim, size in own.items():
                sizes.setdefault(dim, set()).add(size)
        dims = {dim: next(iter(s)) for dim, s in sizes.items() if len(s) == 1 and overall.get(dim) != next(iter(s))}
        apart = {name: {dim: size for dim, size in own.items() if len(sizes[dim]) > 1 and overall.get(dim) != size}
                 for name, own in per_weight.items()}
        apart = {name: own for name, own in apart.items() if own}
        if dims or apart:
            rows.append({"host": key[0], "class": key[1], "dims": dict(sorted(dims.items())),
                         **({"weights": apart} if apart else {})})
    return {"host_dims": rows} if rows else {}
