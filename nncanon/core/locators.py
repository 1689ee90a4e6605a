"""Locators: where in the forward a value is read.

A locator names a point nnsight serves — a module's input or output, a child module's, an
operation inside a forward reached with nnsight's ``.source`` (nested ops drilled into
with ``.source`` again), or a point this library serves itself (`Tap`) — and which part
of what is served there the value is (an element of a tuple, a keyword argument, an
attribute of a model output). The "read at" sentence of the support tables is generated
from it (`read_at`), so the table cannot drift from the code.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

FIRST = "first"  # the first positional input, or the first element of a tuple output


class FamilyMismatch(ValueError):
    """A declared standard path, or an op a value reads, does not resolve on the loaded model."""


class MissingOp(FamilyMismatch):
    """An op a locator names is not in the forward it drills into.

    ``where`` names that forward, ``names`` are the ops it has; `StandardModel` and the value
    descriptors re-raise it naming the value and the host (`explained`).
    """

    def __init__(self, op: str, where: str, names: tuple[str, ...] = (), reason: str | None = None,
                 value: str | None = None) -> None:
        self.op, self.where, self.names, self.reason, self.value = op, where, tuple(names), reason, value
        message = self.describe()
        if value is not None:
            message = (f"{value} reads the op {op}, but {message}; the family calls something else there: "
                       f"fix the value's locator, or serve it from another host class")
        super(MissingOp, self).__init__(message)

    def describe(self) -> str:
        if self.reason:
            return f"{self.op} in {self.where}: {self.reason}"
        stem = _stem(self.op)
        hits = [n for n in self.names if stem in n]
        close = difflib.get_close_matches(self.op, self.names, n=8, cutoff=0.6)
        if hits:
            found = f"the ops there with {stem!r}: {', '.join(hits[:8])}"
        elif close:
            found = f"the ops there spelled like it: {', '.join(close)}"
        else:
            more = ", ..." if len(self.names) > 12 else ""
            found = f"no op there has {stem!r}; its ops: {', '.join(self.names[:12])}{more}"
        return f"{self.where} has no op {self.op} ({found})"

    def explained(self, value: str) -> MissingOp:
        """This error naming the value (``model.layers[0].self_attn.attention_scores``) that reads the op."""
        return MissingOp(self.op, self.where, self.names, self.reason, value)


_GENERIC = {"nn", "functional", "torch", "F", "self", "call"}


def _stem(op: str) -> str:
    """The called function's own name in an op label: ``nn_functional_softmax_0`` -> ``softmax``."""
    words = [w for w in re.sub(r"_\d+$", "", op).split("_") if w and w not in _GENERIC]
    return words[-1] if words else op


class Call(str):
    """An op label that names a call of ``callee`` (its ``nth`` call in the forward): the label is the one the
    locked release gives it (the page shows it), and a release that numbers the function's ops differently is
    searched for the call by what it calls. nnsight numbers calls and assignments of one name together, so
    ``attention_interface = ...; attention_interface(...)`` is ``attention_interface_1`` at the call on 5.23,
    and 5.0's forward, which binds the name twice before calling it, has it at ``attention_interface_2``."""

    callee: str
    nth: int

    def __new__(cls, label: str, nth: int = 0) -> Call:
        made = super(Call, cls).__new__(cls, label)
        made.callee, made.nth = re.sub(r"_\d+$", "", label), nth
        return made

    def __reduce__(self):  # a locator shipped to NDIF stays a Call
        return (Call, (str(self), self.nth))


def call(label: str, nth: int = 0) -> Call:
    return Call(label, nth)


def resolve(op: str, compiled: Any) -> str:
    """The label ``op`` has in ``compiled`` (an nnsight ``Compiled``): ``op`` itself, or for a `Call` whose label is
    not a call of its callee there, that callee's ``nth`` call; ``op`` when there is none (the caller says so)."""
    if not isinstance(op, Call):
        return op
    calls = _calls_in(compiled)
    if calls is None:
        return op
    if op in compiled.names and calls.get(op) == op.callee:
        return str(op)
    found = [label for label in compiled.names if calls.get(label) == op.callee]
    return found[op.nth] if op.nth < len(found) else str(op)


_CALLS: dict[str, dict | None] = {}


def _calls_in(compiled: Any) -> dict[str, str] | None:
    """label -> the called name, for each op of ``compiled`` that calls a plain name (an assignment, an attribute
    call: absent); None when the labels cannot be reproduced from its source."""
    import ast

    from nnsight.intervention.source import BIND, Instrument

    text = compiled.source
    if text not in _CALLS:
        calls: dict[str, str] = {}

        class Labels(Instrument):
            def wrap(self, name, fn, args, keywords, node):
                wrapped = super(Labels, self).wrap(name, fn, args, keywords, node)
                if isinstance(fn, ast.Name) and fn.id != BIND:
                    calls[self.names[-1]] = fn.id
                return wrapped

        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        labels = None
        if tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            tree.body[0].decorator_list = []
            visitor = Labels()
            visitor.visit(tree)
            labels = visitor.names
        _CALLS[text] = calls if labels is not None and tuple(labels) == tuple(compiled.names) else None
    return _CALLS[text]


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

    def base(self, host: Any) -> Any:
        """The module envoy whose forward the ops are in (or whose input or output is read)."""
        return host if self.module is None else host.get(self.module)

    def target(self, host: Any) -> Any:
        """The nnsight object whose ``path`` the location hangs off (drills nested ops).

        Raises `MissingOp` when an op is not in the forward it is looked for in.
        """
        envoy = self.base(host)
        where = f"{type(envoy._module).__name__}.forward"
        for op in self.ops:
            # The first level is installed at load; a nested one is drilled now, which
            # parks until the enclosing op runs: only legal inside a trace.
            source = envoy.source
            op = resolve(op, source.compiled)
            if op not in source.names:
                raise MissingOp(op, where, source.names)
            envoy, where = getattr(source, op), f"the function {op} calls"
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
        swapped = (*raw[:index], new, *raw[index + 1:])
        # a module returning a list (GPT-1's blocks and attention) gets one back: its caller may add lists to it
        return list(swapped) if isinstance(raw, list) else swapped

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
    `nncanon.core.kernels`); ``described`` is the sentence's name for it.
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


# -- checking a locator's ops before any trace ------------------------------------------------


def check_ops(envoy: Any, ops: tuple[str, ...]) -> None:
    """Check, without running the model, that ``ops`` exist in ``envoy``'s forward and the functions it calls.

    The first op is looked up in the module's forward (installing its ``.source``). A nested op lives in the
    function the op before it calls, which nnsight finds only at run time; here that callee is resolved
    statically, by evaluating the call's function expression when it depends only on the module, globals,
    closure cells and locals assigned once from those (an attention interface picked from the config).
    A level that cannot be resolved so is left to the read, which names the missing op the same way.
    Raises `MissingOp`.
    """
    from nnsight.intervention.source import STATE, decorator_chain

    compiled = envoy.source.compiled
    module = envoy._module
    function, _ = decorator_chain(module.__dict__[STATE].original)
    receiver, where = module, f"{type(module).__name__}.forward"
    for depth, op in enumerate(ops):
        op = resolve(op, compiled)
        if op not in compiled.names:
            raise MissingOp(op, where, compiled.names)
        if depth == len(ops) - 1:
            return
        callee = _callee(function, receiver, op)
        if callee is _UNKNOWN:
            return
        if _is_module(callee):
            raise MissingOp(ops[depth + 1], where, reason=f"{op} calls a submodule ({type(callee).__name__}), "
                                                          "which has a .source of its own: read it there")
        resolved = _function(callee)
        if resolved is None:
            return
        function, receiver, compiled = resolved
        where = f"{getattr(function, '__qualname__', op)} (called at {op})"


_UNKNOWN = object()


def _is_module(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def _function(callee: Any) -> tuple[Any, Any, Any] | None:
    """(innermost function, receiver, its Compiled) for a callee, as nnsight's ``instrument`` peels it."""
    import inspect
    from types import FunctionType

    from nnsight.intervention.source import SourceNotAvailable, compiled, decorator_chain

    if not (inspect.isfunction(callee) or inspect.ismethod(callee)) and isinstance(
            getattr(type(callee), "__call__", None), FunctionType):  # noqa: B004  (as nnsight instruments it)
        callee = callee.__call__
    receiver = callee.__self__ if inspect.ismethod(callee) else None
    try:
        inner, _ = decorator_chain(callee.__func__ if receiver is not None else callee)
        return inner, receiver, compiled(inner)
    except (SourceNotAvailable, AttributeError, TypeError):
        return None


_LABELS: dict[Any, Any] = {}


@dataclass(frozen=True)
class _Body:
    """A function's ops as nnsight labels them, and what its local names are bound to."""

    called: dict  #: op label -> the called expression (nnsight's bind marker for an assignment)
    assigned: dict  #: local name -> the one expression it is assigned (a name assigned once)
    bound: frozenset  #: names bound by the call or several times: unknown before a run
    receiver: str | None  #: the first parameter's name (``self``)


def _body(function: Any) -> _Body | None:
    """`_Body` of ``function``, cached by its code; numbered as nnsight's own `Instrument` numbers ops."""
    import ast

    from nnsight.intervention.source import Instrument, SourceNotAvailable, source_tree

    code = function.__code__
    if code not in _LABELS:
        try:
            tree, _, _ = source_tree(code)
        except SourceNotAvailable:
            _LABELS[code] = None
            return None
        definition = tree.body[0]
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _LABELS[code] = None
            return None
        definition.decorator_list = []
        called: dict[str, Any] = {}

        class Labels(Instrument):
            def wrap(self, name, fn, args, keywords, node):
                wrapped = super(Labels, self).wrap(name, fn, args, keywords, node)
                called[self.names[-1]] = fn
                return wrapped

        Labels().visit(tree)
        ast.fix_missing_locations(tree)
        stores: dict[str, int] = {}
        for node in ast.walk(definition):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
        assigned = {}
        for node in ast.walk(definition):
            target = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target = node.target
            if isinstance(target, ast.Name) and stores.get(target.id) == 1:
                assigned[target.id] = node.value
        arguments = definition.args
        params = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        params += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        bound = frozenset((set(stores) - set(assigned)) | set(params[1:]))
        _LABELS[code] = _Body(called, assigned, bound, params[0] if params else None)
    return _LABELS[code]


def _callee(function: Any, receiver: Any, op: str) -> Any:
    """What the call at ``op`` in ``function`` calls, or _UNKNOWN when that needs the run's values."""
    import ast
    import builtins

    from nnsight.intervention.source import BIND, OP, bind

    body = _body(function)
    if body is None or op not in body.called:
        return _UNKNOWN
    expression = body.called[op]
    if isinstance(expression, ast.Name) and expression.id == BIND:
        return _UNKNOWN  # an assignment: nothing to drill into (the read says so)
    names = dict(vars(builtins))
    names.update(function.__globals__)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    names[OP] = lambda location, fn, *args, **kwargs: fn(*args, **kwargs)
    names[BIND] = bind
    if body.receiver is not None:
        if receiver is None:
            names.pop(body.receiver, None)
        else:
            names[body.receiver] = receiver
    return _evaluate(expression, names, body, depth=0)


def _evaluate(expression: Any, names: dict, body: _Body, depth: int) -> Any:
    """``expression`` evaluated where each name it reads is known without running the function, else _UNKNOWN."""
    import ast

    if depth > 4 or any(isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Await, ast.Yield))
                        for n in ast.walk(expression)):
        return _UNKNOWN
    scope = dict(names)
    for node in ast.walk(expression):
        if not isinstance(node, ast.Name) or node.id in (body.receiver,):
            continue
        if node.id in body.assigned:
            value = _evaluate(body.assigned[node.id], names, body, depth + 1)
            if value is _UNKNOWN:
                return _UNKNOWN
            scope[node.id] = value
        elif node.id in body.bound or node.id not in names:
            return _UNKNOWN
    if body.receiver is not None and body.receiver not in names and any(
            isinstance(n, ast.Name) and n.id == body.receiver for n in ast.walk(expression)):
        return _UNKNOWN
    try:
        return eval(compile(ast.Expression(body=expression), "<nncanon locator check>", "eval"), scope)  # noqa: S307
    except Exception:
        return _UNKNOWN
