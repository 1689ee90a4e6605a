"""The conv state (``conv_state_input``, ``conv_state_output``) on every mixer with a causal convolution: Mamba-2's
(mamba2, Falcon-H1's parallel one) and the gated DeltaNet's (Qwen3.5, Qwen3-Next), against transformers' own
cache after a plain forward, on a prompt longer and one shorter than the kernel; chained over decode steps
under ``generate`` + ``tracer.iter``; from a cache a prompt continues; and edits of both against the same edit made in a
plain model's cache."""

from __future__ import annotations

import pytest
import torch
from release_cache import cache_kwarg, cache_of

import nncanon
from generator.recipe.family import get_family

PROMPT = "The cat sat on the mat because it was warm, and the dog slept."
BLOCK = 1  # a mixer block on every tiny checkpoint (a DeltaNet one on the hybrids)
MIXER = {"mamba2": "mixer", "falcon_h1": "mamba", "qwen3_5_text": "linear_attn", "qwen3_next": "linear_attn"}


@pytest.fixture(scope="module", params=sorted(MIXER))
def model(request):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)))


def mixer_of(model):
    return getattr(model.layers[BLOCK], MIXER[model.family])


def plain(model, ids, cache=None):
    """transformers' own forward (no trace: nncanon's taps pass straight through) and the cache it leaves."""
    with torch.no_grad():
        out = model._module(input_ids=ids, use_cache=True, **({cache_kwarg(model): cache} if cache is not None else {}))
    return out, cache_of(out)


@pytest.mark.parametrize("length", [12, 2])
def test_conv_state_output_is_the_native_cache(model, length):
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :length]
    mixer = mixer_of(model)
    with torch.no_grad(), model.trace(ids):
        given = mixer.conv_state_input.save()
        state = mixer.conv_state_output.save()
    _, cache = plain(model, ids)
    native = cache.get_conv_state(BLOCK)  # [batch, conv_dim, conv_kernel]
    kernel = mixer._module.conv1d.kernel_size[0]
    assert given is None and state.shape == native.shape and state.shape[-1] == kernel
    assert torch.equal(state, native)
    if length < kernel:  # zeros on the left where the prompt is shorter than the kernel
        assert not state[..., :kernel - length].any() and state[..., kernel - length:].abs().sum() > 0


def test_decode_steps_chain_conv_states(model):
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :12]
    mixer = mixer_of(model)
    steps = []
    with torch.no_grad(), model.generate(ids, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        for _ in tracer.iter[:3]:
            steps.append((mixer.conv_state_input.save(), mixer.conv_state_output.save()))
    assert steps[0][0] is None
    for i in (1, 2):
        given, left = steps[i]
        assert torch.equal(given, steps[i - 1][1])  # step t's state is what step t+1 starts from
        assert torch.equal(left[..., :-1], given[..., 1:])  # one column in, the oldest out
        assert not torch.equal(left[..., -1], given[..., -1])


def _next_after_a_zeroed_conv_state(model, ids):
    """A plain model's last logits for its greedy next token after the prompt ``ids``, its cache's conv state on
    block BLOCK zeroed in between; and that token."""
    out, cache = plain(model, ids)
    token = out.logits[:, -1:].argmax(-1)
    cache.get_conv_state(BLOCK).zero_()
    following, _ = plain(model, token, cache)
    return following.logits[:, -1], token


def test_an_edit_of_conv_state_input_lands_as_in_the_native_cache(model):
    """Zeroing conv_state_input on the first decode step gives the logits a plain model gives when its cache's
    conv state is zeroed before that step."""
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :12]
    mixer = mixer_of(model)
    with torch.no_grad(), model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for step in tracer.iter[:2]:
            if step == 1:
                mixer.conv_state_input[:] = 0
                edited = model.logits.save()
    following, token = _next_after_a_zeroed_conv_state(model, ids)
    unedited, _ = plain(model, token, plain(model, ids)[1])
    # the same forward on the same inputs, the zero reaching the conv by another path (nncanon's tap, the plain
    # model's cache): at most one step reordered, the STEP level of the error model (nncanon/core/precision.py)
    torch.testing.assert_close(edited[:, -1], following, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(edited[:, -1], unedited.logits[:, -1])  # the edit matters


def test_an_edit_of_conv_state_output_reaches_the_next_step(model):
    """Zeroing conv_state_output on the prompt gives, on the next step, what a plain model gives when its cache's
    conv state is zeroed after the prompt."""
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :12]
    mixer = mixer_of(model)
    with torch.no_grad(), model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for step in tracer.iter[:2]:
            if step == 0:
                mixer.conv_state_output = torch.zeros_like(mixer.conv_state_output)
            if step == 1:
                edited = model.logits.save()
    following, _ = _next_after_a_zeroed_conv_state(model, ids)
    # as above: one step reordered at most (STEP)
    torch.testing.assert_close(edited[:, -1], following, atol=1e-5, rtol=1e-5)


def test_a_prompt_continuing_a_cache_starts_from_its_conv_state(model):
    """Three more tokens after a cached prompt of eight: conv_state_input is the cache's conv state before the call,
    conv_state_output the one transformers leaves in it after, its oldest column the past's newest."""
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :12]
    mixer = mixer_of(model)
    _, cache = plain(model, ids[:, :8])
    before = cache.get_conv_state(BLOCK).clone()
    name = cache_kwarg(model)
    extra = {} if model.family == "mamba2" else {"position_ids": torch.arange(8, 11)[None]}
    with torch.no_grad(), model.trace(ids[:, 8:11], use_cache=True, **{name: cache}, **extra):
        given = mixer.conv_state_input.save()
        left = mixer.conv_state_output.save()
    assert torch.equal(given, before)
    assert torch.equal(left, cache.get_conv_state(BLOCK))
    assert left.shape[-1] == 4 and torch.equal(left[..., 0], before[..., -1])  # three new columns and the past's last


def test_an_edit_of_conv_state_input_on_a_continuing_prompt(model):
    """Zeroing conv_state_input on a prompt that continues a cache gives what a plain model gives from a cache whose
    conv state was zeroed first (the prompt's own columns then convolve with zeros on their left)."""
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"][:, :11]
    mixer = mixer_of(model)
    name = cache_kwarg(model)
    extra = {} if model.family == "mamba2" else {"position_ids": torch.arange(8, 11)[None]}
    _, cache = plain(model, ids[:, :8])
    with torch.no_grad(), model.trace(ids[:, 8:], use_cache=True, **{name: cache}, **extra):
        mixer.conv_state_input[:] = 0
        edited = model.logits.save()
    _, cache = plain(model, ids[:, :8])
    cache.get_conv_state(BLOCK).zero_()
    with torch.no_grad():
        expected = model._module(input_ids=ids[:, 8:], use_cache=True, **{name: cache}, **extra).logits
    # as above: one step reordered at most (STEP)
    torch.testing.assert_close(edited, expected, atol=1e-5, rtol=1e-5)
