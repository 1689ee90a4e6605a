"""InternLM3 (model_type internlm3, built as LlamaForCausalLM): Shanghai AI Lab's InternLM3, Llama's block.

transformers has no modeling code of InternLM3's own: its config class, ``InternLM3Config``, is built as
``LlamaForCausalLM`` (its ``qkv_bias`` and ``bias`` are Llama's ``attention_bias`` and ``mlp_bias``, and must
agree), so every host is Llama's and the shared one of nncanon.parts, unchanged; nncanon loads the checkpoint's
config as InternLM3Config (`nncanon.parts.loading.borrowed_config_class`). Every block is RMSNorm -> grouped-query
attention -> add, RMSNorm -> SwiGLU MLP -> add. The published 8B checkpoint has 32 query heads over only 2
key/value heads and a dynamic NTK rotary (``rope_type`` dynamic), which rescales the rotary base only past
``max_position_embeddings``: it changes the cos/sin tables, not where any value is read.
"""


from __future__ import annotations

import sys

from transformers.models.llama import modeling_llama as hf

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

# Relations still to state: what the survey of internlm3 found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = 'internlm3'
MODEL_TYPES = ('internlm3',)
RENAME = TEXT_RENAME  # the module paths the survey found on internlm3's tree
ENVOYS = {hf.LlamaDecoderLayer: Block, hf.LlamaAttention: Attention, hf.LlamaMLP: MLP}
ROOT = host("Internlm3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.LlamaForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
