"""Persimmon (PersimmonForCausalLM, model_type persimmon): Adept's Persimmon-8B, a pre-norm block with LayerNorms,
a fused query/key/value projection, per-head query/key LayerNorms, a partial rotary and a ReLU² MLP with no gate.

Every block is LayerNorm -> attention -> add, LayerNorm -> MLP -> add, and returns a tensor. The attention projects
queries, keys and values in one biased query_key_value and splits them per head (interleaved: head h's query, key
and value sit side by side), norms each query and key head with a LayerNorm of its own (q_layernorm, k_layernorm,
when qk_layernorm), then turns the first half of each head (partial_rotary_factor 0.5) in halves; its output
projection is ``dense``, mounted as o_proj. The MLP is ``dense_4h_to_h(relu(dense_h_to_4h(x)) ** 2)``: no gate, so
mlp_neurons is the activation itself (the shared ungated_mlp host), its down projection and activation mounted as
down_proj and act_fn. The module was written by ``python -m generator new persimmon --from-survey``; the one relation
the survey found broken, the gated MLP's, is the ungated one here.
"""


from __future__ import annotations

import sys

from transformers.models.persimmon import modeling_persimmon as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.text_family import intermediate_dims
from ..parts.blocks.ungated import ungated_mlp
from ..research.weights import interleaved_qkv

#: the shared attention, its query, key and value weights read from the per-head interleaved query_key_value
PersimmonAttention = host("PersimmonAttention", Attention, WEIGHTS=interleaved_qkv("query_key_value"))

FAMILY = "persimmon"
MODEL_TYPES = ("persimmon",)
RENAME = {"model.layers": "layers", "model.embed_tokens": "embed_tokens", "model.final_layernorm": "norm",
          "self_attn.dense": "self_attn.o_proj", "mlp.dense_4h_to_h": "mlp.down_proj", "mlp.act": "mlp.act_fn"}
ENVOYS = {hf.PersimmonDecoderLayer: Block, hf.PersimmonAttention: PersimmonAttention, hf.PersimmonMLP: ungated_mlp("dense_h_to_4h")}
ROOT = host("PersimmonStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.PersimmonForCausalLM)
layer_types = attention_layer_types  # PersimmonConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.q_layernorm", "layers.0.self_attn.k_layernorm",
            "layers.0.mlp.dense_h_to_4h", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]
