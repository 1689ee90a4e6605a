"""The Mamba-2 + attention hybrid stacks (bamba, nemotron_h, granitemoehybrid) against independent computations:
each block has the mixer of its kind (``layers_block_type``) and no other; the Mamba-2 mixer's outputs and state
recomputed here from its values by the recurrence written out in float64 (not nncanon's); ``states[:, t]`` against
the state transformers' own forward leaves in its cache for the prompt cut after token t; a decode step's output
recomputed from the prompt's ``state_output``; an edit of ``state_output`` reaching the cache the next step reads;
and the cache sizes the pages state, from the config."""

from __future__ import annotations

import pytest
import torch
from release_cache import cache_of

import nncanon
from generator.recipe.family import get_family
from nncanon.parts.recurrent import hybrid

PROMPT = "The cat sat on the mat because it was warm, and the dog slept."

#: family -> (a Mamba-2 block, an attention block, the Mamba-2 mixer's name)
BLOCKS = {"bamba": (1, 2, "mamba"), "nemotron_h": (3, 1, "mamba"), "granitemoehybrid": (2, 1, "mamba")}


@pytest.fixture(scope="module", params=sorted(BLOCKS))
def model(request):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)))


def mixer_of(model):
    block, _, name = BLOCKS[model.family]
    return getattr(model.layers[block], name)


@pytest.fixture(scope="module")
def ids(model):
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 2 * mixer_of(model)._module.chunk_size, "the prompt must span several chunks"
    return ids


def _recurrence(x, dt, A, B, C, D, state=None):
    """y_t = S_t C_t + D x_t, S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_tᵀ, per head, in float64; S as [h, key, value]."""
    x, dt, A, B, C, D = (t.detach().double() for t in (x, dt, A, B, C, D))
    batch, seq, heads, value = x.shape
    per_group = heads // B.shape[2]
    B, C = B.repeat_interleave(per_group, 2), C.repeat_interleave(per_group, 2)
    S = torch.zeros(batch, heads, B.shape[-1], value, dtype=torch.float64) if state is None else state.double()
    ys, states = [], []
    for t in range(seq):
        S = S * torch.exp(dt[:, t] * A)[..., None, None] + torch.einsum("bhk,bhv->bhkv", B[:, t], dt[:, t, :, None]
                                                                          * x[:, t])
        ys.append(torch.einsum("bhkv,bhk->bhv", S, C[:, t]) + D[:, None] * x[:, t])
        states.append(S)
    return torch.stack(ys, 1), torch.stack(states, 1)


def test_each_block_has_the_mixer_of_its_kind(model):
    kinds = model.family_module.layer_types(model)
    config = model.text_config
    assert kinds == list(getattr(config, "layers_block_type", None) or config.layer_types)
    assert {"linear_attention", "full_attention"} <= set(kinds)
    mixers = model.family_module.MIXERS
    for i, kind in enumerate(kinds):
        for other_kind, name in mixers.items():
            # absent (bamba, nemotron_h: an AttributeError) or None (granitemoehybrid) on a block of another kind
            assert (getattr(model.layers[i], name, None) is not None) == (other_kind == kind), (i, kind, name)
    # granitemoehybrid keeps the lacking mixer as a None attribute: asked for, it says which the block has all the
    # same (issue 51: a value read there was a bare "'NoneType' object has no attribute")
    mamba_block, attention_block, _ = BLOCKS[model.family]
    with pytest.raises(AttributeError, match=rf"the blocks with self_attn are .*{attention_block}"):
        model.layers[mamba_block].self_attn  # noqa: B018 (the read is what raises)


def test_outputs_and_state_are_the_recurrence_of_the_values(model, ids):
    mixer = mixer_of(model)
    with torch.no_grad(), model.trace(ids):
        x, B, C = mixer.attention_values.save(), mixer.attention_keys.save(), mixer.attention_queries.save()
        dt, A = mixer.time_steps.save(), mixer.decay_rates.save()
        y = mixer.attention_head_outputs.save()
        final = mixer.state_output.save()
    ys, states = _recurrence(x, dt, A, B, C, mixer._module.D)
    # the chunked scan against the recurrence token by token: a chain of <= seq (< 40) float32 products and sums
    # per element over values of order 1, the STEP level of nncanon/core/precision.py
    torch.testing.assert_close(y.double(), ys, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(final.double(), states[:, -1], atol=1e-5, rtol=1e-5)


def test_states_are_the_native_cache_of_the_cut_prompt(model, ids):
    mixer = mixer_of(model)
    block = BLOCKS[model.family][0]
    with nncanon.route_kernels(model.family, "torch"), torch.no_grad(), model.trace(ids):
        states = mixer.states.save()
    assert states.shape[1] == ids.shape[1]
    for t in (0, 5, ids.shape[1] - 1):
        with torch.no_grad():  # the plain Hugging Face forward, no nncanon in the way
            cache = cache_of(model._module(ids[:, :t + 1], use_cache=True))
        native = cache.get_recurrent_state(block, state_idx=0)  # [batch, heads, head_dim, state_size]
        # the recurrence against transformers' chunked scan of the cut prompt: STEP, as above
        torch.testing.assert_close(states[:, t], native.transpose(-1, -2), atol=1e-5, rtol=1e-5)


def test_a_decode_step_continues_from_state_output(model, ids):
    mixer = mixer_of(model)
    steps = []
    with torch.no_grad(), model.generate(ids[:, :12], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for _ in tracer.iter[:2]:
            steps.append({name: getattr(mixer, name).save() for name in (
                "attention_values", "attention_keys", "attention_queries", "time_steps", "decay_rates",
                "state_input", "state_output", "attention_head_outputs")})
    prompt, step = steps
    assert prompt["state_input"] is None and torch.equal(step["state_input"], prompt["state_output"])
    ys, states = _recurrence(step["attention_values"], step["time_steps"], step["decay_rates"], step["attention_keys"],
                             step["attention_queries"], mixer._module.D, state=prompt["state_output"])
    # one token's update from the prompt's state: a handful of roundings (STEP)
    torch.testing.assert_close(step["attention_head_outputs"].double(), ys, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step["state_output"].double(), states[:, -1], atol=1e-5, rtol=1e-5)


def test_an_edit_of_state_output_lands_in_the_cache(model, ids):
    """Zeroing state_output on the prompt: the decode step starts from zeros (what the cache kept) and its logits
    move."""
    mixer = mixer_of(model)
    kwargs = dict(max_new_tokens=2, min_new_tokens=2, do_sample=False)
    with torch.no_grad(), model.generate(ids[:, :12], **kwargs) as tracer:
        for step in tracer.iter[:2]:
            if step == 1:
                plain_logits = model.logits.save()
    with torch.no_grad(), model.generate(ids[:, :12], **kwargs) as tracer:
        for step in tracer.iter[:2]:
            if step == 0:
                mixer.state_output = torch.zeros_like(mixer.state_output)
            if step == 1:
                given = mixer.state_input.save()
                edited_logits = model.logits.save()
    assert given is not None and not bool(given.abs().sum())
    assert not torch.allclose(plain_logits, edited_logits)


def test_the_cache_sizes_the_pages_state_are_the_caches(model, ids):
    """The Mamba-2 state's bytes per block, and an attention block's KV bytes per token, against what transformers'
    own cache holds after a prompt."""
    config = model.text_config
    mamba_block, attention_block, _ = BLOCKS[model.family]
    module = mixer_of(model)._module
    with torch.no_grad():
        cache = cache_of(model._module(ids, use_cache=True))
    state = cache.get_recurrent_state(mamba_block, state_idx=0)
    assert state[0].numel() * 4 == hybrid.ssm_state_bytes(module.num_heads, module.head_dim, module.ssm_state_size)
    keys = cache.layers[attention_block].keys
    heads = config.num_key_value_heads
    head_dim = keys.shape[-1]
    assert keys.shape[1] == heads and keys.shape[2] == ids.shape[1]
    per_token = 2 * keys[0, :, 0].numel() * keys.element_size()
    assert per_token == hybrid.kv_bytes_per_token(heads, head_dim, keys.element_size())
