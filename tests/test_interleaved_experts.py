"""gpt-oss's per-expert weights (nncanon/families/gpt_oss.py's EXPERT_WEIGHTS) against plain PyTorch: W_gate and
W_in are the even and odd columns of the fused ``gate_up_proj`` (strided views: an edit of W_gate lands in an even
column and nowhere else), and they recompute an expert the way the module's own ``_apply_gate`` does."""

from __future__ import annotations

import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import SUBBLOCK


def _load():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("gpt_oss")))


def test_gate_and_up_are_the_even_and_odd_columns_and_an_edit_lands():
    model = _load()
    mlp = model.layers[0].mlp
    experts = mlp.experts._module
    fused, before = experts.gate_up_proj, experts.gate_up_proj.detach().clone()
    assert mlp.W_gate.shape == mlp.W_in.shape == (experts.num_experts, model.hidden_size, experts.intermediate_size)
    assert mlp.b_out is experts.down_proj_bias and mlp.W_out is experts.down_proj
    try:
        with torch.no_grad():
            mlp.W_gate[2, :, 5] = 0  # expert 2's gate neuron 5: column 10 of its gate_up_proj
        changed = (fused != before).nonzero()
        assert set(changed[:, 0].tolist()) == {2} and set(changed[:, 2].tolist()) == {10}
        mlp.W_in = torch.zeros_like(mlp.W_in)  # assigned: copied into every odd column
        assert torch.all(fused[..., 1::2] == 0) and torch.equal(fused[..., 0::2][:, :, 6:], before[..., 0::2][:, :, 6:])
    finally:
        with torch.no_grad():
            fused.copy_(before)


def test_the_weights_recompute_an_expert_as_the_module_does():
    model = _load()
    mlp = model.layers[1].mlp
    experts = mlp.experts._module
    x = torch.randn(3, model.hidden_size)
    plain = experts._apply_gate(x @ experts.gate_up_proj[4] + experts.gate_up_proj_bias[4])
    plain = plain @ experts.down_proj[4] + experts.down_proj_bias[4]
    gate = (x @ mlp.W_gate[4] + mlp.b_gate[4]).clamp(max=experts.limit)
    up = (x @ mlp.W_in[4] + mlp.b_in[4]).clamp(-experts.limit, experts.limit)
    ours = ((up + 1) * gate * torch.sigmoid(gate * experts.alpha)) @ mlp.W_out[4] + mlp.b_out[4]
    # hidden_size- then intermediate_size-long dot products in another order: SUBBLOCK
    torch.testing.assert_close(ours, plain, rtol=SUBBLOCK, atol=SUBBLOCK)


def test_llama4s_experts_are_the_halves_of_gate_up_and_an_edit_lands():
    """Llama 4's experts store gate_up_proj [experts, hidden, 2·intermediate] as [in, out], the gate the first half of
    the columns: W_gate is that half (an edit lands there and nowhere else), and an expert recomputed from the
    weights is the module's own bmm on the same input."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("llama4_text")))
    moe = next(i for i in range(model.num_layers) if type(model.layers[i].mlp).__name__ == "SigmoidMoE")
    mlp = model.layers[moe].mlp
    experts = mlp.experts._module
    fused, before = experts.gate_up_proj, experts.gate_up_proj.detach().clone()
    width = experts.expert_dim
    assert mlp.W_gate.shape == mlp.W_in.shape == (experts.num_experts, model.hidden_size, width)
    assert mlp.W_out is experts.down_proj and mlp.b_in is None
    try:
        with torch.no_grad():
            mlp.W_gate[1, :, 3] = 0
        changed = (fused != before).nonzero()
        assert set(changed[:, 0].tolist()) == {1} and set(changed[:, 2].tolist()) == {3}
        mlp.W_in = torch.zeros_like(mlp.W_in)  # assigned: the second half of every expert's columns
        assert torch.all(fused[..., width:] == 0)
    finally:
        with torch.no_grad():
            fused.copy_(before)
    x = torch.randn(experts.num_experts * 2, model.hidden_size)
    plain = experts(x).view(experts.num_experts, 2, -1)
    xs = x.view(experts.num_experts, 2, -1)
    ours = torch.einsum("eti,eid->etd", experts.act_fn(torch.einsum("etd,edi->eti", xs, mlp.W_gate))
                        * torch.einsum("etd,edi->eti", xs, mlp.W_in), mlp.W_out)
    # hidden_size- then intermediate_size-long dot products in another order: SUBBLOCK
    torch.testing.assert_close(ours, plain, rtol=SUBBLOCK, atol=SUBBLOCK)
