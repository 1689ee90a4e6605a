"""A causal mask with spans that attend both ways: Gemma 3's image spans, PaliGemma's prefix.

Some vision-language text models relax the causal mask over marked runs of tokens: a key is allowed to a query
if it is not after it, **or** both are tokens of one span (transformers' ``blockwise_overlay``: each token's
``block_sequence_ids``, the span's index, ``-1`` for a token in none). Gemma 3 makes each image's run of image
tokens a span; PaliGemma makes the whole prefix (images, ``<bos>``, prompt: ``token_type_ids`` 0) one span and
leaves the suffix causal. A sliding block still keeps only the last ``sliding_window`` keys, and no padded key
is seen.

This module writes that mask once (`span_mask`), the attention's relations stated with it and the mask as a
value (`span_relations`, `allowed_value`: ``attention_allowed``, read under eager, the only load that always
hands the attention call its mask); each family gives ``spans(host, r)``, its tokens' span ids from the reads
its relations name, and the relations' texts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...core.layouts import Pattern
from ...core.locators import call, op
from ...core.precision import SUBBLOCK
from ...core.relations import Relation, relation
from ...core.values import Condition, Value, View
from ..attention.softmax import EAGER, attending, mix, real_queries

#: (host, reads) -> [batch, seq] long: each token's span id, -1 off every span
Spans = Callable[[Any, dict], Any]


def span_mask(host: Any, spans: Any, padding: Any, queries: int, keys: int, window_bounds_spans: bool = True) -> Any:
    """[batch, 1, queries, keys] additive mask: a key is seen if it is not after the query or in the query's own
    span (``spans`` [batch, seq], -1 off every span); a sliding block keeps only the keys after query -
    sliding_window (of the span's keys too, unless ``window_bounds_spans`` is False: PaliGemma 2's mask ORs the
    span over the sliding causal mask); no padded key."""
    import torch

    module = attending(host)
    q = torch.arange(keys - queries, keys)[:, None]
    k = torch.arange(keys)[None, :]
    spans = spans[:, -keys:]
    same = (spans[:, -queries:, None] == spans[:, None, :]) & (spans[:, -queries:, None] >= 0)
    causal = k <= q
    window = getattr(module, "sliding_window", None)
    if window and not window_bounds_spans:
        allowed = (causal & (k > q - window))[None] | same
    else:
        allowed = causal[None] | same
        if window:
            allowed = allowed & (k > q - window)[None]
    allowed = allowed[:, None] & padding[:, None, None, -keys:].bool()
    return torch.where(allowed, 0.0, float("-inf"))


def span_pattern(host: Any, spans: Any, r: dict, cap: float | None = None,
                 window_bounds_spans: bool = True) -> tuple[Any, Any, Any]:
    """(uncapped, scores, probabilities) [batch, heads, query, key] in float64: uncapped = queries · keysᵀ ·
    scaling; scores = cap · tanh(uncapped / cap) (Gemma 2's softcap; no cap: uncapped) + `span_mask`."""
    module = attending(host)
    queries, keys = r["attention_queries"].double(), r["attention_keys"].double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    uncapped = queries @ keys.transpose(-1, -2) * module.scaling
    scores = uncapped if cap is None else cap * (uncapped / cap).tanh()
    mask = span_mask(host, spans, r["model.attention_mask"], queries.shape[2], keys.shape[2], window_bounds_spans)
    scores = scores + mask.double()
    return uncapped, scores, scores.softmax(-1)


def span_relations(spans: Spans, reads: str, attention: str, pattern: str, allowed: str, capped: bool = False,
                   window_bounds_spans: bool = True) -> tuple[Relation, ...]:
    """The attention's output, its scores and probabilities, and ``attention_allowed``, each stated with the span
    mask of ``spans``; ``reads`` names what ``spans`` reads (besides model.attention_mask), the texts say the mask
    in the family's words. ``capped``: the scores are softcapped by the module's attn_logit_softcapping before the
    mask (Gemma 2), and the pattern's relation proves ``attention_scores_uncapped`` too."""
    cap_of = (lambda host: host._module.attn_logit_softcapping) if capped else (lambda host: None)  # noqa: E731

    def pattern_of(host, r):
        return span_pattern(host, spans(host, r), r, cap_of(host), window_bounds_spans)

    @relation(attention, proves="attention_queries attention_keys attention_values attention_head_outputs",
              reads=f"{reads} model.attention_mask attention_queries attention_keys attention_values "
                    "attention_head_outputs", tolerance=SUBBLOCK)
    def _attention(host, r):
        padding = r["model.attention_mask"]
        _, _, probabilities = pattern_of(host, r)
        heads = mix(probabilities, r["attention_values"])
        return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]

    uncapped_term = " attention_scores_uncapped" if capped else ""

    @relation(pattern, proves=f"attention_scores attention_probabilities{uncapped_term}",
              reads=f"{reads} model.attention_mask attention_queries attention_keys{uncapped_term} attention_scores "
                    "attention_probabilities", tolerance=SUBBLOCK)
    def _pattern(host, r):
        padding = r["model.attention_mask"]
        uncapped, scores, probabilities = pattern_of(host, r)
        seen = scores.isfinite()
        pairs = [(scores[seen], r["attention_scores"].double()[seen]),
                 (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]
        return pairs + ([(uncapped, r["attention_scores_uncapped"].double())] if capped else [])

    @relation(allowed, proves="attention_allowed", reads=f"{reads} model.attention_mask attention_allowed")
    def _allowed(host, r):
        padding, got = r["model.attention_mask"], r["attention_allowed"]
        mask = span_mask(host, spans(host, r), padding, got.shape[2], got.shape[3], window_bounds_spans)
        expected = mask.isfinite().expand_as(got)
        return [(real_queries(padding, expected.double(), 2), real_queries(padding, got.double(), 2))]

    return _attention, _pattern, _allowed


def _allowed_of(host: Any, mask: Any) -> Any:
    """eager's additive mask [batch, 1, query, key] (0 where allowed, the dtype's minimum elsewhere) as booleans per
    head."""
    return (mask == 0).expand(-1, host._module.config.num_attention_heads, -1, -1)


#: eager always hands the attention call the additive mask; sdpa gets none where the mask is purely causal
EAGER_MASK = Condition(needs=EAGER.needs, holds=EAGER.holds,
                       why="only eager always hands the attention call the mask (sdpa gets none where it is causal)")


def allowed_value(description: str) -> Value:
    """``attention_allowed``: the mask the block's attention call receives, per head (``description`` says it in
    the family's words)."""
    return Value("attention_allowed", Pattern, description, op(call("attention_interface_1"), io="input", element=4),
                 view=View("mask == 0, per head", _allowed_of, None, derived=True), conditions=(EAGER_MASK,))


__all__ = ["Spans", "span_mask", "span_pattern", "span_relations", "allowed_value", "EAGER_MASK"]
