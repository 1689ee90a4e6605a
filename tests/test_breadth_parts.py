"""The shared parts issue 24 added (nncanon/parts/): what each proves, checked without a checkpoint."""

from __future__ import annotations

import math

import pytest
import torch

from nncanon.parts.attention import rotary
from nncanon.parts.attention.alibi import bias, slopes


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 8, 12, 16, 24, 32, 71, 112])
def test_alibi_slopes_from_the_paper_are_the_ones_bloom_runs(heads):
    """The slopes are written from the ALiBi paper, not read from transformers: they must equal BLOOM's, for a power
    of two and for the head counts that take the second sequence (BLOOM-176B's 112)."""
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    # BLOOM computes them in float32 (a power of a float32 base): one rounding per product of the powers
    torch.testing.assert_close(slopes(heads), _get_alibi_slopes(heads, "cpu").double(), rtol=1e-6, atol=0)


def test_alibi_bias_counts_each_rows_real_tokens_from_zero():
    padding = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    b = bias(2, padding, keys=5)
    assert b.shape == (2, 2, 1, 5)
    assert b[0, 0, 0].tolist() == [0.0, 0.0, 0.0, slopes(2)[0].item(), 2 * slopes(2)[0].item()]
    assert b[1, 1, 0].tolist() == [k * slopes(2)[1].item() for k in range(5)]


@pytest.mark.parametrize("pairing, other", [(rotary.ADJACENT, rotary.HALVES), (rotary.HALVES, rotary.ADJACENT)])
def test_a_rotation_keeps_its_own_pairs_lengths_and_not_the_others(pairing, other):
    """The partial-rotary relation tells GPT-J's pairs (2j, 2j+1) from GPT-NeoX's (j, j + d/2): rotating by one
    pairing keeps that pairing's lengths and the untouched tail, and not the other pairing's lengths."""
    torch.manual_seed(0)
    x, d = torch.randn(2, 3, 5, 10, dtype=torch.float64), 6
    angle = torch.rand(5, d // 2, dtype=torch.float64) * math.pi
    y = x.clone()
    first, second = (slice(0, d, 2), slice(1, d, 2)) if pairing == rotary.ADJACENT else (slice(0, d // 2), slice(d // 2, d))
    a, b = x[..., first], x[..., second]
    y[..., first], y[..., second] = a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()
    same = rotary.rotated(x, y, d, pairing)
    assert all(torch.allclose(computed, read) for computed, read in same)
    assert not torch.allclose(rotary.pair_norms(x, d, other), rotary.pair_norms(y, d, other))


@pytest.mark.parametrize("family, cls, override, says", [
    ("bloom", "BloomForCausalLM", {"apply_residual_connection_post_layernorm": True}, "residual before the norm"),
    ("phi", "PhiForCausalLM", {"qk_layernorm": True}, "without q/k norms"),
    ("gpt_bigcode", "GPTBigCodeForCausalLM", {"multi_query": False}, "multi-query"),
])
def test_a_layout_the_family_does_not_serve_is_refused_naming_it(family, cls, override, says):
    """Each family serves the layout its released checkpoints use, and refuses another one by name (its values and
    relations would read the wrong tensors there) instead of serving it wrong; the recipe's own layout loads."""
    import transformers

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family
    from nncanon.core.model import FamilyMismatch
    from nncanon.families import family_module
    from nncanon.parts import loading

    causal = getattr(transformers, cls)
    recipe = dict(get_family(family).tiny["config"])
    tokenizer = loading.tokenizer(checkpoint_dir(get_family(family)))
    module = family_module(family)
    nncanon.wrap(module, loading.meta(causal, causal.config_class(**recipe)), "text-generation",
                 tokenizer=tokenizer, device="meta")
    with pytest.raises(FamilyMismatch, match=says):
        nncanon.wrap(module, loading.meta(causal, causal.config_class(**{**recipe, **override})), "text-generation",
                     tokenizer=tokenizer, device="meta")
