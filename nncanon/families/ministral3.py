"""Ministral 3 (Ministral3ForCausalLM, model_type ministral3): the text decoder of Mistral AI's Ministral 3, Llama's
block with a YaRN rotary and Llama 4's query temperature.

Every block is RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add, and returns a tensor; the attention is
grouped-query with no sliding window. The rotary embedding is YaRN-scaled (the cos/sin tables, not where any value
is read), and after the rotary the queries are multiplied by 1 + llama_4_scaling_beta · log(1 + floor(position /
original_max_position_embeddings)): 1 on every position of the original context, where the relations are proven.
Every host is the shared one of nncanon.parts, unchanged; the module was written by
``python -m generator new ministral3 --from-survey``, on which every generic relation held.
"""


from __future__ import annotations

import sys

from transformers.models.ministral3 import modeling_ministral3 as hf

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

# Relations still to state: what the survey of ministral3 found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = "ministral3"
MODEL_TYPES = ("ministral3",)
RENAME = TEXT_RENAME  # the module paths the survey found on ministral3's tree
ENVOYS = {hf.Ministral3DecoderLayer: Block, hf.Ministral3Attention: Attention, hf.Ministral3MLP: MLP}
ROOT = host("Ministral3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Ministral3ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
