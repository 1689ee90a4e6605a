"""Seed-OSS (SeedOssForCausalLM, model_type seed_oss): ByteDance Seed's Seed-OSS, Llama's pre-norm block with
biased query, key and value projections.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (silu) -> add, and returns a tensor. q_proj,
k_proj and v_proj carry a bias (attention_bias) and o_proj none (attention_out_bias); the attention is
grouped-query, 80 query heads over 8 key/value heads on the 36B. The dropouts the config names act only in
training. Every host is the shared one of nncanon.parts, unchanged; the module was written by
``python -m generator new seed_oss --from-survey``, on which every generic relation held.
"""


from __future__ import annotations

import sys

from transformers.models.seed_oss import modeling_seed_oss as hf

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

FAMILY = "seed_oss"
MODEL_TYPES = ("seed_oss",)
RENAME = TEXT_RENAME  # the module paths the survey found on seed_oss's tree
ENVOYS = {hf.SeedOssDecoderLayer: Block, hf.SeedOssAttention: Attention, hf.SeedOssMLP: MLP}
ROOT = host("SeedOssStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.SeedOssForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
