"""Hunyuan dense (HunYuanDenseV1ForCausalLM, model_type hunyuan_v1_dense): Tencent's Hunyuan-7B, Llama's block
with query and key heads normed after the rotary.

Every block is RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add, and returns a tensor. The attention is
grouped-query; its queries and keys are rotated, then each head is RMS-normed by query_layernorm and key_layernorm
(one gain per head dimension, shared by every head) before the attention function reads them, so attention_queries
and attention_keys are normed heads, and the weight relations prove W_Q and W_K at the projections' outputs. The
published configs label the rope "dynamic" with a fixed alpha: transformers computes it once (ntk_alpha), which
changes the cos/sin tables, not where any value is read. Every host is the shared one of nncanon.parts, unchanged;
the module was written by ``python -m generator new hunyuan_v1_dense --from-survey``, on which every generic relation
held once the survey built it.
"""


from __future__ import annotations

import sys

from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.text_family import intermediate_dims, text_paths

# Relations still to state: what the survey of hunyuan_v1_dense found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = "hunyuan_v1_dense"
MODEL_TYPES = ("hunyuan_v1_dense",)
RENAME = TEXT_RENAME  # the module paths the survey found on hunyuan_v1_dense's tree
ENVOYS = {hf.HunYuanDenseV1DecoderLayer: Block, hf.HunYuanDenseV1Attention: Attention, hf.HunYuanDenseV1MLP: MLP}
ROOT = host("HunyuanV1DenseStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.HunYuanDenseV1ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
