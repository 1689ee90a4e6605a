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
(`nncanon.parts.decoder`) proves it on every family under every load the build checks.
"""

from __future__ import annotations

from typing import Any


def unembed(model: Any, x: Any) -> Any:
    """Logits from a residual stream ``x`` (``[..., hidden_size]``): final norm, head, the family's step past it."""
    past = getattr(model.family_module, "past_the_head", None)
    before = getattr(model.family_module, "before_the_head", None)
    normed = model.norm(x) if getattr(model, "FINAL_NORM", True) else x  # OPT-350m has none (post-norm blocks)
    logits = model.lm_head(before(model, normed) if before is not None else normed)
    return past(model, logits) if past is not None else logits
