"""Views shared by families: how a served tensor is reshaped into its layout and back.

Every read is a view of the model's tensor (``Tensor.view``, never a copy), so in-place
edits land; every write maps a value in the layout back to the model's shape.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from nnsight.intervention.interleaver import Mediator

from .values import View


def _invoke_rows() -> tuple[int, int] | None:
    """This invoke's ``(start, size)`` rows of the batch when the trace batches several invokes.

    nnsight narrows a value to an invoke's rows only when its leading dim is the batch; the
    mixture's rows are tokens, so the tokens view narrows them itself.
    """
    try:
        mediator = Mediator.current("a token-flattened value")
    except ValueError:  # a plain forward (the standard cache's hooks): the whole batch
        return None
    batcher = mediator.interleaver.batcher if mediator.interleaver is not None else None
    if batcher is None or not batcher.batching or mediator.batch_group is None:
        return None
    return tuple(mediator.batch_group)


def _tokens_read(host, x: torch.Tensor) -> torch.Tensor:
    batch, seq = host._std_model.token_shape()
    if x.shape[0] != batch * seq:  # already narrowed by nnsight (a one-token decode step)
        return x.view(-1, seq, *x.shape[1:])
    full = x.view(batch, seq, *x.shape[1:])
    rows = _invoke_rows()
    return full if rows is None else full.narrow(0, *rows)


def _tokens_write(host, x: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    batch, seq = host._std_model.token_shape()
    rows = _invoke_rows()
    if rows is None or current.shape[0] != batch * seq:
        return x.reshape(-1, *x.shape[2:])
    full = current.view(batch, seq, *current.shape[1:]).clone()
    full[rows[0]:rows[0] + rows[1]] = x
    return full.reshape(-1, *x.shape[2:])


#: [batch*seq, ...] inside a mixture of experts -> [batch, seq, ...]
TOKENS = View("tokens", _tokens_read, _tokens_write)


def heads(dim: str = "head_dim") -> View:
    """[batch, seq, heads*dim] -> [batch, seq, heads, dim]; ``dim`` names the host module's head width."""

    def read(host, x: torch.Tensor) -> torch.Tensor:
        # a dotted ``dim`` reads a child's width (BERT's attention holds it on its ``self``)
        return x.unflatten(-1, (-1, operator.attrgetter(dim)(host._module)))

    def write(host, x: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        return x.flatten(-2)

    return View(f"heads({dim})", read, write)


def derived(name: str, fn) -> View:
    """A read-only value computed from the served one (``next_token_probs``)."""
    return View(name, lambda host, x: fn(x), None, derived=True)


def head_results(projection: str = "o_proj", count: Any = None) -> View:
    """[batch, seq, heads*dim] entering ``projection`` -> [batch, seq, heads, hidden]: each head's slice through its
    own columns of the projection's weight, no bias (TransformerLens's ``hook_result``). Derived: the forward
    never holds it, it runs one matmul over every head at once. ``count(host)`` is the number of heads (default the
    text model's; a vision tower's attention has its own)."""

    def read(host, x: torch.Tensor) -> torch.Tensor:
        proj = host.get(projection)._module  # dotted: a projection under a child (BERT's output.dense)
        weight = proj.weight if isinstance(proj, torch.nn.Linear) else proj.weight.T  # a Conv1D holds [in, out]
        count_ = host._std_model.num_heads if count is None else count(host)
        return torch.einsum("...hd,ohd->...ho", x.unflatten(-1, (count_, -1)), weight.unflatten(1, (count_, -1)))

    return View(f"head results ({projection})", read, None, derived=True)


#: a value that can be read but not assigned (the mask, the ids, the size of the call)
READ_ONLY = View("read-only", lambda host, x: x, None)

#: [patches, width] -> [1, patches, width]: the packed vision row with its images axis
IMAGES_AXIS = View("images-axis", lambda host, x: x.unsqueeze(0), lambda host, x, current: x.squeeze(0))
