"""The gated delta rule and the DeltaNet's values by their own math, shared by the DeltaNet tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from float_error import within
from plain_hooks import mixer_calls

KERNEL_VALUES = ("attention_queries", "attention_keys", "attention_values", "decays", "betas", "state_input",
                 "attention_head_outputs", "state_output")


#: the roundings of one DeltaNet block of the tiny checkpoint (hidden 40, conv window 4, key dim 18, value
#: dim 20 x 10 heads): the projections, the conv, the chunked kernel's 64-token triangular solve over the
#: key dim and the state carried across three chunks, the gated norm, the out projection
BLOCK = 40 + 4 + 64 * 18 + 3 * 18 + 20 + 10 * 20


def close(actual, expected, n=BLOCK):
    """Equal up to two float32 orders of ``n`` roundings (tests/float_error.py): the chunked kernel, the
    token recurrence and the float64 delta rule accumulate in different orders. Values that cancel below
    0.1 are held to the scale of the terms they sum, the block's inputs, which are above 0.1 here."""
    within(actual, expected, n, floor=0.1)


def differs(actual, expected):
    """Different by more than 1e-3 of the expected's scale."""
    return bool((actual - expected).abs().max() > 1e-3 * expected.abs().max())


def delta_rule(q, k, v, g, beta, state=None):
    """The gated delta rule, written out in float64: y, the state after every token."""
    q, k, v, g, beta = (t.detach().double() for t in (q, k, v, g, beta))
    rep = v.shape[2] // k.shape[2]
    q, k = (t.repeat_interleave(rep, dim=2) for t in (q, k))
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) / q.shape[-1] ** 0.5
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    batch, seq, heads, key_dim = k.shape
    state = torch.zeros(batch, heads, key_dim, v.shape[-1], dtype=torch.float64) if state is None else state.double()
    ys, states = [], []
    for t in range(seq):
        state = state * g[:, t].exp()[..., None, None]
        read = torch.einsum("bhk,bhkv->bhv", k[:, t], state)
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, t], beta[:, t, :, None] * (v[:, t] - read))
        ys.append(torch.einsum("bhk,bhkv->bhv", q[:, t], state))
        states.append(state)
    return torch.stack(ys, 1), torch.stack(states, 1)


def gated_norm(module, y, z):
    """Qwen3_5MoeRMSNormGated: norm(y) * weight * silu(z), per head."""
    norm = module.norm
    y32 = y.float()
    normed = y32 * torch.rsqrt(y32.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return (norm.weight * normed.to(y.dtype)) * F.silu(z.float())


def assert_values_match_the_module_math(model, layer, prompts, module_math) -> dict:
    """Read every kernel value and attention_output of ``layers[layer].linear_attn`` on a left-padded
    batch, and check each against ``module_math`` (the family's projections) and the delta rule."""
    la, module = model.layers[layer].linear_attn, model._module.model.layers[layer].linear_attn
    got = {}
    with mixer_calls(model, layer) as seen, model.trace(prompts):
        for name in (*KERNEL_VALUES, "attention_output"):
            got[name] = getattr(la, name).save()
    (hidden, mask, output), = seen
    assert mask is not None and not mask.all(), "the batch is left-padded"
    with torch.no_grad():
        truth = module_math(module, hidden, mask)
        y, states = delta_rule(truth["q"], truth["k"], truth["v"], truth["g"], truth["beta"])
        mixed = module.out_proj(gated_norm(module, y.float(), truth["z"]).flatten(2))
    close(got["attention_queries"], truth["q"])
    close(got["attention_keys"], truth["k"])
    close(got["attention_values"], truth["v"])
    close(got["betas"], truth["beta"])
    close(got["decays"], truth["g"])
    assert got["decays"].dtype == torch.float32 and (got["decays"] <= 0).all()
    assert ((got["betas"] > 0) & (got["betas"] < 1)).all()
    close(got["attention_head_outputs"], y.float())
    close(got["state_output"], states[:, -1].float())
    close(got["attention_output"], mixed)
    assert torch.equal(got["attention_output"], output)
    return got
