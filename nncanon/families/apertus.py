"""Apertus (ApertusForCausalLM, model_type apertus): Llama's pre-norm block with query/key norms and an ungated
xIELU MLP.

Every block is RMSNorm -> attention -> add, RMSNorm -> MLP -> add, as Llama's; transformers names the two norms
``attention_layernorm`` and ``feedforward_layernorm`` (mounted as ``input_layernorm`` and
``post_attention_layernorm``). The attention is grouped-query; each query and key head is RMS-normed over its
head_dim (``q_norm``, ``k_norm``, gain = weight) right after its projection and before the rotary embedding, as
Qwen3's, so ``attention_queries`` and ``attention_keys`` are normed, then rotated. The MLP has no gate:
``down_proj(xielu(up_proj(x)))``, where xIELU is an activation with two learnable coefficients of each block's
own (``act_fn.alpha_p``, ``act_fn.alpha_n``; nncanon.parts.blocks.xielu states and proves its formula), so
``mlp_neurons`` is ``mlp_activation``. Apertus-8B scales its rotary frequencies ("llama3" rope), which changes
the cos/sin tables, not where any value is read. The head is untied.
"""

from __future__ import annotations

import sys

from transformers.models.apertus import modeling_apertus as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.text_family import intermediate_dims
from ..parts.blocks.xielu import xielu_mlp

FAMILY = "apertus"
MODEL_TYPES = ("apertus",)
RENAME = {**TEXT_RENAME, "attention_layernorm": "input_layernorm", "feedforward_layernorm": "post_attention_layernorm"}
ENVOYS = {hf.ApertusDecoderLayer: Block, hf.ApertusAttention: Attention, hf.ApertusMLP: xielu_mlp("up_proj")}
ROOT = host("ApertusStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.ApertusForCausalLM)
layer_types = attention_layer_types  # ApertusConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", "layers.0.mlp.up_proj",
            "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]
