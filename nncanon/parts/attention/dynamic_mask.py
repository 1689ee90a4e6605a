"""Dynamic mask attention (Doge's DMA): a learned bias per key, computed from the values, added to the scores.

Each key/value head gives every key position a bias from that position's values,

    dt = exp(A · softplus(dt_proj(the key's values, every key/value head side by side)))     one per key/value head

(``A`` a learned number per key/value head), added to every query's score of that key in the head's group where the
causal mask allows the key; a masked key gets the dtype's minimum instead. Past ``keep_window_size`` keys only the
``keep_window_size`` largest biases of a row stay, the others are masked as well. So the scores are
``queries · keysᵀ · scaling + the dynamic mask``, not ``+ the causal mask``, and the relations here recompute the bias
from the module's own ``A`` and ``dt_proj`` over the values read at the attention call.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.precision import SUBBLOCK
from ...core.relations import relation
from .softmax import ATTENTION_RELATIONS, PATTERN_RELATIONS, Attention, causal_mask, mix, real_queries


def dynamic_bias(module: Any, values: Any) -> Any:
    """``[batch, kv_heads, keys]``: exp(A · softplus(dt_proj(values))), every key/value head's values side by side."""
    values = values.double()
    side_by_side = values.transpose(1, 2).reshape(values.shape[0], values.shape[2], -1)
    dt = side_by_side @ module.dt_proj.weight.double().T
    if module.dt_proj.bias is not None:
        dt = dt + module.dt_proj.bias.double()
    return torch.exp(module.A.double() * torch.nn.functional.softplus(dt)).transpose(-1, -2)


def dynamic_pattern(module: Any, queries: Any, keys: Any, values: Any, padding: Any) -> tuple[Any, Any]:
    """Scores and probabilities ``[batch, heads, query, key]`` in float64: scaled by the module's scaling, plus each
    key's dynamic bias where the causal mask allows it (the largest keep_window_size of a row past that many keys),
    -inf elsewhere; keys, values and biases repeated over each group's query heads."""
    queries, keys = queries.double(), keys.double()
    groups = queries.shape[1] // keys.shape[1]
    bias = dynamic_bias(module, values)[:, :, None, :].expand(-1, -1, queries.shape[2], -1)
    allowed = torch.isfinite(causal_mask(module, padding, queries.shape[2], keys.shape[2]))
    bias = torch.where(allowed, bias, float("-inf"))
    if bias.shape[-1] > module.keep_window_size:
        kept = torch.topk(bias, module.keep_window_size, dim=-1).indices
        bias = torch.where(torch.zeros_like(bias, dtype=torch.bool).scatter(-1, kept, True), bias, float("-inf"))
    bias = bias.repeat_interleave(groups, 1)
    scores = queries @ keys.repeat_interleave(groups, 1).transpose(-1, -2) * module.scaling + bias
    return scores, scores.softmax(-1)


_BIAS = ("dynamic mask = exp(A · softplus(dt_proj(attention_values, the key/value heads side by side))) per key and "
         "key/value head where the causal mask allows the key (past keep_window_size keys, the row's keep_window_size "
         "largest), -inf elsewhere")
#: the keys a row keeps are a top-k: a discrete choice, not a rounding a bound covers
_HALF = ("each row keeps the keep_window_size keys whose dynamic mask is largest; in a half dtype the forward computes "
         "that mask in rounded steps, and where two keys' masks lie within a rounding of each other it keeps another "
         "key than the float64 recompute")


@relation(f"attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + dynamic mask) · "
          f"attention_values, {_BIAS}",
          proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK, half=_HALF)
def _attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = dynamic_pattern(host._module, r["attention_queries"], r["attention_keys"],
                                       r["attention_values"], padding)
    heads = mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation(f"attention_scores == attention_queries · attention_keysᵀ · scaling + dynamic mask; attention_probabilities "
          f"== softmax(attention_scores), {_BIAS}", proves="attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_scores "
                "attention_probabilities", tolerance=SUBBLOCK, half=_HALF)
def _pattern(host, r):
    padding = r["model.attention_mask"]
    scores, probabilities = dynamic_pattern(host._module, r["attention_queries"], r["attention_keys"],
                                            r["attention_values"], padding)
    allowed = torch.isfinite(scores)  # transformers masks with the dtype's minimum, not -inf
    return [(scores[allowed], r["attention_scores"].double()[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


#: softmax attention whose additive mask is Doge's dynamic one: the two pattern relations restated, the rest kept
DynamicMaskAttention = host("DynamicMaskAttention", Attention, RELATIONS=(
    _attention, _pattern, *(r for r in ATTENTION_RELATIONS if r not in PATTERN_RELATIONS)))
