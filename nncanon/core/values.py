"""Values: a standard name for one point of the forward, declared as data.

A `Value` is a name, a `Layout`, a one-line description, a `Locator` (where it is read),
an optional view (how the served tensor is reshaped into the layout, and back for an
assignment) and the `Condition`s under which the current load serves it. A host class
(an nnsight Envoy subclass, see `nncanon.core.hosts`) carries one `ValueProperty` per value,
so ``model.layers[1].mlp.router_logits`` reads like any nnsight attribute and shows up in
``print(model)``.

Views are views: an in-place edit of what a read returns lands in the model's own tensor;
an assignment is rebuilt into the model's layout and swapped in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator, OutOfOrderError

from ..guards import releases, stale
from ..guards.errors import OutsideTrace, check_shape, read_out_of_order, remember_read
from ..guards.readonly import protect, refusal
from ..research import grads
from .layouts import Layout
from .locators import FamilyMismatch, Locator, MissingOp


class Unavailable(Exception):
    """The current load cannot serve this value; the message says what would make it available.

    Not an AttributeError: a property getter raising one would be swallowed into
    ``__getattr__`` and resurface as a bare "has no attribute".
    """


class NotOnHost(Unavailable, AttributeError):
    """A standard name asked of a host that does not have it (self_attn on a DeltaNet block).

    An AttributeError too, so ``hasattr`` stays False and nnsight's alias lookups skip it.
    """


@dataclass(frozen=True)
class Condition:
    """A requirement of the load: ``needs`` is what the user does to meet it.

    ``holds(model)`` is evaluated on the `StandardModel`; ``why`` says in a clause why
    the value needs it.
    """

    needs: str
    why: str
    holds: Callable[[Any], bool]

    def message(self, name: str) -> str:
        return f"{name} needs {self.needs}: {self.why}"


def never(reason: str) -> Condition:
    """A condition no load meets: the value does not exist on this family's host."""
    return Condition(needs="", why=reason, holds=lambda model: False)


@dataclass(frozen=True)
class View:
    """How a selected tensor becomes the layout (``read``) and back (``write``).

    Both get the host envoy, so a view can ask it for sizes (the token shape of the
    current call, the head count); ``write(host, new, current)`` also gets the tensor the
    model holds there now, for a view that shows only part of it (one invoke's rows).
    ``write`` None: the value cannot be assigned.
    """

    name: str
    read: Callable[[Any, Any], Any]
    write: Callable[[Any, Any], Any] | None
    #: ``read`` computes a new tensor (a softmax, a shape) instead of viewing the model's
    derived: bool = False


#: layouts whose values are integers: ids, masks, indices, sizes
_INTEGER_LAYOUTS = ("Tokens", "ExpertIndices", "scalar", "ImageTokenMask")

IDENTITY = View("identity", lambda host, x: x, lambda host, x, current: x)


@dataclass(frozen=True)
class Value:
    name: str
    layout: Layout
    description: str
    locator: Locator
    view: View = IDENTITY
    conditions: tuple[Condition, ...] = ()
    #: shown in the support table beside the ⚠︎ mark: a sentence, or a function of the model
    #: for one that depends on its config (the size of ``states``)
    note: str | Callable[[Any], str] | None = None
    #: assignment copies into the model's tensor instead of swapping it, for a tensor the
    #: forward reads twice (layer_mid is both the MLP norm's input and the residual), so an
    #: assignment reaches every reader, as an in-place edit does
    assign_in_place: bool = False
    #: where an edit of this value shows: "this call" (its logits), or "the next call" for a value the
    #: forward only hands on (a state written to the cache), whose edit reaches the next decode step
    reaches: str = "this call"
    #: why ``.grad`` of this value cannot exist, where its layout, view and reach do not say it already
    #: (a stack made only for the reader); see `gradient`
    no_grad: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def gradient(self) -> str | None:
        """None when the value has a gradient inside ``with loss.backward():``, else why it cannot."""
        if self.no_grad is not None:
            return self.no_grad
        if self.layout.name in _INTEGER_LAYOUTS:
            return f"it holds integers ({self.layout.name}), which autograd does not differentiate"
        if self.view.derived:
            return "it is derived for the reader (a copy the forward never uses), so no gradient reaches it"
        if self.reaches != "this call":
            return "the forward only hands it to the cache for the next call: this call's outputs do not depend on it"
        return None

    @property
    def writable(self) -> bool:
        return self.view.write is not None

    def read_at(self) -> str:
        return self.locator.read_at()

    def line(self) -> str:
        """The line print(model) shows for this value."""
        arrow = f" -> {self.layout}" if self.layout.typed else ""
        return f"({self.name}){arrow}: {self.description}"


class ValueProperty(eproperty):
    """The descriptor a host class carries for one `Value`.

    An `eproperty` so nnsight's repr lists it; reads and writes go straight through the
    interleaver at the value's location, so there is no write-back to flush: the views
    alias the model's tensors.
    """

    def __init__(self, value: Value) -> None:
        super(ValueProperty, self).__init__(key=value.name, description=value.description)
        self.name = value.name
        self.value = value
        self.__doc__ = f"{value.layout}: {value.description}"

    def __str__(self) -> str:
        return self.value.line()

    def __reduce__(self) -> tuple:
        # A property does not pickle; a host class shipped by value to NDIF (nncanon.core.remote) carries its
        # values as their data and rebuilds the descriptor from it.
        return type(self), (self.value,)

    def __get__(self, host: Any, owner: Any = None) -> Any:
        if host is None:
            return self
        value = self.value
        location, where, raw = self._raw(host)
        selected = self._select(raw, where)
        served = value.view.read(host, selected)
        if value.view.write is None:  # an in-place edit is refused as an assignment is (nncanon.guards.readonly)
            served = protect(served, where, value)
        mediator = remember_read(where)
        run = stale.current_run(mediator)
        stale.stamp(served, run)
        stale.check(mediator, run)
        return grads.mark(served, selected, where, value.gradient)

    def _select(self, raw: Any, where: str) -> Any:
        """The value's part of what its location serves; a part the call does not have (a release that calls the
        op with other arguments) is `Unavailable` naming the release, never a bare IndexError."""
        try:
            return self.value.locator.select(raw)
        except (IndexError, KeyError) as error:
            raise Unavailable(f"{where} is unavailable: it is read at {self.value.read_at()}, which "
                              f"{releases.named()} does not pass there ({type(error).__name__}: {error})") from None

    def _raw(self, host: Any) -> tuple[str, str, Any]:
        """The value's location, standard path and the native object it is read from, in forward order: an
        out-of-order request is re-raised naming the standard values."""
        host._require(self.value)
        where = f"{host._standard_path()}.{self.value.name}"
        try:
            # inside the try: locating a nested op (an op of an op's .source) already waits on the forward
            location = self._location(host)
            return location, where, Mediator.value(location)
        except OutOfOrderError as error:
            named = read_out_of_order(error, where)
            if named is None:  # a tracer.iter loop that outran the run: nnsight's own to warn about
                raise
            raise named from None
        except ValueError as error:
            if "outside of interleaving" not in str(error):
                raise
            raise OutsideTrace(f"{where} is read inside a `with model.trace(...)` (or model.cache) block: outside one "
                               f"no forward runs to read it from") from None

    def _location(self, host: Any) -> str:
        """The value's location on ``host``; an op the forward lacks is a `MissingOp` naming the value.

        Never an AttributeError: raised from a property getter, it would resurface as a bare
        "has no attribute" for the value's own name.
        """
        try:
            return self.value.locator.location(host)
        except MissingOp as error:
            raise error.explained(self._where(host)) from None
        except AttributeError as error:
            raise FamilyMismatch(f"{self._where(host)} is read at {self.value.read_at()}, which does not "
                                 f"resolve: {error}") from None

    def _where(self, host: Any) -> str:
        return f"{host._standard_path()}.{self.name} ({type(host).__name__} on {type(host._module).__name__})"

    def __set__(self, host: Any, new: Any) -> None:
        value = self.value
        if value.view.write is None:
            raise refusal(f"{host._standard_path()}.{value.name}", value)
        location, where, raw = self._raw(host)
        current = self._select(raw, where)
        check_shape(where, value.layout, new, value.view.read(host, current))
        written = value.view.write(host, new, current)
        if value.assign_in_place:
            value.locator.select(raw).copy_(written)
        else:
            Mediator.swap(location, value.locator.replace(raw, written))
