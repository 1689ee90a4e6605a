"""gpt-oss's new values against what transformers itself returns: the probabilities over the keys and
the sink's share against the native model's ``output_attentions`` (the softmax with the sink column
dropped), and the routed experts' weighted outputs (read under the default grouped_mm experts)
against the eager experts' own loop, seen by a plain forward hook."""

from __future__ import annotations

import pytest
import torch

from generator.recipe.family import get_family

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


@pytest.fixture(scope="module")
def checkpoint():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family("gpt_oss"))


def test_sink_probability_is_what_the_keys_leave(checkpoint):
    import nncanon

    model = nncanon.load(checkpoint)
    ids = model.tokenizer(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        native = model._module(**ids, output_attentions=True).attentions
    assert len(native) == len(model.layers)
    for i, block in enumerate(model.layers):
        a = block.self_attn
        with torch.no_grad(), model.trace(PROMPTS):
            sink = a.attention_sink_probability.save()
            probs = a.attention_probabilities.save()
        real = ids["attention_mask"].bool()
        torch.testing.assert_close(probs, native[i])
        # a padded query has no key; on a real one the sink takes exactly what the keys leave
        left = (1 - native[i].sum(-1)).permute(0, 2, 1)[real]
        # 1 - a softmax row summed over <= 16 keys, against the sink's own column: <= 32 roundings of terms <= 1,
        # 2 gamma_32 = 3.8e-6, so 1e-5 relative and 1e-6 absolute for a sink near 0
        torch.testing.assert_close(sink.permute(0, 2, 1)[real], left, atol=1e-6, rtol=1e-5)
        shares = sink.permute(0, 2, 1)[real]
        assert bool((shares > 0).all() and (shares < 1).all()), f"block {i}: the sink takes all or nothing"
        assert float(shares.mean()) > 0.05, f"block {i}: the sink takes next to nothing (the test would check little)"
    windowed = model.layers[0].self_attn._module.sliding_window
    assert windowed is not None and windowed < ids["input_ids"].shape[1]


def test_expert_outputs_sum_to_the_eager_experts(checkpoint):
    import nncanon

    fused = nncanon.load(checkpoint)
    eager = nncanon.load(checkpoint, experts_implementation="eager")
    for i in range(len(fused.layers)):
        seen = {}
        module = eager.layers[i].mlp.experts._module
        handle = module.register_forward_hook(lambda mod, args, out, seen=seen: seen.setdefault("out", out))
        try:
            with torch.no_grad():
                eager._module(**eager.tokenizer(PROMPTS, return_tensors="pt", padding=True))
        finally:
            handle.remove()
        with torch.no_grad(), fused.trace(PROMPTS):
            weights = fused.layers[i].mlp.expert_weights.save()
            slots = fused.layers[i].mlp.expert_outputs.save()
        # the fused and the eager experts: the clamped SwiGLU's two projections and a sum over the chosen slots,
        # in another order: the SUBBLOCK level (<= 800 roundings, nncanon/core/precision.py)
        torch.testing.assert_close(slots.sum(-2).reshape(-1, slots.shape[-1]), seen["out"], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
