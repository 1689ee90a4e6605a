"""Mamba-2's scan values against the native model: x, B and C against a plain hook on the convolution;
``states[:, t]`` against the recurrent state transformers' own forward leaves in its cache for the prompt
cut after token t; the token route's outputs against the default chunked path; and decode steps under
``generate`` + ``tracer.iter`` chaining ``state_input`` to the previous step's ``state_output``."""

from __future__ import annotations

import pytest
import torch

import nncanon

PROMPT = "The cat sat on the mat because it was warm, and the dog slept."
BLOCK = 1


@pytest.fixture(scope="module")
def model():
    from generator.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir("mamba2"))


@pytest.fixture(scope="module")
def ids(model):
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 2 * model.text_config.chunk_size, "the prompt must span several chunks"
    return ids


def test_scan_inputs_are_the_convolution_split(model, ids):
    mixer = model.layers[BLOCK].mixer
    module = mixer._module
    seen = {}
    handle = module.in_proj.register_forward_hook(lambda mod, args, out: seen.setdefault("proj", out))
    try:
        with torch.no_grad(), model.trace(ids):
            x = mixer.attention_values.save()
            B = mixer.attention_keys.save()
            C = mixer.attention_queries.save()
    finally:
        handle.remove()
    # the forward runs the convolution functionally (causal_conv1d_fn): the module's own conv1d on the hooked
    # projection, cut to the causal part, is the same map
    _, xbc, _ = seen["proj"].split([module.intermediate_size, module.conv_dim, module.num_heads], dim=-1)
    with torch.no_grad():
        xbc = module.act(module.conv1d(xbc.transpose(1, 2))[..., :ids.shape[1]]).transpose(1, 2)
    size = module.n_groups * module.ssm_state_size
    xs, b, c = xbc.split([module.intermediate_size, size, size], dim=-1)
    torch.testing.assert_close(x, xs.unflatten(-1, (module.num_heads, module.head_dim)))
    torch.testing.assert_close(B, b.unflatten(-1, (module.n_groups, -1)))
    torch.testing.assert_close(C, c.unflatten(-1, (module.n_groups, -1)))


def test_states_are_the_native_cache_of_the_cut_prompt(model, ids):
    mixer = model.layers[BLOCK].mixer
    with torch.no_grad(), model.trace(ids):
        default_out = mixer.attention_head_outputs.save()
    with nncanon.route_kernels(model.family, "torch"), torch.no_grad():
        with model.trace(ids):
            states = mixer.states.save()
            routed_out = mixer.attention_head_outputs.save()
    torch.testing.assert_close(routed_out, default_out, atol=1e-5, rtol=1e-5)
    for t in (0, 5, ids.shape[1] - 1):
        with torch.no_grad():  # the plain Hugging Face forward, no nncanon in the way
            out = model._module(ids[:, :t + 1], use_cache=True)
        native = out.cache_params.get_recurrent_state(BLOCK, state_idx=0)  # [batch, heads, head_dim, state_size]
        torch.testing.assert_close(states[:, t], native.transpose(-1, -2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_decode_steps_chain_states(model, ids, route):
    mixer = model.layers[BLOCK].mixer
    steps = []
    with nncanon.route_kernels(model.family, route), torch.no_grad():
        with model.generate(ids[:, :12], max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
            for _ in tracer.iter[:3]:
                steps.append({"x": mixer.attention_values.save(), "state_input": mixer.state_input.save(),
                              "state_output": mixer.state_output.save()})
    assert steps[0]["state_input"] is None and steps[0]["x"].shape[1] == 12
    for i in (1, 2):
        assert steps[i]["x"].shape[1] == 1
        assert torch.equal(steps[i]["state_input"], steps[i - 1]["state_output"])
        assert not torch.equal(steps[i]["state_input"], steps[i]["state_output"])
