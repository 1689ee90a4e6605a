"""The weights in standard names (nncanon.weights) where the layout is unusual (issue 27), against plain PyTorch:
the projection's own output as a plain forward hook sees it, split by the module's own code (CodeGen's mp_num
split, Falcon's ``_split_heads``), is the input times the weight; an edit of the weight lands in the parameter,
exactly where that head's rows are, and nowhere else; a weight with no such matrix refuses in one line saying what
to read instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import SUBBLOCK
from nncanon.research.gathered import Gathered
from nncanon.research.weights import WeightUnavailable

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The cat sat on the mat because it was warm."


def _load(family, variant=None):
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import load_family

    if variant is None:
        return nncanon.load(checkpoint_dir(get_family(family)))
    return nncanon.load(checkpoint_dir(load_family(ROOT / "families" / f"{family}.yaml").variant(variant)))


def _plain_io(model, module):
    """A plain forward's input and output of ``module`` (plain hooks; nothing replaced)."""
    seen = {}

    def keep(mod, args, kwargs, out):
        seen.setdefault("in", (args[0] if args else next(iter(kwargs.values()))).detach().clone())
        seen.setdefault("out", (out[0] if isinstance(out, tuple) else out).detach().clone())

    handle = module.register_forward_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPT, return_tensors="pt"))
    finally:
        handle.remove()
    return seen["in"], seen["out"]


def _heads(x, W):
    return torch.einsum("bsd,cdh->bsch", x, W)


def _edit_lands(param, weight, head, rows_of):
    """Zero ``weight[head]`` (a view's in-place write) and check that exactly ``rows_of(head)`` of ``param`` (a
    Linear's [out, in]) became zero, then restore."""
    before = param.detach().clone()
    try:
        with torch.no_grad():
            weight[head].zero_()
        changed = (param != before).any(1).nonzero().flatten().tolist()
        assert set(changed) <= set(rows_of(head)) and changed, (changed, list(rows_of(head)))
        assert torch.all(param[list(rows_of(head))] == 0)
    finally:
        with torch.no_grad():
            param.copy_(before)


# -- CodeGen: qkv_proj in mp_num = 4 chunks of [q | v | k] ---------------------------------------------------------


def test_codegen_weights_are_the_mp_num_split_of_qkv_proj():
    """The module's own split (reshape to mp_num chunks, split in q, v, k, its _split_heads) of qkv_proj's plain
    output is input @ W_Q, W_V, W_K per head (no bias: b_Q is None)."""
    model = _load("codegen")
    attention = model.layers[1].self_attn
    module = attention._module
    x, qkv = _plain_io(model, module.qkv_proj)
    chunks = qkv.reshape(qkv.shape[:-1] + (4, -1))  # the forward's mp_num = 4
    local = module.head_dim * module.num_attention_heads // 4
    query, value, key = torch.split(chunks, local, dim=-1)
    for part, W in ((query, attention.W_Q), (value, attention.W_V), (key, attention.W_K)):
        plain = module._split_heads(part, module.num_attention_heads, module.head_dim, mp_num=4)
        assert isinstance(W, Gathered) and W.shape == (model.num_heads, model.hidden_size, model.head_dim)
        # hidden_size-long dot products in another order than the module's matmul: SUBBLOCK
        torch.testing.assert_close(_heads(x, W), plain, rtol=SUBBLOCK, atol=SUBBLOCK)
    assert attention.b_Q is None and attention.b_K is None and attention.b_V is None


def test_codegen_edits_land_in_the_rows_of_that_head():
    """W_Q[h], W_K[h], W_V[h] zeroed through a view of the weight: qkv_proj's rows of head h (chunk h // 2 of the
    tiny's 8 heads, place h % 2; q, v, k in that order within the chunk) and none other; an assignment is copied in
    and reads back."""
    model = _load("codegen")
    attention = model.layers[1].self_attn
    param = attention._module.qkv_proj.weight  # [3 · hidden, hidden]
    d, per = model.head_dim, model.num_heads // 4
    local = per * d

    def rows(slot):
        return lambda h: range((h // per) * 3 * local + slot * local + (h % per) * d,
                               (h // per) * 3 * local + slot * local + (h % per + 1) * d)

    for name, slot in (("W_Q", 0), ("W_V", 1), ("W_K", 2)):
        for head in (0, 3, 6):  # three chunks, both places
            _edit_lands(param, getattr(attention, name), head, rows(slot))
    before = param.detach().clone()
    try:
        queries = attention.W_Q.clone()
        new = torch.randn_like(attention.W_K)
        attention.W_K = new
        assert torch.equal(attention.W_K, new) and torch.equal(attention.W_Q, queries)
        with torch.no_grad():
            attention.W_V[5] = 0  # __setitem__ on the read
            attention.W_Q.mul_(2)
        assert torch.all(param[list(rows(1)(5))] == 0)
        torch.testing.assert_close(param[list(rows(0)(1))], 2 * before[list(rows(0)(1))], rtol=0, atol=0)
    finally:
        with torch.no_grad():
            param.copy_(before)


# -- Falcon-40B: each key/value group's query heads, then its key, then its value ----------------------------------


def test_falcon_40b_weights_are_the_modules_own_split():
    """_split_heads of query_key_value's plain output: the queries are input @ W_Q per head; the keys and values,
    broadcast to a head per query head, are input @ W_K / W_V of the head's group (2 groups of 2 on the tiny)."""
    model = _load("falcon", "40b")
    attention = model.layers[1].self_attn
    module = attention._module
    x, fused = _plain_io(model, module.query_key_value)
    q, k, v = module._split_heads(fused)  # [batch, seq, heads, head_dim] each
    assert isinstance(attention.W_Q, Gathered) and attention.W_K.shape[0] == module.num_kv_heads == 2
    group = model.num_heads // module.num_kv_heads
    torch.testing.assert_close(_heads(x, attention.W_Q), q, rtol=SUBBLOCK, atol=SUBBLOCK)
    for W, plain in ((attention.W_K, k), (attention.W_V, v)):
        torch.testing.assert_close(_heads(x, W).repeat_interleave(group, dim=2), plain, rtol=SUBBLOCK, atol=SUBBLOCK)
    params = {p.untyped_storage().data_ptr() for p in model._module.parameters()}
    assert attention.W_K.untyped_storage().data_ptr() in params  # the key and value heads are plain views


def test_falcon_40b_edits_land_in_the_rows_of_that_head():
    """Query head h is group h // 2's place h % 2: rows (g · 4 + h % 2) · head_dim of query_key_value; key head g
    is row block g · 4 + 2, value head g · 4 + 3."""
    model = _load("falcon", "40b")
    attention = model.layers[1].self_attn
    param = attention._module.query_key_value.weight
    d, group = model.head_dim, model.num_heads // attention._module.num_kv_heads

    def block(index):
        return range(index * d, (index + 1) * d)

    for head in range(model.num_heads):
        _edit_lands(param, attention.W_Q, head, lambda h: block((h // group) * (group + 2) + h % group))
    for g in range(attention._module.num_kv_heads):
        _edit_lands(param, attention.W_K, g, lambda g: block(g * (group + 2) + group))
        _edit_lands(param, attention.W_V, g, lambda g: block(g * (group + 2) + group + 1))


# -- Gemma 4: KV-shared blocks and attention_k_eq_v ------------------------------------------------------------------


def test_gemma4_weights_are_the_projections_on_blocks_with_their_own_keys():
    """Blocks 0-2 (tiny: 0, 1 sliding, 2 full with attention_k_eq_v): q_proj's and k_proj's plain outputs are input @
    W_Q / W_K per head; what v_norm normalizes (the values before it) is input @ W_V, and on the k_eq_v block W_V
    is k_proj's own weight (its values are its unnormed keys)."""
    model = _load("gemma4_text")
    for block in (0, 2):
        attention = model.layers[block].self_attn
        module = attention._module
        x, q = _plain_io(model, module.q_proj)
        torch.testing.assert_close(_heads(x, attention.W_Q).flatten(-2), q, rtol=SUBBLOCK, atol=SUBBLOCK)
        x, k = _plain_io(model, module.k_proj)
        torch.testing.assert_close(_heads(x, attention.W_K).flatten(-2), k, rtol=SUBBLOCK, atol=SUBBLOCK)
        before_norm, _ = _plain_io(model, module.v_norm)  # [batch, seq, kv_heads, head_dim]
        torch.testing.assert_close(_heads(x, attention.W_V), before_norm, rtol=SUBBLOCK, atol=SUBBLOCK)
        assert (module.v_proj is None) == (block == 2)
    assert model.layers[2].self_attn.W_V.data_ptr() == model.layers[2].self_attn._module.k_proj.weight.data_ptr()


def test_gemma4_a_kv_shared_block_refuses_naming_its_source_whose_edit_reaches_it():
    """Block 3 attends over block 1's keys: its W_K refuses in one line naming model.layers[1].self_attn.W_K; zeroing
    that key head (through the named weight) zeroes key head 0 of the keys block 3 attends over; W_Q stays served."""
    model = _load("gemma4_text")
    shared = model.layers[3].self_attn
    for name in ("W_K", "W_V", "b_K", "b_V"):
        with pytest.raises(WeightUnavailable, match=rf"^model\.layers\[3\]\.self_attn\.{name} is unavailable on "
                                                    rf"gemma4_text: a KV-shared block computes no keys or values: it attends over "
                                                    rf"block 1's .*model\.layers\[1\]\.self_attn\.{name}$") as error:
            getattr(shared, name)
        assert "\n" not in str(error.value)
    assert shared.W_Q.shape[0] == model.num_heads
    source = model.layers[1].self_attn
    saved = source.W_K.detach().clone()
    try:
        with torch.no_grad():
            source.W_K[0] = 0
            with model.trace(PROMPT):
                keys = shared.attention_keys.save()
        assert torch.all(keys[:, 0] == 0) and not torch.all(keys[:, 1] == 0)
    finally:
        source.W_K = saved


def test_gemma4_edits_land_in_q_proj():
    model = _load("gemma4_text")
    attention = model.layers[0].self_attn
    d = attention._module.head_dim
    _edit_lands(attention._module.q_proj.weight, attention.W_Q, 5, lambda h: range(h * d, (h + 1) * d))
    _edit_lands(attention._module.k_proj.weight, attention.W_K, 1, lambda h: range(h * d, (h + 1) * d))


# -- DeepSeek-V3: latent attention has no W_Q ------------------------------------------------------------------------


def test_deepseek_latent_attention_refusal_names_what_is_served():
    """W_Q, W_K, W_V (and their biases) refuse in one line; every standard name the line points to exists on the
    host; the page's Weights row (generator/facts/weight_rows.py) carries the same reason."""
    from generator.facts.weight_rows import weight_rows

    model = _load("deepseek_v3")
    attention = model.layers[0].self_attn
    with pytest.raises(WeightUnavailable) as error:
        attention.W_K  # noqa: B018 (the read is what raises)
    line = str(error.value)
    assert "\n" not in line and line.startswith("model.layers[0].self_attn.W_K is unavailable on deepseek_v3: ")
    for name in ("query_latent", "kv_latent", "attention_queries_nope", "attention_queries_rope",
                 "attention_keys_nope", "attention_keys_rope", "W_O"):
        assert name in line
        assert name == "W_O" or any(v.name == name for v in type(attention).values())
    # o_proj reads v_head_dim per head (model.head_dim is the config's head_dim, qk_rope_head_dim here)
    assert attention.W_O.shape == (model.num_heads, model.text_config.v_head_dim, model.hidden_size)
    kind = next(k for k in weight_rows(model) if k["host"] == "model.layers[i].self_attn")
    row = {r["name"]: r for r in kind["weights"]}
    for name in ("W_Q", "W_K", "W_V", "b_Q"):
        assert row[name]["status"] == "refused" and "kv_latent" in row[name]["why"]
    assert row["W_O"]["status"] == "view"


# -- vision towers: per-head results over the tower's own heads ------------------------------------------------------


@pytest.mark.parametrize("family", ["llava", "gemma3"])
def test_tower_head_results_are_each_tower_heads_columns_of_out_proj(family):
    """A CLIP (llava) and a SigLIP (gemma3) tower: attention_head_results on model.vision.layers[1].self_attn has one
    entry per head of the tower (its config's heads, not the text model's); head h is out_proj's input slice h
    through out_proj's columns h, as plain hooks on out_proj see them; summed over heads, plus the bias, out_proj's
    output."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.core.precision import STEP
    from nncanon.parts.vision.vision_towers import example_images

    model = nncanon.load(checkpoint_dir(get_family(family)), task="image-text-to-text")
    attention = model.vision.layers[1].self_attn
    proj = attention.o_proj._module  # the tower's out_proj
    heads = attention._module.config.num_attention_heads
    seen = {}
    handles = [proj.register_forward_pre_hook(lambda m, args: seen.setdefault("input", args[0].clone())),
               proj.register_forward_hook(lambda m, args, out: seen.setdefault("output", out.clone()))]
    prompt = f"Look at {model.processor.image_token}. What is it?"
    try:
        with torch.no_grad(), model.trace(prompt, images=example_images(model.processor)[:1]):
            results = attention.attention_head_results.save()
    finally:
        for handle in handles:
            handle.remove()
    x, width = seen["input"], seen["input"].shape[-1] // heads
    assert heads != model.num_heads  # each tiny tower has a head count of its own
    assert results.shape == (*x.shape[:-1], heads, proj.weight.shape[0])
    for h in range(heads):
        columns = slice(h * width, (h + 1) * width)
        # one head's dot products over its width in another order than the einsum: STEP
        torch.testing.assert_close(results[..., h, :], x[..., columns] @ proj.weight[:, columns].T, rtol=STEP, atol=STEP)
    # heads · width products against the projection's one matmul: SUBBLOCK
    torch.testing.assert_close(results.sum(-2) + proj.bias, seen["output"], rtol=SUBBLOCK, atol=SUBBLOCK)


def test_qwen_vit_head_results_are_each_tower_heads_columns_of_its_proj():
    """qwen2_vl's packed ViT: attention_head_results on model.vision.layers[1].self_attn is [1, patches, the tower's
    heads, width]; head h is proj's (o_proj's) input slice h through proj's columns h, as plain hooks on proj see
    them; summed over heads, plus the bias, proj's output."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.core.precision import STEP
    from nncanon.parts.vision import qwen_vit

    model = nncanon.load(checkpoint_dir(get_family("qwen2_vl")), task="image-text-to-text")
    attention = model.vision.layers[1].self_attn
    proj = attention.o_proj._module
    heads = attention._module.num_heads
    seen = {}
    handles = [proj.register_forward_pre_hook(lambda m, args: seen.setdefault("input", args[0].clone())),
               proj.register_forward_hook(lambda m, args, out: seen.setdefault("output", out.clone()))]
    prompt = "Look at <|vision_start|><|image_pad|><|vision_end|>. What is it?"
    try:
        with torch.no_grad(), model.trace(prompt, images=qwen_vit.example_images(model.processor)[:1]):
            results = attention.attention_head_results.save()
    finally:
        for handle in handles:
            handle.remove()
    x, width = seen["input"], seen["input"].shape[-1] // heads  # [patches, heads · head_dim], packed
    assert heads != model.num_heads and results.shape == (1, x.shape[0], heads, proj.weight.shape[0])
    for h in range(heads):
        columns = slice(h * width, (h + 1) * width)
        torch.testing.assert_close(results[0, :, h], x[:, columns] @ proj.weight[:, columns].T, rtol=STEP, atol=STEP)
    torch.testing.assert_close(results[0].sum(-2) + proj.bias, seen["output"], rtol=SUBBLOCK, atol=SUBBLOCK)
