"""DeepSeek-V3's new values against plain PyTorch hooks on the native modules: the key/value latent's
expansion (kv_b_proj's output, hooked) is the keys' no-rope part and the values the attention is called
with; the keys' rope part is kv_a_proj_with_mqa's last columns rotated with the cos/sin the attention
was handed (hooked), the same on every head; the router's choice and weights are what the native
router returns (hooked)."""

from __future__ import annotations

import pytest
import torch

from generator.recipe.family import get_family

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


@pytest.fixture(scope="module")
def model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("deepseek_v3")))


def hooked(module):
    seen = {}

    def hook(mod, args, kwargs, out):
        seen.setdefault("out", out)
        seen.setdefault("kwargs", kwargs)

    return seen, module.register_forward_hook(hook, with_kwargs=True)


def test_keys_and_values_are_the_latent_expanded(model):
    for i in range(len(model.layers)):
        attn = model.layers[i].self_attn
        module = attn._module
        up, h1 = hooked(module.kv_b_proj)
        a_proj, h2 = hooked(module.kv_a_proj_with_mqa)
        call, h3 = hooked(module)
        try:
            with torch.no_grad(), model.trace(PROMPTS):
                latent = attn.kv_latent.save()
                keys_nope = attn.attention_keys_nope.save()
                keys_rope = attn.attention_keys_rope.save()
                values = attn.attention_values.save()
        finally:
            for h in (h1, h2, h3):
                h.remove()
        nope, v = module.qk_nope_head_dim, module.v_head_dim
        assert latent.shape[-1] == model.text_config.kv_lora_rank
        heads = up["out"].squeeze(1).unflatten(-1, (-1, nope + v)).transpose(1, 2)  # the latent is [batch, 1, seq, rank]
        assert torch.equal(heads[..., :nope], keys_nope)
        assert torch.equal(heads[..., nope:], values)
        cos, sin = call["kwargs"]["position_embeddings"]
        k_rot = a_proj["out"][..., module.kv_lora_rank:][:, None]
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave

        _, rotated = apply_rotary_pos_emb_interleave(k_rot, k_rot, cos, sin)
        torch.testing.assert_close(keys_rope, rotated.expand_as(keys_rope))
        assert values.shape[-1] != keys_nope.shape[-1] + keys_rope.shape[-1]


def test_grouped_router_matches_the_native_router(model):
    config = model.text_config
    mixtures = [i for i in range(len(model.layers)) if i >= config.first_k_dense_replace]
    assert mixtures and config.first_k_dense_replace > 0, "the tiny stack must be dense, then mixtures"
    for i in mixtures:
        moe = model.layers[i].mlp
        router, handle = hooked(moe.router._module)
        try:
            with torch.no_grad(), model.trace(PROMPTS):
                weights = moe.expert_weights.save()
                chosen = moe.expert_indices.save()
        finally:
            handle.remove()
        _, native_weights, native_indices = router["out"]
        assert torch.equal(chosen.reshape(native_indices.shape), native_indices)
        assert torch.equal(weights.reshape(native_weights.shape), native_weights)
        torch.testing.assert_close(weights.sum(-1), torch.full(weights.shape[:2], config.routed_scaling_factor))
