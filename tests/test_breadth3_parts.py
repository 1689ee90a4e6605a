"""The shared parts breadth3 added for issue 24 (nncanon/parts/): what each proves, checked without a checkpoint."""

from __future__ import annotations

import pytest
import torch

from nncanon.parts.blocks.xielu import xielu


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


def test_codegen_split_reads_four_chunks_of_query_value_key():
    """CodeGen's qkv_proj output is four chunks (mp_num = 4), each [queries | values | keys] of a quarter of the heads:
    split_qkv recovers what CodeGenAttention's forward hands its attention (checked against transformers' own
    _split_heads on a random projection), and the naive split by thirds [q | k | v] does not."""
    from transformers import CodeGenConfig
    from transformers.models.codegen.modeling_codegen import CodeGenAttention

    from nncanon.families.codegen import MP_NUM, split_qkv

    torch.manual_seed(0)
    module = CodeGenAttention(CodeGenConfig(n_embd=64, n_head=8, rotary_dim=4, n_positions=32, n_ctx=32), 0)
    x = torch.randn(2, 5, 64)
    query, value, key = split_qkv(module, x)
    qkv = module.qkv_proj(x)
    local = module.head_dim * module.num_attention_heads // MP_NUM
    want_q, want_v, want_k = torch.split(qkv.reshape(qkv.shape[:-1] + (MP_NUM, -1)), local, dim=-1)
    if hasattr(module, "_split_heads"):  # transformers 5.23: the forward's own reshaping
        def heads(t):
            return module._split_heads(t, module.num_attention_heads, module.head_dim, mp_num=MP_NUM).transpose(1, 2)
    else:  # 5.24: reshape to (..., heads, head_dim), as its forward does
        def heads(t):
            return t.reshape(*t.shape[:2], -1, module.head_dim).transpose(1, 2)
    for mine, want in ((query, want_q), (value, want_v), (key, want_k)):
        assert torch.equal(mine, heads(want))
    thirds = qkv.split(qkv.shape[-1] // 3, dim=-1)
    assert not torch.allclose(thirds[2].reshape(2, 5, 8, 8).transpose(1, 2), value)
    assert not torch.allclose(thirds[1].reshape(2, 5, 8, 8).transpose(1, 2), key)
