"""attention_head_results (TransformerLens's hook_result) against plain PyTorch: each head's slice of what the
output projection receives, through that head's own columns of the projection's weight, one head at a time, as a
plain forward pre-hook sees it; summed over heads plus the projection's bias, what the projection returns (a plain
forward hook). Families: llama (no bias), gpt2 (a Conv1D with a bias), gpt_oss (a Linear with a bias),
deepseek_v3 (value heads narrower than the query heads)."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import STEP, SUBBLOCK

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]
PROJECTION = {"llama": "o_proj", "gpt2": "c_proj", "gpt_oss": "o_proj", "deepseek_v3": "o_proj"}


@pytest.mark.parametrize("family", list(PROJECTION))
def test_head_results_are_each_heads_columns_of_the_projection(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family(family)))
    block = 1
    attention = model.layers[block].self_attn
    proj = getattr(attention, PROJECTION[family])._module
    seen = {}

    def keep_input(module, args):
        seen.setdefault("input", args[0].clone())  # returns None: the input goes on unreplaced

    def keep_output(module, args, output):
        seen.setdefault("output", output.clone())

    handles = [proj.register_forward_pre_hook(keep_input), proj.register_forward_hook(keep_output)]
    try:
        with torch.no_grad(), model.trace(PROMPTS):
            results = attention.attention_head_results.save()
    finally:
        for handle in handles:
            handle.remove()
    heads = model.num_heads
    x = seen["input"]
    width = x.shape[-1] // heads
    weight = proj.weight if isinstance(proj, torch.nn.Linear) else proj.weight.T  # Conv1D: [in, out]
    assert results.shape == (*x.shape[:-1], heads, weight.shape[0])
    for h in range(heads):
        columns = slice(h * width, (h + 1) * width)
        # one head's dot products over its width (<= 32 roundings) in another order than the einsum: STEP
        torch.testing.assert_close(results[..., h, :], x[..., columns] @ weight[:, columns].T, rtol=STEP, atol=STEP)
    bias = proj.bias if proj.bias is not None else 0
    # heads · width products and sums against the projection's one matmul (<= 800 roundings): SUBBLOCK
    torch.testing.assert_close(results.sum(-2) + bias, seen["output"], rtol=SUBBLOCK, atol=SUBBLOCK)


def test_head_results_are_read_only():
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("llama")))
    with pytest.raises(nncanon.ReadOnly, match=r"^model\.layers\[0\]\.self_attn\.attention_head_results is read-only"):
        with torch.no_grad(), model.trace("The cat sat"):
            model.layers[0].self_attn.attention_head_results[:, :, 0] = 0
