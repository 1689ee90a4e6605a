"""Every text value of qwen3_5_moe_text against an independent computation.

The truth comes from plain PyTorch hooks on the Hugging Face modules, registered for the
same traced forward the values are read in, or from the module's own math on what the
hooks saw. Batch of two prompts of different lengths, so the batch is left-padded.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

DELTA, ATTN = 1, 3  # a DeltaNet block and an attention block of the tiny checkpoint


@contextlib.contextmanager
def hooks(model, layer):
    """Record inputs/outputs of the block's modules with plain forward hooks."""
    seen, handles = {}, []
    block = model._module.model.layers[layer]

    def keep(name):
        def hook(module, args, output):
            seen[name + ".in"] = args[0] if args else None
            seen[name + ".out"] = output
        return hook

    named = {"block": block, "input_layernorm": block.input_layernorm,
             "post_attention_layernorm": block.post_attention_layernorm, "mlp": block.mlp,
             "experts": block.mlp.experts, "router": block.mlp.gate, "shared": block.mlp.shared_expert,
             "shared.act": block.mlp.shared_expert.act_fn, "shared.down": block.mlp.shared_expert.down_proj,
             "embed": model._module.model.embed_tokens, "norm": model._module.model.norm,
             "lm_head": model._module.lm_head}
    mixer = getattr(block, "self_attn", None) or block.linear_attn
    named["mixer"] = mixer
    if hasattr(block, "self_attn"):
        named.update({"q_proj": mixer.q_proj, "q_norm": mixer.q_norm, "k_norm": mixer.k_norm,
                      "v_proj": mixer.v_proj, "o_proj": mixer.o_proj})
    for name, module in named.items():
        handles.append(module.register_forward_hook(keep(name)))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def read_all(model, prompts, layer, names):
    """Read ``names`` (host-relative paths) in one trace, with hooks recording the truth."""
    got = {}
    with hooks(model, layer) as seen, model.trace(prompts):
        mask = model.attention_mask.save()
        for name in names:
            host, _, value = name.rpartition(".")
            envoy = model.layers[layer].get(host) if host else model.layers[layer]
            got[name] = getattr(envoy, value).save()
        got["logits"] = model.logits.save()
    return got, seen, mask


def test_block_stream_values_match_hooks(model, prompts):
    for layer in (DELTA, ATTN):
        names = ["layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input", "layer_output"]
        got, seen, _ = read_all(model, prompts, layer, names)
        assert torch.equal(got["layer_input"], seen["block.in"])
        assert torch.equal(got["attention_norm_output"], seen["input_layernorm.out"])
        assert torch.equal(got["layer_mid"], seen["post_attention_layernorm.in"])
        assert torch.equal(got["mlp_norm_output"], seen["post_attention_layernorm.out"])
        assert torch.equal(got["mlp_input"], seen["mlp.in"])
        assert torch.equal(got["layer_output"], seen["block.out"])
        assert got["layer_output"].shape == (2, got["layer_output"].shape[1], model.hidden_size)


def test_root_values_match_hooks(model, prompts):
    with hooks(model, 0) as seen, model.trace(prompts):
        ids = model.input_ids.save()
        mask = model.attention_mask.save()
        size = model.input_size.save()
        emb = model.token_embeddings.save()
        normed = model.final_norm_output.save()
        head = model.lm_head_output.save()
        logits = model.logits.save()
        probs = model.next_token_probs.save()
    encoded = model.tokenizer(prompts, return_tensors="pt", padding=True)
    assert torch.equal(ids, encoded["input_ids"]) and torch.equal(mask, encoded["attention_mask"])
    assert mask[1, 0] == 0, "the shorter prompt is left-padded"
    assert size == list(ids.shape)
    assert torch.equal(emb, seen["embed.out"]) and torch.equal(emb, model._module.model.embed_tokens.weight[ids])
    assert torch.equal(normed, seen["norm.out"]) and torch.equal(head, seen["lm_head.out"])
    assert torch.equal(logits, head)  # this family does nothing past lm_head
    torch.testing.assert_close(probs, logits[:, -1].softmax(-1))


def test_moe_values_match_module_math(model, prompts):
    # in the forward's order: the shared expert runs before the router, and is gated last
    names = ["mlp.shared_experts.mlp_activation", "mlp.shared_experts.mlp_neurons", "mlp.shared_experts.mlp_output",
             "mlp.router_logits", "mlp.expert_weights", "mlp.expert_indices", "mlp.expert_outputs",
             "mlp.routed_output", "mlp.shared_expert_output", "mlp.mlp_output"]
    got, seen, _ = read_all(model, prompts, DELTA, names)
    moe = model._module.model.layers[DELTA].mlp
    x = seen["mlp.in"]
    batch, seq, hidden = x.shape
    rows = x.reshape(-1, hidden)
    logits = got["mlp.router_logits"]
    assert logits.shape == (batch, seq, model.text_config.num_experts)
    # one projection over hidden 40 of O(0.1) logits, another batching: 2 gamma_40 x 0.1 = 5e-7 < 1e-6
    torch.testing.assert_close(logits, (rows @ moe.gate.weight.T).view(batch, seq, -1), rtol=0, atol=1e-6)
    # weights: the top-k of the softmax, renormalized to sum to one
    top = logits.softmax(-1).topk(model.layers[DELTA].mlp.top_k, dim=-1)
    torch.testing.assert_close(got["mlp.expert_weights"], top.values / top.values.sum(-1, keepdim=True))
    assert torch.equal(got["mlp.expert_indices"], top.indices)
    torch.testing.assert_close(got["mlp.expert_weights"].sum(-1), torch.ones(batch, seq))
    # each slot's weighted output, from the experts' own weights
    w, idx = got["mlp.expert_weights"], got["mlp.expert_indices"]
    flat = rows.view(batch, seq, 1, hidden)
    gate_up = moe.experts.gate_up_proj[idx]  # [b, s, k, 2I, H]
    gate, up = (gate_up @ flat.unsqueeze(-1)).squeeze(-1).chunk(2, dim=-1)
    slot = (moe.experts.down_proj[idx] @ (F.silu(gate) * up).unsqueeze(-1)).squeeze(-1) * w.unsqueeze(-1)
    # the experts' two projections batched another way: ~80 roundings, 2 gamma_80 < 1e-5 relative
    torch.testing.assert_close(got["mlp.expert_outputs"], slot, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["mlp.expert_outputs"].sum(2), got["mlp.routed_output"], rtol=1e-5, atol=1e-6)
    assert torch.equal(got["mlp.routed_output"], seen["experts.out"].view(batch, seq, hidden))
    # the shared expert, gated by a sigmoid per token
    ungated = seen["shared.out"].view(batch, seq, hidden)
    assert torch.equal(got["mlp.shared_experts.mlp_output"], ungated)
    assert torch.equal(got["mlp.shared_experts.mlp_activation"], seen["shared.act.out"].view(batch, seq, -1))
    assert torch.equal(got["mlp.shared_experts.mlp_neurons"], seen["shared.down.in"].view(batch, seq, -1))
    assert got["mlp.shared_experts.mlp_neurons"].shape[-1] == model.text_config.shared_expert_intermediate_size
    gate_scalar = torch.sigmoid(moe.shared_expert_gate(x))
    assert torch.equal(gate_scalar * ungated, got["mlp.shared_expert_output"])
    assert torch.equal(got["mlp.routed_output"] + got["mlp.shared_expert_output"], got["mlp.mlp_output"])
    assert torch.equal(got["mlp.mlp_output"], seen["mlp.out"])


def test_attention_values(eager_model, prompts):
    model = eager_model
    names = ["self_attn.attention_queries", "self_attn.attention_keys", "self_attn.attention_values",
             "self_attn.attention_scores", "self_attn.attention_probabilities", "self_attn.attention_head_outputs",
             "self_attn.attention_premix", "self_attn.attention_output"]
    got, seen, mask = read_all(model, prompts, ATTN, names)
    config = model.text_config
    batch, seq = mask.shape
    heads, kv, d = config.num_attention_heads, config.num_key_value_heads, model.head_dim
    rot = int(d * config.rope_parameters["partial_rotary_factor"])
    q, k, v = got["self_attn.attention_queries"], got["self_attn.attention_keys"], got["self_attn.attention_values"]
    assert q.shape == (batch, heads, seq, d) and k.shape == (batch, kv, seq, d) and v.shape == (batch, kv, seq, d)
    # values: v_proj's output split into heads; partial rotary: only the first `rot` dims turn
    assert torch.equal(v, seen["v_proj.out"].view(batch, seq, kv, d).transpose(1, 2))
    assert torch.equal(q[..., rot:], seen["q_norm.out"].transpose(1, 2)[..., rot:])
    assert torch.equal(k[..., rot:], seen["k_norm.out"].transpose(1, 2)[..., rot:])
    assert not torch.equal(q[..., :rot], seen["q_norm.out"].transpose(1, 2)[..., :rot])
    # the rotation keeps each rotated pair's length
    def pair_norm(t):
        return (t[..., : rot // 2] ** 2 + t[..., rot // 2: rot] ** 2)
    torch.testing.assert_close(pair_norm(q), pair_norm(seen["q_norm.out"].transpose(1, 2)))
    # scores: masked q k^T / sqrt(d), which the softmax turns into the probabilities
    keys = k.repeat_interleave(heads // kv, dim=1)
    scores = got["self_attn.attention_scores"]
    raw = q @ keys.transpose(-1, -2) * d ** -0.5
    real = mask.bool()[:, None, None, :] & torch.ones(seq, seq, dtype=torch.bool).tril()
    torch.testing.assert_close(scores.masked_select(real.expand_as(scores)), raw.masked_select(real.expand_as(raw)))
    assert (scores.masked_select(~real.expand_as(scores)) < -1e30).all()
    probs = got["self_attn.attention_probabilities"]
    torch.testing.assert_close(probs, scores.softmax(-1))
    heads_out = got["self_attn.attention_head_outputs"]
    torch.testing.assert_close(heads_out, (probs @ v.repeat_interleave(heads // kv, dim=1)).transpose(1, 2))
    # the gate: q_proj holds per head [query | gate]; o_proj takes heads * sigmoid(gate)
    gate = seen["q_proj.out"].unflatten(-1, (-1, 2 * d))[..., d:]
    torch.testing.assert_close(seen["o_proj.in"], (heads_out * gate.sigmoid()).flatten(2))
    assert torch.equal(got["self_attn.attention_premix"], seen["o_proj.in"].view(batch, seq, heads, d))
    assert torch.equal(got["self_attn.attention_output"], seen["mixer.out"][0])


def test_q_norm_gain_is_one_plus_weight(eager_model, prompts):
    got, seen, _ = read_all(eager_model, prompts, ATTN, [])
    attn = eager_model._module.model.layers[ATTN].self_attn
    d = eager_model.head_dim
    query = seen["q_proj.out"].unflatten(-1, (-1, 2 * d))[..., :d]
    rms = query * torch.rsqrt(query.pow(2).mean(-1, keepdim=True) + attn.q_norm.eps)
    torch.testing.assert_close(seen["q_norm.out"], rms * (1 + attn.q_norm.weight))
    assert attn.q_norm.weight.abs().min() > 0, "the tiny checkpoint randomizes norm gains, so 1 + w differs from w"


def test_identities_on_both_block_kinds(model, prompts):
    for layer, mixer in ((DELTA, "linear_attn"), (ATTN, "self_attn")):
        got, _, _ = read_all(model, prompts, layer, ["layer_input", f"{mixer}.attention_output", "mlp.mlp_output",
                                                     "layer_output"])
        x, mix, mlp, out = (got[n] for n in ["layer_input", f"{mixer}.attention_output", "mlp.mlp_output",
                                                "layer_output"])
        assert torch.equal((x + mix) + mlp, out)


def test_sdpa_scores_unavailable_names_eager(model, prompts):
    import nncanon

    with pytest.raises(nncanon.Unavailable, match='attn_implementation="eager"'):
        with model.trace(prompts):
            model.layers[ATTN].self_attn.attention_scores.save()
    rows = {(r.host, r.name): r for r in model.support()}
    assert not rows[("model.layers[i].self_attn", "attention_scores")].available
    assert rows[("model.layers[i].self_attn", "attention_queries")].available


def test_wrong_host_is_a_clear_error(model):
    import nncanon

    with pytest.raises(nncanon.NotOnHost, match=r"layers\[0\] is a linear_attention block.*\[3, 7\]"):
        _ = model.layers[0].self_attn
    with pytest.raises(nncanon.NotOnHost, match="attention_scores is served on model.layers"):
        _ = model.layers[0].linear_attn.attention_scores
    assert not hasattr(model.layers[0], "self_attn")


def test_router_before_shared_expert_is_out_of_order(model, prompts):
    from nnsight.intervention.interleaver import OutOfOrderError

    moe = model.layers[DELTA].mlp
    with pytest.raises(OutOfOrderError):
        with model.trace(prompts):
            moe.router_logits.save()
            moe.shared_experts.output.save()
    with model.trace(prompts):  # the forward's order works
        ungated = moe.shared_experts.output.save()
        logits = moe.router_logits.save()
    assert ungated.shape[0] == logits.shape[0] * logits.shape[1]


def test_aliases_reach_the_same_modules(model):
    moe = model.layers[DELTA].mlp
    assert moe.router is moe.gate and moe.shared_experts is moe.shared_expert
    assert moe.top_k == model.text_config.num_experts_per_tok
