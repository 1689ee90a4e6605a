"""Hosts: the nnsight Envoy classes that carry standard values.

A host class is an Envoy subclass whose class body holds one `ValueProperty` per value.
Families build them by subclassing the shared hosts in `nncanon.parts` (`decoder`, `attention`, `mlp`, `mixture`, ...) and
friends; `host()` makes one from a list of values. The support table lists a host's values
base class first (so a family's additions come after the shared ones), print(model) lists
them as nnsight does, most derived class first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from nnsight.intervention.envoy import Envoy
from nnsight.intervention.eproperty import eproperty

from ..guards.errors import OutsideTrace
from ..research.weights import NORMS as NORM_WEIGHTS
from .values import NotOnHost, Unavailable, Value, ValueProperty


class _Boundary(eproperty):
    """nnsight's ``.output``/``.input``/``.inputs``, whose read outside a trace names the standard path and value,
    not nnsight's internal ``model.model.layers.0.output``."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        try:
            return super(_Boundary, self).__get__(obj, owner)
        except ValueError as error:
            if obj is None or "outside of interleaving" not in str(error):
                raise
            io = "output" if self.key == "output" else "input"
            same = [v.name for v in type(obj).values()
                    if v.locator.io == io and v.locator.module is None and not v.locator.ops]
            standard = f"; the standard value there is {obj._standard_path()}.{same[0]}" if same else ""
            raise OutsideTrace(f"{obj._standard_path()}.{self.name} is read inside a `with model.trace(...)` block: "
                               f"outside one no forward runs to read it from{standard}") from None

    def __reduce__(self):
        # a host class shipped by value to NDIF carries this descriptor; nnsight's own eproperty does not pickle,
        # so it is rebuilt on the other side from the Envoy attribute it wraps
        return _boundary_of, (self.name,)


def _boundary_of(name: str) -> eproperty:
    return _boundary(Envoy.__dict__[name])


def _boundary(served: eproperty) -> eproperty:
    named = _Boundary(key=served.key, description=served.description)
    named.__dict__.update(served.__dict__)  # its name, preprocess, postprocess and write-back
    return named


class Host(Envoy):
    """An Envoy that serves standard values and explains the ones it does not have."""

    #: the standard host name in tables and errors, e.g. ``model.layers[i].mlp``
    HOST: ClassVar[str] = ""
    #: what kind of module this host is, in errors: ``dense MLP``, ``mixture MLP``
    KIND: ClassVar[str] = ""

    # Set by StandardModel when it builds the tree, so a read needs no parent walk.
    _std_model: Any = None
    _std_path: str = ""

    output = _boundary(Envoy.__dict__["output"])
    input = _boundary(Envoy.__dict__["input"])
    inputs = _boundary(Envoy.__dict__["inputs"])
    #: every norm's gain and bias (attention_norm_w, ...): views of the norm's parameters (nncanon.weights)
    locals().update(NORM_WEIGHTS)

    @classmethod
    def kind(cls) -> str:
        return cls.KIND or cls.__name__

    @classmethod
    def values(cls) -> list[Value]:
        """Every value of this host, base classes' first, an override keeping its place."""
        order: dict[str, Value] = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                if isinstance(attr, ValueProperty):
                    order[attr.name] = attr.value
        return list(order.values())

    def _standard_path(self) -> str:
        return self._std_path or self.path

    def _require(self, value: Value) -> None:
        model = self._std_model
        for condition in value.conditions:
            if model is None or not condition.holds(model):
                raise Unavailable(f"{self._standard_path()}.{value.name} is unavailable: "
                                  + (condition.why if not condition.needs else condition.message(value.name)))
        moved = model is not None and model.missing_op(type(self), value.name)
        if moved:
            raise Unavailable(f"{self._standard_path()}.{value.name} is unavailable: {moved}")

    def __getattr__(self, name: str) -> Any:
        try:
            found = super(Host, self).__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_std_model")
            explain = getattr(model, "_explain_missing", None)
            if explain is not None:
                message = explain(self, name)
                if message:
                    raise NotOnHost(message) from None
            raise
        if found is None and name in (getattr(type(self), "MIXERS", None) or ()):
            # a hybrid block may keep the mixer it lacks as a None attribute (granitemoehybrid's self_attn): reading
            # a value there was a bare "'NoneType' object has no attribute"; say which mixer the block has instead
            explain = getattr(self.__dict__.get("_std_model"), "_explain_missing", None)
            raise NotOnHost((explain and explain(self, name)) or f"{self._std_path} has no {name}: its module "
                            f"({type(self._module).__name__}) holds None there; print(model.support()) lists what "
                            "each block has")
        return found


def pattern(path: str) -> str:
    """A standard path with its indices as ``[i]``: ``model.layers[3].mlp`` -> ``model.layers[i].mlp``."""
    return re.sub(r"\[\d+\]", "[i]", path)


def index(path: str) -> int | None:
    """The first index of a standard path (the block), or None: ``model.layers[3].mlp`` -> 3."""
    found = re.search(r"\[(\d+)\]", path)
    return int(found.group(1)) if found else None


def span(blocks: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` -> ``"blocks 0-2, 5"``; ``(3,)`` -> ``"block 3"``."""
    runs: list[list[int]] = []
    for block in sorted(blocks):
        if runs and block == runs[-1][-1] + 1:
            runs[-1].append(block)
        else:
            runs.append([block])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
    return f"block {text}" if len(blocks) == 1 else f"blocks {text}"


@dataclass(frozen=True)
class HostKind:
    """One kind of host on a loaded model: a standard path pattern and the module class under it.

    A stack may put different modules at one path (dense MLPs on the first blocks, mixtures after):
    each (path, module class) is a kind of its own, with its host class and the blocks it covers.
    """

    host: str  #: the standard path pattern, ``model.layers[i].mlp``
    cls: type  #: the host class (its values)
    native: str  #: the module class name, ``Qwen3MoeSparseMoeBlock``
    blocks: tuple[int, ...] | None  #: the blocks (first index) it stands at; None for a path with no index
    paths: tuple[str, ...]  #: the standard paths of every module of this kind

    @property
    def covers(self) -> str:
        """``"blocks 1, 3"``, or ``""`` for a host with no index."""
        return span(self.blocks) if self.blocks else ""

    def has(self, name: str) -> bool:
        return any(v.name == name for v in self.cls.values())


class Stack(Envoy):
    """The envoy of a ``ModuleList`` (``model.layers``): an index past its end names how many entries it has."""

    _std_path: str = ""

    def __getitem__(self, key: Any) -> Any:
        size = len(self)
        if isinstance(key, int) and not -size <= key < size:
            children = [child for _, child in self._named_children()]
            noun = "blocks" if children and isinstance(children[0], Host) else "entries"
            raise IndexError(f"{self._std_path or self.path}[{key}] is out of range: "
                             f"{self._std_path or self.path} has {size} {noun} (0 to {size - 1})")
        return super(Stack, self).__getitem__(key)


def host(name: str, *bases: type[Host], values: list[Value] | tuple[Value, ...] = (), **attrs: Any) -> type[Host]:
    """A host class named ``name`` over ``bases`` that adds (or overrides) ``values``."""
    body: dict[str, Any] = {v.name: ValueProperty(v) for v in values}
    body.update(attrs)
    return type(name, bases or (Host,), body)
