"""Bidirectional softmax attention (BERT's and its descendants'): every query sees every real key, before and after
it; only padding is masked, on both sides. The values are read where the decoder's are (the attention function's
call: `nncanon.parts.attention.softmax`), inside the module that computes them.

An encoder's attention module (``BertAttention``) wraps the self-attention (``self``: query, key, value and the
attention call) and the output sublayer (``output``: the projection ``dense`` and the post-norm ``LayerNorm``,
which nnsight serves as ``E_output``: ``output`` is every envoy's own output). The standard ``self_attn`` is the
wrapper, so ``attention_output`` is what the projection adds to the stream before the post-norm, as a decoder's
``o_proj`` output is.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import HeadOutputs, Keys, Pattern, Queries, Residual, Values
from ...core.locators import call, child, op
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Value
from ...core.views import heads
from ..attention.softmax import ATTENTION_CALL, EAGER, LINK_RELATIONS, PATTERN_RELATIONS, head_results_value

#: the attention function's call inside the self-attention's forward (BertSelfAttention.forward)
_CALL = call("attention_interface_1")
#: the output sublayer's projection, under the name nnsight gives the child ``output``
PROJECTION = "E_output.dense"


def padding_mask(module: Any, padding: Any, queries: int, keys: int) -> Any:
    """[batch, 1, queries, keys] additive mask of an encoder: no causal part, only the padded keys masked (the
    signature of `softmax.causal_mask`, whose place it takes as the host's ``MASK``)."""
    allowed = padding[:, None, None, -keys:].bool().expand(-1, 1, queries, -1)
    return torch.where(allowed, 0.0, float("-inf"))


def restated(shared: Any, text: str) -> Any:
    """softmax's relation (its compute, under the host's ``MASK``) with the text an encoder's page states."""
    return relation(text, proves=" ".join(shared.proves), reads=" ".join(shared.reads),
                    tolerance=shared.tolerance)(shared.compute)


_attention = restated(PATTERN_RELATIONS[0], "attention_head_outputs == softmax(attention_queries · attention_keysᵀ · "
                       "scaling + padding mask) · attention_values, the mask bidirectional: every query reads every "
                       "real key, before and after it")
_pattern = restated(PATTERN_RELATIONS[1], "attention_scores == attention_queries · attention_keysᵀ · scaling + "
                     "padding mask (no causal mask); attention_probabilities == softmax(attention_scores)")


@relation("attention_probabilities > 0 at every real key after its query (no causal mask) and == 0 at every padded "
          "key, before or after it: padding is masked in both directions", proves="",
          reads="model.attention_mask attention_probabilities")
def _both_directions(host, r):
    """Counted, not compared in value: the number of later real keys that get weight is the number there are,
    and the weight on padded keys is zero."""
    padding, probabilities = r["model.attention_mask"].bool(), r["attention_probabilities"].double()
    seq = probabilities.shape[-1]
    later = torch.ones(seq, seq, dtype=torch.bool).triu(1)[None, None]
    real = padding[:, None, :, None] & padding[:, None, None, :]  # a real query's real keys
    after = (later & real).expand_as(probabilities)
    padded = (padding[:, None, :, None] & ~padding[:, None, None, :]).expand_as(probabilities)
    return [(torch.tensor(float(after.sum())), torch.tensor(float((probabilities[after] > 0).sum()))),
            (torch.zeros(int(padded.sum()), dtype=torch.float64), probabilities[padded])]


@relation("attention_queries, attention_keys, attention_values == self.query(input), self.key(input), "
          "self.value(input) in heads", proves="", reads="input attention_queries attention_keys attention_values")
def _projections(host, r):
    module, x = host._module.self, first(r["input"])

    def in_heads(y):
        return y.unflatten(-1, (-1, module.attention_head_size)).transpose(1, 2)

    return [(in_heads(module.query(x)), r["attention_queries"]), (in_heads(module.key(x)), r["attention_keys"]),
            (in_heads(module.value(x)), r["attention_values"])]


@relation("attention_output == output.dense(attention_premix): what the attention adds before the post-norm",
          proves="attention_premix attention_output", reads="attention_premix attention_output")
def _output_projection(host, r):
    premix = r["attention_premix"]
    return [(host._module.output.dense(premix.flatten(-2)), r["attention_output"])]


@relation("attention_output == sum over heads of attention_head_results + output.dense's bias",
          proves="attention_head_results", reads="attention_head_results attention_output", tolerance=SUBBLOCK)
def _head_results(host, r):
    results = r["attention_head_results"]
    return [(results.double().sum(-2) + host._module.output.dense.bias.double(), r["attention_output"])]


#: the pattern under the padding mask alone, on any softmax attention with this host's ``MASK`` (BART's encoder too)
BIDIRECTIONAL_PATTERN = (_attention, _pattern, _both_directions)
#: the proof chain's links are softmax's: the read pattern mixes the values, the heads go side by side into output.dense
ENCODER_ATTENTION_RELATIONS = (*BIDIRECTIONAL_PATTERN, _projections, _head_results, *LINK_RELATIONS,
                               _output_projection)


def _at_call(name: str, layout: Any, description: str, *ops: str, condition=ATTENTION_CALL, **kw: Any) -> Value:
    return Value(name, layout, description, op(_CALL, *ops, module="self", shown="self", **kw),
                 conditions=(condition,))


#: the encoder's attention host: the wrapper module (``BertAttention``), its values read in ``self`` and ``output``
EncoderAttention = host("EncoderAttention", values=[
    _at_call("attention_queries", Queries, "The queries entering attention", io="input", element=1),
    _at_call("attention_keys", Keys, "The keys entering attention", io="input", element=2),
    _at_call("attention_values", Values, "The values entering attention", io="input", element=3),
    _at_call("attention_scores", Pattern, "The attention scores entering the softmax, padding masked (no causal "
             "mask)", "nn_functional_softmax_0", io="input", condition=EAGER),
    _at_call("attention_probabilities", Pattern, "The attention pattern the values are mixed with: every real key, "
             "before and after the query", "nn_functional_dropout_0", condition=EAGER),
    _at_call("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection", element=0),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection "
          "(output.dense) takes it", child(PROJECTION, "input", shown="output.dense"),
          view=heads("self.attention_head_size")),
    Value("attention_output", Residual, "What the attention adds to the residual stream before the post-norm: "
          "output.dense's output", child(PROJECTION, shown="output.dense")),
    head_results_value(PROJECTION, shown="output.dense"),
], HOST="model.layers[i].self_attn", KIND="attention", RELATIONS=ENCODER_ATTENTION_RELATIONS,
   # the scaling is the self-attention's (the wrapper has none); the mask is padding only
   SCALING=staticmethod(lambda module: module.self.scaling), MASK=staticmethod(padding_mask))
