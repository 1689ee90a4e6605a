"""The weights in standard names (nncanon.weights) against plain PyTorch: each is a view of the parameter
``model.named_parameters()`` holds (an edit lands there), and the plain forward's own projections (plain forward
hooks) are the input times it: llama (separate q/k/v), gpt2 (a fused Conv1D), bloom (a per-head interleaved
query_key_value), phi3 (a fused qkv_proj and gate_up_proj), gpt_bigcode (multi-query), qwen3_next (query and
gate per head); W_E and W_U; per-expert weights of a mixture; the latent attention's clear refusal."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.precision import SUBBLOCK
from nncanon.research.weights import WeightUnavailable

PROMPT = "The cat sat on the mat because it was warm."

#: family -> (the fused or separate projection(s) a plain hook reads, how its output splits into q, k, v)
FAMILIES = ["llama", "gpt2", "bloom", "phi3", "gpt_bigcode", "qwen3_next", "qwen2", "gpt_neox"]


def _load(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(family)))


def _param(model, tensor):
    """The name of the parameter ``tensor`` is a view of (shares its storage), by model.named_parameters()."""
    for name, p in model._module.named_parameters():
        if tensor.untyped_storage().data_ptr() == p.untyped_storage().data_ptr():
            return name
    return None


def _plain_io(model, module):
    """A plain forward's input and output of ``module`` (plain hooks; nothing replaced)."""
    seen = {}

    def keep(mod, args, kwargs, out):
        x = args[0] if args else next(iter(kwargs.values()))
        seen.setdefault("in", x.detach().clone())
        seen.setdefault("out", (out[0] if isinstance(out, tuple) else out).detach().clone())

    handle = module.register_forward_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPT, return_tensors="pt"))
    finally:
        handle.remove()
    return seen["in"], seen["out"]


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_weights_are_views_that_project_like_the_model(family):
    model = _load(family)
    block = next(i for i in range(1, len(model.layers)) if hasattr(model.layers[i], "self_attn"))  # not a DeltaNet's
    attention = model.layers[block].self_attn
    heads, d = model.num_heads, model.hidden_size
    W_Q, W_K, W_V, W_O = attention.W_Q, attention.W_K, attention.W_V, attention.W_O
    assert W_Q.shape[:2] == (heads, d) and W_O.shape[0] == heads and W_O.shape[-1] == d
    assert W_K.shape[1] == d and W_V.shape[1] == d and W_K.shape[0] == W_V.shape[0]
    for w in (W_Q, W_K, W_V, W_O):  # views: they share the storage of a parameter the model holds
        assert _param(model, w) is not None, family
    # the output projection: a plain hook on the attention's output projection sees premix -> output
    proj_name = next(v for v in type(attention).values() if v.name == "attention_head_results").extra["projection"]
    proj = getattr(attention, proj_name)._module
    premix, out = _plain_io(model, proj)
    by_weights = torch.einsum("bshd,hdo->bso", premix.unflatten(-1, (heads, -1)), W_O)
    by_weights = by_weights + (attention.b_O if attention.b_O is not None else 0)
    # hidden_size-long dot products in another order than the module's matmul: SUBBLOCK
    torch.testing.assert_close(by_weights, out, rtol=SUBBLOCK, atol=SUBBLOCK)


def test_separate_projections_are_the_input_times_the_weight():
    """llama: q_proj's plain output per head is input @ W_Q[h] (no bias); qwen2: with b_Q."""
    for family in ("llama", "qwen2"):
        model = _load(family)
        attention = model.layers[0].self_attn
        for proj, W, b in (("q_proj", attention.W_Q, attention.b_Q), ("v_proj", attention.W_V, attention.b_V)):
            x, y = _plain_io(model, getattr(attention, proj)._module)
            expected = torch.einsum("bsd,cdh->bsch", x, W) + (0 if b is None else b)
            torch.testing.assert_close(expected.flatten(-2), y, rtol=SUBBLOCK, atol=SUBBLOCK)
        assert (attention.b_Q is None) == (family == "llama")


def test_fused_layouts_pick_the_forwards_own_split():
    """bloom's query_key_value is [heads, 3, head_dim] per head; gpt2's c_attn is q | k | v (a Conv1D)."""
    model = _load("bloom")
    attention = model.layers[0].self_attn
    x, y = _plain_io(model, attention.query_key_value._module)
    heads, width = model.num_heads, model.head_dim
    fused = y.unflatten(-1, (heads, 3, width))
    for slot, (W, b) in enumerate(((attention.W_Q, attention.b_Q), (attention.W_K, attention.b_K),
                                   (attention.W_V, attention.b_V))):
        torch.testing.assert_close(torch.einsum("bsd,cdh->bsch", x, W) + b, fused[..., slot, :],
                                   rtol=SUBBLOCK, atol=SUBBLOCK)
    model = _load("gpt2")
    attention = model.layers[0].self_attn
    x, y = _plain_io(model, attention.c_attn._module)
    q, k, v = y.split(model.hidden_size, dim=-1)
    for W, b, part in ((attention.W_Q, attention.b_Q, q), (attention.W_K, attention.b_K, k),
                       (attention.W_V, attention.b_V, v)):
        torch.testing.assert_close((torch.einsum("bsd,cdh->bsch", x, W) + b).flatten(-2), part,
                                   rtol=SUBBLOCK, atol=SUBBLOCK)


def test_an_edit_lands_in_the_parameter_and_an_assignment_is_copied_in():
    model = _load("gpt2")
    attention = model.layers[0].self_attn
    params = dict(model._module.named_parameters())
    weight = params["transformer.h.0.attn.c_attn.weight"]  # [hidden, 3·hidden], q first
    before = weight.detach().clone()
    try:
        with torch.no_grad():
            attention.W_V[2] = 0  # value head 2 of c_attn
        width, d = model.head_dim, model.hidden_size
        assert torch.all(weight[:, 2 * d + 2 * width:2 * d + 3 * width] == 0)
        changed = (weight != before).any(0).nonzero().flatten()
        assert changed.min() >= 2 * d + 2 * width and changed.max() < 2 * d + 3 * width
        new = torch.randn_like(attention.W_O)
        attention.W_O = new
        torch.testing.assert_close(params["transformer.h.0.attn.c_proj.weight"], new.flatten(0, 1), rtol=0, atol=0)
    finally:
        with torch.no_grad():
            weight.copy_(before)


def test_an_edit_of_W_in_changes_the_forward_as_the_weight_says():
    """Zeroing neuron 5's input weight (and bias) on gpt2 block 0: the plain forward's activation there is act(0)."""
    model = _load("gpt2")
    mlp = model.layers[0].mlp
    saved = mlp.W_in.detach().clone(), mlp.b_in.detach().clone()
    try:
        with torch.no_grad():
            mlp.W_in[:, 5] = 0
            mlp.b_in[5] = 0
        _, activation = _plain_io(model, mlp.act._module if hasattr(mlp.act, "_module") else mlp._module.act)
        assert torch.all(activation[..., 5] == 0)  # gelu(0) == 0
    finally:
        with torch.no_grad():
            mlp.W_in.copy_(saved[0])
            mlp.b_in.copy_(saved[1])


def test_embedding_and_unembedding():
    model = _load("llama")
    params = dict(model._module.named_parameters())
    assert model.W_E.data_ptr() == params["model.embed_tokens.weight"].data_ptr()
    assert model.W_U.shape == (model.hidden_size, model.vocab_size)
    x, logits = _plain_io(model, model.lm_head._module)
    torch.testing.assert_close(x @ model.W_U, logits, rtol=SUBBLOCK, atol=SUBBLOCK)
    assert model.b_U is None


@pytest.mark.parametrize("family, embedding", [("t5", "shared.weight"), ("whisper", "model.decoder.embed_tokens.weight")])
def test_an_encoder_decoder_has_its_input_embedding_as_W_E_and_each_stack_its_weights(family, embedding):
    """Issue 49: the weights in standard names on both stacks. W_E is the matrix the model's token ids index (T5's
    shared one, which both stacks embed with; Whisper's decoder's, its encoder reading audio), each stack's
    attention and cross-attention project like the module, and a stack asked for the head's W_U refuses in one line."""
    model = _load(family)
    params = dict(model._module.named_parameters())
    assert model.W_E.data_ptr() == params[embedding].data_ptr()
    for attention in (model.encoder.layers[0].self_attn, model.decoder.layers[0].self_attn,
                      model.decoder.layers[0].cross_attn):
        q = attention._module.q_proj if hasattr(attention._module, "q_proj") else attention._module.q
        assert _param(model, attention.W_Q) == _param(model, q.weight)
    with pytest.raises(AttributeError) as refused:
        model.encoder.W_U  # noqa: B018
    assert len(str(refused.value).splitlines()) == 1 and "W_U is on the model" in str(refused.value)


def test_per_expert_weights_recompute_an_expert():
    model = _load("qwen3_moe")
    mlp = model.layers[0].mlp
    experts = mlp.experts._module
    assert mlp.W_gate.shape == (mlp.num_experts, model.hidden_size, experts.intermediate_dim)
    x = torch.randn(3, model.hidden_size)
    gate, up = torch.nn.functional.linear(x, experts.gate_up_proj[4]).chunk(2, dim=-1)
    plain = torch.nn.functional.linear(experts.act_fn(gate) * up, experts.down_proj[4])
    ours = (experts.act_fn(x @ mlp.W_gate[4]) * (x @ mlp.W_in[4])) @ mlp.W_out[4]
    torch.testing.assert_close(ours, plain, rtol=SUBBLOCK, atol=SUBBLOCK)


def test_latent_attention_refuses_in_one_line_naming_weight_and_family():
    model = _load("deepseek_v3")
    with pytest.raises(WeightUnavailable, match=r"^model\.layers\[0\]\.self_attn\.W_Q is unavailable on deepseek_v3: "
                                                r"multi-head latent attention"):
        model.layers[0].self_attn.W_Q  # noqa: B018 (the read is what raises)
    assert model.layers[0].self_attn.W_O.shape[0] == model.num_heads  # the output projection is per head


def test_a_mixer_with_no_such_matrix_refuses_in_one_line():
    """A DeltaNet block (qwen3_next) and an SSD mixer (mamba2) have no W_Q: one line naming the weight and family."""
    model = _load("qwen3_next")
    with pytest.raises(nncanon.NotOnHost, match=r"^model\.layers\[0\]\.linear_attn\.W_Q is unavailable on qwen3_next: "):
        model.layers[0].linear_attn.W_Q  # noqa: B018 (the read is what raises)
    model = _load("mamba2")
    with pytest.raises(nncanon.NotOnHost, match=r"^model\.layers\[0\]\.mixer\.W_O is unavailable on mamba2: "):
        model.layers[0].mixer.W_O  # noqa: B018 (the read is what raises)
