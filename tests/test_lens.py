"""The lens (`model.unembed`) against plain PyTorch: on the last block's stream it is the logits the Hugging Face
module returns, seen by plain forward hooks, on the families that do something past the head and one that does
not; a hand-made ``lm_head(norm(x))`` is not, where the model steps past the head. Inside a trace it runs aside
from the forward: values read after it are what they are without it."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family

PROMPT = "The cat sat on the mat because it was warm."


def _plain(model):
    """The last block's output and the returned logits of one plain forward, by plain forward hooks."""
    seen = {}

    def keep(key, pick):
        def hook(module, args, out):
            seen.setdefault(key, pick(out))  # returns None: the output goes on unreplaced
        return hook

    last = model.layers[len(model.layers) - 1]._module
    handles = [last.register_forward_hook(keep("last", lambda out: out[0] if isinstance(out, tuple) else out)),
               model._module.register_forward_hook(keep("logits", lambda out: out.logits))]
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPT, return_tensors="pt"))
    finally:
        for handle in handles:
            handle.remove()
    return seen["last"], seen["logits"]


#: family -> how far a hand-made lm_head(norm(x)) is from the logits (None: nothing past the head, equal)
PAST_THE_HEAD = {"llama": None, "granite": "logits_scaling", "falcon_h1": "lm_head_multiplier",
                 "gemma2": "final_logit_softcapping", "mamba2": None}


@pytest.mark.parametrize("family", list(PAST_THE_HEAD))
def test_the_lens_of_the_last_block_is_the_returned_logits(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family(family)))
    last, logits = _plain(model)
    with torch.no_grad():
        lensed = model.unembed(last)
        by_hand = model.lm_head._module(model.norm._module(last).to(model.lm_head._module.weight.dtype))
    # the same modules on the same tensor, then the model's own step past the head: bit-equal
    assert torch.equal(lensed, logits), family
    if PAST_THE_HEAD[family] is None:
        assert torch.equal(by_hand, logits)
    else:  # the step the lens adds is the model's own: without it the hand-made lens is off
        assert not torch.allclose(by_hand, logits, rtol=1e-3, atol=1e-3), f"{family}: nothing past the head?"


def test_the_lens_inside_a_trace_leaves_the_forward_alone():
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("gemma2")))
    with torch.no_grad(), model.trace(PROMPT):
        middle = model.unembed(model.layers[0].layer_output).save()
        stream = model.layers[0].layer_output.save()
        normed = model.final_norm_output.save()
        logits = model.logits.save()
    with torch.no_grad(), model.trace(PROMPT):
        alone = model.final_norm_output.save()
    assert torch.equal(normed, alone) and middle.shape == logits.shape
    with torch.no_grad():
        assert torch.equal(middle, model.unembed(stream))  # the same outside the trace
