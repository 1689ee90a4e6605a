"""The norms' gains and biases in standard names (nncanon.weights' ``<stem>_w``/``<stem>_b``) against plain PyTorch:
where the parameter is the gain the weight is the parameter (an in-place edit and an assignment land in the model
and move the norm's output as the formula says); Gemma's computed ``1 + weight`` is served and refuses edits naming
the parameter; OLMo's weightless LayerNorm refuses its gain in one line; each norm's output is recomputed from its
input, the served gain and bias and eps (the relation nncanon.parts.weights adds on every norm host)."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import STEP
from nncanon.research.weights import WeightUnavailable, names

PROMPT = "The cat sat on the mat because it was warm."


def _load(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(family)))


def _plain_out(model, module):
    """A plain forward's output of ``module`` (a plain hook; nothing replaced)."""
    seen = {}
    handle = module.register_forward_hook(lambda mod, args, out: seen.setdefault("out", out.detach().clone()))
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPT, return_tensors="pt"))
    finally:
        handle.remove()
    return seen["out"]


def test_a_gain_is_the_parameter_and_an_edit_lands():
    model = _load("llama")
    block = model.layers[1]
    norm = block.input_layernorm._module
    assert block.attention_norm_w is norm.weight and block.attention_norm_b is None
    assert model.final_norm_w is model.norm._module.weight
    before = _plain_out(model, norm)
    saved = norm.weight.detach().clone()
    try:
        with torch.no_grad():
            block.attention_norm_w[3] = 0  # in place: lands in input_layernorm.weight
        assert norm.weight[3] == 0
        after = _plain_out(model, norm)
        assert torch.all(after[..., 3] == 0)
        torch.testing.assert_close(after[..., :3], before[..., :3], rtol=0, atol=0)
        block.attention_norm_w = 2 * saved  # assigned: copied in; a gain is a scale of the normed rows
        torch.testing.assert_close(_plain_out(model, norm), 2 * before, rtol=STEP, atol=STEP)
        with pytest.raises(ValueError, match=r"attention_norm_w is \[hidden_size\]"):
            block.attention_norm_w = torch.ones(3)
    finally:
        with torch.no_grad():
            norm.weight.copy_(saved)


def test_a_layernorm_bias_is_the_parameter():
    model = _load("gpt2")
    block = model.layers[0]
    assert block.mlp_norm_b is block.post_attention_layernorm._module.bias
    assert model.final_norm_b is model.norm._module.bias
    assert {"attention_norm_w", "attention_norm_b", "mlp_norm_w", "mlp_norm_b"} <= set(names(type(block)))
    assert not hasattr(block.self_attn, "attention_norm_w")  # a host without the norm's value lacks its gain


def test_a_computed_gain_is_served_and_refuses_edits_by_name():
    model = _load("gemma2")
    block = model.layers[0]
    for stem, native in (("attention_norm", "input_layernorm"), ("attention_post_norm", "post_attention_layernorm"),
                         ("mlp_norm", "pre_feedforward_layernorm"), ("mlp_post_norm", "post_feedforward_layernorm")):
        weight = getattr(block, native)._module.weight
        gain = getattr(block, f"{stem}_w")
        torch.testing.assert_close(gain.as_subclass(torch.Tensor), 1 + weight.detach(), rtol=0, atol=0)
        with pytest.raises(WeightUnavailable, match=rf"1 \+ {native}.weight.*edit model.layers\[0\].{native}.weight"):
            with torch.no_grad():
                gain[0] = 5
        with pytest.raises(WeightUnavailable, match="computed by the forward"):
            setattr(block, f"{stem}_w", torch.zeros_like(weight))
        assert torch.all(weight == getattr(block, native)._module.weight)  # nothing landed


def test_a_weightless_norm_has_no_gain_and_says_so():
    model = _load("olmo")
    with pytest.raises(WeightUnavailable, match="OlmoLayerNorm .* has no weight: the gain is 1"):
        model.layers[0].attention_norm_w  # noqa: B018
    assert model.layers[0].attention_norm_b is None


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma2", "olmo", "opt", "olmo2"])
def test_every_norm_output_is_its_input_normed_by_the_served_gain(family):
    """The relation the build checks, run here on every norm host: the norm's output from its input."""
    from generator.facts.proof import relations_of
    from nncanon.core.relations import error
    from nncanon.research.weights import gains, norm_module

    model = _load(family)
    ids = model.tokenizer(["The cat sat on the mat", "Hi"], return_tensors="pt", padding=True)
    checked = 0
    for host in {id(h): h for h in [model, *model._hosts]}.values():
        for stem in gains(host):
            name, _ = norm_module(host, stem)
            relation = next(r for r in relations_of(host) if r.reads == (f"{name}.input", f"{stem}_output"))
            with model.trace(ids):
                inputs = getattr(host, name).inputs.save()
                out = getattr(host, f"{stem}_output").save()
            pairs = relation.compute(host, {f"{name}.input": inputs, f"{stem}_output": out})
            assert all(error(a, b) <= relation.tolerance for a, b in pairs), (family, host._std_path, stem)
            checked += 1
    assert checked >= 3


def test_transformer_lens_names_map_to_the_gains():
    """other_names' TransformerLens parameter names resolve to gains llama serves (block 1's and the final norm's)."""
    from nncanon.guards.other_names import TRANSFORMER_LENS_WEIGHTS, standard_name

    assert standard_name("ln_final.w") == ("TransformerLens", "ln_final.w", "model.final_norm_w")
    model = _load("llama")
    for tl, path in TRANSFORMER_LENS_WEIGHTS.items():
        if "_post" in tl or tl.endswith(".b"):
            continue  # llama has no sandwich norms and no norm biases (None)
        host = model if path.count(".") == 1 else model.layers[1]
        assert getattr(host, path.rsplit(".", 1)[-1]) is not None, tl
