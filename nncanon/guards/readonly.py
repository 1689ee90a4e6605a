"""Read-only values refuse in-place edits as they refuse assignment.

A value with no write view (``next_token_probs``, ``attention_sink_probability``, ``input_ids``) is
either a tensor computed for the reader, which the forward never uses again (an edit of it would change
nothing), or one of the call's own inputs, which nncanon does not offer as an edit point. An assignment
is refused in the value descriptor; an in-place edit (``probs[:] = 0``, ``probs.zero_()``, ``probs += 1``)
never passes through it, so the served tensor itself refuses: it is served as a `ReadOnlyTensor`, an alias
of the same storage whose ``__torch_function__`` raises `ReadOnly` for an op that writes into it while a
trace runs. Every other op returns a plain tensor, so nothing downstream is a subclass; after the trace a
saved value is an ordinary tensor to the user's own code (an edit then is the user's copy), and it
pickles as a plain tensor (a remote trace sends it back to a client with or without nncanon).
"""

from __future__ import annotations

from typing import Any

import torch

#: ops whose names end in ``_`` but do not write the tensor's elements
_NOT_EDITS = frozenset({"requires_grad_", "share_memory_", "retain_grad"})
_AUGMENTED = frozenset(f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and",
                                                "or", "xor", "lshift", "rshift", "matmul"))


class ReadOnly(Exception):
    """A derived or read-only value was assigned to, or edited in place inside a trace.

    Not a TypeError: torch turns a TypeError raised inside ``t += 1`` into NotImplemented, and Python then
    rebinds ``t`` to ``t + 1``, silently.
    """


def refusal(where: str, value: Any) -> ReadOnly:
    """The one-line error for editing the read-only ``value`` read at ``where`` (a standard path)."""
    if value.view.derived:
        why = ("it is computed for the reader from what the forward holds, so an edit would reach nothing; "
               "edit the value it is computed from, or a copy (.clone())")
    else:
        why = "nncanon serves it to read, not as an edit point; edit a value the forward computes from it"
    return ReadOnly(f"{where} is read-only ({value.description}): {why}")


def _edits(func: Any, args: tuple, kwargs: dict | None) -> bool:
    """Whether calling ``func`` writes into the ReadOnlyTensor it was dispatched for."""
    name = getattr(func, "__name__", "")
    target = args[0] if args else None
    if isinstance(target, ReadOnlyTensor) and (
            name == "__setitem__" or name in _AUGMENTED or
            (name.endswith("_") and not name.startswith("__") and name not in _NOT_EDITS)):
        return True
    out = (kwargs or {}).get("out")
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(o, ReadOnlyTensor) for o in outs)


def _tracing() -> bool:
    from .errors import _mediator

    return _mediator() is not None


class ReadOnlyTensor(torch.Tensor):
    """A served read-only value: the same storage, refusing in-place edits inside a trace."""

    #: (standard path, Value) of what was read, for the error
    _nncanon_read: tuple

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if _edits(func, args, kwargs) and _tracing():
            target = args[0] if isinstance(args[0], ReadOnlyTensor) else kwargs["out"]
            raise refusal(*target._nncanon_read)
        with torch._C.DisableTorchFunctionSubclass():
            if getattr(func, "__name__", "") == "__repr__":  # prints as the tensor it is
                return args[0].as_subclass(torch.Tensor).__repr__()
            return func(*args, **(kwargs or {}))

    def __reduce_ex__(self, protocol: int) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            return self.as_subclass(torch.Tensor).__reduce_ex__(protocol)


def protect(served: Any, where: str, value: Any) -> Any:
    """``served`` as a `ReadOnlyTensor` aliasing its storage; a non-tensor (a shape) as it is."""
    if not isinstance(served, torch.Tensor):
        return served
    guarded = served.as_subclass(ReadOnlyTensor)
    guarded._nncanon_read = (where, value)
    return guarded
