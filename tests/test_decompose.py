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


#: each family's native modules the plain check hooks: the block's list, what each sublayer adds to the stream (the
#: module whose output is the add), the attention's output projection, the final norm and the head
NATIVE = {
    "gpt2": {"layers": "transformer.h", "adds": ("attn", "mlp"), "o_proj": "attn.c_proj", "norm": "transformer.ln_f"},
    "gemma2": {"layers": "model.layers", "adds": ("post_attention_layernorm", "post_feedforward_layernorm"),
               "o_proj": "self_attn.o_proj", "norm": "model.norm"},
}


@pytest.mark.parametrize("family", list(NATIVE))
def test_logit_attribution_with_its_stated_rest_is_the_plain_logit(family):
    """Direct logit attribution as the Recipes page computes it (decompose's shares, the final norm's bias, the head's
    bias, each head's part through the post-attention norm with b_O as its rest) against a computation from plain
    forward hooks on the native modules alone: every share is the plain one, and the shares, the biases and the
    stated step past the head (logits - lm_head_output: Gemma 2's softcap) sum to the logit the plain module returns."""
    spec, model = NATIVE[family], _load(family)
    native = model._module
    blocks = native.get_submodule(spec["layers"])
    seen: dict = {}

    def keep(key, pre=False):
        def hook(module, args, out=None):
            x = args[0] if pre else (out[0] if isinstance(out, tuple) else out)
            seen[key] = x.detach()[0, -1].clone()
        return hook

    handles = [blocks[0].register_forward_pre_hook(keep("embed", pre=True)),
               blocks[0].get_submodule(spec["o_proj"]).register_forward_pre_hook(keep("premix", pre=True)),
               blocks[0].get_submodule(spec["adds"][0].replace("post_attention_layernorm", "self_attn"))
               .register_forward_hook(keep("attention_output")),
               native.lm_head.register_forward_hook(keep("lm_head"))]
    for i, block in enumerate(blocks):
        for name in spec["adds"]:
            handles.append(block.get_submodule(name).register_forward_hook(keep(f"{i}.{name}")))
        handles.append(block.register_forward_hook(keep(f"{i}.out")))
    try:
        with torch.no_grad():
            logits = native(**model.tokenizer(PROMPTS, return_tensors="pt")).logits[0, -1]
    finally:
        for handle in handles:
            handle.remove()
    token = int(logits.argmax())
    row = native.lm_head.weight[token].detach().double()
    norm, last = native.get_submodule(spec["norm"]), seen[f"{len(blocks) - 1}.out"].double()
    centred = isinstance(norm, torch.nn.LayerNorm)
    centre = (lambda x: x - x.mean(-1, keepdim=True)) if centred else (lambda x: x)
    eps = norm.eps
    gain = norm.weight.detach().double() if centred else 1 + norm.weight.detach().double()  # Gemma's RMSNorm scales by 1 + weight
    scale = (centre(last).pow(2).mean() + eps).sqrt()
    plain = [seen["embed"].double()] + [seen[f"{i}.{name}"].double() for i in range(len(blocks)) for name in spec["adds"]]
    plain_shares = torch.stack([(centre(c) / scale * gain) @ row for c in plain])
    bias = 0 if getattr(norm, "bias", None) is None else norm.bias.detach().double() @ row
    stated_rest = seen["lm_head"][token].double() - logits[token].double()  # the step past the head, as stated

    labels, parts = decompose.components(model, PROMPTS)
    shares = (decompose.apply_final_norm(model, parts[:, 0, -1], seen[f"{len(blocks) - 1}.out"]) @ model.W_U[:, token]).detach()
    size = float(plain_shares.abs().max() + logits[token].abs())
    # the same sums in another order, in float32 against float64: a sub-block's chain of roundings of the largest
    torch.testing.assert_close(shares.double(), plain_shares, rtol=0, atol=SUBBLOCK * size)
    total = plain_shares.sum() + bias - stated_rest
    assert abs(float(total) - float(logits[token])) <= SUBBLOCK * size
    assert (family == "gemma2") == (abs(float(stated_rest)) > SUBBLOCK * size)  # gemma2 softcaps, gpt2 does not

    # block 0's heads: the premix a plain pre-hook sees entering the output projection, a head's columns at a time
    with torch.no_grad(), model.trace(PROMPTS):
        results = model.layers[0].self_attn.attention_head_results[0, -1].save()
        output = model.layers[0].self_attn.attention_output[0, -1].save()
    per_head, rest = decompose.attention_heads(model, 0, results, output)
    o_proj, heads = blocks[0].get_submodule(spec["o_proj"]), model.num_heads
    weight = (o_proj.weight.T if family == "gpt2" else o_proj.weight).detach()  # GPT-2's Conv1D holds [in, out]
    width = weight.shape[1] // heads
    by_hand = torch.stack([seen["premix"][h * width:(h + 1) * width].double()
                           @ weight[:, h * width:(h + 1) * width].T.double() for h in range(heads)])
    if family == "gemma2":  # through the post-attention norm's linear part at the attention's whole output
        post = blocks[0].post_attention_layernorm
        by_hand = by_hand / (seen["attention_output"].double().pow(2).mean() + post.eps).sqrt() * (1 + post.weight.detach().double())
        plain_rest = torch.zeros_like(by_hand[0])
    else:
        plain_rest = o_proj.bias.detach().double()
    torch.testing.assert_close(per_head.double(), by_hand, rtol=0, atol=SUBBLOCK * float(by_hand.abs().max()))
    torch.testing.assert_close(rest.double(), plain_rest, rtol=0, atol=SUBBLOCK * float(by_hand.abs().max()))
    added = seen[f"0.{spec['adds'][0]}"].double()
    torch.testing.assert_close(per_head.double().sum(0) + rest.double(), added, rtol=0,
                               atol=SUBBLOCK * float(added.abs().max()))
