"""Gemma 4 text's new values against the native model: the shared keys and values against what the forward itself
returns (``return_shared_kv_states``) and against transformers' own ``kv_sharing_modes``; the per-layer inputs
against a plain hook on each block's call and the model's own get/project methods; edits of the per-layer input
and of its branch against plain hooks making the same edit; every block's sizes (`dim_sizes(block=i)`) against its
modules."""

from __future__ import annotations

import pytest
import torch

from generator.recipe.family import get_family

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


@pytest.fixture(scope="module")
def model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("gemma4_text")), attn_implementation="eager")


def _ids(model):
    return model.tokenizer(PROMPTS, return_tensors="pt", padding=True)


def test_kv_sources_are_transformers_store_and_reuse_blocks(model):
    from nncanon.parts.attention.kv_sharing import kv_sources, sources_of

    modes = model.text_config.kv_sharing_modes
    sources = sources_of(model)
    assert sources == {3: 1, 4: 1, 5: 2}
    assert set(sources) == {i for i, mode in enumerate(modes) if mode == "reuse"}
    assert set(sources.values()) == {i for i, mode in enumerate(modes) if mode == "store"}
    assert all(model._module.model.layers[i].self_attn.is_kv_shared_layer == (i in sources) for i in range(6))
    # E2B's schedule (4 sliding, 1 full, 35 blocks, the last 20 shared): sliding blocks read 13, full ones 14
    e2b = (["sliding_attention"] * 4 + ["full_attention"]) * 7
    assert set(kv_sources(e2b, 20).values()) == {13, 14}
    assert all(src == (14 if e2b[i] == "full_attention" else 13) for i, src in kv_sources(e2b, 20).items())
    assert kv_sources(e2b, 0) == {}
    with pytest.raises(ValueError, match="no block"):
        kv_sources(["sliding_attention", "full_attention", "full_attention"], 2)


def test_shared_keys_values_are_what_the_forward_hands_on(model):
    seen = {}

    def hook(module, args, kwargs, output):  # after block 2, the dict holds both kinds' stored keys and values
        seen.update({kind: tuple(t.clone() for t in pair) for kind, pair in kwargs["shared_kv_states"].items()})

    handle = model._module.model.layers[2].self_attn.register_forward_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad(), model.trace(PROMPTS):
            k1 = model.layers[1].self_attn.attention_keys.save()
            v1 = model.layers[1].self_attn.attention_values.save()
            k2 = model.layers[2].self_attn.attention_keys.save()
            k3 = model.layers[3].self_attn.attention_keys.save()
            v4 = model.layers[4].self_attn.attention_values.save()
            k5 = model.layers[5].self_attn.attention_keys.save()
            v5 = model.layers[5].self_attn.attention_values.save()
    finally:
        handle.remove()
    sliding_k, sliding_v = seen["sliding_attention"]
    full_k, full_v = seen["full_attention"]
    for got, want in ((k1, sliding_k), (v1, sliding_v), (k3, sliding_k), (v4, sliding_v), (k2, full_k),
                      (k5, full_k), (v5, full_v)):
        assert torch.equal(got, want)
    assert full_k.shape[-1] != sliding_k.shape[-1]  # global_head_dim against head_dim


def test_per_layer_inputs_are_the_blocks_arguments(model):
    from nncanon.parts.blocks.per_layer_inputs import per_layer_inputs

    seen = {}
    def record(i):
        def hook(mod, args):
            seen[i] = args[1].clone()  # returns None: the call goes on with its own arguments
        return hook

    hooks = [layer.register_forward_pre_hook(record(i)) for i, layer in enumerate(model._module.model.layers)]
    try:
        with torch.no_grad(), model.trace(PROMPTS):
            ids = model.input_ids.save()
            embeds = model.token_embeddings.save()
            p0 = model.layers[0].per_layer_input.save()
            p1 = model.layers[1].per_layer_input.save()
            p2 = model.layers[2].per_layer_input.save()
            p3 = model.layers[3].per_layer_input.save()
            p4 = model.layers[4].per_layer_input.save()
            p5 = model.layers[5].per_layer_input.save()
    finally:
        for h in hooks:
            h.remove()
    got = [p0, p1, p2, p3, p4, p5]
    text = model._module.model
    with torch.no_grad():
        own = text.project_per_layer_inputs(embeds, text.get_per_layer_inputs(ids, embeds))
        mine = per_layer_inputs(model, ids, embeds)
    for i in range(model.num_layers):
        assert torch.equal(got[i], seen[i])
        assert torch.equal(got[i], own[:, :, i])
        # float64 against float32: a projection over hidden_size (40 terms), a norm, a sum (STEP)
        assert float((mine[:, :, i] - got[i].double()).abs().max()) <= 1e-5 * max(1.0, float(got[i].abs().max()))


def _hooked_logits(model, module, hook, pre=False):
    """The logits of a trace in which a plain hook on ``module`` makes the edit (no nncanon value involved)."""
    handle = module.register_forward_pre_hook(hook) if pre else module.register_forward_hook(hook)
    try:
        with torch.no_grad(), model.trace(PROMPTS):
            logits = model.logits.save()
    finally:
        handle.remove()
    return logits


def test_zeroing_a_per_layer_input_is_the_native_edit(model):
    want = _hooked_logits(model, model._module.model.layers[5],
                          lambda mod, args: (args[0], torch.zeros_like(args[1]), *args[2:]), pre=True)
    with torch.no_grad(), model.trace(PROMPTS):
        model.layers[5].per_layer_input[:] = 0
        got = model.logits.save()
    with torch.no_grad(), model.trace(PROMPTS):
        plain = model.logits.save()
    assert torch.equal(got, want)
    assert not torch.allclose(got, plain)


def test_zeroing_the_per_layer_branch_is_the_native_edit(model):
    norm = model._module.model.layers[2].post_per_layer_input_norm
    want = _hooked_logits(model, norm, lambda mod, args, out: torch.zeros_like(out))
    with torch.no_grad(), model.trace(PROMPTS):
        model.layers[2].per_layer_output = torch.zeros_like(model.layers[2].per_layer_output)
        got = model.logits.save()
    with torch.no_grad(), model.trace(PROMPTS):
        plain = model.logits.save()
    assert torch.equal(got, want)
    assert not torch.allclose(got, plain)


def test_editing_a_source_blocks_keys_reaches_the_blocks_sharing_them(model):
    """Zeroing block 1's keys in place zeroes block 4's: block 4 attends over the very tensor block 1 stored, so
    every score block 4 does not mask is 0."""
    with torch.no_grad(), model.trace(PROMPTS):
        before = model.layers[4].self_attn.attention_scores.save()
    with torch.no_grad(), model.trace(PROMPTS):
        model.layers[1].self_attn.attention_keys[:] = 0
        k4 = model.layers[4].self_attn.attention_keys.save()
        after = model.layers[4].self_attn.attention_scores.save()
    assert bool((k4 == 0).all())
    finite = torch.isfinite(after) & (after > torch.finfo(after.dtype).min)
    assert bool((after[finite] == 0).all()) and not torch.equal(before, after)


def test_block_sizes_are_each_blocks_modules(model):
    for i, layer in enumerate(model._module.model.layers):
        sizes = model.dim_sizes(block=i)
        attn, mlp = layer.self_attn, layer.mlp
        assert attn.q_proj.out_features == model.num_heads * sizes["head_dim"]
        assert attn.o_proj.in_features == model.num_heads * sizes["head_dim"]
        if not attn.is_kv_shared_layer:
            assert attn.k_proj.out_features == sizes["num_kv_heads"] * sizes["head_dim"]
        assert mlp.up_proj.out_features == sizes["intermediate_size"]
    assert model.dim_sizes(block=2)["head_dim"] == 32 and model.dim_sizes(block=0)["head_dim"] == 24
    assert model.dim_sizes(block=2)["num_kv_heads"] == 2 and model.dim_sizes(block=0)["num_kv_heads"] == 4
    assert model.dim_sizes(block=5)["intermediate_size"] == 112
    assert model.dim_sizes()["head_dim"] == 24
    with pytest.raises(IndexError, match="out of range"):
        model.dim_sizes(block=6)


def test_other_families_sizes_are_one_per_model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    llama = nncanon.load(checkpoint_dir(get_family("llama")))
    assert all(llama.dim_sizes(block=i) == llama.dim_sizes() for i in range(llama.num_layers))


def test_the_shape_check_reads_every_blocks_own_sizes(monkeypatch):
    """Values are measured on the first block of every other set of sizes: a full-attention head size stated
    wrong fails the claims, naming the full block it was read on."""
    import nncanon.families.gemma4_text as family
    from generator.contribute import served_claims
    from generator.facts.claim_error import ClaimError
    from generator.recipe.family import get_family

    right = family.block_dim_sizes

    def wrong(model, block):
        sizes = right(model, block)
        if model.text_config.layer_types[block] == "full_attention":
            sizes["head_dim"] = sizes["qk_head_dim"] = model.text_config.per_layer_config[0].head_dim
        return sizes

    monkeypatch.setattr(family, "block_dim_sizes", wrong)
    with pytest.raises(ClaimError, match=r"on model\.layers\[2\]\.self_attn\).*should be 24 .* measured 32"):
        served_claims(get_family("gemma4_text"))
