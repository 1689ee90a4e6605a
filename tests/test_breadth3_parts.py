"""The shared parts breadth3 added for issue 24 (nncanon/parts/): what each proves, checked without a checkpoint."""

from __future__ import annotations

import pytest
import torch

from nncanon.parts.xielu import xielu


def _activation(alpha_p: float, alpha_n: float):
    from transformers.activations import XIELUActivation

    return XIELUActivation(alpha_p_init=alpha_p, alpha_n_init=alpha_n, dtype=torch.float32)


@pytest.mark.parametrize("alpha_p, alpha_n", [(0.8, 0.8), (1.7, 0.6), (0.3, 2.5)])
def test_xielu_written_from_the_formula_is_the_activation_transformers_runs(alpha_p, alpha_n):
    """The formula is written from the xIELU paper's definition, not by calling the module: it must equal
    transformers' XIELUActivation (its Python path, in float32) on both branches and around eps, for several
    learned coefficients."""
    act = _activation(alpha_p, alpha_n)
    x = torch.cat([torch.linspace(-6, 6, 241), torch.tensor([0.0, -1e-7, 1e-7, -1e-6, -2e-6])])
    # float32 forward vs float64 formula: a handful of roundings (square, expm1, products, a sum) at the
    # activation's scale (|x| <= 6, coefficients <= 3: values <= ~110)
    torch.testing.assert_close(act(x).double(), xielu(act, x), rtol=1e-6, atol=1e-6 * 110)


def test_xielu_tells_its_own_coefficients_from_another_blocks():
    """Each block learns its own alpha_p and alpha_n: the relation reads them from the block's act_fn, so another
    block's coefficients (or a fixed activation such as GELU) do not satisfy it."""
    x = torch.linspace(-4, 4, 81)
    mine, other = _activation(0.8, 0.8), _activation(1.5, 0.4)
    assert not torch.allclose(xielu(other, x), mine(x).double(), atol=1e-3)
    assert not torch.allclose(torch.nn.functional.gelu(x).double(), mine(x).double(), atol=1e-3)


@pytest.mark.parametrize("override, says", [({"use_parallel_residual": True}, "use_parallel_residual"),
                                            ({"qk_layernorm": True}, "qk_layernorm")])
def test_stablelm_refuses_the_12b_layout_naming_the_switch(override, says):
    """StableLM serves the sequential block without q/k norms (Stable LM 2 1.6B's); Stable LM 2 12B's parallel block
    and per-head q/k LayerNorms put its values elsewhere, so either switch is refused by name, and the recipe's own
    layout loads."""
    import transformers

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family
    from nncanon.families import family_module
    from nncanon.model import FamilyMismatch
    from nncanon.parts import loading

    causal = transformers.StableLmForCausalLM
    recipe = dict(get_family("stablelm").tiny["config"])
    tokenizer = loading.tokenizer(checkpoint_dir("stablelm"))
    module = family_module("stablelm")
    nncanon.wrap(module, loading.meta(causal, causal.config_class(**recipe)), "text-generation",
                 tokenizer=tokenizer, device="meta")
    with pytest.raises(FamilyMismatch, match=says):
        nncanon.wrap(module, loading.meta(causal, causal.config_class(**{**recipe, **override})), "text-generation",
                     tokenizer=tokenizer, device="meta")
