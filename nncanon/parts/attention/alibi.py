"""ALiBi (attention with linear biases, Press et al. 2022): no position embedding at all; each head adds to
its scores a bias linear in the key's position, with a slope of its own.

The slopes are a geometric sequence: with n heads a power of two, head h (from 1) has slope 2^(-8h/n); with n
not a power of two, the 2^⌊log2 n⌋ slopes of that power, then every other slope of the next power of two
(``slopes``, written from the paper, not read from transformers). BLOOM adds ``slope_h · p_k`` to the score of
key k, p_k the key's position among its row's real tokens (``cumsum(attention_mask) - 1``): per query that is
``-slope_h · (p_q - p_k)``, the paper's distance penalty, plus ``slope_h · p_q``, a constant the softmax ignores.
MPT adds ``slope_h · (k - (K - 1))`` instead, k the key's column among the K keys (the last key 0, padding or not:
its bias is cut from one table over ``max_seq_len`` columns): a left-padded row's biases differ from BLOOM's by a
constant of the row, which the softmax ignores too. MPT's slopes, computed from the next power of two up, are the
paper's in another order of computation: the same numbers.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...core.precision import SUBBLOCK
from ...core.relations import relation
from .softmax import attending, mix, pattern, real_queries


def slopes(heads: int) -> torch.Tensor:
    """Each head's slope, float64, as the ALiBi paper defines them."""
    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    closest = 2 ** math.floor(math.log2(heads))
    found = power_of_two(closest)
    if closest != heads:
        found += power_of_two(2 * closest)[0::2][: heads - closest]
    return torch.tensor(found, dtype=torch.float64)


def bias(heads: int, padding: Any, keys: int, by_column: bool = False) -> torch.Tensor:
    """``[batch, heads, 1, keys]``: slope_h · p_k, p_k each key's position among its row's real tokens (0 on
    padding, which the mask leaves out); ``by_column``: slope_h · (k - (keys - 1)), k the key's column (MPT's)."""
    if by_column:
        positions = torch.arange(1 - keys, 1, dtype=torch.float64).expand(padding.shape[0], -1)
    else:
        mask = padding[:, -keys:].long()
        positions = ((padding.long().cumsum(-1) - 1)[:, -keys:] * mask).double()
    return slopes(heads)[None, :, None, None] * positions[:, None, None, :]


def _scores(host: Any, r: dict, scaled: bool, times: Any, by_column: bool = False) -> tuple[Any, Any, Any]:
    """The scores by the module's scaling plus the bias (scaled with them when ``scaled``, added ``times(host)``
    times) and the causal mask, and the bias alone."""
    padding = r["model.attention_mask"]
    queries, keys = r["attention_queries"], r["attention_keys"]
    module = attending(host)
    scores, _ = pattern(module, queries, keys, padding)
    linear = bias(queries.shape[1], padding, keys.shape[2], by_column) * (module.scaling if scaled else 1.0)
    return scores + linear * (times(host) if times else 1), linear * (times(host) if times else 1), padding


def alibi_relations(scaled: bool = False, times: Any = None, why: str = "", by_column: bool = False) -> tuple:
    """The pattern's relations of an ALiBi attention, in place of the shared ones (the output projection's is kept).
    ``scaled``: the bias is added before the scores are scaled, ``(q · kᵀ + alibi) · scaling`` (Falcon-RW), rather
    than after (BLOOM's ``baddbmm``), so each slope is scaled too. ``times(host)``: how many times the forward adds
    the bias under the host's load, ``why`` saying when it is not once (Falcon's eager attention adds it twice).
    ``by_column``: the bias counts the keys' columns back from the last (MPT's), not the real tokens from the first."""
    alibi = ("alibi · scaling" if scaled else "alibi") + (f" ({why})" if why else "")
    p_k = "(k − (keys − 1))" if by_column else "p_k"
    bias_is = (f"slopes[h] · {p_k} · scaling" if scaled else f"slopes[h] · {p_k}") + (
        " (times as many as it is added)" if why else "")
    where = ("k: the key's column, the last key's bias 0, padding or not" if by_column
             else "p_k: key k's position among its row's real tokens")
    text = (f"attention_queries · attention_keysᵀ · scaling + {alibi} + causal mask, alibi[h, k] == slopes[h] · {p_k} "
            f"({where}; per query −slopes[h] · (p_q − p_k) plus a constant "
            "the softmax ignores; slopes[h] = 2^(−8h/n) for n heads a power of two)")

    @relation(f"attention_head_outputs == softmax({text}) · attention_values",
              proves="attention_queries attention_keys attention_values attention_head_outputs",
              reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
              tolerance=SUBBLOCK)
    def _alibi_attention(host, r):
        scores, _, padding = _scores(host, r, scaled, times, by_column)
        heads = mix(scores.softmax(-1), r["attention_values"])
        return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]

    @relation(f"attention_scores == {text}; attention_probabilities == softmax(attention_scores); the scores' bias "
              f"(attention_scores − attention_queries · attention_keysᵀ · scaling) == {bias_is} at every allowed key",
              proves="attention_scores attention_probabilities",
              reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
              tolerance=SUBBLOCK)
    def _alibi_pattern(host, r):
        scores, linear, padding = _scores(host, r, scaled, times, by_column)
        read = r["attention_scores"].double()
        allowed = torch.isfinite(scores)  # transformers masks with the dtype's minimum: compare where a key is allowed
        unbiased = scores - linear
        return [(scores[allowed], read[allowed]),
                ((read - unbiased)[allowed], linear.expand_as(scores)[allowed]),
                (real_queries(padding, scores.softmax(-1), 2), real_queries(padding, r["attention_probabilities"], 2))]

    return _alibi_attention, _alibi_pattern


#: BLOOM's: the bias added to the scaled scores
ALIBI_RELATIONS = alibi_relations()
#: MPT's: the bias added to the scaled scores, counted by the keys' columns back from the last
COLUMN_ALIBI_RELATIONS = alibi_relations(by_column=True)
