"""Relations: what a value means, stated as an equation the build checks on the model.

A name is a promise: ``layer_mid`` promises "the residual stream after the attention add". The
relation ``layer_input + self_attn.attention_output == layer_mid`` is that promise in a form a
forward can check. Every host class carries ``RELATIONS``; each relation says which values it
proves (their meaning), which terms it reads relative to the host (values, ``child.value``, a
module's ``input``/``output``), and how to compute its two sides from what was read, by the module's
own math (its norm, its projection, its router), never by the value plumbing under test. The
encyclopedia's build reads every term on every block under every load and fails naming the
relation and the block where one does not hold; a value no relation proves fails the build too
(``generator/facts/proof.py``).

A family whose block differs (sandwich norms, a parallel block, a softcap) gives its host class its
own ``RELATIONS``, which the page shows; it cannot inherit a relation that does not hold, because the
build checks it.

Terms: ``{mixer}`` is the block's sequence mixer (``self_attn`` or ``linear_attn``, whichever the
block has); ``model.x`` reads the root's ``x``; ``layers[*].x`` reads ``x`` on every block, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .precision import STEP

Pairs = list[tuple[Any, Any]]


@dataclass(frozen=True)
class Relation:
    #: the equation as the page shows it, in standard names
    text: str
    #: the terms (relative to the host) whose meaning this relation states
    proves: tuple[str, ...]
    #: every term the check reads, relative to the host
    reads: tuple[str, ...]
    #: (host envoy, {term: what was read}) -> [(computed, read), ...]; both sides of each pair must agree
    compute: Callable[[Any, dict[str, Any]], Pairs]
    #: the largest error allowed, relative to the read side's scale (at least 1): a level of the float32 error
    #: model (nncanon/core/precision.py) for the chain of roundings the check recomputes
    tolerance: float = STEP
    #: (stream in, what is added, stream out[, the stream the branch reads]): a residual add the block
    #: diagram draws; the fourth element, when it is the block's input, marks a parallel branch
    adds: tuple[str, ...] | None = None
    #: False: the check recomputes with other shapes than the forward (a token at a time, a batch at once), so
    #: an error of 0 on one CPU is rounding luck that another's vector kernels do not repeat: the page gives
    #: the tolerance, never "0"
    exact: bool = True
    #: why the relation cannot hold when the model runs in bfloat16 or float16 (a discrete choice the dtype's
    #: rounding decides, as a top-k over rounded scores): the page says so with the measured error
    #: (generator/facts/dtypes.py); None, it holds within the bound the error model derives for the dtype
    half: str | None = None

    def on(self, mixer: str | None) -> Relation:
        """This relation with ``{mixer}`` filled in (a block's sequence mixer)."""
        if mixer is None or "{mixer}" not in self.text + "".join(self.reads):
            return self
        fill = lambda s: s.replace("{mixer}", mixer)  # noqa: E731
        return Relation(fill(self.text), tuple(map(fill, self.proves)), tuple(map(fill, self.reads)),
                        lambda host, r: self.compute(host, {k.replace(mixer, "{mixer}", 1): v for k, v in r.items()}),
                        self.tolerance, tuple(map(fill, self.adds)) if self.adds else None, self.exact, self.half)


def pick(relations: tuple[Relation, ...], start: str) -> Relation:
    """The one of ``relations`` whose text starts with ``start``: a family keeps a shared relation by name
    while it states its own in place of the others."""
    return next(r for r in relations if r.text.startswith(start))


def relation(text: str, proves: str, reads: str, tolerance: float = STEP, adds: tuple | None = None,
             exact: bool = True, half: str | None = None):
    """A decorator: ``@relation("a + b == c", proves="c", reads="a b c")`` over the compute function."""
    def wrap(compute):
        return Relation(text, tuple(proves.split()), tuple(reads.split()), compute, tolerance, adds, exact, half)
    return wrap


def called(module: Any, x: Any) -> Any:
    """``module(x)`` as a forward calls it: on ``x`` in the module's weight dtype. A half-precision model whose
    stream runs in float32 (Mamba's ``residual_in_fp32``, a norm computed in float32) casts there; in float32
    the cast is nothing."""
    return module(x.to(module.weight.dtype))


def first(x: Any) -> Any:
    """A module's output or input that may be a tuple: its first tensor."""
    while isinstance(x, (tuple, list)):
        x = x[0]
    return x


def rows(x: Any) -> Any:
    """Token rows ``[tokens, last]`` of a ``[..., last]`` tensor: compares token-flattened and
    ``[batch, seq]`` layouts of the same rows."""
    return x.reshape(-1, x.shape[-1])


def error(computed: Any, read: Any) -> float:
    """The largest difference, relative to the read side's scale (at least 1); inf on a shape mismatch."""
    import torch

    computed, read = torch.as_tensor(computed).detach(), torch.as_tensor(read).detach()
    if computed.numel() != read.numel():
        return float("inf")
    computed, read = computed.reshape(-1).double(), read.reshape(-1).double()
    if computed.numel() == 0:
        return 0.0
    finite = torch.isfinite(read)
    if not bool((torch.isfinite(computed) == finite).all()):
        return float("inf")
    scale = max(1.0, float(read[finite].abs().max()) if bool(finite.any()) else 1.0)
    return float((computed[finite] - read[finite]).abs().max()) / scale if bool(finite.any()) else 0.0
