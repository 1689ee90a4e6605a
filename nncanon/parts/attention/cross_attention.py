"""An encoder-decoder's attention hosts: the decoder's cross-attention (queries from the decoder's stream, keys and
values from the encoder's final output) and the two self-attentions a seq2seq model's stacks hold beside it.

BART's (and its descendants') three attentions are one module class (``BartAttention``), told apart by where they
sit: the family maps each by its path (``encoder.layers.*.self_attn``, ``decoder.layers.*.self_attn``,
``cross_attn``). Each is softmax attention over the module's own ``q_proj``, ``k_proj``, ``v_proj`` and ``o_proj``
(``out_proj`` mounted), so the shared relations of `nncanon.parts.attention.softmax` hold on each with its own mask:

- the encoder's: no causal mask, only the source padding (`nncanon.parts.encoders.bidirectional`'s relations);
- the decoder's: causal over the target, its padding ``model.decoder_attention_mask`` (none passed: no padding);
- the cross-attention's (``decoder.layers[i].cross_attn``): every target query over every real source key, the
  source padding masked (``model.attention_mask``), no causal part; its ``encoder_states`` (what its keys and
  values are made of) proven equal to the encoder stack's last output.

The values keep the self-attention's names (``attention_queries`` ... ``attention_output``), so a cross-attention
is read as ``model.decoder.layers[i].cross_attn.attention_keys``; the keys and values are over the source's
positions, the queries over the target's.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Residual
from ...core.locators import own
from ...core.relations import Relation, first, relation
from ...core.values import Value
from ...core.views import READ_ONLY
from ..encoders.bidirectional import BIDIRECTIONAL_PATTERN, padding_mask
from .softmax import (
    ATTENTION_RELATIONS,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
    attending,
    causal_mask,
    mix,
    pattern,
)
from .softmax import PATTERN_RELATIONS as _CAUSAL_PATTERN

_OUTPUT_PROJECTION = ATTENTION_RELATIONS[-1]


def _projected(host: Any, name: str, x: Any, r: dict) -> Any:
    """``name`` (q_proj, k_proj, v_proj: standard names, a family's own mounted on them) of ``x``, in heads as wide
    as the read queries' (BART's head_dim, T5's d_kv)."""
    y = host.get(name)._module(x)
    return y.unflatten(-1, (-1, r["attention_queries"].shape[-1])).transpose(1, 2)


@relation("attention_queries, attention_keys, attention_values == q_proj(input), k_proj(input), v_proj(input) in "
          "heads (the scaling is the attention call's)", proves="",
          reads="input attention_queries attention_keys attention_values")
def _self_projections(host, r):
    x = first(r["input"])
    return [(_projected(host, "q_proj", x, r), r["attention_queries"]),
            (_projected(host, "k_proj", x, r), r["attention_keys"]),
            (_projected(host, "v_proj", x, r), r["attention_values"])]


def unpadded(shared: Relation, text: str | None = None) -> Relation:
    """``shared`` (a softmax relation reading ``model.attention_mask``, the source's padding) with no padding in its
    place: the decoder's self-attention is causal over the target, and the calls the page verifies pass no
    decoder_attention_mask."""
    def compute(host, r):
        return shared.compute(host, {**r, "model.attention_mask": torch.ones_like(r["model.decoder.input_ids"])})

    reads = [term for term in shared.reads if term != "model.attention_mask"] + ["model.decoder.input_ids"]
    return Relation(text or shared.text, shared.proves, tuple(reads), compute, shared.tolerance, shared.adds,
                    shared.exact)


_causal_text = " over the target (no decoder_attention_mask passed: no target padding)"

#: the encoder's self-attention: softmax attention with no causal mask, the source padding masked both ways
ENCODER_SELF_RELATIONS = (*BIDIRECTIONAL_PATTERN, HEAD_RESULTS_RELATION, *LINK_RELATIONS, _OUTPUT_PROJECTION,
                          _self_projections)
#: the decoder's self-attention: causal, under the decoder's own padding
DECODER_SELF_RELATIONS = (*(unpadded(rel, rel.text + _causal_text) for rel in _CAUSAL_PATTERN),
                          HEAD_RESULTS_RELATION, unpadded(LINK_RELATIONS[0]), LINK_RELATIONS[1],
                          _OUTPUT_PROJECTION, _self_projections)


SELF_PROJECTIONS = _self_projections

EncoderSelfAttention = host("EncoderSelfAttention", Attention, HOST="model.encoder.layers[i].self_attn",
                            RELATIONS=ENCODER_SELF_RELATIONS, MASK=staticmethod(padding_mask))
DecoderSelfAttention = host("DecoderSelfAttention", Attention, HOST="model.decoder.layers[i].self_attn",
                            RELATIONS=DECODER_SELF_RELATIONS, MASK=staticmethod(causal_mask))

# -- the cross-attention -----------------------------------------------------------------------------------------


@relation("encoder_states == model.encoder.layers[-1].layer_output: the cross-attention reads the encoder's final "
          "output", proves="encoder_states", reads="encoder_states model.encoder.layers[-1].layer_output")
def _from_the_encoder(host, r):
    return [(r["model.encoder.layers[-1].layer_output"], r["encoder_states"])]


@relation("attention_queries == q_proj(input) in heads (from the decoder's stream); attention_keys, attention_values "
          "== k_proj(encoder_states), v_proj(encoder_states) in heads (from the encoder's output)",
          proves="attention_queries attention_keys attention_values",
          reads="input encoder_states attention_queries attention_keys attention_values")
def _cross_projections(host, r):
    x, states = first(r["input"]), r["encoder_states"]
    return [(_projected(host, "q_proj", x, r), r["attention_queries"]),
            (_projected(host, "k_proj", states, r), r["attention_keys"]),
            (_projected(host, "v_proj", states, r), r["attention_values"])]


def _cross_pattern(host: Any, r: dict) -> tuple[Any, Any]:
    # the scores' factor as the host says (its class's SCALING: Whisper scales the queries, the call by 1)
    return pattern(attending(host), r["attention_queries"], r["attention_keys"], r["model.attention_mask"],
                   padding_mask)


@relation("encoder_states == model.encoder.stack_output: the cross-attention reads what the encoder returns, after "
          "its final norm", proves="encoder_states", reads="encoder_states model.encoder.stack_output")
def _from_the_encoder_stack(host, r):
    return [(r["model.encoder.stack_output"], r["encoder_states"])]


def cross_relations(scaled: str = "· scaling", final_norm: bool = False) -> tuple:
    """The cross-attention's relations, its scores ``attention_queries · attention_keysᵀ {scaled}`` (``scaled``: how
    the text states the module's scaling; T5's is 1, the 1/√d folded into its init); ``final_norm``: the encoder
    stack ends in a norm of its own (T5's), so its states are the stack's output, not its last block's."""
    @relation(f"attention_head_outputs == softmax(attention_queries · attention_keysᵀ {scaled} + source padding mask) "
              "· attention_values: every target query reads every real source key (no causal mask)",
              proves="attention_head_outputs",
              reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
              tolerance=HEAD_RESULTS_RELATION.tolerance)
    def _cross_attention(host, r):
        _, probabilities = _cross_pattern(host, r)
        return [(mix(probabilities, r["attention_values"]), r["attention_head_outputs"])]

    @relation(f"attention_scores == attention_queries · attention_keysᵀ {scaled} + source padding mask; "
              "attention_probabilities == softmax(attention_scores)", proves="attention_scores attention_probabilities",
              reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
              tolerance=HEAD_RESULTS_RELATION.tolerance)
    def _cross_scores(host, r):
        scores, probabilities = _cross_pattern(host, r)
        allowed = torch.isfinite(scores)
        return [(scores[allowed], r["attention_scores"].double()[allowed]),
                (probabilities, r["attention_probabilities"])]

    return (_from_the_encoder_stack if final_norm else _from_the_encoder, _cross_projections, _cross_attention, _cross_scores, _cross_mixed,
            LINK_RELATIONS[1], HEAD_RESULTS_RELATION, _OUTPUT_PROJECTION)


@relation("attention_head_outputs == attention_probabilities · attention_values", proves="attention_head_outputs",
          reads="attention_probabilities attention_values attention_head_outputs",
          tolerance=HEAD_RESULTS_RELATION.tolerance)
def _cross_mixed(host, r):
    return [(mix(r["attention_probabilities"].double(), r["attention_values"]), r["attention_head_outputs"])]


CROSS_RELATIONS = cross_relations()

#: ``model.decoder.layers[i].cross_attn``: the self-attention's values, and the encoder states it reads
CrossAttention = host("CrossAttention", Attention, values=[
    Value("encoder_states", Residual, "The states the keys and values are made of: the encoder's final output, as "
          "handed to the module (source positions); read-only", own("input", element="key_value_states"),
          view=READ_ONLY),
], HOST="model.decoder.layers[i].cross_attn", KIND="cross-attention", RELATIONS=CROSS_RELATIONS,
   KV_INPUT="encoder_states")



#: a pre-norm encoder-decoder's cross-attention (mBART's, Pegasus's): the encoder's output is its final LayerNorm's
PreNormCrossAttention = host("PreNormCrossAttention", CrossAttention, RELATIONS=cross_relations(final_norm=True))

__all__ = ["EncoderSelfAttention", "DecoderSelfAttention", "CrossAttention", "PreNormCrossAttention",
           "ENCODER_SELF_RELATIONS", "DECODER_SELF_RELATIONS", "CROSS_RELATIONS", "cross_relations", "unpadded",
           "SELF_PROJECTIONS"]
