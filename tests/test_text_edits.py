"""Writing values: every writable text value, edited in place and by assignment, moves the
logits; zeroing a whole contribution equals removing it with a plain PyTorch hook."""

from __future__ import annotations

import pytest
import torch

DELTA, ATTN = 1, 3

HOSTS = {
    "": ["token_embeddings", "final_norm_output", "lm_head_output", "logits"],
    f"layers.{DELTA}": ["layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input",
                        "layer_output"],
    f"layers.{DELTA}.linear_attn": ["attention_queries", "attention_keys", "attention_values", "decays", "betas",
                                    "attention_head_outputs", "attention_output"],
    f"layers.{DELTA}.mlp": ["router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output",
                            "shared_expert_output", "mlp_output"],
    f"layers.{DELTA}.mlp.shared_experts": ["mlp_activation", "mlp_neurons", "mlp_output"],
    f"layers.{ATTN}.self_attn": ["attention_queries", "attention_keys", "attention_values", "attention_scores",
                                 "attention_probabilities", "attention_head_outputs", "attention_premix",
                                 "attention_output"],
}


def cases():
    return [(host, name) for host, names in HOSTS.items() for name in names]


def nudge(t: torch.Tensor, experts: int) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return t * 1.5 + 0.25
    return (t + 1) % experts


def baseline(model, prompts):
    with torch.no_grad(), model.trace(prompts):
        logits = model.logits.save()
    return logits


@pytest.mark.parametrize("host,name", cases(), ids=lambda c: c if isinstance(c, str) else None)
def test_edit_moves_logits(eager_model, prompts, host, name):
    model = eager_model
    experts = model.text_config.num_experts
    before = baseline(model, prompts)
    envoy = model.get(host) if host else model
    with torch.no_grad(), model.trace(prompts):  # in place
        view = getattr(envoy, name)
        view[:] = nudge(view, experts)
        in_place = model.logits.save() if name != "logits" else view.save()
    with torch.no_grad(), model.trace(prompts):  # by assignment
        setattr(envoy, name, nudge(getattr(envoy, name), experts))
        assigned = model.logits.save()
    assert not torch.equal(in_place, before), f"an in-place edit of {host}.{name} did not reach the logits"
    assert not torch.equal(assigned, before), f"assigning {host}.{name} did not reach the logits"
    torch.testing.assert_close(in_place, assigned, equal_nan=True)  # a padded row of -inf scores stays NaN


def test_read_only_values_refuse_assignment(model, prompts):
    import nncanon

    for name in ("input_ids", "attention_mask", "next_token_probs", "input_size"):
        with pytest.raises(nncanon.ReadOnly, match=name):
            with model.trace(prompts):
                setattr(model, name, None)


def hooked_logits(model, prompts, module, hook):
    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad(), model.trace(prompts):
            logits = model.logits.save()
    finally:
        handle.remove()
    return logits


def test_zeroing_the_shared_expert_equals_removing_it(model, prompts):
    moe = model.layers[DELTA].mlp
    with torch.no_grad(), model.trace(prompts):
        moe.shared_expert_output = torch.zeros_like(moe.shared_expert_output)
        ablated = model.logits.save()
    removed = hooked_logits(model, prompts, moe._module.shared_expert, lambda m, a, out: torch.zeros_like(out))
    assert torch.equal(ablated, removed)
    assert not torch.equal(ablated, baseline(model, prompts))


def test_zeroing_one_experts_weight_equals_dropping_it_from_the_routing(model, prompts):
    moe = model.layers[DELTA].mlp
    with torch.no_grad(), model.trace(prompts):
        chosen = moe.expert_indices.save()
    e = int(chosen[0, -1, 0])  # an expert the last token uses
    with torch.no_grad(), model.trace(prompts):
        weights = moe.expert_weights.masked_fill(moe.expert_indices == e, 0)
        moe.expert_weights = weights
        kept = weights.save()
        ablated = model.logits.save()

    def drop(module, args, output):
        logits, scores, indices = output
        return logits, scores.masked_fill(indices == e, 0), indices

    removed = hooked_logits(model, prompts, moe._module.gate, drop)
    assert torch.equal(ablated, removed)
    assert (kept.sum(-1) < 1).any(), "the other slots keep their weights, so they sum to less than one"


def test_zeroing_attention_output_equals_skipping_the_mixer(model, prompts):
    attn = model.layers[ATTN].self_attn
    with torch.no_grad(), model.trace(prompts):
        attn.attention_output = torch.zeros_like(attn.attention_output)
        ablated = model.logits.save()
    removed = hooked_logits(model, prompts, attn._module, lambda m, a, out: (torch.zeros_like(out[0]), out[1]))
    assert torch.equal(ablated, removed)


def test_token_flattened_values_keep_to_their_invoke(model, prompts):
    """The mixture's values are token rows, which nnsight does not narrow per invoke: the tokens view
    does, so each invoke reads and writes its own prompt's rows."""
    moe = model.layers[DELTA].mlp
    with torch.no_grad(), model.trace(prompts):
        both = moe.router_logits.save()
        before = model.logits.save()
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(prompts[0]):
            first = moe.router_logits.save()
        with tracer.invoke(prompts[1]):
            second = moe.router_logits.save()
            moe.shared_expert_output = torch.zeros_like(moe.shared_expert_output)
            after = model.logits.save()
    assert first.shape[0] == second.shape[0] == 1
    assert torch.equal(first, both[:1]) and torch.equal(second, both[1:])
    with torch.no_grad(), model.trace(prompts):
        shared = moe.shared_expert_output
        shared[1:] = 0
        expected = model.logits.save()
    torch.testing.assert_close(after, expected[1:])
    assert not torch.equal(after, before[1:])
