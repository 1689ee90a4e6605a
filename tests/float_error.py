"""The float32 error model the numeric tests' bounds come from, instead of what one CPU happened to give.

Two evaluations of one expression that accumulate in different orders (a chunked kernel and a
token-by-token one, AVX2's and AVX-512's vector widths, one thread and two) each lie within
gamma_n * S of the exact result, where n is the length of the longest chain of float32 roundings
that leads to it and S the magnitude of the terms (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., section 3.1: gamma_n = n u / (1 - n u), u = 2**-24 for float32). They lie
within 2 gamma_n S of each other (nncanon/core/precision.py). A test names n by counting what the forward accumulates (a
projection of width d is d roundings, a softmax over k keys is k, a block chains its projections),
and S by the value's scale, floored where a result cancels to far less than the terms it sums.
"""

from __future__ import annotations

from nncanon.core.precision import reordered  # the same error model the relations' tolerances come from


def within(actual, expected, n: int, floor: float = 0.0) -> None:
    """``actual`` equals ``expected`` up to two orders of n roundings at the expected's scale (at least
    ``floor``: the magnitude of the terms where the result cancels below them)."""
    actual, expected = actual.detach().float(), expected.detach().float()
    error, scale = float((actual - expected).abs().max()), max(float(expected.abs().max()), floor)
    bound = reordered(n, scale)
    assert error <= bound, f"max error {error:.3g} over the bound {bound:.3g} (n = {n} roundings at scale {scale:.3g})"


def forward_roundings(config, seq: int, chunk: int = 64) -> int:
    """The longest chain of roundings from the embeddings to the logits of a decoder stack over ``seq``
    tokens: per block, its mixer's and its MLP's chained reductions; then the head."""
    hidden = config.hidden_size
    mlp = hidden + max(getattr(config, "moe_intermediate_size", 0) or 0, getattr(config, "intermediate_size", 0) or 0,
                       getattr(config, "shared_expert_intermediate_size", 0) or 0)
    mlp += getattr(config, "num_experts_per_tok", 0) or 0  # the weighted sum of the chosen experts
    head_dim = getattr(config, "head_dim", None) or hidden // config.num_attention_heads
    attention = hidden + head_dim + 2 * seq + config.num_attention_heads * head_dim
    total = hidden
    for kind in getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers:
        if kind == "linear_attention":
            key, value = config.linear_key_head_dim, config.linear_value_head_dim
            # the projections, the conv window, the chunk's triangular solve (chunk x key roundings),
            # the state carried across chunks, the gated norm and the out projection
            total += (hidden + config.linear_conv_kernel_dim + chunk * key + -(-seq // chunk) * key + value
                      + config.linear_num_value_heads * value)
        else:
            total += attention
        total += mlp
    return total

