"""Hosts: the nnsight Envoy classes that carry standard values.

A host class is an Envoy subclass whose class body holds one `ValueProperty` per value.
Families build them by subclassing the shared hosts in `nncanon.families._decoder` and
friends; `host()` makes one from a list of values. The support table lists a host's values
base class first (so a family's additions come after the shared ones), print(model) lists
them as nnsight does, most derived class first.
"""

from __future__ import annotations

from typing import Any, ClassVar

from nnsight.intervention.envoy import Envoy

from .values import NotOnHost, Unavailable, Value, ValueProperty


class Host(Envoy):
    """An Envoy that serves standard values and explains the ones it does not have."""

    #: the standard host name in tables and errors, e.g. ``model.layers[i].mlp``
    HOST: ClassVar[str] = ""

    # Set by StandardModel when it builds the tree, so a read needs no parent walk.
    _std_model: Any = None
    _std_path: str = ""

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

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_std_model")
            explain = getattr(model, "_explain_missing", None)
            if explain is not None:
                message = explain(self, name)
                if message:
                    raise NotOnHost(message) from None
            raise


def host(name: str, *bases: type[Host], values: list[Value] | tuple[Value, ...] = (), **attrs: Any) -> type[Host]:
    """A host class named ``name`` over ``bases`` that adds (or overrides) ``values``."""
    body: dict[str, Any] = {v.name: ValueProperty(v) for v in values}
    body.update(attrs)
    return type(name, bases or (Host,), body)
