"""A weight whose heads no stride can walk in order, served so that an edit still lands (nncanon.weights).

CodeGen's ``qkv_proj`` holds its query heads in ``mp_num`` chunks of [q | v | k]: head ``i`` starts at output
``(i // per_chunk) · 3 · chunk_width + (i % per_chunk) · head_dim``, and Falcon-40B's ``query_key_value`` holds each
key/value group's query heads, then its key, then its value: query head ``i`` starts at ``(i + 2 · (i // per_group))
· head_dim``. Neither offset is affine in ``i``, so no strided view (``view``, ``permute``, ``as_strided``) of the
parameter is ``[num_heads, hidden_size, head_dim]``: the heads are a true view only as two axes, ``[groups,
per_group, ...]`` (`grouped`'s ``source``).

`Gathered` is the standard shape all the same: a copy of that two-axis view flattened to one heads axis, and every
in-place write into it (``W_Q[3] = 0``, ``W_Q.mul_(2)``, ``W_Q[3].zero_()`` through a view of it, the host's
``W_Q = new``) is written back into the parameter at once, through the two-axis view. So a read is the parameter's
values and an edit lands, as a view's would; what it is not is the parameter's storage, and the page's Weights
section says "gathered" for it, measured (generator/facts/weight_rows.py).
"""

from __future__ import annotations

from typing import Any

import torch

from ..guards.readonly import _AUGMENTED, _NOT_EDITS


def _writes(func: Any, args: tuple, kwargs: dict | None) -> bool:
    """Whether ``func`` writes into its first argument (an in-place method, ``__setitem__``, ``+=``) or an ``out=``."""
    name = getattr(func, "__name__", "")
    if name == "__setitem__" or name in _AUGMENTED or (name.endswith("_") and not name.startswith("__")
                                                          and name not in _NOT_EDITS):
        return True
    return isinstance((kwargs or {}).get("out"), Gathered)


class Gathered(torch.Tensor):
    """The gathered copy (or a view of it): writes into it are written back into the parameter."""

    _nncanon_source: torch.Tensor  # the parameter's two-axis view [groups, per_group, ...]
    _nncanon_root: torch.Tensor  # the whole gathered copy [groups · per_group, ...], plain

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        target = args[0] if args else None
        if isinstance((kwargs or {}).get("out"), Gathered):
            target = kwargs["out"]
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if not isinstance(target, Gathered):
            return out
        if _writes(func, args, kwargs):
            target._write_back()
        root = target._nncanon_root
        if isinstance(out, torch.Tensor) and not isinstance(out, Gathered) and out.device == root.device \
                and out.untyped_storage().data_ptr() == root.untyped_storage().data_ptr():
            out = _wrap(out, target._nncanon_source, root)  # a view of the copy: its writes land too
        return out

    def _write_back(self) -> None:
        source, root = self._nncanon_source, self._nncanon_root
        with torch.no_grad():
            source.copy_(root.unflatten(0, tuple(source.shape[:2])))


def _wrap(tensor: torch.Tensor, source: torch.Tensor, root: torch.Tensor) -> Gathered:
    wrapped = tensor.as_subclass(Gathered)
    wrapped._nncanon_source, wrapped._nncanon_root = source, root
    return wrapped


def grouped(source: torch.Tensor) -> torch.Tensor:
    """``source`` ``[groups, per_group, ...]`` (a view of a parameter) as ``[groups · per_group, ...]``: the view itself
    where a stride can walk the heads (one group, or groups laid end to end), else a `Gathered` copy."""
    flat = source.detach().flatten(0, 1)
    if flat.untyped_storage().data_ptr() == source.untyped_storage().data_ptr():
        return source.flatten(0, 1)  # a plain view: edits land by themselves
    return _wrap(flat, source, flat)
