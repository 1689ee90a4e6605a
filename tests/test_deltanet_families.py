"""The hybrid families written over the shared parts: qwen3_5_text (dense) and qwen3_next (mixture).

On each tiny pinned checkpoint (linear x3 + full, twice), on a left-padded batch of two prompts:
the DeltaNet values against the module's own math written out here (Qwen3-Next's fused, per-key-head
projections split independently of transformers' fix_query_key_value_ordering), the block identity on
both kinds of block, the mixture's routed + shared sum, an edit's effect, and the token route's states.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F
from delta_math import assert_values_match_the_module_math, differs

import nncanon
from generator.recipe.family import get_family

FAMILIES = ["qwen3_5_text", "qwen3_next"]
DELTA, FULL = 1, 3  # a DeltaNet block and an attention block of the tiny checkpoints


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def hybrid_checkpoint(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family(family))


@pytest.fixture(scope="module")
def hybrid(hybrid_checkpoint):
    return nncanon.load(hybrid_checkpoint)


def projections(module, x):
    """(q, k, v, z, b, a) before the convolution: Qwen3.5's separate projections, or Qwen3-Next's
    in_proj_qkvz / in_proj_ba, which hold each key head's q, k, then its group of value heads' v and z."""
    if hasattr(module, "in_proj_qkv"):
        q, k, v = module.in_proj_qkv(x).split([module.key_dim, module.key_dim, module.value_dim], dim=-1)
        return q, k, v, module.in_proj_z(x), module.in_proj_b(x), module.in_proj_a(x)
    group = module.num_v_heads // module.num_k_heads
    dk, dv = module.head_k_dim, module.head_v_dim
    per_key_head = module.in_proj_qkvz(x).unflatten(-1, (module.num_k_heads, -1))
    q, k, v, z = per_key_head.split([dk, dk, group * dv, group * dv], dim=-1)
    b, a = module.in_proj_ba(x).unflatten(-1, (module.num_k_heads, -1)).split([group, group], dim=-1)
    return tuple(t.flatten(2) for t in (q, k, v, z, b, a))


def module_math(module, hidden, mask):
    x = hidden * mask[:, :, None].to(hidden.dtype)
    seq = x.shape[1]
    q, k, v, z, b, a = projections(module, x)
    mixed = torch.cat([q, k, v], dim=-1).transpose(1, 2)
    mixed = F.silu(F.conv1d(mixed, module.conv1d.weight, padding=module.conv_kernel_size - 1,
                            groups=mixed.shape[1])[..., :seq]).transpose(1, 2)
    q, k, v = mixed.split([module.key_dim, module.key_dim, module.value_dim], dim=-1)
    return {"q": q.unflatten(-1, (-1, module.head_k_dim)), "k": k.unflatten(-1, (-1, module.head_k_dim)),
            "v": v.unflatten(-1, (-1, module.head_v_dim)), "z": z.unflatten(-1, (-1, module.head_v_dim)),
            "beta": torch.sigmoid(b), "g": -module.A_log.float().exp() * F.softplus(a.float() + module.dt_bias)}


def test_loads_as_its_family(family, hybrid, hybrid_checkpoint):
    module = importlib.import_module(f"nncanon.families.{family}")
    assert hybrid.family == family and isinstance(hybrid, module.ROOT)
    assert type(hybrid._module).__name__ == module.build.causal_lm.__name__
    assert module.layer_types(hybrid) == ["linear_attention"] * 3 + ["full_attention"] + \
        ["linear_attention"] * 3 + ["full_attention"]
    assert hybrid.tokenizer.padding_side == "left"
    with pytest.raises(Exception, match=r"layers\[0\] is a linear_attention block: it has linear_attn, not "
                                        r"self_attn; the blocks with self_attn are \[3, 7\]"):
        with hybrid.trace("The cat"):
            hybrid.layers[0].self_attn.attention_output.save()
    with pytest.raises(ValueError, match="text-only"):
        nncanon.load(hybrid_checkpoint, task="image-text-to-text")


def test_deltanet_values_match_the_module_math(hybrid, prompts):
    assert_values_match_the_module_math(hybrid, DELTA, prompts, module_math)


def test_block_identity_on_both_kinds(hybrid, prompts):
    terms = {}
    with hybrid.trace(prompts):
        for layer, mixer in ((DELTA, "linear_attn"), (FULL, "self_attn")):
            block = hybrid.layers[layer]
            terms[layer] = (block.input.save(), getattr(block, mixer).attention_output.save(),
                            block.mlp.mlp_output.save(), block.layer_output.save())
    for layer, (x, mix, mlp, out) in terms.items():
        assert torch.equal(x + mix + mlp, out), layer
        assert differs(x + mlp, out), layer  # the mixer's term is not negligible


def test_routed_plus_shared_is_the_mixture(hybrid, prompts):
    if hybrid.family != "qwen3_next":
        assert not hasattr(hybrid.layers[DELTA].mlp, "routed_output")  # a dense MLP
        return
    for layer in (DELTA, FULL):
        moe = hybrid.layers[layer].mlp
        with hybrid.trace(prompts):
            routed, shared, mlp = moe.routed_output.save(), moe.shared_expert_output.save(), moe.mlp_output.save()
        assert torch.equal(routed + shared, mlp)
        assert differs(routed, mlp) and differs(shared, mlp)


def test_an_edit_changes_the_logits(hybrid, prompts):
    with hybrid.trace(prompts):
        before = hybrid.logits.save()
    with hybrid.trace(prompts):
        hybrid.layers[DELTA].linear_attn.betas = hybrid.layers[DELTA].linear_attn.betas * 0
        zeroed = hybrid.layers[DELTA].linear_attn.attention_head_outputs.save()
        after = hybrid.logits.save()
    assert torch.equal(zeroed, torch.zeros_like(zeroed))  # nothing written into the state: nothing read
    assert differs(after, before)


def test_token_route_states_end_in_state_output(hybrid, prompts):
    with nncanon.route_kernels(hybrid.family, "torch"):
        with hybrid.trace(prompts):
            states = hybrid.layers[DELTA].linear_attn.states.save()
            last = hybrid.layers[DELTA].linear_attn.state_output.save()
    config = hybrid.text_config
    assert states.shape[2:] == (config.linear_num_value_heads, config.linear_key_head_dim,
                                config.linear_value_head_dim)
    assert torch.equal(states[:, -1], last)
    assert nncanon.core.kernels.route(hybrid.family) == "fla"  # undone on exit


def test_time_steps_and_decay_rates_factor_the_decays(hybrid, prompts):
    """The DeltaNet's decay in Mamba-2's vocabulary: time_steps is softplus(a + dt_bias) from a plain hook's input
    (a split independently of transformers), decay_rates is A = -exp(A_log), and decays is their product."""
    la = hybrid.layers[DELTA].linear_attn
    module = la._module
    seen = {}
    handle = module.register_forward_pre_hook(lambda mod, args, kwargs: seen.setdefault("in", (args, kwargs)),
                                              with_kwargs=True)
    try:
        with torch.no_grad(), hybrid.trace(prompts):
            rates = la.decay_rates.save()
            steps = la.time_steps.save()
            decays = la.decays.save()
    finally:
        handle.remove()
    args, kwargs = seen["in"]
    hidden = args[0] if args else kwargs["hidden_states"]
    mask = kwargs["attention_mask"]
    a = projections(module, hidden * mask[:, :, None].to(hidden.dtype))[5]
    assert rates.shape == (module.num_v_heads,) and torch.equal(rates, -module.A_log.detach().float().exp())
    torch.testing.assert_close(steps, F.softplus(a.float() + module.dt_bias))
    torch.testing.assert_close(decays, steps * rates)
