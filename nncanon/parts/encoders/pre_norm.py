"""The pre-norm encoder block (fairseq's ``--encoder-normalize-before``: XLM-R XL's, RoBERTa-PreLayerNorm's): a
LayerNorm before each sublayer, none after, so the stream between the blocks is a sum, normed once past the last
block.

    a    = LayerNorm_a(x)                    attention_norm_output: what the self-attention's projections read
    mid  = x + attention(a)                  layer_mid: the attention wrapper's output (its output.dense adds x)
    m    = LayerNorm_m(mid)                  mlp_norm_output = mlp_input: what intermediate.dense reads
    out  = mid + output.dense(act(intermediate.dense(m)))       layer_output: the Output sublayer adds mid

The modules are BERT's (``attention.self``, ``attention.output.dense``, ``intermediate``, ``output.dense``), with the
residual adds moved into the two output sublayers; where the two norms sit differs by family, so they are data
(``attention_norm``: a child of the attention wrapper; ``mlp_norm``: a child of the block, inside ``intermediate`` on
RoBERTa-PreLayerNorm). The attention's projections read the normed stream, not the wrapper's input, so the block
states them from ``attention_norm_output`` (`PreNormEncoderAttention` keeps every other relation of the encoder's
attention).
"""

from __future__ import annotations

import operator
from typing import Any

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, relation
from ...core.values import Value
from ..blocks.norms import formula, layer_norm
from .bidirectional import ENCODER_ATTENTION_RELATIONS, EncoderAttention
from .post_norm import POST_NORM_RELATIONS

_FORM = formula("· weight + bias")


def _in_heads(module: Any, y: Any) -> Any:
    return y.unflatten(-1, (-1, module.attention_head_size)).transpose(1, 2)


#: the encoder attention's relations, less the projections of its input (a pre-norm wrapper norms it first)
PreNormEncoderAttention = host("PreNormEncoderAttention", EncoderAttention,
                               RELATIONS=tuple(r for r in ENCODER_ATTENTION_RELATIONS
                                               if not r.text.startswith("attention_queries, attention_keys")))

#: the MLP's relation of the post-norm block: act(intermediate.dense(mlp_input)), then output.dense
_MLP = next(r for r in POST_NORM_RELATIONS if r.text.startswith("mlp_activation =="))


def pre_norm_block(name: str, attention_norm: str, mlp_norm: str) -> type:
    """The block host of a pre-norm encoder whose attention wrapper norms its input with its child
    ``attention_norm`` and whose MLP's norm is the block's child ``mlp_norm`` (a dotted path)."""
    norm_a, norm_m = operator.attrgetter(attention_norm), operator.attrgetter(mlp_norm)

    @relation(f"attention_norm_output == layernorm(layer_input), layernorm(x) = {_FORM}, the wrapper's "
              f"attention.{attention_norm}; self_attn.attention_queries, self_attn.attention_keys, "
              "self_attn.attention_values == self.query(attention_norm_output), self.key(...), self.value(...) in "
              "heads: pre-norm, the projections read the normed stream",
              proves="attention_norm_output",
              reads="layer_input self_attn.input attention_norm_output self_attn.attention_queries "
                    "self_attn.attention_keys self_attn.attention_values")
    def _attention_norm(host, r):
        wrapper = host._module.attention
        normed, attention = r["attention_norm_output"], wrapper.self
        return [(first(r["self_attn.input"]), r["layer_input"]),
                (layer_norm(norm_a(wrapper), r["layer_input"]), normed),
                (_in_heads(attention, attention.query(normed)), r["self_attn.attention_queries"]),
                (_in_heads(attention, attention.key(normed)), r["self_attn.attention_keys"]),
                (_in_heads(attention, attention.value(normed)), r["self_attn.attention_values"])]

    @relation("layer_input + self_attn.attention_output == layer_mid: the attention's add (its output sublayer adds "
              "the wrapper's input)", proves="layer_mid self_attn.attention_output",
              reads="layer_input self_attn.attention_output layer_mid",
              adds=("layer_input", "self_attn.attention_output", "layer_mid"))
    def _attention_add(host, r):
        return [(r["layer_input"] + r["self_attn.attention_output"], r["layer_mid"])]

    @relation(f"mlp_input == mlp_norm_output == layernorm(layer_mid), layernorm(x) = {_FORM}, the block's "
              f"{mlp_norm}: pre-norm, the MLP reads the normed stream", proves="mlp_norm_output mlp_input",
              reads="layer_mid mlp_norm_output mlp_input")
    def _mlp_norm(host, r):
        return [(layer_norm(norm_m(host._module), r["layer_mid"]), r["mlp_norm_output"]),
                (r["mlp_norm_output"], r["mlp_input"])]

    @relation("layer_mid + mlp_output == layer_output: the MLP's add (the Output sublayer adds layer_mid); nothing "
              "normed after it", proves="layer_output mlp_output", reads="layer_mid mlp_output layer_output",
              adds=("layer_mid", "mlp_output", "layer_output"))
    def _mlp_add(host, r):
        return [(r["layer_mid"] + r["mlp_output"], r["layer_output"])]

    shown_m = mlp_norm
    return host(name, values=[
        Value("layer_input", Residual, "The residual stream entering the block: the sum of every earlier "
              "sublayer's output and the embeddings, unnormed", own("input")),
        Value("attention_norm_output", Residual, "The LayerNorm before the attention: what its query, key and "
              "value projections read", child(f"self_attn.{attention_norm}", shown=f"attention.{attention_norm}")),
        # the MLP's norm reads the stream its Output sublayer adds to: an assignment writes into it
        Value("layer_mid", Residual, "The residual stream after the attention add: the attention wrapper's sum, "
              "before the MLP's LayerNorm", child(mlp_norm, "input", shown=shown_m), assign_in_place=True),
        Value("mlp_norm_output", Residual, "The LayerNorm before the MLP", child(mlp_norm, shown=shown_m)),
        Value("mlp_input", Residual, "What the MLP's up projection (intermediate.dense) is called with",
              child("intermediate.dense", "input")),
        Value("mlp_activation", Neurons, "The activation's output, act(intermediate.dense(mlp_input))",
              child("intermediate")),
        Value("mlp_neurons", Neurons, "What the down projection output.dense receives: the activation itself (no "
              "gate)", child("E_output.dense", "input", shown="output.dense")),
        Value("mlp_output", Residual, "What the MLP adds to the stream: output.dense's output",
              child("E_output.dense", shown="output.dense")),
        Value("layer_output", Residual, "The residual stream leaving the block: layer_mid + mlp_output",
              own("output")),
    ], HOST="model.layers[i]", KIND="block", RELATIONS=(_attention_norm, _attention_add, _mlp_norm, _MLP, _mlp_add),
        MIXERS=("self_attn",))
