"""Gradients of values served through a view, inside nnsight's ``with loss.backward():``.

nnsight serves ``t.grad`` by an autograd hook on ``t``. A value served through a view
(``router_logits`` unflattened from the mixture's token rows, ``attention_premix`` split into
heads) is a tensor the model never computes with: no gradient ever reaches it, so the read
waits until the backward ends and fails as out of order. Here the read is redirected to the
tensor the model did compute with (the value's *source*): its gradient is laid out as the
source is and cut by the view's own strides, so ``value.grad`` is autograd's gradient of the
native tensor, reshaped as the value is; assigning ``value.grad`` splices the edit back.

A value that cannot have a gradient (ids, indices, a derived or cache-only value) is marked
when read, and its ``.grad`` raises `NoGradient` naming the value and why.

nnsight builds its ``Tensor.grad`` property per backward (``backward._grad_property``); `install`
wraps that builder once, so nnsight's own path serves every other tensor unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from nnsight.intervention import backward
from nnsight.intervention.interleaver import OutOfOrderError

SOURCE = "_nncanon_source"  #: on a served view: the tensor the model computed with
NAME = "_nncanon_name"  #: on a served tensor: its standard path, for errors
NO_GRAD = "_nncanon_no_grad"  #: on a served tensor that has no gradient: why


class NoGradient(TypeError):
    """``.grad`` of a value that cannot have one (an index, a mask, a value the forward never reads)."""


def mark(value: Any, source: Any, name: str, no_grad: str | None) -> Any:
    """Tag a served tensor with what its ``.grad`` needs; other objects pass through untouched."""
    if not isinstance(value, torch.Tensor):
        return value
    setattr(value, NAME, name)
    if no_grad is not None:
        setattr(value, NO_GRAD, no_grad)
    elif value is not source and isinstance(source, torch.Tensor) and _shares(value, source):
        setattr(value, SOURCE, source)
    return value


def _shares(view: torch.Tensor, source: torch.Tensor) -> bool:
    return view.untyped_storage().data_ptr() == source.untyped_storage().data_ptr()


def _anchor(source: torch.Tensor) -> torch.Tensor:
    """The tensor autograd reaches: an invoke's rows that nnsight narrowed are a view of the batch it ran."""
    if getattr(source, "_nnsight_batch", False) and source._base is not None:
        return source._base
    return source


def _redirect(interleaver: Any, seen: set[int], hooks: list, view: torch.Tensor) -> None:
    """Hook the view's source and serve the view's part of the source's gradient at ``{id(view)}.grad``."""
    location = id(view)
    if location in seen:
        return
    seen.add(location)
    anchor = _anchor(getattr(view, SOURCE))
    geometry = (view.shape, view.stride(), view.storage_offset() - anchor.storage_offset())

    def hook(grad: torch.Tensor) -> torch.Tensor:
        try:
            laid = grad
            if grad.stride() != anchor.stride() or grad.storage_offset() != 0:
                laid = torch.empty_strided(anchor.shape, anchor.stride(), dtype=grad.dtype, device=grad.device)
                laid.copy_(grad)
            cut = laid.as_strided(*geometry)
            served = interleaver.handle(f"{location}.grad", cut)
            if served is cut:
                return grad
            updated = laid.clone()
            updated.as_strided(*geometry).copy_(served)
            return updated
        finally:
            handle.remove()

    handle = anchor.register_hook(hook)
    hooks.append(handle)


def _named(error: OutOfOrderError, tensor: torch.Tensor) -> Exception:
    from ..guards.errors import grad_out_of_order

    return grad_out_of_order(error, getattr(tensor, NAME))


_original = backward._grad_property


def _grad_property(interleaver: Any, seen: set[int], hooks: list) -> property:
    inner = _original(interleaver, seen, hooks)

    def prepare(tensor: torch.Tensor) -> None:
        why = getattr(tensor, NO_GRAD, None)
        if why is not None:
            raise NoGradient(f"{getattr(tensor, NAME)} has no gradient: {why}")
        if hasattr(tensor, SOURCE):
            _redirect(interleaver, seen, hooks, tensor)

    def getter(tensor: torch.Tensor) -> Any:
        prepare(tensor)
        try:
            grad = inner.fget(tensor)
        except OutOfOrderError as error:
            if not hasattr(tensor, NAME):
                raise
            raise _named(error, tensor) from None
        if hasattr(tensor, NAME):
            from ..guards.errors import remember_read

            remember_read(getattr(tensor, NAME))
        return grad

    def setter(tensor: torch.Tensor, value: Any) -> None:
        prepare(tensor)
        try:
            inner.fset(tensor, value)
        except OutOfOrderError as error:
            if not hasattr(tensor, NAME):
                raise
            raise _named(error, tensor) from None

    return property(getter, setter)


def install() -> None:
    """Wrap nnsight's per-backward ``Tensor.grad`` builder (idempotent)."""
    if backward._grad_property is not _grad_property:
        backward._grad_property = _grad_property


install()
