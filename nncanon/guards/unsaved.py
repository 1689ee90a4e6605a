"""A name assigned inside a trace but not saved, said as such where it is used after the trace.

nnsight runs a trace's body in a scratch namespace and writes back into the caller's frame only what was marked
with ``.save()`` (``nnsight.tracing.tracer.push_result``). Everything else the body assigned is simply absent
afterwards, and its first use is Python's bare ``UnboundLocalError: cannot access local variable 'x'`` (in a
function) or ``NameError: name 'x' is not defined`` (in a script or notebook), which says nothing of ``.save()``.
A list built inside the trace (``outs = []``, then ``outs.append(...)``) is the commonest case.

`SavingTracer` is the trace class ``StandardModel.trace`` hands nnsight (its ``tracer_cls`` extension point). After
the outermost trace has run, each name the body stored that is still absent from the caller's frame is bound to a
`NotSaved` placeholder: any use of it (an attribute, an index, arithmetic, printing, iterating, calling) raises
`NotSavedError` in one line naming the variable and the fix. A name that already held a value before the trace is
left as it is (nnsight leaves it too), and nothing is bound inside an enclosing trace or session, whose own body
receives everything an inner trace assigned.
"""

from __future__ import annotations

import dis
from types import CodeType, FrameType
from typing import Any, NoReturn

from nnsight.intervention.tracer import InterleavingTracer
from nnsight.tracing import tracer as _tracing
from nnsight.tracing.util import push

_STORES = {"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"}


class NotSavedError(NameError):
    """A variable assigned inside a trace, used after it without having been saved. A ``NameError``, as the bare
    error it replaces was (``UnboundLocalError`` is one too)."""


def message(name: str) -> str:
    return (f"{name!r} was assigned inside the trace but not saved, so it holds nothing after it: save it inside the "
            f"trace ({name} = <value>.save(), or nnsight.save({name}) after its last assignment there: a list, a dict, "
            f"a number)")


class NotSaved:
    """What an unsaved name holds after the trace: every use raises `NotSavedError` naming it."""

    __slots__ = ("_nncanon_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_nncanon_name", name)

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotSavedError(message(object.__getattribute__(self, "_nncanon_name")))

    def __getattr__(self, attribute: str) -> NoReturn:
        if attribute.startswith("_"):  # a library's probe (getattr(x, "_base", None), hasattr): absent, as for any
            raise AttributeError(message(object.__getattribute__(self, "_nncanon_name")))  # object without it
        self._refuse()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> NoReturn:
        from torch.utils._pytree import tree_leaves

        # torch hands the placeholder in wherever it sat, a list's element too (torch.stack([x]))
        next(a for a in tree_leaves((args, kwargs or {})) if isinstance(a, NotSaved))._refuse()


#: every operation a variable is commonly used by after a trace (a tensor's, a list's, a number's), each refused
for _name in (
    "__repr__ __str__ __format__ __bool__ __len__ __iter__ __reversed__ __contains__ __getitem__ __setitem__ "
    "__delitem__ __call__ __setattr__ __delattr__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __index__ "
    "__int__ __float__ __complex__ __neg__ __pos__ __abs__ __invert__ __array__ __dlpack__ "
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __matmul__ __rmatmul__ __truediv__ __rtruediv__ "
    "__floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ "
    "__lshift__ __rlshift__ __rshift__ __rrshift__ __enter__ __exit__"
).split():
    setattr(NotSaved, _name, NotSaved._refuse)


def stored_names(code: CodeType) -> set[str]:
    """The names a trace body binds in its own scope (assignments, loop targets, imports, ``with ... as``); not
    those of the functions or comprehensions it defines, which have scopes of their own."""
    return {i.argval for i in dis.get_instructions(code) if i.opname in _STORES}


class SavingTracer(InterleavingTracer):
    """nnsight's trace, binding each name the body assigned but did not save to a `NotSaved` placeholder."""

    def __exit__(self, exc_type: Any, exc_value: Any, exc_traceback: Any) -> bool:
        info = self.info
        frame, code = (info.frame, info.code) if info is not None else (None, None)
        handled = super(SavingTracer, self).__exit__(exc_type, exc_value, exc_traceback)
        outermost = getattr(_tracing._local, "depth", 0) == 0
        if handled and outermost and isinstance(frame, FrameType) and isinstance(code, CodeType):
            present = frame.f_locals  # a script's or notebook's globals; a function's locals (fresh on 3.11)
            absent = sorted(n for n in stored_names(code) if n not in present)
            if absent:
                push(frame, {name: NotSaved(name) for name in absent})
        return handled
