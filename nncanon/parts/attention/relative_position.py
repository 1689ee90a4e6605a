"""Relative position buckets (T5's, Raffel et al. 2020): no position embedding; each head adds to its scores a
learned scalar per bucket of the key's offset from the query, and the scores are not scaled by 1/√d (T5 folds it
into the queries' init).

    bucket(n)  for n = key − query: bidirectional (an encoder's): half the buckets for keys after the query
               (n > 0), the rest for the others by |n|; causal (a decoder's): −min(n, 0) over all the buckets.
               Of those b buckets, the first b/2 are exact offsets 0 .. b/2 − 1, the rest logarithmic up to
               max_distance: b/2 + ⌊log(n / (b/2)) / log(max_distance / (b/2)) · (b − b/2)⌋, at most b − 1
    bias[h, q, k] = relative_attention_bias.weight[bucket(k − q), h]
    scores     = attention_queries · attention_keysᵀ + bias + mask          (scaling 1)

Only each stack's first block holds the table (``relative_attention_bias``, buckets × heads); it computes the bias
once and every later block of the stack attends with that same tensor, handed down the stack. The bias is served on
every self-attention as ``attention_position_bias`` (``[1, heads, query, key]``, read where the attention function
is called with it), proven on the stack's host (`POSITION_BIAS_RELATIONS`): every block's is the first block's
table at the buckets, recomputed here from the paper's bucket rule (`buckets`), not read from transformers.

The attention modules are T5's (``q``, ``k``, ``v``, ``o`` mounted as ``q_proj`` ... ``o_proj``); the encoder's
self-attention masks the source padding only, the decoder's is causal; the cross-attention (no bias: its position
bias is zeros) is `nncanon.parts.attention.cross_attention`'s with its text saying the scaling is 1.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import HeadOutputs, layout
from ...core.locators import call, child, op
from ...core.precision import SUBBLOCK
from ...core.relations import relation
from ...core.values import Value
from ...core.views import View, heads
from ..encoders.bidirectional import padding_mask
from .cross_attention import SELF_PROJECTIONS, CrossAttention, cross_relations, unpadded
from .softmax import (
    ATTENTION_CALL,
    ATTENTION_RELATIONS,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
    causal_mask,
    mix,
    real_queries,
)

_OUTPUT_PROJECTION = ATTENTION_RELATIONS[-1]
UNSCALED = "(scaling 1: no 1/√head_dim, T5 folds it into the queries' init)"


def buckets(offsets: torch.Tensor, bidirectional: bool, count: int, max_distance: int) -> torch.Tensor:
    """The bucket of each key − query offset: ``count`` buckets, half exact and half logarithmic up to
    ``max_distance``; ``bidirectional`` keys after the query get buckets of their own (the upper half)."""
    found = torch.zeros_like(offsets)
    if bidirectional:
        count //= 2
        found = found + (offsets > 0).long() * count
        distance = offsets.abs()
    else:
        distance = (-offsets).clamp(min=0)
    exact = count // 2
    # in float32, as Mesh TensorFlow and the forward compute it: the floor at a bucket's edge follows its rounding
    far = distance.float().clamp(min=1) / exact
    logarithmic = exact + (far.log() / math.log(max_distance / exact) * (count - exact)).long()
    logarithmic = logarithmic.clamp(max=count - 1)
    return found + torch.where(distance < exact, distance, logarithmic)


def position_bias(attention: Any, queries: int, keys: int) -> torch.Tensor:
    """``[heads, queries, keys]``: ``attention``'s table (the stack's first block's) at the buckets of k − q."""
    offsets = torch.arange(keys)[None, :] - torch.arange(queries)[:, None]
    found = buckets(offsets, not attention.is_decoder, attention.relative_attention_num_buckets,
                    attention.relative_attention_max_distance)
    return attention.relative_attention_bias.weight[found].permute(2, 0, 1)


def first_attention(stack: Any) -> Any:
    """The self-attention module of a stack's first block: the one holding the table (T5Stack's ``block[0]``)."""
    return stack.block[0].layer[0].SelfAttention


@relation("layers[i].self_attn.attention_position_bias == relative_attention_bias.weight[bucket(k − q)] of the "
          "stack's first block, heads first, on every block: computed once by the first block and reused by the "
          "others; bucket(n): bidirectional (the encoder's) half the buckets for keys after the query, causal (the "
          "decoder's) −min(n, 0); of b buckets the first b/2 exact, the rest logarithmic up to max_distance",
          proves="layers[*].self_attn.attention_position_bias",
          reads="input_ids layers[*].self_attn.attention_position_bias")
def _position_bias(host, r):
    attention, length = first_attention(host._module), r["input_ids"].shape[1]
    expected = position_bias(attention, length, length)
    return [(expected, bias) for bias in r["layers[*].self_attn.attention_position_bias"]]


#: the stack host's relation: every block's bias, the first block's table at the buckets
POSITION_BIAS_RELATIONS = (_position_bias,)


def _biased(host: Any, r: dict, mask: Any) -> tuple[Any, Any]:
    """Scores and probabilities in float64: q · kᵀ by the module's scaling (1) plus the bias read and the mask."""
    queries, keys = r["attention_queries"].double(), r["attention_keys"].double()
    scores = queries @ keys.transpose(-1, -2) * host._module.scaling + r["attention_position_bias"].double()[None]
    scores = scores + mask(host._module, r["model.attention_mask"], queries.shape[2], keys.shape[2]).double()
    return scores, scores.softmax(-1)


def biased_relations(mask: Any, masked: str) -> tuple:
    """The pattern's relations of a self-attention with a position bias, under ``mask`` (``masked``: how the text
    names it)."""
    text = f"attention_queries · attention_keysᵀ {UNSCALED} + attention_position_bias + {masked}"

    @relation(f"attention_head_outputs == softmax({text}) · attention_values",
              proves="attention_queries attention_keys attention_values attention_head_outputs",
              reads="model.attention_mask attention_queries attention_keys attention_values attention_position_bias "
                    "attention_head_outputs", tolerance=SUBBLOCK)
    def _attention(host, r):
        padding = r["model.attention_mask"]
        _, probabilities = _biased(host, r, mask)
        heads = mix(probabilities, r["attention_values"])
        return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]

    @relation(f"attention_scores == {text}; attention_probabilities == softmax(attention_scores)",
              proves="attention_scores attention_probabilities",
              reads="model.attention_mask attention_queries attention_keys attention_position_bias attention_scores "
                    "attention_probabilities", tolerance=SUBBLOCK)
    def _pattern(host, r):
        padding = r["model.attention_mask"]
        scores, probabilities = _biased(host, r, mask)
        allowed = torch.isfinite(scores)  # transformers masks with the dtype's minimum: compare where a key is allowed
        return [(scores[allowed], r["attention_scores"].double()[allowed]),
                (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]

    return _attention, _pattern


_causal_text = " (no decoder_attention_mask passed: no target padding)"
#: the encoder's self-attention: the bias, no causal mask, the source padding masked
ENCODER_BIASED_RELATIONS = (*biased_relations(padding_mask, "padding mask (no causal mask)"), HEAD_RESULTS_RELATION,
                            *LINK_RELATIONS, _OUTPUT_PROJECTION, SELF_PROJECTIONS)
#: the decoder's self-attention: the bias over the target, causal
DECODER_BIASED_RELATIONS = (*(unpadded(rel, rel.text + _causal_text)
                              for rel in biased_relations(causal_mask, "causal mask over the target")),
                            HEAD_RESULTS_RELATION, unpadded(LINK_RELATIONS[0]), LINK_RELATIONS[1], _OUTPUT_PROJECTION,
                            SELF_PROJECTIONS)

_CALL = call("attention_interface_1")
#: one bias for every row of the batch: the scores' layout without its batch axis
PositionBias = layout("PositionBias", "num_heads query key")
#: the bias without its batch axis of 1; read-only: the stack's blocks share the one tensor, so an in-place edit
#: would reach every block and an assignment this one
_SHARED = View("shared by the batch, read-only", lambda host, x: x[0], None)
_BIAS = Value("attention_position_bias", PositionBias, "The relative position bias added to every head's scores, "
              "[heads, query, key] for every row of the batch: the stack's first block's table at the buckets of "
              "k − q, as the attention function is called with it (one tensor shared by the stack's blocks); "
              "read-only", op(_CALL, io="input", element="position_bias"), conditions=(ATTENTION_CALL,),
              view=_SHARED)

#: the heads side by side as ``o`` takes them, each d_kv wide (T5Attention's key_value_proj_dim; it has no head_dim)
_PREMIX = Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
                child("o_proj", "input"), view=heads("key_value_proj_dim"))

#: ``model.encoder.layers[i].self_attn`` of a T5 stack: bidirectional, with the bias
BiasedEncoderAttention = host("BiasedEncoderAttention", Attention, values=[_BIAS, _PREMIX],
                              HOST="model.encoder.layers[i].self_attn", RELATIONS=ENCODER_BIASED_RELATIONS,
                              MASK=staticmethod(padding_mask))
#: ``model.decoder.layers[i].self_attn`` of a T5 stack: causal, with the bias
BiasedDecoderAttention = host("BiasedDecoderAttention", Attention, values=[_BIAS, _PREMIX],
                              HOST="model.decoder.layers[i].self_attn", RELATIONS=DECODER_BIASED_RELATIONS,
                              MASK=staticmethod(causal_mask))
#: the cross-attention's relations with T5's scaling of 1 (its position bias is zeros: nothing added)
UNSCALED_CROSS_RELATIONS = cross_relations(f"{UNSCALED} + 0 (the cross-attention has no position bias)", final_norm=True)
#: ``model.decoder.layers[i].cross_attn`` of a T5 stack
UnscaledCrossAttention = host("UnscaledCrossAttention", CrossAttention, values=[_PREMIX],
                              RELATIONS=UNSCALED_CROSS_RELATIONS)
