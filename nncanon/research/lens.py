"""The lens: a residual stream to logits, as the model turns its last block's output into the logits it returns.

    with model.trace(prompt):
        logits = model.unembed(model.layers[3].layer_output).save()   # the logit lens on block 3

`unembed(model, x)` applies the final norm, the head and whatever the family does past the head, read from
its modeling file: gemma2's and gemma3's final logit softcap, granite's division by ``logits_scaling``,
falcon_h1's ``lm_head_multiplier``, cohere's and cohere2's ``logit_scale``, mamba2's cast of the head's input to its weight's dtype and of the
logits to float32. A family states that step as ``past_the_head(model, logits)`` in its module (none: nothing
past the head). A naive ``lm_head(norm(x))`` misses it: 3.98x off on falcon_h1, 7.75x on granite.

The modules are called through their envoys, so inside a trace nnsight runs them aside from the forward
(nothing is served, no occurrence is spent: later reads of ``final_norm_output`` are untouched); outside one
they are ordinary module calls. The root relation ``unembed(layers[-1].layer_output) == logits``
(`nncanon.parts.blocks.decoder`) proves it on every family under every load the build checks.
"""

from __future__ import annotations

from typing import Any


class LensInputError(ValueError):
    """``unembed`` given what is not a residual stream of the model: names what it got and what to pass."""


def unembed(model: Any, x: Any) -> Any:
    """Logits from a residual stream ``x`` (``[..., hidden_size]``): final norm, head, the family's step past it."""
    import torch

    width = model.hidden_size
    stream = f"a tensor [..., hidden_size={width}] (a residual stream: model.layers[i].layer_output)"
    if not isinstance(x, torch.Tensor):
        raise LensInputError(f"model.unembed(x): x is a {type(x).__name__}; pass {stream}")
    if x.ndim == 0 or x.shape[-1] != width:
        raise LensInputError(f"model.unembed(x): x is {list(x.shape)}, its last dimension is not hidden_size={width}; "
                             f"pass {stream}")
    past = getattr(model.family_module, "past_the_head", None)
    before = getattr(model.family_module, "before_the_head", None)
    try:
        normed = model.norm(x) if getattr(model, "FINAL_NORM", True) else x  # OPT-350m has none (post-norm blocks)
        logits = model.lm_head(before(model, normed) if before is not None else normed)
    except RuntimeError as e:
        # a family may cast the stream itself (mamba2), so a dtype is refused only where the modules refused it
        held = next(model.lm_head._module.parameters(), x).dtype
        if x.dtype == held:
            raise
        raise LensInputError(f"model.unembed(x): x is {x.dtype}, the model's head {held}: pass x.to({held})") from e
    return past(model, logits) if past is not None else logits
