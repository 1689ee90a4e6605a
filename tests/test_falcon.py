"""Falcon (issue 24): Falcon-7B's and Falcon-40B's layouts against what transformers itself computes, and the
in-place add that overwrites a saved mlp_output.

The multi-query split is checked against an independent reading of query_key_value's weight (num_heads query
rows, then one key's, then one value's); the block's in-place ``mlp_output += attention_output`` is what a saved
mlp_output shows, while ``model.cache`` keeps each value as it was at its read, on both of its paths (plain hooks
when run on its own, nnsight inside a trace).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from generator.recipe.family import get_family

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


@pytest.fixture(scope="module")
def model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("falcon")))


def test_one_key_head_from_query_key_values_own_rows(model):
    """The values' single head is x · W_v, W_v the last head_dim rows of query_key_value (no bias: bias false):
    exact, the same matmul of the same rows."""
    assert model.num_kv_heads == 1 and model.text_config.num_kv_heads == model.num_heads  # the config's is not it
    attn = model.layers[1].self_attn
    d = model.head_dim
    with torch.no_grad(), model.trace(PROMPTS):
        x = model.layers[1].attention_norm_output.save()
        values = attn.attention_values.save()  # put in heads before the rotary turns the keys
        keys = attn.attention_keys.save()
    w = attn._module.query_key_value.weight
    assert keys.shape[1] == values.shape[1] == 1
    torch.testing.assert_close(values[:, 0], x @ w[-d:].T, rtol=0, atol=0)
    # the rotary turns the key head: its pairs keep their lengths (head_dim 16: 16 products, 1e-6 relative)
    raw = x @ w[-2 * d:-d].T
    pairs = lambda t: t[..., : d // 2].pow(2) + t[..., d // 2:].pow(2)  # noqa: E731
    torch.testing.assert_close(pairs(keys[:, 0]), pairs(raw), rtol=1e-5, atol=1e-6)


def test_saved_mlp_output_holds_both_branches_but_the_cache_does_not(model):
    block = model.layers[2]
    with torch.no_grad(), model.trace(PROMPTS):
        attn = block.self_attn.attention_output.save()
        saved = block.mlp.mlp_output.save()
        own = block.mlp.mlp_output.clone().save()
    assert torch.equal(saved, own + attn)  # the block's mlp_output += attention_output, in the saved tensor
    assert not torch.equal(saved, own)
    alone = model.cache(["mlp.mlp_output", "self_attn.attention_output"], PROMPTS)  # plain hooks
    assert torch.equal(alone["layers.2.mlp.mlp_output"], own)
    assert torch.equal(alone["layers.2.self_attn.attention_output"], attn)
    with torch.no_grad(), model.trace(PROMPTS):
        traced = model.cache(["mlp.mlp_output"])  # through nnsight, copied at the read
    assert torch.equal(traced["layers.2.mlp.mlp_output"], own)


def test_the_40b_layout_broadcasts_each_groups_key_to_its_query_heads():
    """Falcon-40B's tiny (2 groups of 2 query heads): before transformers 5.25 the keys and values entering the
    attention have a head per query head, equal within a group and not across; from 5.25 one per group (the
    attention function repeats them). The value head is x · the group's value rows of query_key_value (exact: the
    same matmul of the same rows); the MLP reads its own LayerNorm (ln_mlp)."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import load_family
    from nncanon.families.falcon import on_interface

    family = load_family(ROOT / "families" / "falcon.yaml")
    model = nncanon.load(checkpoint_dir(family.variant("40b")))
    config = model.text_config
    per_group = 1 if on_interface() else 2  # the heads each group's key and value have entering the attention
    assert config.new_decoder_architecture and config.num_kv_heads == 2 and model.num_heads == 4
    assert model.num_kv_heads == 2 * per_group
    block = model.layers[1]
    d = model.head_dim
    with torch.no_grad(), model.trace(PROMPTS):
        layer_input = block.layer_input.save()
        x = block.attention_norm_output.save()
        mlp_norm = block.mlp_norm_output.save()
        values = block.self_attn.attention_values.save()
        keys = block.self_attn.attention_keys.save()
        mlp_in = block.mlp_input.save()
    ln_mlp = block._module.ln_mlp
    assert torch.equal(mlp_in, mlp_norm) and torch.equal(mlp_norm, ln_mlp(layer_input)) and not torch.equal(mlp_in, x)
    assert keys.shape[1] == values.shape[1] == 2 * per_group
    if per_group == 2:
        for a, b in ((0, 1), (2, 3)):
            assert torch.equal(keys[:, a], keys[:, b]) and torch.equal(values[:, a], values[:, b])
    assert not torch.equal(keys[:, per_group - 1], keys[:, per_group])  # the last of group 0, the first of group 1
    w = block.self_attn._module.query_key_value.weight.unflatten(0, (2, 4, d))  # [group, 2 queries + k + v, d, hidden]
    for g in range(2):
        torch.testing.assert_close(values[:, per_group * g], x @ w[g, 3].T, rtol=0, atol=0)


def test_the_rw_layout_adds_alibi_twice_under_eager():
    """Falcon-RW's tiny: the queries, keys and values are query_key_value's per-head [q | k | v] (biases included:
    exact, the same matmul); before transformers 5.25, under eager the scores carry 2 · slope · p_k · scaling over
    q · kᵀ · scaling (the attention's own bias and the one FalconModel puts in the mask), so eager's logits differ
    from sdpa's, which adds it once; from 5.25 the mask alone carries it, once under both. The bias is at most 2 · 2^-2 · 12 · 0.25 here; the difference 1e-4 relative is float32 rounding
    of 16-term dot products (gamma_16 ~ 1e-6) far below the bias's size."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import load_family
    from nncanon.families.falcon import on_interface
    from nncanon.parts.attention.alibi import bias

    family = load_family(ROOT / "families" / "falcon.yaml")
    directory = checkpoint_dir(family.variant("rw"))
    eager = nncanon.load(directory, attn_implementation="eager")
    sdpa = nncanon.load(directory, attn_implementation="sdpa")
    attn = eager.layers[1].self_attn
    with torch.no_grad(), eager.trace(PROMPTS):
        mask = eager.attention_mask.save()
        x = eager.layers[1].attention_norm_output.save()
        q = attn.attention_queries.save()
        k = attn.attention_keys.save()
        v = attn.attention_values.save()
        scores = attn.attention_scores.save()
        eager_logits = eager.logits.save()
    with torch.no_grad(), sdpa.trace(PROMPTS):
        sdpa_logits = sdpa.logits.save()
    qkv = attn._module.query_key_value(x).unflatten(-1, (eager.num_heads, 3, eager.head_dim)).transpose(1, 2)
    for i, got in enumerate((q, k, v)):
        torch.testing.assert_close(got, qkv[..., i, :], rtol=0, atol=0)
    scale = attn._module.inv_norm_factor
    added = (scores - q @ k.transpose(-1, -2) * scale).double()
    times = 1 if on_interface() else 2
    expected = (times * bias(eager.num_heads, mask, k.shape[2]) * scale).expand_as(added)
    allowed = torch.ones_like(added, dtype=torch.bool).tril() & mask.bool()[:, None, None, :]
    torch.testing.assert_close(added[allowed], expected[allowed], rtol=1e-4, atol=1e-5)
    real = mask.bool()
    differ = float((eager_logits - sdpa_logits)[real].abs().max())
    assert differ > 1e-3 if times == 2 else differ < 1e-4


def test_other_layouts_are_refused_in_one_line():
    """ALiBi keeps every weight's shape, so the tiny checkpoint loads with it set and the family refuses it (no
    released checkpoint has ALiBi in 7B's block); the other switches are refused by prepare before any value is
    served."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.families import falcon

    source = checkpoint_dir(get_family("falcon"))
    config = AutoConfig.from_pretrained(source)
    config.alibi = True  # ALiBi in Falcon-7B's parallel multi-query block: no released checkpoint
    with pytest.raises(nncanon.FamilyMismatch) as info:
        nncanon.load(source, config=config)
    assert "\n" not in str(info.value) and "Falcon-RW's layout" in str(info.value)
    base = dict(new_decoder_architecture=False, alibi=False, parallel_attn=True, multi_query=True)
    for change in ({"parallel_attn": False}, {"multi_query": False}):  # rotary in a sequential or multi-head block
        with pytest.raises(nncanon.FamilyMismatch, match="Falcon-7B's layout"):
            falcon.prepare(SimpleNamespace(text_config=SimpleNamespace(**{**base, **change})))
    for change in ({"alibi": True}, {"num_ln_in_parallel_attn": 1}):
        with pytest.raises(nncanon.FamilyMismatch, match="Falcon-40B's layout"):
            falcon.prepare(SimpleNamespace(text_config=SimpleNamespace(
                **{**base, "new_decoder_architecture": True, **change})))
