"""Ministral (MinistralForCausalLM, model_type ministral): Mistral AI's Ministral 8B, Llama's block with
interleaved attention reach.

Every block is RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add, and returns a tensor; the attention is
grouped-query with the rotary embedding on every dimension. What differs from block to block is the attention's
reach: config.layer_types names each block full_attention or sliding_attention (on Ministral 8B one full block,
then three whose query sees only the last sliding_window keys), and each attention module carries its own
sliding_window (None on a full block), which the shared attention relations read from it. Every host is the shared
one of nncanon.parts, unchanged; the module was written by ``python -m generator new ministral --from-survey``, on
which every generic relation held once the survey built it.
"""


from __future__ import annotations

import sys

from transformers.models.ministral import modeling_ministral as hf

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

# Relations still to state: what the survey of ministral found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = "ministral"
MODEL_TYPES = ("ministral",)
RENAME = TEXT_RENAME  # the module paths the survey found on ministral's tree
ENVOYS = {hf.MinistralDecoderLayer: Block, hf.MinistralAttention: Attention, hf.MinistralMLP: MLP}
ROOT = host("MinistralStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.MinistralForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
