"""The plain decoder families: every registered family whose module serves only the shared hosts of
Llama's tree (nncanon.parts' Block, MoEBlock, Attention, MLP and MoE, unchanged), text only, on its
tiny pinned checkpoint. (A family with hosts of its own is proven by its relations in the build and by
tests/test_registry.py.)

Every value a block serves is checked against plain PyTorch forward hooks on the Hugging Face
modules, registered for the same traced forward the values are read in (or the module's own math
on what the hooks saw), on a batch of two prompts of different lengths, so it is left-padded.
"""

from __future__ import annotations

import contextlib
import importlib
import re

import pytest
import torch
import torch.nn.functional as F

from generator.recipe.family import all_families, get_family
from nncanon.parts.attention import softmax as attention
from nncanon.parts.blocks import decoder, mixture, mlp


def _plain(family) -> bool:
    module = importlib.import_module(family.module)
    shared = {decoder.Block, mixture.MoEBlock, attention.Attention, mlp.MLP, mixture.MoE}
    return "processor" not in family.tiny and set(module.ENVOYS.values()) <= shared


FAMILIES = [f.family for f in all_families() if _plain(f)]
LAYER = 1  # a middle block of the tiny checkpoints' four

BLOCK = ["layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input", "layer_output"]
ATTENTION = ["attention_queries", "attention_keys", "attention_values", "attention_head_outputs",
             "attention_premix", "attention_head_results", "attention_output"]
PATTERN = ["attention_scores", "attention_probabilities"]
MLP = ["mlp_activation", "mlp_neurons", "mlp_output"]
MOE = ["router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "mlp_output"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def checkpoint(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family(family))


@pytest.fixture(scope="module")
def model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint)


@pytest.fixture(scope="module")
def eager_model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint, attn_implementation="eager")


def is_moe(model) -> bool:
    return hasattr(model._module.model.layers[LAYER].mlp, "experts")


@contextlib.contextmanager
def hooks(model, layer=LAYER):
    """Record every block module's positional inputs, keyword inputs and output with plain hooks."""
    seen, handles = {}, []
    hf = model._module
    block = hf.model.layers[layer]
    attn, mlp = block.self_attn, block.mlp
    named = {"block": block, "input_layernorm": block.input_layernorm, "attn": attn,
             "post_attention_layernorm": block.post_attention_layernorm, "mlp": mlp,
             "q_proj": attn.q_proj, "k_proj": attn.k_proj, "v_proj": attn.v_proj, "o_proj": attn.o_proj,
             "embed": hf.model.embed_tokens, "norm": hf.model.norm, "lm_head": hf.lm_head}
    if hasattr(attn, "q_norm"):
        named.update({"q_norm": attn.q_norm, "k_norm": attn.k_norm})
    if hasattr(attn, "query_layernorm"):
        named.update({"query_layernorm": attn.query_layernorm, "key_layernorm": attn.key_layernorm})
    if is_moe(model):
        named.update({"router": mlp.gate, "experts": mlp.experts})
    else:
        named.update({"act_fn": mlp.act_fn, "down_proj": mlp.down_proj})

    def keep(name):
        def hook(module, args, kwargs, output):
            seen[name] = (args, kwargs, output)
        return hook

    for name, module in named.items():
        handles.append(module.register_forward_hook(keep(name), with_kwargs=True))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def first_input(seen, name):
    args, kwargs, _ = seen[name]
    return args[0] if args else next(iter(kwargs.values()))


def output(seen, name):
    out = seen[name][2]
    return out[0] if isinstance(out, tuple) else out


def read(model, prompts, names):
    """Read ``names`` (paths under block LAYER) in one trace, with the hooks recording the truth."""
    got = {}
    with hooks(model) as seen, model.trace(prompts):
        got["mask"] = model.attention_mask.save()
        for name in names:
            path, _, value = name.rpartition(".")
            envoy = model.layers[LAYER].get(path) if path else model.layers[LAYER]
            got[name] = getattr(envoy, value).save()
        got["logits"] = model.logits.save()
    return got, seen


def rotated_queries_and_keys(model, seen):
    """The queries and keys as the attention computes them from what q_proj/k_proj (and q/k norms) returned, rotated
    by the modeling file's own apply_rotary_pos_emb (Helium's and ERNIE 4.5's rotate interleaved pairs, Llama's
    halves)."""
    apply_rotary_pos_emb = importlib.import_module(type(model._module).__module__).apply_rotary_pos_emb

    d = model.head_dim
    if "query_layernorm" in seen:  # Hunyuan: each head rotated, then normed; the norms return what attention reads
        return output(seen, "query_layernorm"), output(seen, "key_layernorm")
    if "q_norm" in seen:
        q, k = output(seen, "q_norm"), output(seen, "k_norm")
    else:
        q, k = (output(seen, n).unflatten(-1, (-1, d)) for n in ("q_proj", "k_proj"))
    cos, sin = seen["attn"][1]["position_embeddings"]
    return apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)


# -- loading -------------------------------------------------------------------------------------


def test_loads_as_its_family(family, model, checkpoint):
    import nncanon

    module = importlib.import_module(f"nncanon.families.{family}")
    assert model.family == family and isinstance(model, module.ROOT)
    assert type(model._module).__name__ == module.build.causal_lm.__name__
    assert model.num_layers == len(module.layer_types(model)) == 4
    assert model.tokenizer is not None and model.tokenizer.padding_side == "left"
    with pytest.raises(ValueError, match="text-only"):
        nncanon.load(checkpoint, task="image-text-to-text")


def test_batch_is_left_padded(model, prompts):
    got, _ = read(model, prompts, [])
    mask = got["mask"]
    assert mask.shape[0] == 2 and mask[1, 0] == 0 and mask[0].all()


# -- values against hooks -------------------------------------------------------------------------


def test_block_values_match_hooks(model, prompts):
    got, seen = read(model, prompts, BLOCK)
    assert torch.equal(got["layer_input"], first_input(seen, "block"))
    assert torch.equal(got["attention_norm_output"], output(seen, "input_layernorm"))
    assert torch.equal(got["layer_mid"], first_input(seen, "post_attention_layernorm"))
    assert torch.equal(got["mlp_norm_output"], output(seen, "post_attention_layernorm"))
    assert torch.equal(got["mlp_input"], first_input(seen, "mlp"))
    assert torch.equal(got["layer_output"], output(seen, "block"))
    assert got["layer_output"].shape == (*got["mask"].shape, model.hidden_size)


def test_block_identity(model, prompts):
    names = ["layer_input", "self_attn.attention_output", "layer_mid", "mlp.mlp_output", "layer_output"]
    got, _ = read(model, prompts, names)
    x, attn, mid, mlp, out = (got[n] for n in names)
    assert torch.equal(x + attn, mid)
    assert torch.equal(x + attn + mlp, out)


def test_attention_values_match_hooks(model, prompts):
    got, seen = read(model, prompts, [f"self_attn.{n}" for n in ATTENTION])
    batch, seq = got["mask"].shape
    heads, kv, d = model.num_heads, model.num_kv_heads, model.head_dim
    q, k = rotated_queries_and_keys(model, seen)
    assert got["self_attn.attention_queries"].shape == (batch, heads, seq, d)
    assert got["self_attn.attention_keys"].shape == (batch, kv, seq, d)
    torch.testing.assert_close(got["self_attn.attention_queries"], q, rtol=0, atol=0)
    torch.testing.assert_close(got["self_attn.attention_keys"], k, rtol=0, atol=0)
    assert torch.equal(got["self_attn.attention_values"], output(seen, "v_proj").unflatten(-1, (kv, d)).transpose(1, 2))
    premix = first_input(seen, "o_proj")
    assert torch.equal(got["self_attn.attention_head_outputs"].flatten(2), premix)
    assert torch.equal(got["self_attn.attention_premix"], premix.unflatten(-1, (heads, d)))
    assert torch.equal(got["self_attn.attention_output"], output(seen, "attn"))


def test_attention_pattern_matches_module_math(eager_model, prompts):
    model = eager_model
    in_order = [*ATTENTION[:3], *PATTERN, *ATTENTION[3:]]  # a trace reads values in the forward's order
    got, seen = read(model, prompts, [f"self_attn.{n}" for n in in_order])
    q, k = rotated_queries_and_keys(model, seen)
    v = got["self_attn.attention_values"]
    per_kv = model.num_heads // model.num_kv_heads
    mask = seen["attn"][1]["attention_mask"]  # the additive 4D mask the attention was called with
    scores = q @ k.repeat_interleave(per_kv, dim=1).transpose(-1, -2) * model.head_dim ** -0.5 + mask
    torch.testing.assert_close(got["self_attn.attention_scores"], scores)
    probs = got["self_attn.attention_probabilities"]
    torch.testing.assert_close(probs, scores.softmax(-1))
    real = got["mask"][1].bool()
    assert bool((probs[1][:, real][:, :, ~real] == 0).all()), "no real token attends to the left padding"
    heads = (probs @ v.repeat_interleave(per_kv, dim=1)).transpose(1, 2)
    torch.testing.assert_close(got["self_attn.attention_head_outputs"], heads)
    assert torch.equal(got["self_attn.attention_head_outputs"].flatten(2), first_input(seen, "o_proj"))


def test_mlp_values_match_hooks(model, prompts):
    (check_moe if is_moe(model) else check_dense_mlp)(model, prompts)


def check_dense_mlp(model, prompts):
    got, seen = read(model, prompts, [f"mlp.{n}" for n in MLP])
    assert torch.equal(got["mlp.mlp_activation"], output(seen, "act_fn"))
    assert torch.equal(got["mlp.mlp_neurons"], first_input(seen, "down_proj"))
    assert torch.equal(got["mlp.mlp_output"], output(seen, "mlp"))
    assert got["mlp.mlp_neurons"].shape[-1] == model.text_config.intermediate_size
    mlp = model._module.model.layers[LAYER].mlp
    x = first_input(seen, "mlp")
    torch.testing.assert_close(got["mlp.mlp_neurons"], F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))


def check_moe(model, prompts):
    got, seen = read(model, prompts, [f"mlp.{n}" for n in MOE])
    batch, seq = got["mask"].shape
    logits, scores, indices = seen["router"][2]
    assert torch.equal(got["mlp.router_logits"], logits.view(batch, seq, -1))
    assert torch.equal(got["mlp.expert_weights"], scores.view(batch, seq, -1))
    assert torch.equal(got["mlp.expert_indices"], indices.view(batch, seq, -1))
    assert torch.equal(got["mlp.routed_output"], output(seen, "experts").view(batch, seq, -1))
    assert torch.equal(got["mlp.mlp_output"], output(seen, "mlp"))
    config = model.text_config
    assert got["mlp.router_logits"].shape == (batch, seq, config.num_experts)
    assert got["mlp.expert_weights"].shape == (batch, seq, config.num_experts_per_tok)
    # the router's math: softmax over every expert, top-k, renormalized
    x = first_input(seen, "mlp")
    moe = model._module.model.layers[LAYER].mlp
    torch.testing.assert_close(got["mlp.router_logits"], x @ moe.gate.weight.T)
    top = got["mlp.router_logits"].softmax(-1).topk(config.num_experts_per_tok, dim=-1)
    assert torch.equal(got["mlp.expert_indices"], top.indices)
    torch.testing.assert_close(got["mlp.expert_weights"], top.values / top.values.sum(-1, keepdim=True))
    # each slot's weighted output, from the fused experts' weights
    w, idx = got["mlp.expert_weights"], got["mlp.expert_indices"]
    gate, up = (moe.experts.gate_up_proj[idx] @ x.unsqueeze(2).unsqueeze(-1)).squeeze(-1).chunk(2, dim=-1)
    slot = (moe.experts.down_proj[idx] @ (F.silu(gate) * up).unsqueeze(-1)).squeeze(-1) * w.unsqueeze(-1)
    # the experts' two projections (hidden 40, then the expert width) batched another way: ~80 roundings at the
    # slot's scale, 2 gamma_80 < 1e-5 relative; atol 1e-6 for slots the router weights down to ~0
    torch.testing.assert_close(got["mlp.expert_outputs"], slot, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["mlp.expert_outputs"].sum(2), got["mlp.routed_output"], rtol=1e-5, atol=1e-6)
    assert torch.equal(got["mlp.routed_output"], got["mlp.mlp_output"])  # no shared expert


def test_root_values_match_hooks(model, prompts):
    with hooks(model) as seen, model.trace(prompts):
        ids = model.input_ids.save()
        mask = model.attention_mask.save()
        emb = model.token_embeddings.save()
        normed = model.final_norm_output.save()
        head = model.lm_head_output.save()
        logits = model.logits.save()
        probs = model.next_token_probs.save()
    encoded = model.tokenizer(prompts, return_tensors="pt", padding=True)
    assert torch.equal(ids, encoded["input_ids"]) and torch.equal(mask, encoded["attention_mask"])
    assert torch.equal(emb, output(seen, "embed")) and torch.equal(emb, model._module.model.embed_tokens.weight[ids])
    assert torch.equal(normed, output(seen, "norm")) and torch.equal(head, output(seen, "lm_head"))
    assert torch.equal(logits, head)
    torch.testing.assert_close(probs, logits[:, -1].softmax(-1))


# -- edits ---------------------------------------------------------------------------------------------


def test_an_edit_changes_the_logits(model, prompts):
    with model.trace(prompts):
        before = model.logits.save()
    with model.trace(prompts):
        x = model.layers[LAYER].input.save()
        attn = model.layers[LAYER].self_attn.attention_output.save()
        model.layers[LAYER].mlp.mlp_output = torch.zeros_like(model.layers[LAYER].mlp.mlp_output)
        out = model.layers[LAYER].layer_output.save()
        after = model.logits.save()
    assert torch.equal(out, x + attn), "the block went on with the zeroed MLP output"
    assert not torch.allclose(after, before)
    with model.trace(prompts):
        again = model.logits.save()
    assert torch.equal(again, before), "an edit lasts one trace"


def test_head_edit_reaches_only_its_heads(model, prompts):
    """Zeroing one query head's output before o_proj is the same as zeroing that head's slice of o_proj's input."""
    d = model.head_dim
    with model.trace(prompts):
        model.layers[LAYER].self_attn.attention_head_outputs[:, :, 2] = 0
        premix = model.layers[LAYER].self_attn.attention_premix.save()
        out = model.layers[LAYER].self_attn.attention_output.save()
    assert bool((premix[:, :, 2] == 0).all()) and bool((premix[:, :, 3] != 0).any())
    o_proj = model._module.model.layers[LAYER].self_attn.o_proj
    torch.testing.assert_close(out, o_proj(premix.flatten(2)))
    assert premix.shape[-1] == d


# -- support and the full-size printout -----------------------------------------------------------------


def expected_rows(model) -> set[tuple[str, str]]:
    mlp = [*MLP[:2], *MOE] if is_moe(model) else MLP
    root = ["logits", "token_embeddings", "final_norm_output", "lm_head_output", "next_token_probs", "input_ids",
            "attention_mask", "input_size"]
    return ({("model", n) for n in root} | {("model.layers[i]", n) for n in BLOCK}
            | {("model.layers[i].self_attn", n) for n in [*ATTENTION, *PATTERN]}
            | {("model.layers[i].mlp", n) for n in mlp})


def test_support_rows(model, eager_model):
    rows = {(r.host, r.name): r for r in model.support()}
    assert set(rows) == expected_rows(model)
    natives = {r.host: r.host_class for r in rows.values()}
    prefix = type(model._module).__name__.removesuffix("ForCausalLM")
    assert natives["model.layers[i]"] == f"{prefix}DecoderLayer"
    assert natives["model.layers[i].self_attn"] == f"{prefix}Attention"
    assert natives["model.layers[i].mlp"] == (f"{prefix}SparseMoeBlock" if is_moe(model) else f"{prefix}MLP")
    missing = {k for k, r in rows.items() if not r.available}
    never = {("model.layers[i].mlp", "mlp_activation"), ("model.layers[i].mlp", "mlp_neurons")} if is_moe(model) else set()
    assert missing == {("model.layers[i].self_attn", n) for n in PATTERN} | never
    assert 'attn_implementation="eager"' in rows[("model.layers[i].self_attn", "attention_scores")].condition
    eager = {(r.host, r.name): r.available for r in eager_model.support()}
    assert {k for k, ok in eager.items() if not ok} == never
    assert all(r.read_at for r in rows.values())


def test_full_size_printout(family):
    from generator.facts.configs import full_size
    from generator.recipe.family import get_family

    fam = get_family(family)
    module = importlib.import_module(fam.module)
    causal = module.build.causal_lm
    model = full_size(fam, module, fam.printout_checkpoint, "text-generation", causal)
    config = model.text_config
    text = repr(model)
    assert model._module.device.type == "meta"
    assert text.startswith(f"{causal.__name__}(")
    # the padding row is named where the config gives one (Helium's and Hunyuan's pad_token_id)
    assert re.search(rf"\(embed_tokens\): Embedding\({config.vocab_size}, {config.hidden_size}(, padding_idx=\d+)?\)",
                     text), text[:600]
    assert f"(0-{config.num_hidden_layers - 1}): {config.num_hidden_layers} x " in text
    for line in ["(self_attn): ", "(mlp): ", "(input_layernorm): ", "(post_attention_layernorm): ", "(norm): ",
                 "(lm_head): Linear",
                 "(layer_output) -> Residual [batch seq hidden_size]: The residual stream leaving the block",
                 "(attention_queries) -> Queries [batch num_heads seq qk_head_dim]",
                 "(logits) -> Logits [batch seq vocab_size]"]:
        assert line in text, line
    assert "(model): " not in text, "the backbone is shown through its mounts"
    if getattr(config, "num_experts", None):
        assert f"(router/gate): {causal.__name__.removesuffix('ForCausalLM')}TopKRouter()" in text
        assert "(router_logits) -> RouterLogits [batch seq num_experts]" in text
    else:
        assert "(mlp_neurons) -> Neurons [batch seq intermediate_size]" in text
    if hasattr(model._module.model.layers[0].self_attn, "q_norm"):
        assert f"(q_norm): {causal.__name__.replace('ForCausalLM', '')}RMSNorm(({config.head_dim},)" in text


def test_qwen3_moe_refuses_dense_blocks():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.core.model import FamilyMismatch
    from nncanon.families import qwen3_moe
    from nncanon.parts import loading

    config = Qwen3MoeConfig(hidden_size=40, intermediate_size=56, moe_intermediate_size=28, num_experts=10,
                            num_experts_per_tok=3, num_hidden_layers=4, num_attention_heads=8,
                            num_key_value_heads=4, head_dim=24, vocab_size=384, mlp_only_layers=[2])
    tokenizer = loading.tokenizer(checkpoint_dir(get_family("qwen3_moe")))
    module = loading.meta(Qwen3MoeForCausalLM, config)
    with pytest.raises(FamilyMismatch, match=r"blocks \[2\] have a dense MLP"):
        nncanon.wrap(qwen3_moe, module, "text-generation", tokenizer=tokenizer, device="meta")
    config.mlp_only_layers = []
    module = loading.meta(Qwen3MoeForCausalLM, config)
    model = nncanon.wrap(qwen3_moe, module, "text-generation", tokenizer=tokenizer, device="meta")
    assert model.layers[2].mlp.top_k == 3
