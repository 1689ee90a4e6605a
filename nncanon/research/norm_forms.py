"""What a norm module is, read off the module: its kind (centred or RMS), how its forward makes the gain from its
parameters, and its epsilon; and the error a weight nncanon cannot serve raises (the Weights section's refusals)."""

from __future__ import annotations

import torch

from ..core.values import Unavailable


class WeightUnavailable(Unavailable):
    """This family's parameters hold no such matrix (a latent attention's W_Q): the message says why."""


def norm_kind(module: torch.nn.Module) -> str:
    """"layernorm" (centred: nn.LayerNorm, OLMo's, Cohere's) or "rmsnorm", by the module's class."""
    name = type(module).__name__
    if name.endswith("T5LayerNorm"):  # T5's and mT5's: named a LayerNorm, an RMS norm (no mean subtracted, no bias)
        return "rmsnorm"
    if isinstance(module, torch.nn.LayerNorm) or "LayerNorm" in name:
        return "layernorm"
    if "RMSNorm" in name and "Gated" not in name:
        return "rmsnorm"
    raise WeightUnavailable(f"{name} is a norm nncanon does not map to a gain (neither a LayerNorm nor an RMSNorm)")


def gain_form(module: torch.nn.Module) -> str:
    """How the forward makes the gain from the module's parameters: "weight" (the parameter is the gain),
    "1 + weight" (Gemma's zero-centred gain, read from the module's own forward) or "none" (weightless)."""
    if getattr(module, "weight", None) is None:
        return "none"
    return _gain_form_of(type(module))


#: each norm class's gain form, read once: inspect.getsource parses the class's whole modeling file. A plain dict:
#: shipped code must not hold an lru_cache (tests/test_remote.py)
_GAIN_FORMS: dict[type, str] = {}


def _gain_form_of(cls: type) -> str:
    if cls not in _GAIN_FORMS:
        import inspect
        import re

        source = inspect.getsource(cls)
        _GAIN_FORMS[cls] = ("1 + weight" if re.search(r"1(\.0)? \+ self\.weight|self\.weight \+ 1", source)
                            else "weight")
    return _GAIN_FORMS[cls]


def norm_epsilon(module: torch.nn.Module) -> float:
    """The norm's epsilon: ``eps``, ``variance_epsilon`` or ``epsilon``; OLMo's literal 1e-5 (held by no attribute)."""
    for name in ("eps", "variance_epsilon", "epsilon"):
        if isinstance(getattr(module, name, None), float):
            return getattr(module, name)
    if type(module).__name__ == "OlmoLayerNorm":
        return 1e-5  # F.layer_norm(..., eps=1e-5) in its forward
    raise WeightUnavailable(f"{type(module).__name__} holds its epsilon in no attribute nncanon knows")
