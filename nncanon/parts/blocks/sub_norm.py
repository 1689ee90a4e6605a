"""Sub-layer norms before the output projections (BitNet b1.58): an RMSNorm between what a sublayer computes and the
projection back to the stream.

BitNet's attention norms its heads, side by side, by ``attn_sub_norm`` before ``o_proj``; its MLP norms
``act(gate) · up`` by ``ffn_sub_norm`` before ``down_proj``. So ``attention_premix`` and ``mlp_neurons``, read where
the projections take them, are the normed tensors, and the links that join them to what precedes them state the
norm: :data:`SubNormAttention` replaces softmax attention's side-by-side link, :data:`SubNormMLP` the gated MLP's
(its weight relation, ``nncanon.parts.weights``, norms the product by the host's ``SUB_NORM`` too).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.relations import first, relation, rows
from ..attention.softmax import ATTENTION_RELATIONS, SIDE_BY_SIDE_RELATION, Attention
from .mlp import MLP, MLP_RELATIONS


@relation("attention_premix == attn_sub_norm(attention_head_outputs, the heads side by side), split into heads "
          "again", proves="attention_premix", reads="attention_head_outputs attention_premix")
def _sub_normed_heads(host, r):
    heads, premix = r["attention_head_outputs"], r["attention_premix"]
    return [(host._module.attn_sub_norm(heads.reshape(*heads.shape[:2], -1)), premix.reshape(*premix.shape[:2], -1))]


@relation("mlp_activation == act_fn(gate_proj(input)); mlp_neurons == ffn_sub_norm(mlp_activation · up_proj(input))",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _sub_normed_neurons(host, r):
    module, x = host._module, rows(first(r["input"]))
    activation = module.act_fn(module.gate_proj(x))
    return [(activation, rows(r["mlp_activation"])),
            (module.ffn_sub_norm(activation * module.up_proj(x)), rows(r["mlp_neurons"]))]


#: softmax attention whose heads, side by side, are RMS-normed by attn_sub_norm before o_proj
SubNormAttention = host("SubNormAttention", Attention, RELATIONS=tuple(
    _sub_normed_heads if relation is SIDE_BY_SIDE_RELATION else relation for relation in ATTENTION_RELATIONS))

#: the gated MLP whose act(gate) · up is RMS-normed by ffn_sub_norm before down_proj
SubNormMLP = host("SubNormMLP", MLP, RELATIONS=(MLP_RELATIONS[0], _sub_normed_neurons), SUB_NORM="ffn_sub_norm")
