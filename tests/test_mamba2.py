"""The Mamba-2 mixer's values (the mamba2 family's, and Falcon-H1's parallel one) against the native model: x, B and C against a plain hook on the convolution;
``states[:, t]`` against the recurrent state transformers' own forward leaves in its cache for the prompt
cut after token t; the token route's outputs against the default chunked path; and decode steps under
``generate`` + ``tracer.iter`` chaining ``state_input`` to the previous step's ``state_output``."""

from __future__ import annotations

import pytest
import torch
from release_cache import cache_of

import nncanon
from generator.recipe.family import get_family

PROMPT = "The cat sat on the mat because it was warm, and the dog slept."
BLOCK = 1


#: family -> the mixer's name on a block
MIXER = {"mamba2": "mixer", "falcon_h1": "mamba"}


@pytest.fixture(scope="module", params=sorted(MIXER))
def model(request):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)))


def mixer_of(model):
    return getattr(model.layers[BLOCK], MIXER[model.family])


@pytest.fixture(scope="module")
def ids(model):
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 2 * mixer_of(model)._module.chunk_size, "the prompt must span several chunks"
    return ids


def _read_with_projection(model, ids, *names):
    """The mixer's values ``names`` read in one trace, and in_proj's output caught by a plain hook (times
    Falcon-H1's muP vector, which the forward applies after in_proj)."""
    mixer = mixer_of(model)
    module = mixer._module
    seen = {}
    handle = module.in_proj.register_forward_hook(lambda mod, args, out: seen.setdefault("proj", out))
    saved = {}
    try:
        with torch.no_grad(), model.trace(ids):
            for name in names:  # a loop, not a comprehension: nnsight runs the block's own frame
                saved[name] = getattr(mixer, name).save()
    finally:
        handle.remove()
    return [saved[name] for name in names], seen["proj"] * getattr(module, "mup_vector", 1.0)


def test_scan_inputs_are_the_convolution_split(model, ids):
    mixer = mixer_of(model)
    module = mixer._module
    (x, B, C), projected = _read_with_projection(model, ids, "attention_values", "attention_keys", "attention_queries")
    # the forward runs the convolution functionally (causal_conv1d_fn): the module's own conv1d on the hooked
    # projection, cut to the causal part, is the same map
    _, xbc, _ = projected.split([module.intermediate_size, module.conv_dim, module.num_heads], dim=-1)
    with torch.no_grad():
        xbc = module.act(module.conv1d(xbc.transpose(1, 2))[..., :ids.shape[1]]).transpose(1, 2)
    size = module.n_groups * module.ssm_state_size
    xs, b, c = xbc.split([module.intermediate_size, size, size], dim=-1)
    torch.testing.assert_close(x, xs.unflatten(-1, (module.num_heads, module.head_dim)))
    torch.testing.assert_close(B, b.unflatten(-1, (module.n_groups, -1)))
    torch.testing.assert_close(C, c.unflatten(-1, (module.n_groups, -1)))


def test_states_are_the_native_cache_of_the_cut_prompt(model, ids):
    mixer = mixer_of(model)
    with torch.no_grad(), model.trace(ids):
        default_out = mixer.attention_head_outputs.save()
    with nncanon.route_kernels(model.family, "torch"), torch.no_grad():
        with model.trace(ids):
            states = mixer.states.save()
            routed_out = mixer.attention_head_outputs.save()
    # the token recurrence against the chunked scan (chunk 8 tokens over state size <= 16 on the tiny model):
    # <= 80 roundings apart, the STEP level
    torch.testing.assert_close(routed_out, default_out, atol=1e-5, rtol=1e-5)
    for t in (0, 5, ids.shape[1] - 1):
        with torch.no_grad():  # the plain Hugging Face forward, no nncanon in the way
            out = model._module(ids[:, :t + 1], use_cache=True)
        cache = cache_of(out)
        native = cache.get_recurrent_state(BLOCK, state_idx=0)  # [batch, heads, head_dim, state_size]
        # the state after token t by the recurrence and by transformers' scan of the cut prompt: STEP as above
        torch.testing.assert_close(states[:, t], native.transpose(-1, -2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_decode_steps_chain_states(model, ids, route):
    mixer = mixer_of(model)
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


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_generation_matches_a_plain_model(model, ids, route):
    """The tap serves one call shape for both kernels (and gates a decode step's output after it, on Falcon-H1):
    greedy decoding through it, on either route, gives a separately loaded plain model's tokens and logits."""
    from transformers import AutoModelForCausalLM

    from generator.checkpoint.checkpoints import checkpoint_dir

    plain = AutoModelForCausalLM.from_pretrained(checkpoint_dir(get_family(model.family)))
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = plain.generate(ids[:, :12], **kwargs)
        with nncanon.route_kernels(model.family, route):
            got = model._module.generate(ids[:, :12], **kwargs)
    assert torch.equal(got.sequences, expected.sequences)
    for mine, theirs in zip(got.scores, expected.scores):
        # whole forwards of 4 blocks on two routes: the SUBBLOCK level (nncanon/core/precision.py)
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


def test_decay_rates_are_A_and_decays_are_time_steps_times_A(model, ids):
    """decay_rates is A as the forward computes it (-exp(A_log), float32, per head), on a prompt and on a decode
    step; decays is time_steps · A, time_steps softplus(dt + dt_bias) of a plain hook's dt."""
    mixer = mixer_of(model)
    module = mixer._module
    (rates, steps, decays), projected = _read_with_projection(model, ids, "decay_rates", "time_steps", "decays")
    A = -torch.exp(module.A_log.detach().float())
    assert rates.dtype == torch.float32 and rates.shape == (module.num_heads,)
    assert torch.equal(rates, A) and bool((rates < 0).all())
    dt = projected[..., -module.num_heads:]
    expected = torch.nn.functional.softplus(dt.float() + module.dt_bias.float()).clamp(*module.time_step_limit)
    torch.testing.assert_close(steps, expected)
    torch.testing.assert_close(decays, expected * A)
    with torch.no_grad(), model.generate(ids[:, :12], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for step in tracer.iter[:2]:
            if step == 1:
                decode = mixer.decay_rates.save()
    assert torch.equal(decode, A)
