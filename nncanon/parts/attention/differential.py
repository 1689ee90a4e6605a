"""Differential attention (Ye et al. 2024, arXiv:2410.05258): two softmax maps subtracted, scaled by a learned lambda.

DiffLlama computes it as two calls of the attention function with the same queries and keys: the first over the
first half of the key/value heads, the second over the second half (each half repeated to fill every group), and
puts the two outputs side by side, so each query head mixes a value twice ``head_dim`` wide. The query heads are then
paired, head ``j`` with head ``j + heads/2``: the second's output, scaled by

    λ = exp(Σ lambda_q1 · lambda_k1) - exp(Σ lambda_q2 · lambda_k2) + lambda_init,   lambda_init = 0.8 - 0.6 · exp(-0.3 · layer)

is subtracted from the first's (the noise one map cancels in the other), each difference is RMS-normed over its
``2 · head_dim`` dimensions with no weight (``groupnorm``) and scaled by ``1 - lambda_init``, and the heads/2
differences, side by side, are what o_proj reads. So ``attention_values`` is read where the value heads enter the
split (every key/value head, before either half is repeated), ``attention_head_outputs`` where the two calls' outputs
are joined (``[batch, seq, heads, 2 · head_dim]``, a layout of its own), the queries and keys at the rotary's output
(which both calls take), and the pattern at the first call (both calls compute the same one).
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Keys, Queries, Values, layout
from ...core.locators import call, op
from ...core.precision import SUBBLOCK
from ...core.relations import relation
from ...core.values import Value
from .softmax import (
    ATTENTION_CALL,
    HEAD_RESULTS_RELATION,
    PATTERN_RELATIONS,
    Attention,
    attending,
    mask_of,
    pattern,
    real_queries,
)

#: each query head's output over the two value halves side by side: twice a head wide
PairedHeadOutputs = layout("PairedHeadOutputs", "batch seq num_heads paired_head_dim")


def paired_dims(model: Any) -> dict[str, int]:
    """The size of the layout's own dimension: a value head from each half, side by side."""
    return {"paired_head_dim": 2 * model.head_dim}


def paired_values(values: Any) -> Any:
    """``[batch, kv_heads, seq, 2 · head_dim]``: the first half of the key/value heads beside the second, each half
    repeated to fill the kv heads, as the forward's two calls take them."""
    values = values.double()
    first, second = torch.chunk(values, 2, dim=1)
    return torch.cat([first.repeat(1, 2, 1, 1), second.repeat(1, 2, 1, 1)], dim=-1)


def paired_mix(probabilities: Any, values: Any) -> Any:
    """``[batch, seq, heads, 2 · head_dim]``: the probabilities over the paired values, repeated over each group."""
    paired = paired_values(values)
    paired = paired.repeat_interleave(probabilities.shape[1] // paired.shape[1], 1)
    return (probabilities.double() @ paired).transpose(1, 2)


def differential_lambda(module: Any) -> Any:
    """λ = exp(Σ lambda_q1 · lambda_k1) - exp(Σ lambda_q2 · lambda_k2) + lambda_init, in float64."""
    one = torch.exp((module.lambda_q1.double() * module.lambda_k1.double()).sum())
    two = torch.exp((module.lambda_q2.double() * module.lambda_k2.double()).sum())
    return one - two + module.lambda_init


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + causal mask) · "
          "(the first half of attention_values' heads ‖ the second half), each half repeated over the key/value heads",
          proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = pattern(attending(host), r["attention_queries"], r["attention_keys"], padding, mask_of(host))
    heads = paired_mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_head_outputs == attention_probabilities · (the first half of attention_values' heads ‖ the second "
          "half)", proves="attention_head_outputs",
          reads="model.attention_mask attention_probabilities attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _mixed(host, r):
    """The pattern read at the first call mixes both halves (the second call computes the same pattern)."""
    padding = r["model.attention_mask"]
    heads = paired_mix(r["attention_probabilities"], r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_premix == (1 - lambda_init) · groupnorm(attention_head_outputs[first heads/2] - λ · "
          "attention_head_outputs[last heads/2]), λ = exp(Σ lambda_q1 · lambda_k1) - exp(Σ lambda_q2 · lambda_k2) + "
          "lambda_init, groupnorm an RMSNorm over each difference's 2 · head_dim with no weight; the heads/2 "
          "differences side by side", proves="attention_premix", reads="attention_head_outputs attention_premix",
          tolerance=SUBBLOCK)
def _differential(host, r):
    """The subtraction, the norm and the scale in float64 against the forward's float32; a small difference is
    normed up, so the error is the norm's input's relative to its own size: SUBBLOCK."""
    module = host._module
    heads, premix = r["attention_head_outputs"].double(), r["attention_premix"]
    minuend, subtrahend = torch.chunk(heads, 2, dim=2)
    difference = minuend - differential_lambda(module) * subtrahend
    eps = module.groupnorm.eps if module.groupnorm.eps is not None else torch.finfo(torch.float32).eps
    normed = difference * (difference.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
    return [((1 - module.lambda_init) * normed.reshape(*heads.shape[:2], -1), premix.reshape(*premix.shape[:2], -1))]


#: queries and keys are read where both calls share them (an edit at the first call's arguments would miss the second)
_ROTARY = call("apply_rotary_pos_emb_0")
#: the values' read: every key/value head, where the forward splits them into the two halves
_SPLIT = call("torch_chunk_0")
#: where the two calls' outputs are put side by side
_JOINED = call("torch_cat_0")

#: DiffLlama's attention: softmax attention's values and weights, the values and head outputs read around the two
#: calls, and the relations above in place of the mixing and the heads side by side
DifferentialAttention = host("DifferentialAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention: the rotary's output, which both calls read",
          op(_ROTARY, element=0)),
    Value("attention_keys", Keys, "The keys entering attention: the rotary's output, which both calls read",
          op(_ROTARY, element=1)),
    Value("attention_values", Values,
          "The values entering attention: every key/value head, before the forward splits them into two halves",
          op(_SPLIT, io="input"), conditions=(ATTENTION_CALL,)),
    Value("attention_head_outputs", PairedHeadOutputs,
          "Each query head's output over the two halves of the value heads, side by side (both attention calls)",
          op(_JOINED), conditions=(ATTENTION_CALL,)),
], RELATIONS=(*PATTERN_RELATIONS[1:], _attention, HEAD_RESULTS_RELATION, _mixed, _differential,
              *(r for r in Attention.RELATIONS if r.text == "attention_output == o_proj(attention_premix)")))
