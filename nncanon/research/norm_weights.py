"""The norm gains in standard names: ``<stem>_w`` and ``<stem>_b`` beside each norm value ``<stem>_output``
(TransformerLens's ``blocks.{i}.ln1.w`` is ``model.layers[i].attention_norm_w``), as views of the norm's parameters
or computed where the forward computes the gain."""

from __future__ import annotations

from typing import Any

import torch

from .norm_forms import WeightUnavailable, gain_form, norm_kind
from .weight import Weight

# -- norm gains ----------------------------------------------------------------------------------------------------
#
# Each norm whose output is a standard value ``<stem>_output`` (attention_norm_output, mlp_norm_output,
# final_norm_output, ...) has its gain ``<stem>_w`` and bias ``<stem>_b`` on the same host: TransformerLens's
# ``blocks.{i}.ln1.w`` is ``model.layers[i].attention_norm_w``. The norm module is the one the value is read at (its
# locator), so a family's RENAME and sandwich norms need nothing more. Where the parameter IS the gain the weight is
# the parameter (an edit lands); where the forward computes the gain (Gemma's and Qwen3-Next's ``1 + weight``) it is
# served computed and refuses edits naming the parameter to edit; a weightless norm (OLMo's LayerNorm) has no gain
# to serve and says so. A gated norm (Mamba-2's rms(y · silu(z)) · weight) is not among them: its output value is
# proven by the ssd part with its gate.

#: the standard norm values whose norms carry a gain
NORM_STEMS = ("attention_norm", "mlp_norm", "attention_post_norm", "mlp_post_norm", "final_norm", "embedding_norm")


def norm_module(host: Any, stem: str) -> tuple[str, torch.nn.Module] | None:
    """(child name, module) of the norm ``<stem>_output`` is read at on ``host``; None where the host has no such value."""
    value = next((v for v in type(host).values() if v.name == f"{stem}_output"), None)
    if value is not None and any(not c.needs for c in value.conditions or ()):
        return None  # a value no load serves (never): the layout has no such norm (OPT-350m's post-norm block)
    locator = getattr(value, "locator", None)
    if locator is None or not locator.module or locator.ops or locator.io != "output":
        return None
    envoy = host
    for part in locator.module.split("."):
        envoy = getattr(envoy, part, None)  # a block kind declared with a norm its module lacks (a post-norm block)
    module = getattr(envoy, "_module", None)
    if isinstance(module, torch.nn.Identity):
        return None  # no norm on this block (ModernBERT's first block: the embeddings' norm precedes its attention)
    return (locator.module, module) if isinstance(module, torch.nn.Module) else None


class ComputedGain(torch.Tensor):
    """A gain the forward computes (``1 + weight``): served to read; an in-place edit would reach nothing, so it is
    refused naming the parameter to edit."""

    _nncanon_where: str

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        from ..guards.readonly import _edits

        target = args[0] if args else None
        if isinstance(target, ComputedGain) and (_edits(func, args, kwargs) or func is torch.Tensor.__setitem__):
            raise WeightUnavailable(target._nncanon_where)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class Gain(Weight):
    """``<stem>_w`` / ``<stem>_b``: a norm's gain or bias, on any host; a host without the norm value lacks it
    (an AttributeError, so ``hasattr`` is False)."""

    def __init__(self, stem: str, part: str) -> None:
        what = "gain: normed = norm(x) · w + b" if part == "w" else "bias (None without one)"
        # explicit base calls: a host class shipped to NDIF by value has no __class__ cell for super()
        Weight.__init__(self, f"{stem}_{part}", "hidden_size", f"The {stem.replace('_', ' ')}'s {what}",
                        lambda host: _gain(host, stem, part))
        self.stem, self.part = stem, part

    def __reduce__(self) -> tuple:
        return type(self), (self.stem, self.part)

    def __get__(self, host: Any, owner: Any = None) -> Any:
        if host is None:
            return self
        if norm_module(host, self.stem) is None:
            from ..core.values import NotOnHost

            raise NotOnHost(f"{host._standard_path()}.{self.name}: {host._standard_path()} has no {self.stem}_output, "
                            f"so no such norm")
        return Weight.__get__(self, host, owner)

    def __set__(self, host: Any, new: Any) -> None:
        name, module = norm_module(host, self.stem) or (None, None)
        if self.part == "w" and module is not None and gain_form(module) == "1 + weight":
            raise WeightUnavailable(_computed(host, self.stem, name))
        Weight.__set__(self, host, new)


def _computed(host: Any, stem: str, name: str) -> str:
    return (f"{host._standard_path()}.{stem}_w is 1 + {name}.weight, computed by the forward: an edit would reach "
            f"nothing; edit {host._standard_path()}.{name}.weight (the gain minus 1)")


def _gain(host: Any, stem: str, part: str) -> torch.Tensor | None:
    name, module = norm_module(host, stem)
    norm_kind(module)  # a norm with no gain nncanon knows refuses by name
    if part == "b":
        return getattr(module, "bias", None)
    form = gain_form(module)
    if form == "none":
        raise WeightUnavailable(f"{host._standard_path()}.{stem}_w is unavailable on {host._std_model.family}: its "
                                f"{type(module).__name__} ({name}) has no weight: the gain is 1 (and the bias 0)")
    if form == "weight":
        return module.weight
    computed = (1 + module.weight.detach()).as_subclass(ComputedGain)
    computed._nncanon_where = _computed(host, stem, name)
    return computed


NORMS = {g.name: g for stem in NORM_STEMS for g in (Gain(stem, "w"), Gain(stem, "b"))}


def gains(host: Any) -> list[str]:
    """The norm stems ``host`` has a gain/bias pair for (its norm values), in NORM_STEMS order."""
    return [stem for stem in NORM_STEMS if norm_module(host, stem) is not None]
