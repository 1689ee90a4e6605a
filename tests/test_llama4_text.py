"""Llama 4 text's new values against the native model: the chunked pattern against the mask transformers hands
each attention call (hooked) and its own ``output_attentions``; the router scores and the experts' inputs against
plain hooks on the router and the experts; the shared expert's output is what it returned before the mixture
added the routed output into it."""

from __future__ import annotations

import pytest
import torch

from generator.recipe.family import get_family

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


@pytest.fixture(scope="module")
def eager():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("llama4_text")), attn_implementation="eager")


def test_probabilities_follow_the_chunked_mask(eager):
    ids = eager.tokenizer(PROMPTS, return_tensors="pt", padding=True)
    assert ids["input_ids"].shape[1] > eager.text_config.attention_chunk_size
    with torch.no_grad():
        native = eager._module(**ids, output_attentions=True).attentions
    real = ids["attention_mask"].bool()
    for i, kind in enumerate(eager.text_config.layer_types):
        with torch.no_grad(), eager.trace(PROMPTS):
            probs = eager.layers[i].self_attn.attention_probabilities.save()
        torch.testing.assert_close(probs.permute(0, 2, 1, 3)[real], native[i].permute(0, 2, 1, 3)[real])
        # the last real query of the unpadded row sees keys only from its own chunk on a chunked block
        seen = probs[0, 0, -1] > 0
        last = seen.shape[0] - 1
        first = last - last % eager.text_config.attention_chunk_size
        assert bool(seen[first:].all())
        assert bool(seen[:first].any()) == (kind == "full_attention"), f"block {i} ({kind})"


def test_router_scores_scale_the_experts_inputs(eager):
    moe_block = eager.text_config.moe_layers[0]
    moe = eager.layers[moe_block].mlp
    module = moe._module
    seen = {}

    def record(key, pick):
        def hook(mod, args, out):
            seen.setdefault(key, pick(args, out))
        return hook

    hooks = [module.router.register_forward_hook(record("router", lambda a, o: o)),
             module.experts.register_forward_hook(record("experts_in", lambda a, o: a[0])),
             module.shared_expert.register_forward_hook(record("shared", lambda a, o: o.clone()))]
    try:
        with torch.no_grad(), eager.trace(PROMPTS):
            scores = moe.router_scores.save()
            inputs = moe.expert_inputs.save()
            shared = moe.shared_expert_output.save()
            out = moe.mlp_output.save()
    finally:
        for h in hooks:
            h.remove()
    native_scores, _ = seen["router"]
    assert torch.equal(scores.reshape(native_scores.shape), native_scores)
    experts = native_scores.shape[1]
    native_in = seen["experts_in"].view(experts, *scores.shape[:2], -1).permute(1, 2, 0, 3)
    assert torch.equal(inputs, native_in)
    assert torch.equal(shared.reshape(seen["shared"].shape), seen["shared"])
    assert not torch.allclose(shared, out), "the shared expert's output is served before the routed one is added"
    assert bool(((scores > 0).sum(-1) == eager.text_config.num_experts_per_tok).all())
