"""Views shared by families: how a served tensor is reshaped into its layout and back.

Every read is a view of the model's tensor (``Tensor.view``, never a copy), so in-place
edits land; every write maps a value in the layout back to the model's shape.
"""

from __future__ import annotations

import torch

from .values import View


def _tokens_read(host, x: torch.Tensor) -> torch.Tensor:
    return x.view(*host._std_model.token_shape(), *x.shape[1:])


def _tokens_write(host, x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, *x.shape[2:])


#: [batch*seq, ...] inside a mixture of experts -> [batch, seq, ...]
TOKENS = View("tokens", _tokens_read, _tokens_write)


def heads(dim: str = "head_dim") -> View:
    """[batch, seq, heads*dim] -> [batch, seq, heads, dim]; ``dim`` names the host module's head width."""

    def read(host, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (-1, getattr(host._module, dim)))

    def write(host, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(-2)

    return View(f"heads({dim})", read, write)


def derived(name: str, fn) -> View:
    """A read-only value computed from the served one (``next_token_probs``)."""
    return View(name, lambda host, x: fn(x), None)


#: a value that can be read but not assigned (the mask, the ids, the size of the call)
READ_ONLY = View("read-only", lambda host, x: x, None)

#: [patches, width] -> [1, patches, width]: the packed vision row with its images axis
IMAGES_AXIS = View("images-axis", lambda host, x: x.unsqueeze(0), lambda host, x: x.squeeze(0))
