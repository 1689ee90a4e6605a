"""nnsight's out-of-order errors, said in standard names.

nnsight reports a read the model already ran past by its internal location
(``model.model.layers.1.mlp.gate.source.F_linear_0.output.i0``, or a tensor's id for a
gradient). The value descriptors catch it where the read was made and re-raise
`ReadOrderError`, naming the value the user wrote, the value read just before it (which the
forward computes later) and the fix. Each worker (one per trace body, invoke or backward
block) remembers the last value it was served, on the nnsight mediator itself, so nothing
outlives the trace.
"""

from __future__ import annotations

from nnsight.intervention.interleaver import Mediator, OutOfOrderError

_LAST = "_nncanon_last_read"


class ReadOrderError(OutOfOrderError):
    """A value read after the forward had computed it; the message names both values and the fix.

    A subclass of nnsight's `OutOfOrderError`, so code catching that keeps working.
    """


class OutsideTrace(ValueError):
    """A standard value read with no trace running, said by its standard name (nnsight names ``model.output``)."""


def _mediator() -> Mediator | None:
    try:
        return Mediator.current("a standard value")
    except ValueError:
        return None


def remember_read(name: str) -> Mediator | None:
    """Record ``name`` as the last value this worker was served; returns the worker's mediator."""
    mediator = _mediator()
    if mediator is not None:
        setattr(mediator, _LAST, name)
    return mediator


def _last() -> str | None:
    mediator = _mediator()
    return None if mediator is None else getattr(mediator, _LAST, None)


def _reached(error: OutOfOrderError) -> bool | None:
    """Whether the forward visited the location the failed read waited on (None: unknown)."""
    mediator = _mediator()
    pending = getattr(mediator, "pending", None)
    interleaver = getattr(mediator, "interleaver", None)
    if pending is None or interleaver is None:
        return None
    return interleaver.counts.get(pending.provider, 0) > 0


def read_out_of_order(error: OutOfOrderError, name: str) -> ReadOrderError | None:
    """The error for reading ``name`` after the model ran past it; None inside a ``tracer.iter`` loop, where
    nnsight ends a loop that outran the run with this error and warns instead (it must see its own)."""
    mediator = _mediator()
    if mediator is not None and getattr(mediator, "iteration", 0) != 0:
        return None
    before = _last()
    reached = _reached(error)
    if before is None:
        what = (f"{name} was requested after the forward had already computed it" if reached is not False else
                f"the forward never reached {name} in this call (its branch did not run, or a value the forward "
                f"computes later was read before it by another worker)")
        return ReadOrderError(f"{what}: reads in a trace must follow the forward's order; "
                              f"model.support() lists each host's values in that order")
    if reached is False:
        return ReadOrderError(f"{name} was read after {before}, and the forward never reached {name} after that "
                              f"point: reads must follow the forward's order (model.support() lists each host's "
                              f"values in that order); read {name} in a trace of its own")
    return ReadOrderError(f"{name} was read after {before}, but the forward computes {name} first: reads in a "
                          f"trace must follow the forward's order; read {name} before {before}, or in a trace "
                          f"of its own (model.support() lists each host's values in forward order)")


def grad_out_of_order(error: OutOfOrderError, name: str) -> ReadOrderError:
    """The error for ``name.grad`` that the backward never served (read too late, or not on the loss's path)."""
    before = _last()
    later = (f" after {before}.grad; gradients arrive in reverse forward order, so read {name}.grad first"
             if before is not None else "")
    return ReadOrderError(f"{name}.grad was requested{later}; if the order is right, the loss does not depend on "
                          f"{name} (a later block's value, or one the forward never uses), so no gradient reaches it")



class ShapeMismatch(ValueError):
    """A value assigned a tensor of another shape than the one the model holds there."""


class EditTypeError(TypeError):
    """A value assigned something that is not a tensor of the dtype the model holds there."""


def check_shape(name: str, layout, new, current) -> None:
    """Refuse assigning ``new`` to ``name`` unless it is a tensor of the shape and dtype the model holds there."""
    import torch

    if isinstance(current, torch.Tensor):  # else the forward fails later, in the model's code, on a list's .dtype
        if not isinstance(new, torch.Tensor):
            raise EditTypeError(f"{name} = {type(new).__name__}: assign a tensor of the value's shape "
                                f"{list(current.shape)} and dtype {current.dtype}, or edit it in place ([...] = ...)")
        if new.dtype != current.dtype:
            raise EditTypeError(f"{name} is {current.dtype}; the assigned tensor is {new.dtype}: assign "
                                f"tensor.to({current.dtype})")
    shape = getattr(new, "shape", None)
    held = getattr(current, "shape", None)
    if shape is None or held is None or tuple(shape) == tuple(held):
        return
    raise ShapeMismatch(f"{name} is {layout}, here {list(held)}; the assigned tensor is {list(shape)}: "
                        f"assign a tensor of the value's own shape (edit a slice in place to change part of it)")
