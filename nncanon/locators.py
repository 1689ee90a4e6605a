"""Locators: where in the forward a value is read.

A locator names a point nnsight serves — a module's input or output, a child module's, an
operation inside a forward reached with nnsight's ``.source`` (nested ops drilled into
with ``.source`` again), or a point this library serves itself (`Tap`) — and which part
of what is served there the value is (an element of a tuple, a keyword argument, an
attribute of a model output). The "read at" sentence of the support tables is generated
from it (`read_at`), so the table cannot drift from the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIRST = "first"  # the first positional input, or the first element of a tuple output


@dataclass(frozen=True)
class Locator:
    """A module's input or output, optionally at an operation inside its forward.

    ``module`` is the child's native attribute path from the host (None: the host
    itself); ``shown`` is how the sentence names it (the standard name, e.g. ``router``
    for ``gate``). ``ops`` is the chain of ``.source`` operations, outermost first.
    ``element``: None for the whole served value, FIRST, an int (tuple element or
    positional argument) or a str (keyword argument). ``attr`` reads an attribute of the
    selected object (``logits`` of a model output).
    """

    io: str = "output"
    module: str | None = None
    shown: str | None = None
    ops: tuple[str, ...] = ()
    element: Any = None
    attr: str | None = None

    # -- where ------------------------------------------------------------

    def target(self, host: Any) -> Any:
        """The nnsight object whose ``path`` the location hangs off (drills nested ops)."""
        envoy = host if self.module is None else host.get(self.module)
        for op in self.ops:
            # The first level is installed at load; a nested one is drilled now, which
            # parks until the enclosing op runs: only legal inside a trace.
            envoy = getattr(envoy.source, op)
        return envoy

    def location(self, host: Any) -> str:
        return f"{self.target(host).path}.{self.io}"

    def sourced_modules(self) -> tuple[str | None, ...]:
        """The modules whose ``.source`` must be installed before a trace."""
        return (self.module,) if self.ops else ()

    # -- what part --------------------------------------------------------

    def select(self, raw: Any) -> Any:
        if self.io == "input":
            args, kwargs = raw
            if self.element is None or self.element == FIRST:
                value = args[0] if args else next(iter(kwargs.values()))
            elif isinstance(self.element, int):
                value = args[self.element]
            else:
                value = kwargs[self.element]
        else:
            value = raw
            if self.element == FIRST:
                value = raw[0] if isinstance(raw, tuple) else raw
            elif self.element is not None:
                value = raw[self.element]
        return getattr(value, self.attr) if self.attr else value

    def replace(self, raw: Any, new: Any) -> Any:
        """``raw`` with the selected part swapped for ``new``."""
        if self.attr:
            holder = self.select_holder(raw)
            setattr(holder, self.attr, new)
            return raw
        if self.io == "input":
            args, kwargs = raw
            args, kwargs = list(args), dict(kwargs)
            if self.element is None or self.element == FIRST:
                if args:
                    args[0] = new
                else:
                    kwargs[next(iter(kwargs))] = new
            elif isinstance(self.element, int):
                args[self.element] = new
            else:
                kwargs[self.element] = new
            return tuple(args), kwargs
        if self.element is None or (self.element == FIRST and not isinstance(raw, tuple)):
            return new
        index = 0 if self.element == FIRST else self.element
        return (*raw[:index], new, *raw[index + 1:])

    def select_holder(self, raw: Any) -> Any:
        return Locator(self.io, element=self.element).select(raw)

    # -- the sentence -----------------------------------------------------

    def part(self) -> str:
        if self.element is None or self.element == FIRST:
            return ""
        if isinstance(self.element, int):
            return f", element {self.element}"
        return f", argument {self.element}"

    def read_at(self) -> str:
        name = self.shown or self.module
        if not self.ops:
            plural = self.io == "input" and isinstance(self.element, (int, str)) and self.element != FIRST
            what = ("inputs" if plural else "input") if self.io == "input" else "output"
            attr = f", field {self.attr}" if self.attr else ""
            where = "the module's own" if self.module is None else f"the child module {name}'s"
            return f"{where} {what}{attr}{self.part()}"
        scope = "inside the forward" if self.module is None else f"inside {name}'s forward"
        *outer, op = self.ops
        if self.io == "input":
            what = "the input of" if self.part() == "" else "the arguments of"
        else:
            what = "the output of"
        inside = "".join(f" inside {o}" for o in reversed(outer))
        return f"{scope}: {what} {op}{inside}{self.part()}"


@dataclass(frozen=True)
class Tap(Locator):
    """A point this library serves itself, where no module or op boundary stands.

    The family's code calls ``serve(host_envoy, name, io, value)`` at it (see
    `nncanon.kernels`); ``described`` is the sentence's name for it.
    """

    name: str = ""
    described: str = ""

    def target(self, host: Any) -> Any:
        return host

    def location(self, host: Any) -> str:
        return f"{host.path}.{self.name}.{self.io}"

    def sourced_modules(self) -> tuple[str | None, ...]:
        return ()

    def read_at(self) -> str:
        what = "the arguments of" if self.io == "input" else "the output of"
        return f"inside the forward: {what} {self.described}{self.part()}"


def own(io: str = "output", **kw: Any) -> Locator:
    return Locator(io=io, **kw)


def child(module: str, io: str = "output", shown: str | None = None, **kw: Any) -> Locator:
    return Locator(io=io, module=module, shown=shown, **kw)


def op(*ops: str, io: str = "output", module: str | None = None, shown: str | None = None, **kw: Any) -> Locator:
    return Locator(io=io, module=module, shown=shown, ops=ops, **kw)
