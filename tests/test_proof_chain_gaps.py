"""The five gaps the proof chain found when it came (issue 47), closed by stating what the forward does:

- LFM2's ``conv_states`` (every token's conv window, stacked for the reader) claimed a gradient, so the chain counted
  it as a value the logits depend on, a branch to nowhere: autograd says the logits do not depend on it, and it now
  says so (the chain needs it only tied, to conv_input);
- Llama 3.2 Vision's text prompt skips the cross-attention blocks, so the stack relation over every block proved
  nothing there: the stack over the blocks a call runs (plain hooks say which ran) joins the block before a
  cross-attention block to the block after it, and a change between the two breaks it;
- Qwen3-VL's ``deepstack_output`` exists on the first len(deepstack_visual_indexes) blocks only: the chain drew it on
  every block, an island on the others; it now draws a value only where the host serves it.
"""

from __future__ import annotations

import dataclasses
import importlib
import re

import pytest
import torch

from generator.recipe.family import get_family

pytestmark = pytest.mark.slow

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


def _models(name):
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.loads import resolve_loads

    family = get_family(name)
    module = importlib.import_module(family.module)
    return family, module, resolve_loads(family, module, checkpoint_dir(family))


def _prove_and_chain(name):
    from generator.facts.chain import check_family_chain
    from generator.facts.measure import run_inputs
    from generator.facts.proof import prove_family

    family, module, models = _models(name)
    try:
        prove_family(family, models, models.all, lambda m: run_inputs(m, module, PROMPTS))
        check_family_chain(family, models)
    finally:
        models.close()


# -- LFM2: conv_states is made for the reader ---------------------------------------------------------------------


def test_lfm2_conv_states_has_no_gradient_and_conv_output_has_one():
    """The logits depend on what the convolution gives (its gradient through the trace is not zero) and not on the
    stack of its windows, which the forward never builds: plain autograd finds no path from the logits to the saved
    stack, and reading its gradient says why."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.research.grads import NoGradient

    model = nncanon.load(checkpoint_dir(get_family("lfm2")))
    conv = model.layers[list(model.text_config.layer_types).index("conv")].conv
    with model.trace(PROMPTS[0]):
        states = conv.conv_states.save()
        logits = model.logits.save()
    assert not states.requires_grad or torch.autograd.grad(logits.sum(), states, allow_unused=True)[0] is None
    with model.trace(PROMPTS[0]):
        conv_output = conv.conv_output
        loss = model.logits.sum()
        with loss.backward():
            grad = conv_output.grad.save()
    assert grad.abs().max() > 0
    with pytest.raises(NoGradient, match="made for the reader"):
        with model.trace(PROMPTS[0]):
            states = conv.conv_states
            loss = model.logits.sum()
            with loss.backward():
                states.grad.save()


def test_a_conv_states_claiming_a_gradient_is_a_branch_to_nowhere(monkeypatch):
    """What the chain said of LFM2 before the value told the truth: it names the stack and the mixer's output."""
    from generator.facts.proof import RelationError
    from nncanon.parts.recurrent.short_conv import ShortConv

    prop = vars(ShortConv)["conv_states"]
    monkeypatch.setattr(prop, "value", dataclasses.replace(prop.value, no_grad=None))
    with pytest.raises(RelationError) as raised:
        _prove_and_chain("lfm2")
    message = str(raised.value)
    assert "\n" not in message, message
    assert ("model.layers[i].conv.conv_states and model.layers[i].conv.attention_output are not joined by any "
            "relation") in message, message


# -- Llama 3.2 Vision: a text prompt skips the cross-attention blocks ---------------------------------------------


def test_mllama_running_layers_are_the_blocks_the_forward_runs():
    """Plain forward hooks on every decoder layer of the text load's module: the layers called are running_layers,
    the cross-attention layers left out, and each one's input is the output of the one called before it."""
    family, _, models = _models("mllama")
    try:
        model = models.get(models.default)
        with models.loads[models.default].within(model):
            hf = model._module
            layers = list(hf.model.language_model.layers)
            called = []
            handles = [layer.register_forward_hook(
                lambda mod, args, kwargs, out, i=i: called.append((i, kwargs.get("hidden_states", args[0] if args else
                                                                                  None), out)), with_kwargs=True)
                for i, layer in enumerate(layers)]
            try:
                with torch.no_grad():
                    hf(**model.tokenizer(PROMPTS[0], return_tensors="pt"))
            finally:
                for handle in handles:
                    handle.remove()
            cross = set(hf.config.text_config.cross_attention_layers)
            assert cross and [i for i, _, _ in called] == [i for i in range(len(layers)) if i not in cross]
            assert [int(b._std_path.rsplit("[", 1)[1][:-1]) for b in model.running_layers] == [i for i, _, _ in called]
            for (_, _, out), (_, entering, _) in zip(called[:-1], called[1:]):
                torch.testing.assert_close(entering, out[0] if isinstance(out, tuple) else out, rtol=0, atol=0)
        image = next(load for load in models.all if load.label == "image")
        with image.within(models.get("image")):
            assert len(models.get("image").running_layers) == len(layers)
    finally:
        models.close()


def test_mllama_a_change_between_the_blocks_a_text_prompt_runs_breaks_the_running_stack():
    """A hook scaling the input of the first self-attention block after a cross-attention block, on the text loads:
    the stack over the blocks the call runs does not hold (so it is an equation the forward satisfies, not one
    tensor read twice)."""
    from generator.facts.measure import run_inputs
    from generator.facts.proof import RelationError, prove_family
    from nncanon.parts.vision.cross_attention import RUNNING_STACK

    family, module, models = _models("mllama")
    try:
        text_loads = [load for load in models.all if "image" not in load.label]
        for load in text_loads:
            hf = models.get(load.label)._module
            cross = hf.config.text_config.cross_attention_layers
            after = hf.model.language_model.layers[cross[0] + 1]
            after.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2, *args[1:]), kwargs)
                                            if args else (args, {**kwargs, "hidden_states": kwargs["hidden_states"]
                                                                 * 2}), with_kwargs=True)
        with pytest.raises(RelationError, match=re.escape(repr(RUNNING_STACK.text)) + " does not hold"):
            prove_family(family, models, text_loads, lambda m: run_inputs(m, module, PROMPTS))
    finally:
        models.close()


# -- Qwen3-VL: DeepStack's output exists on its first blocks only -------------------------------------------------


def test_qwen3_vl_chain_draws_deepstack_output_only_where_it_is_served():
    from generator.facts.chain import check_family_chain, graph
    from nncanon.core.values import Unavailable

    family, _, models = _models("qwen3_vl")
    try:
        image = next(load for load in models.all if load.label == "image")
        model = models.get("image")
        with image.within(model):
            count = len(model._module.config.vision_config.deepstack_visual_indexes)
            g = graph(model)
            drawn = sorted(row for row in g.values if row.endswith(".deepstack_output"))
            assert 0 < count < len(model.layers)
            assert drawn == [f"model.layers[{j}].deepstack_output" for j in range(count)]
            with pytest.raises(Unavailable, match="after blocks 0 to"), model.trace(*model.family_module.trace_inputs(
                    model)[0], **model.family_module.trace_inputs(model)[1]):
                model.layers[count].deepstack_output.save()
        check_family_chain(family, models)  # under every load, each value where the forward produced it
    finally:
        models.close()
