"""The residual decomposition (nncanon.decompose) against plain PyTorch: the accumulated stream is what plain forward
hooks see entering each block and leaving the last; the components are the embedding, each attention's and each
MLP's output as plain hooks see them, and sum to the last block's output; the final norm applied to the stack sums
to the norm of the stream (less its bias). Families: llama (sequential), gpt2 (LayerNorm, learned positions),
gpt_neox (parallel blocks), gemma2 (sandwich norms, a 1 + weight gain), granite (residual_multiplier)."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import SUBBLOCK
from nncanon.research import decompose

#: one prompt: a family pads a batch on its own side, which a plain forward of the tokenizer need not repeat
PROMPTS = ["The cat sat on the mat because it was warm."]
FAMILIES = ["llama", "gpt2", "gpt_neox", "gemma2", "granite"]


def _load(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(family)))


def _plain(model):
    """Each block's input and output, and each attention's and MLP's output, by plain forward hooks."""
    seen: dict = {}

    def keep(key):
        def hook(module, args, kwargs, out):
            x = args[0] if args else next(iter(kwargs.values()))
            seen.setdefault(key + ".in", x.detach().clone())
            seen.setdefault(key + ".out", (out[0] if isinstance(out, tuple) else out).detach().clone())
        return hook

    handles = []
    for i in range(len(model.layers)):
        block = model.layers[i]
        handles.append(block._module.register_forward_hook(keep(f"{i}"), with_kwargs=True))
        handles.append(block.self_attn._module.register_forward_hook(keep(f"{i}.attn"), with_kwargs=True))
        handles.append(block.mlp._module.register_forward_hook(keep(f"{i}.mlp"), with_kwargs=True))
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPTS, return_tensors="pt", padding=True))
    finally:
        for handle in handles:
            handle.remove()
    return seen

# the trace and the plain forward run the same modules on the same batch, but nnsight's batching of invokes may pick
# other kernels' reduction order: a rounding per op, well within SUBBLOCK


@pytest.mark.parametrize("family", FAMILIES)
def test_components_sum_to_the_last_blocks_output(family):
    model = _load(family)
    plain = _plain(model)
    n = len(model.layers)
    labels, acc = decompose.accumulated(model, PROMPTS)
    assert labels == [f"{i}_pre" for i in range(n)] + ["final_post"]
    for i in range(n):
        torch.testing.assert_close(acc[i], plain[f"{i}.in"], rtol=SUBBLOCK, atol=SUBBLOCK)
    torch.testing.assert_close(acc[-1], plain[f"{n - 1}.out"], rtol=SUBBLOCK, atol=SUBBLOCK)

    labels, parts = decompose.components(model, PROMPTS)
    assert labels[0] == "embed" and labels[1:3] == ["0_attn", "0_mlp"] and len(labels) == 1 + 2 * n
    torch.testing.assert_close(parts[0], plain["0.in"], rtol=SUBBLOCK, atol=SUBBLOCK)
    if family in ("llama", "gpt2", "gpt_neox"):  # the added terms are the modules' own outputs
        torch.testing.assert_close(parts[1], plain["0.attn.out"], rtol=SUBBLOCK, atol=SUBBLOCK)
        torch.testing.assert_close(parts[2], plain["0.mlp.out"], rtol=SUBBLOCK, atol=SUBBLOCK)
    # 2·blocks + 1 streams summed in another order than the forward's adds: SUBBLOCK
    torch.testing.assert_close(parts.sum(0), plain[f"{n - 1}.out"], rtol=SUBBLOCK, atol=SUBBLOCK)

    normed = decompose.apply_final_norm(model, parts, acc[-1])
    norm = model.norm._module
    bias = getattr(norm, "bias", None)
    with torch.no_grad():
        full = norm(plain[f"{n - 1}.out"])
    torch.testing.assert_close(normed.sum(0) + (0 if bias is None else bias), full, rtol=SUBBLOCK, atol=SUBBLOCK)


def test_a_family_whose_branches_do_not_sum_is_refused():
    """A block whose relations name a term that is not what it adds is refused in one line naming the family."""
    model = _load("llama")
    block = type(model.layers[0])
    relations = block.RELATIONS
    from dataclasses import replace

    try:  # pretend the MLP's add were the attention's output: the sum no longer holds
        block.RELATIONS = tuple(replace(r, adds=(r.adds[0], "layer_input", r.adds[2])) if r.adds and "mlp" in r.adds[1]
                                else r for r in relations)
        with pytest.raises(decompose.NotDecomposable, match=r"^llama: the terms its blocks' relations add"):
            decompose.components(model, PROMPTS)
    finally:
        block.RELATIONS = relations
